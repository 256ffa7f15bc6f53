"""The leaderboard of a sweep: its child runs ranked by their primary validation metric.

With several seeds per configuration (``seed`` — the initial weights — or ``data.split_seed`` — the
split — swept), a configuration, not a seed, wins: configurations rank by the mean of their seeds'
validation metric, each shown as one row (mean, spread, ``n``) named by its run closest to the mean
(:func:`representative`), which is the one ``best_run`` and ``python -m sweeper.promote`` pick."""

from __future__ import annotations

import csv
import io
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from sweeper.base.fmt import cell, text_cell
from sweeper.base.tags import MLP_NAME, PRUNED_AT, model_name
from sweeper.tracking.ui import run_path
from sweeper.base.output import spreadsheet_safe, spreadsheet_value
from sweeper.job import crossval
from sweeper.job.metrics import LOWER_IS_BETTER, TIE_BREAK, rank_key
from sweeper.tracking import bulk


__all__ = ["Board", "SEEDS", "behind_finished", "build", "children", "group", "read_csv"]


@dataclass
class Board:
    """Leaderboard rows (dicts, best first) of one sweep, and what they are ranked by."""

    rows: list[dict[str, Any]]
    keys: list[str]  # the swept params, in the order of the columns
    metric: str  # e.g. "mse"
    lower: bool
    # the swept seed keys (seed, data.split_seed): rows then group
    seeds: list[str] = field(default_factory=list)
    # one per configuration, best mean first (seeds only)
    groups: list[dict[str, Any]] = field(default_factory=list)
    # marked rows (sweeper.insight.baselines), never ranked
    baselines: list[dict[str, Any]] = field(default_factory=list)
    # where the MLflow UI shows the board's runs (sweeper.insight.standing.address)
    address: str | None = None

    @property
    def folded(self) -> list[str]:
        """The columns of cross-validated runs (data.folds=k): the std
        of val_<metric> over a run's folds, and k."""
        return crossval.columns(self.rows, self.metric)

    @property
    def model(self) -> list[str]:
        """The model column: shown when a run of the board is not sweeper's MLP (a
        model of yours, a function trainer, or several models side by side)."""
        return ["model"] if any(r.get("model", MLP_NAME) != MLP_NAME for r in self.rows) else []

    @property
    def config_columns(self) -> list[str]:
        m = self.metric
        return [
            "run",
            *self.model,
            *(k for k in self.keys if k not in self.seeds),
            f"val_{m}",
            f"val_{m}_std",
            "n",
            *self.folded,
            f"test_{m}",
            "train_time_s",
            "status",
        ]

    @property
    def columns(self) -> list[str]:
        reused = ["reused"] if any(r.get("reused") for r in self.rows) else []
        return [
            "run",
            *self.model,
            *self.keys,
            f"val_{self.metric}",
            *self.folded,
            f"test_{self.metric}",
            "train_time_s",
            "speedup",
            "status",
            *reused,
        ]

    @property
    def best(self) -> dict[str, Any] | None:
        """The best run: with seeds, the run closest to the mean of
        the best configuration (its row in :attr:`rows`)."""
        first = self.rows[0] if self.rows else None
        value = first.get(f"val_{self.metric}") if first else None
        return (
            first
            if value is not None and math.isfinite(value) and first["status"] == "FINISHED"
            else None
        )

    def _view(
        self, limit: int | None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
        """(every row, the first ``limit`` of them, the columns): one
        row a run, or with seeds one a configuration."""
        rows, cols = (
            (self.groups, self.config_columns) if self.groups else (self.rows, self.columns)
        )
        return rows, rows if limit is None else rows[:limit], cols

    def _cells(self, rows: list[dict[str, Any]], cols: list[str]) -> list[list[str]]:
        keys = set(self.keys)
        return [[(text_cell if c in keys else cell)(_shown(r, c)) for c in cols] for r in rows]

    def table(self, fmt: str = "simple", limit: int | None = None) -> str:
        """One row a run; with seeds, one row a configuration (its mean over seeds, their std
        and ``n``; ``run`` is its run closest to the mean), ranked by the mean. ``limit``:
        the first rows only, and a line that says how many more there are."""
        # lazy: saves ~51 ms at this module's import (measured)
        from tabulate import tabulate

        rows, shown, cols = self._view(limit)
        body = self._cells([*shown, *self.baselines], cols)
        return "\n".join(
            [tabulate(body, headers=cols, tablefmt=fmt, disable_numparse=True), *self.notes(shown)]
        )

    def markdown(self, experiment_id: str | None = None, limit: int | None = None) -> str:
        """:meth:`table` in the markdown of MLflow's UI (a run's description, summary.md):
        each cell padded with non-breaking spaces (MLflow draws its tables
        without padding: lr 0.001 beside val_mse 3118 read ``0.0013118``), each run's name
        a link to its page on the model-training views (``experiment_id`` given), and each
        note a paragraph of its own (a line right after a table row becomes a row)."""
        rows, shown, cols = self._view(limit)
        pad = "\u00a0\u00a0"

        def line(cells: list[str]) -> str:
            return "|" + "|".join(f"{pad}{c.replace('|', chr(92) + '|')}{pad}" for c in cells) + "|"

        body = self._cells([*shown, *self.baselines], cols)
        if experiment_id is not None:
            for cells, r in zip(body, shown):  # the baselines are no run
                cells[0] = f"[{cells[0]}]({run_path(experiment_id, r['run_id'])})"
        table = [line(cols), "|" + "|".join("---" for _ in cols) + "|", *map(line, body)]
        return "\n\n".join(["\n".join(table), *self.notes(shown)])

    def notes(self, shown: list[dict[str, Any]]) -> list[str]:
        """The lines under the table: how many rows were left out
        (``shown``: the rows printed), and what its columns mean where they
        are not plain (seeds, folds, a failed gradient check, baselines)."""
        rows = self.groups or self.rows
        out = []
        if len(shown) < len(rows):
            what = "configurations" if self.groups else "runs"
            out.append(
                f"… and {len(rows) - len(shown):,} more {what} (the best {len(shown)} of "
                f"{len(rows):,} shown; "
                "all of them: the parent run's summary.csv and summary.md)"
            )
        if self.groups:
            over = " and ".join(self.seeds)
            out.append(
                f"(one row a configuration: mean and std of val_{self.metric} over its {over} "
                "values, ranked by "
                "the mean; run: its run closest to the mean)"
            )
            if any(g.get("n_total", g["n"]) > g["n"] for g in self.groups):
                out.append(
                    f"({FAILED_MARK}: n = finished/total, a seed of it FAILED; ranked behind "
                    "every configuration "
                    "whose seeds all finished and whose mean is within the noise of its own)"
                )
        if self.folded:
            out.append(crossval.legend(self.metric))
        if any(r.get("gradient_check") == "failed" for r in shown):
            out.append(
                f"({WRONG_GRADIENT}: the model's backward disagrees with finite differences; "
                "trained anyway "
                "under model.check=false: its scores are not those of the model it claims to be)"
            )
        if self.baselines:
            out.append(
                "([baseline] rows: references fitted on the same split and rows (baselines=...), "
                "never ranked or "
                "promoted)"
            )
        return out

    def csv(self) -> str:
        buf = io.StringIO()
        writer = csv.DictWriter(
            buf, fieldnames=[*self.columns, "reason", "run_id"], extrasaction="ignore"
        )
        writer.writeheader()
        # no cell runs as a formula
        writer.writerows({k: spreadsheet_safe(v) for k, v in r.items()} for r in self.rows)
        return buf.getvalue()


def read_csv(path: Any) -> Any:
    """The leaderboard that :meth:`Board.csv` wrote (a parent's ``summary.csv``), as a
    DataFrame of the values it held: run ids and names as text (an id of digits only
    would read as a number), the swept values as pandas reads them, text cells without
    the quote that kept a spreadsheet from running them (:func:`spreadsheet_value`)."""
    # lazy: saves ~238 ms at this module's import (measured)
    import pandas as pd

    board = pd.read_csv(path, dtype={"run": str, "run_id": str, "status": str, "reason": str})
    for column in board.columns:
        if not pd.api.types.is_numeric_dtype(board[column]):
            board[column] = board[column].map(spreadsheet_value)
    return board


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _shown(row: dict[str, Any], column: str) -> Any:
    """A cell as the table shows it: the status carries the failure reason, shortened."""
    if column == "status" and row.get("reason"):
        return f"{row['status']}: {_short(row['reason'])}"
    # model.check=false: its gradients are wrong
    if column == "status" and row.get("gradient_check") == "failed":
        return f"{row['status']} {WRONG_GRADIENT}"
    # stopped early at a rung (sweeper.sweep.pruning)
    if column == "status" and row.get("pruned_at"):
        return f"{row['status']} (pruned at epoch {row['pruned_at']})"
    if column == "n" and row.get("n_total", 0) > (row.get("n") or 0):
        return f"{row['n']}/{row['n_total']} {FAILED_MARK}"
    return row.get(column)


FAILED_MARK = "✗"
WRONG_GRADIENT = "(gradient check failed)"


def behind_finished(
    items: list[Any], failed: Callable[[Any], bool], same: Callable[[Any, Any], bool]
) -> list[Any]:
    """``items`` (best first) with each one that ``failed`` (a seed FAILED) moved behind
    every fully finished item after it whose score is the ``same`` as its own within
    the noise: a configuration does not rank ahead by the seeds that survived."""
    out = list(items)
    for it in [x for x in items if failed(x)][::-1]:
        i = j = out.index(it)
        for k in range(i + 1, len(out)):
            if not same(it, out[k]):
                break  # the scores only grow apart from here
            if not failed(out[k]):
                j = k
        out.insert(j, out.pop(i))  # j == i: where it was
    return out


def _pooled(groups: list[dict[str, Any]]) -> tuple[float, int] | None:
    """The seed-to-seed std pooled over the configurations, and its
    degrees of freedom (None without repeats)."""
    spread = [(g["n"] - 1, statistics.variance(g["values"])) for g in groups if g["n"] > 1]
    dof = sum(d for d, _ in spread)
    return (math.sqrt(sum(d * v for d, v in spread) / dof), dof) if dof else None


def _within(noise: tuple[float, int] | None) -> Callable[[dict[str, Any], dict[str, Any]], bool]:
    """Whether two groups' means differ by no more than
    a two-sided t-test at 5% on the pooled noise allows."""
    if noise is None:
        return lambda a, b: False
    # lazy: saves ~571 ms at this module's import (measured)
    from scipy import stats

    sd, dof = noise
    q = float(stats.t.ppf(0.975, dof))
    return lambda a, b: (
        None not in (a["mean"], b["mean"])
        and abs(a["mean"] - b["mean"]) <= q * sd * math.sqrt(1 / a["n"] + 1 / b["n"])
    )


SEEDS = ("seed", "data.split_seed")  # the keys that draw noise, not a configuration


def representative(values: list[float], mean: float) -> int:
    """The index of the value closest to ``mean`` (the earlier on a
    tie): the run that stands for its configuration."""
    return min(range(len(values)), key=lambda i: (abs(values[i] - mean), i))


def group(
    items: Iterable[Any],
    config: Callable[[Any], Any],
    value: Callable[[Any], float | None],
    lower: bool,
) -> list[dict[str, Any]]:
    """Items (runs, rows) by configuration, ranked by the mean of their
    finite ``value``: each ``{"config", "items" (the representative first), "values",
    "mean", "std" (None for one value), "n"}``; configurations with no value last."""
    by: dict[Any, list[Any]] = {}
    for it in items:
        by.setdefault(config(it), []).append(it)
    out = []
    for key, its in by.items():
        scored = [(it, v) for it in its if (v := value(it)) is not None and math.isfinite(v)]
        values = [v for _, v in scored]
        mean = statistics.fmean(values) if values else None
        if values:
            first = scored[representative(values, mean)][0]
            its = [first, *(it for it in its if it is not first)]
        out.append(
            {
                "config": key,
                "items": its,
                "values": values,
                "mean": mean,
                "n": len(values),
                "std": statistics.stdev(values) if len(values) > 1 else None,
            }
        )
    # the scored configurations ranked by their mean, then those without a score
    ranked = sorted(
        (g for g in out if g["mean"] is not None), key=lambda g: g["mean"] if lower else -g["mean"]
    )
    return ranked + [g for g in out if g["mean"] is None]


def children(c: Any, parent: Any) -> list[Any]:
    """The child runs of a parent run."""
    return bulk.child_runs(c, [parent.info.experiment_id], parent.info.run_id)


def build(runs: list[Any], reused: Any = ()) -> Board:
    """Rank child runs by their primary validation metric (accuracy for binary tasks, else MSE).

    ``reused`` holds the ids of those runs that a resumed sweep took over instead of training
    them again: they rank with the others, and their ``reused`` cell holds their id.
    """
    binary = any("val_accuracy" in r.data.metrics for r in runs)
    metric = "accuracy" if binary else "mse"
    lower = LOWER_IS_BETTER[metric]
    ignore = ("tracking.", "pinned.")
    # resume: false on the runs a resumed sweep reuses, true on those it trains; it
    # says nothing of either; baselines: a param of runs made before it became a
    # tag (references fitted at the sweep's end, not a run's key) model._target_:
    # the model column says it, short (a run of sweeper's MLP has no such param)
    names = sorted(
        {
            k
            for r in runs
            for k in r.data.params
            if not k.startswith(ignore) and k not in ("resume", "baselines", "model._target_")
        }
    )
    # a run killed before its end has no params (they come with its final batch): it makes no column
    keys = [k for k in names if len({r.data.params.get(k) for r in runs if r.data.params}) > 1]
    rows = []
    for r in runs:
        m = r.data.metrics
        rows.append(
            {
                "run": r.info.run_name,
                "model": model_name(r.data.tags),
                **{k: r.data.params.get(k) for k in keys},
                f"val_{metric}": m.get(f"val_{metric}"),
                f"test_{metric}": m.get(f"test_{metric}"),
                "train_time_s": m.get("train_time_s"),
                "speedup": m.get("speedup"),
                "status": r.info.status,
                "reason": r.data.tags.get("failure_reason"),
                "run_id": r.info.run_id,
                "device": r.data.tags.get("device"),
                "fingerprint": r.data.tags.get("fingerprint"),
                "reused": r.info.run_id if r.info.run_id in reused else None,
                TIE_BREAK: m.get(TIE_BREAK),
                "start_time": r.info.start_time,
                "end_time": getattr(r.info, "end_time", None),
                "pruned_at": r.data.tags.get(PRUNED_AT),
                # failed: trained anyway under model.check=false
                "gradient_check": r.data.tags.get("gradient_check"),
                # cross-validated (data.folds=k): val_<metric> is the fold mean
                **crossval.row(r.data.tags, m, metric),
            }
        )

    def rank(row: dict[str, Any]) -> tuple:
        v = row[f"val_{metric}"]
        ok = row["status"] == "FINISHED" and v is not None and math.isfinite(v)
        # configurations that trained their full epochs first; those
        # halving stopped below, by their rung's score
        return (
            not ok,
            row["pruned_at"] is not None,
            *(rank_key(v, lower, row[TIE_BREAK], row["start_time"]) if ok else ()),
        )

    rows = sorted(rows, key=rank)
    seeds = [k for k in keys if k in SEEDS]
    if not seeds:
        return Board(rows, keys, metric, lower)
    # a configuration, not a seed, wins: rank configurations by their
    # mean, each led by its run closest to it
    val = f"val_{metric}"
    config = lambda r: (r["model"], *(r[k] for k in keys if k not in seeds))
    groups = [
        g
        for g in group(
            (r for r in rows if r["status"] == "FINISHED"), config, lambda r: r[val], lower
        )
    ]
    tried: dict[Any, int] = {}
    for r in rows:
        if r["status"] in ("FINISHED", "FAILED"):
            tried[config(r)] = tried.get(config(r), 0) + 1
    for g in groups:
        # a configuration's finished runs are among its tried ones
        g["n_total"] = tried[g["config"]]

    def incomplete(g: dict[str, Any]) -> bool:
        return g["n_total"] > g["n"]

    if any(map(incomplete, groups)):  # pragma: no mutate  (only spares the noise's scipy import)
        groups = behind_finished(groups, incomplete, _within(_pooled(groups)))
    shown = []
    for g in groups:
        first = g["items"][0]
        tests = [
            t for r in g["items"] if (t := r[f"test_{metric}"]) is not None and math.isfinite(t)
        ]
        times = [t for r in g["items"] if (t := r["train_time_s"]) is not None]
        shown.append(
            {
                **first,
                val: g["mean"],
                f"{val}_std": g["std"],
                "n": g["n"],
                "n_total": g["n_total"],
                f"test_{metric}": statistics.fmean(tests) if tests else None,
                "train_time_s": statistics.fmean(times) if times else None,
            }
        )
    ordered = [r for g in groups for r in g["items"]]
    return Board(
        ordered + [r for r in rows if r["status"] != "FINISHED"], keys, metric, lower, seeds, shown
    )
