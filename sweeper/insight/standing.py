"""Where each run of a sweep stands, written on the run itself at the sweep's end: a
``rank`` metric (its row in the leaderboard, summary.csv's order: a sortable column
in MLflow's runs table; a run that did not finish with a score has none), a one-line
description (MLflow's ``mlflow.note.content``: "rank 2 of 6 by val_mse: 3118; best
3070"), and the parent runs whose leaderboard ranks it (``sweeper.sweeps``: the
printed address shows the runs of one sweep by it, reused runs of a resumed sweep
included). A report rebuilt from the store writes only what changed."""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any

from sweeper.base.fmt import cell
from sweeper.base.tags import GROUP_SIZE, SWEEPS, booked
from sweeper.tracking.ui import ATTRIBUTE, METRIC, PARAM, column, experiment_url, table_query
from sweeper.job import crossval
from sweeper.tracking import bulk, ui

__all__ = ["address", "record"]

RANK = "rank"
NOTE = "mlflow.note.content"  # MLflow's run description
# parent ids a run keeps in sweeper.sweeps at most (the latest: each resumed round adds one)
KEEP_SWEEPS = 20


def ranked(board: Any) -> int:
    """How many of the board's rows are ranked: those that finished with a score (they come
    first). The rest (FAILED, KILLED) follow in no order that means anything, and get no rank."""
    m = f"val_{board.metric}"
    return sum(
        1
        for r in board.rows
        if r["status"] == "FINISHED" and r.get(m) is not None and math.isfinite(r[m])
    )


def description(
    board: Any, i: int, run: Any = None, config: tuple[int, dict[str, Any]] | None = None
) -> str:
    """The one line of the run in row ``i`` (0-based) of ``board``: its rank,
    score and the best's, and what its numbers mean when that is not plain (a
    group's share of the time, folds; ``config``: with seeds, its configuration's
    place among :attr:`Board.groups` (0-based) and that group)."""
    row, m, n = board.rows[i], f"val_{board.metric}", ranked(board)
    if i < n:
        best = board.best
        parts = [
            f"rank {i + 1} of {n} by {m}: {cell(row[m])}",
            "the best"
            if best is not None and best["run_id"] == row["run_id"]
            else f"best {cell(best[m])}"
            if best is not None
            else "the best finished run is unscored",
        ]
    else:
        why = row.get("reason")
        parts = [
            f"{row['status']}" + (f" ({_short(why)})" if why else "") + f": not ranked ({n} of "
            f"{len(board.rows)} runs finished with a {m})"
        ]
    if row.get("pruned_at"):
        parts.append(
            f"pruned at epoch {row['pruned_at']}: stopped early at a rung (ranked after the full "
            "runs)"
        )
    if said := crossval.said(row, m):
        parts.append(said)
    if config is not None and i < n:
        at, group = config
        parts.append(
            f"its configuration ranks {at + 1} of {len(board.groups)} by its mean over "
            f"{group['n']} seed(s): "
            f"{cell(group[m])}"
        )
    size = booked(run.data.tags, GROUP_SIZE) if run is not None else None
    if size and size.isdigit() and int(size) > 1:
        parts.append(f"trained in a group of {size}, times are its share")
    if row.get("reused"):
        parts.append("reused (resume=true): trained by an earlier sweep")
    return "; ".join(parts)


def _short(text: str, width: int = 80) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def marks(
    board: Any, runs: list[Any], parent_run_id: str
) -> list[tuple[str, dict[str, float], dict[str, str]]]:
    """What each ranked run gets, ``(run id, metrics, tags)``, leaving out what it holds already."""
    by_id = {r.info.run_id: r for r in runs}
    keys = [k for k in board.keys if k not in board.seeds]
    configs = {tuple(g.get(k) for k in keys): (j, g) for j, g in enumerate(board.groups)}
    n, out = ranked(board), []
    for i, row in enumerate(board.rows):
        run = by_id.get(row["run_id"])
        held_metrics = run.data.metrics if run is not None else {}
        held_tags = run.data.tags if run is not None else {}
        metrics = {RANK: float(i + 1)} if i < n and held_metrics.get(RANK) != float(i + 1) else {}
        tags = {}
        note = description(board, i, run, configs.get(tuple(row.get(k) for k in keys)))
        if held_tags.get(NOTE) != note:
            tags[NOTE] = note
        sweeps = (held_tags.get(SWEEPS) or "").split()
        if parent_run_id not in sweeps:
            tags[SWEEPS] = " ".join([*sweeps, parent_run_id][-KEEP_SWEEPS:])
        if metrics or tags:
            out.append((row["run_id"], metrics, tags))
    return out


def record(c: Any, board: Any, runs: list[Any], parent_run_id: str) -> int:
    """Write each ranked run's rank, description and sweeps (:func:`marks`) in one
    transaction on the embedded store (``bulk.mark_runs``); return how many runs changed."""

    found = marks(board, runs, parent_run_id)
    bulk.mark_runs(c, found)
    return len(found)


