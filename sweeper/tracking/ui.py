"""MLflow's web UI: the addresses sweeper prints, the command that serves them, and the view a
printed address opens. The adapter for the one part of it that is not a documented API.

The runs table reads its sort and search from the page address (``orderByKey``, ``orderByAsc``,
``searchFilter``), which any MLflow 3 UI honours. Its columns are UI state only: MLflow 3.17's
"share view" stores the whole table state (search, sort, ``selectedColumns``, chart settings)
as JSON in an experiment tag ``mlflow.sharedViewState.<key>``, and an address
with ``viewStateShareKey=<key>`` (and no sort or search of its own: those would win) opens it.
That tag is internal UI state, so it is written only where the installed MLflow is one whose UI
was checked (:data:`sweeper.base.tested.TESTED` ``mlflow-ui``; the shortcut ``ui_view`` of
``SWEEPER_PUBLIC_ONLY``); elsewhere the address carries the sort and the search alone
(:func:`table_query`).
"""

from __future__ import annotations

import json
from typing import Any, Mapping
from urllib.parse import quote

from sweeper.base import tested
from sweeper.base.files import sqlite_path

__all__ = [
    "ATTRIBUTE",
    "METRIC",
    "PARAM",
    "UI_VIEW",
    "column",
    "experiment_url",
    "run_path",
    "run_url",
    "shared",
    "table_query",
    "ui_command",
    "ui_line",
]

SHARED = "mlflow.sharedViewState."  # the experiment tag's prefix the UI reads a shared view from
ATTRIBUTE, METRIC, PARAM = "attributes", "metrics", "params"  # the UI's column kinds


def column(kind: str, name: str) -> str:
    """A runs-table column as the UI names it (its sort key too): ``metrics.`val_mse```."""
    return f"{kind}.`{name}`"


def shared(c: Any, experiment_id: str, key: str, view: Mapping[str, Any]) -> bool:
    """Store ``view`` (search, sort, columns) as the experiment's shared view
    ``key``; False (nothing written) where the installed MLflow's UI was not
    checked or the shortcut ``ui_view`` is off (``SWEEPER_PUBLIC_ONLY``)."""

    if not tested.shortcut("ui_view"):
        return False
    c.set_experiment_tag(experiment_id, SHARED + key, json.dumps(dict(view), separators=(",", ":")))
    return True


def ui_command(uri: str) -> str:
    if sqlite_path(uri) is not None:
        return f"mlflow ui --backend-store-uri {uri} --port 5000"
    return f"open {uri} in a browser"


# MLflow 3.17's UI picks its model-training views (runs table, models, charts) or its GenAI
# ones (traces, evaluations) from the page address's workflowType, else from what this browser
# chose last (GenAI at first); it does not read the experiment's mlflow.experimentKind tag. So
# every address sweeper prints asks for the model-training views.
UI_VIEW = "workflowType=machine_learning"


def _ui_base(uri: str) -> str:
    """The UI of a tracking server, or the one ``mlflow ui`` (:func:`ui_command`) serves
    for an embedded store."""
    return uri.rstrip("/") if uri.startswith(("http://", "https://")) else "http://127.0.0.1:5000"


def run_path(experiment_id: str, run_id: str) -> str:
    """A run's page in the MLflow UI, relative to the UI (a link in a run's
    description), on its model-training views."""
    return f"#/experiments/{experiment_id}/runs/{run_id}?{UI_VIEW}"


def run_url(uri: str, experiment_id: str, run_id: str) -> str:
    """Where the MLflow UI shows a run, on its model-training views."""
    return f"{_ui_base(uri)}/{run_path(experiment_id, run_id)}"


def experiment_url(uri: str, experiment_id: str, query: str = "") -> str:
    """Where the MLflow UI shows an experiment's runs table (sweeps expand into their
    runs); ``query``: more of the page address (:func:`table_query`,
    or ``viewStateShareKey=<key>``: :func:`shared`)."""
    return f"{_ui_base(uri)}/#/experiments/{experiment_id}/runs?{UI_VIEW}" + (
        f"&{query}" if query else ""
    )


def table_query(order_by: str, ascending: bool, search: str = "") -> str:
    """The runs table's own search and sort as the page address gives them (every MLflow
    3 UI honours them; a sort flattens the tree of parents and
    children): ``orderByKey=metrics.%60val_mse%60&orderByAsc=true``."""

    parts = [f"searchFilter={quote(search, safe='')}"] if search else []
    return "&".join(
        [
            *parts,
            f"orderByKey={quote(order_by, safe='')}",
            f"orderByAsc={str(bool(ascending)).lower()}",
        ]
    )


def ui_line(uri: str, url: str) -> str:
    """``url``, and for an embedded store the command that serves it."""
    ui = ui_command(uri)
    return url + ("" if ui.startswith("open") else f"  (after: {ui})")
