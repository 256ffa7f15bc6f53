"""The leaderboard of a sweep: its child runs ranked by their primary validation metric."""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from typing import Any

from sweeper import tracking
from sweeper.base.fmt import cell, text_cell
from sweeper.job.metrics import LOWER_IS_BETTER, TIE_BREAK, rank_key


@dataclass
class Board:
    """Leaderboard rows (dicts, best first) of one sweep, and what they are ranked by."""

    rows: list[dict[str, Any]]
    keys: list[str]  # the swept params, in the order of the columns
    metric: str  # e.g. "mse"
    lower: bool

    @property
    def columns(self) -> list[str]:
        reused = ["reused"] if any(r.get("reused") for r in self.rows) else []
        return ["run", *self.keys, f"val_{self.metric}", f"test_{self.metric}", "train_time_s", "speedup", "status",
                *reused]

    @property
    def best(self) -> dict[str, Any] | None:
        first = self.rows[0] if self.rows else None
        value = first.get(f"val_{self.metric}") if first else None
        return first if value is not None and math.isfinite(value) and first["status"] == "FINISHED" else None

    def table(self, fmt: str = "simple") -> str:
        from tabulate import tabulate

        body = [[(text_cell if c in self.keys else cell)(_shown(r, c)) for c in self.columns] for r in self.rows]
        return tabulate(body, headers=self.columns, tablefmt=fmt, disable_numparse=True)

    def csv(self) -> str:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=[*self.columns, "reason", "run_id"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(self.rows)
        return buf.getvalue()



def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"



def _shown(row: dict[str, Any], column: str) -> Any:
    """A cell as the table shows it: the status carries the failure reason, shortened."""
    if column == "status" and row.get("reason"):
        return f"{row['status']}: {_short(row['reason'])}"
    return row.get(column)



def children(c: Any, parent: Any) -> list[Any]:
    """The child runs of a parent run."""
    return tracking.search(c, [parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")



def build(runs: list[Any], reused: Any = ()) -> Board:
    """Rank child runs by their primary validation metric (accuracy for binary tasks, else MSE).

    ``reused`` holds the ids of those runs that a resumed sweep took over instead of training them again:
    they rank with the others, and their ``reused`` cell holds their id.
    """
    binary = any("val_accuracy" in r.data.metrics for r in runs)
    metric = "accuracy" if binary else "mse"
    lower = LOWER_IS_BETTER[metric]
    ignore = ("tracking.", "pinned.")
    # resume: false on the runs a resumed sweep reuses, true on those it trains; it says nothing of either
    names = sorted({k for r in runs for k in r.data.params if not k.startswith(ignore) and k != "resume"})
    # a run killed before its end has no params (they come with its final batch): it makes no column
    keys = [k for k in names if len({r.data.params.get(k) for r in runs if r.data.params}) > 1]
    rows = []
    for r in runs:
        m = r.data.metrics
        rows.append({
            "run": r.info.run_name, **{k: r.data.params.get(k) for k in keys},
            f"val_{metric}": m.get(f"val_{metric}"), f"test_{metric}": m.get(f"test_{metric}"),
            "train_time_s": m.get("train_time_s"), "speedup": m.get("speedup"),
            "status": r.info.status, "reason": r.data.tags.get("failure_reason"),
            "run_id": r.info.run_id, "device": r.data.tags.get("device"), "fingerprint": r.data.tags.get("fingerprint"),
            "reused": r.info.run_id if r.info.run_id in reused else None,
            TIE_BREAK: m.get(TIE_BREAK), "start_time": r.info.start_time,
        })

    def rank(row: dict[str, Any]) -> tuple:
        v = row[f"val_{metric}"]
        ok = row["status"] == "FINISHED" and v is not None and math.isfinite(v)
        return (not ok, *(rank_key(v, lower, row[TIE_BREAK], row["start_time"]) if ok else (0.0, 0.0, 0)))

    return Board(sorted(rows, key=rank), keys, metric, lower)