# The metric shown beside the primary one: the mean absolute error
# (regression), F1 (classification).
COMPANIONS = MappingProxyType({"mse": ("val_mae",), "accuracy": ("val_f1", "val_f1_macro")})
TIMES = ("train_time_s", "wall_time_s")
MAX_NAME_PX = 480  # the widest the run-name column opens
# The loss curves (a value each sampled epoch): line charts, after the metrics that rank
CURVES = ("val_loss", "train_loss")
# The chart view's sections, by the names MLflow's UI files its charts under
SECTIONS = MappingProxyType(
    {"Model metrics": "sweeper-model-metrics", "System metrics": "sweeper-system-metrics"}
)


def charts(first: list[str], held: set[str]) -> dict[str, Any]:
    """The chart view's first charts (UI state of the shared view, as the UI's own cards): a bar
    chart of each metric of ``first`` (the ranking's), then the loss curves, each one the runs
    hold (``held``). The UI adds every other metric after them (it sorts its own by name, so the
    chart view opened on ``best_epoch`` and ``epochs_per_s``)."""
    section = SECTIONS["Model metrics"]
    generated = {"deleted": False, "isGenerated": True}
    card = generated | {"metricSectionId": section}
    cards = [
        card | {"uuid": f"sweeper-{k}", "type": "BAR", "metricKey": k, "displayName": k}
        for k in first
        if k in held
    ]
    line = {
        "lineSmoothness": 0,
        "xAxisScaleType": "linear",
        "scaleType": "linear",
        "xAxisKey": "step",
        "selectedXAxisMetricKey": "",
        "yAxisKey": "metric",
        "yAxisExpressions": [],
        "ignoreOutliers": False,
        "useGlobalXaxisKey": True,
        "useGlobalLineSmoothing": True,
    }
    cards += [
        card | line | {"uuid": f"sweeper-{k}", "type": "LINE", "metricKey": k, "displayName": k}
        for k in CURVES
        if k in held
    ]
    # reordered: the UI appends its other charts after these (not reordered, it files each by
    # name among them, and every one before val_*)
    sections = [
        {"uuid": uuid, "name": name, "display": True, "isReordered": True, **generated}
        for name, uuid in SECTIONS.items()
    ]
    return {"compareRunCharts": cards, "compareRunSections": sections}


def view(board: Any, runs: list[Any], parent_run_id: str) -> dict[str, Any]:
    """The runs table that answers the sweep: its runs (those it ranks: reused
    ones too), best first by the primary validation metric in its direction, with
    the rank, the primary validation and test metrics, the companion metric, the
    times, the speedup where devices were swept and the swept keys as columns."""

    m, held = board.metric, {k for r in runs for k in r.data.metrics}
    companion = next((k for k in COMPANIONS.get(m, ()) if k in held), None)
    # the metrics that rank (and the companion one): columns after the rank, and the first charts
    ranking = [f"val_{m}", f"test_{m}", *([companion] if companion else [])]
    metrics = [
        RANK,
        *ranking,
        *TIMES,
        *(["speedup"] if "device" in board.keys and "speedup" in held else []),
    ]
    shown = [column(METRIC, k) for k in metrics] + [column(PARAM, k) for k in board.keys]
    # its width: the longest name whole (the UI cut names at ~15 characters)
    name = column(ATTRIBUTE, "Run Name")
    wide = min(
        MAX_NAME_PX, max(160, 40 + 8 * max((len(r["run"] or "") for r in board.rows), default=0))
    )
    return {
        "searchFilter": f"tags.`{SWEEPS}` LIKE '%{parent_run_id}%'",
        "orderByKey": column(METRIC, f"val_{m}"),
        "orderByAsc": bool(board.lower),
        "selectedColumns": shown,
        # the UI's own first columns (the name, when it was created,
        # how long it ran), then these in this order
        "columnOrder": [name, "runDateAndNestInfo", "duration", *shown],
        "columnWidths": {name: wide},
        # the chart view opens on the same answer: the ranking's metrics, then the loss curves
        **charts(ranking, held),
    }


def address(
    c: Any, uri: str, experiment_id: str, board: Any, runs: list[Any], parent_run_id: str
) -> str:
    """The page that answers the sweep (:func:`view`): the experiment's shared
    view ``sweeper-<parent run id>`` where the installed MLflow's UI was checked
    (:mod:`sweeper.tracking.ui`), else the sort and search in the address."""

    if not board.rows:
        return experiment_url(uri, experiment_id)
    shown = view(board, runs, parent_run_id)
    key = f"sweeper-{parent_run_id}"
    if ui.shared(c, experiment_id, key, shown):
        return experiment_url(uri, experiment_id, f"viewStateShareKey={key}")
    return experiment_url(
        uri,
        experiment_id,
        table_query(shown["orderByKey"], shown["orderByAsc"], shown["searchFilter"]),
    )
