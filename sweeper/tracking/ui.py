"""MLflow's web UI: the view a printed address opens. The adapter for
the one part of it that is not a documented API.

The runs table reads its sort and search from the page address (``orderByKey``, ``orderByAsc``,
``searchFilter``), which any MLflow 3 UI honours. Its columns are UI state only: MLflow 3.17's
"share view" stores the whole table state (search, sort, ``selectedColumns``, chart settings)
as JSON in an experiment tag ``mlflow.sharedViewState.<key>``, and an address
with ``viewStateShareKey=<key>`` (and no sort or search of its own: those would win) opens it.
That tag is internal UI state, so it is written only where the installed MLflow is one whose UI
was checked (:data:`sweeper.base.tested.TESTED` ``mlflow-ui``; the shortcut ``ui_view`` of
``SWEEPER_PUBLIC_ONLY``); elsewhere the address carries the sort and the search alone
(:func:`sweeper.base.names.table_query`).
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from sweeper.base import tested

__all__ = ["ATTRIBUTE", "METRIC", "PARAM", "column", "shared"]

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
