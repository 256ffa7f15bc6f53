"""A sweep at a glance, built from the MLflow store alone: leaderboard, plots and the parent's metrics.

The end of every multirun publishes it on the parent run; ``python -m sweeper.report`` rebuilds the
same from the store when that step never ran (a job crashed, the launcher was killed):

    python -m sweeper.report --experiment diabetes          # the latest sweep of the experiment
    python -m sweeper.report --parent RUN_ID [--tracking-uri URI]
"""
from __future__ import annotations

import argparse
import csv
import io
import math
import os
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeper import tracking
from sweeper.metrics import LOWER_IS_BETTER

TOP_CURVES = 5


@dataclass
class Board:
    """Leaderboard rows (dicts, best first) of one sweep, and what they are ranked by."""

    rows: list[dict[str, Any]]
    keys: list[str]  # the swept params, in the order of the columns
    metric: str  # e.g. "mse"
    lower: bool

    @property
    def columns(self) -> list[str]:
        return ["run", *self.keys, f"val_{self.metric}", f"test_{self.metric}", "train_time_s", "speedup", "status"]

    @property
    def best(self) -> dict[str, Any] | None:
        first = self.rows[0] if self.rows else None
        return first if first and first["status"] == "FINISHED" and first.get(f"val_{self.metric}") is not None else None

    def table(self, fmt: str = "simple") -> str:
        from tabulate import tabulate

        body = [[_cell(_shown(r, c)) for c in self.columns] for r in self.rows]
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


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def children(c: Any, parent: Any) -> list[Any]:
    """The child runs of a parent run."""
    return tracking.search(c, [parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")


def build(runs: list[Any]) -> Board:
    """Rank child runs by their primary validation metric (accuracy for binary tasks, else MSE)."""
    binary = any("val_accuracy" in r.data.metrics for r in runs)
    metric = "accuracy" if binary else "mse"
    lower = LOWER_IS_BETTER[metric]
    ignore = ("tracking.", "pinned.")
    names = sorted({k for r in runs for k in r.data.params if not k.startswith(ignore)})
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
        })

    def rank(row: dict[str, Any]) -> tuple:
        v = row[f"val_{metric}"]
        ok = row["status"] == "FINISHED" and v is not None and math.isfinite(v)
        return (not ok, (v if lower else -v) if ok else 0.0, row["run"] or "")

    return Board(sorted(rows, key=rank), keys, metric, lower)


def figures(c: Any, board: Board) -> dict[str, Any]:
    """Plots of a sweep, by artifact name. Each is titled, with labelled axes (units) and a legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, Any] = {}
    done = [r for r in board.rows if r["status"] == "FINISHED" and r[f"val_{board.metric}"] is not None]
    val = f"val_{board.metric}"
    unit = " (target units²)" if board.metric == "mse" else ""

    if "lr" in board.keys and len({r["lr"] for r in done}) > 1:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        others = [k for k in board.keys if k not in ("lr", "device", "sync_every_epoch")]
        groups: dict[str, list[dict[str, Any]]] = {}
        for r in done:
            if r.get("device", "cpu") == "cpu" or "device" not in board.keys:
                groups.setdefault(", ".join(f"{k}={r[k]}" for k in others) or "all runs", []).append(r)
        for label, rs in sorted(groups.items()):
            rs = sorted(rs, key=lambda r: float(r["lr"]))
            ax.plot([float(r["lr"]) for r in rs], [r[val] for r in rs], marker="o", label=label)
        ax.set_xscale("log")
        ax.set(title=f"Validation {board.metric} against learning rate", xlabel="learning rate (lr, log scale)",
               ylabel=f"validation {board.metric}{unit}")
        ax.legend(fontsize="small")
        ax.grid(alpha=0.3)
        out["plots/val_metric_vs_lr.png"] = fig

    top = done[:TOP_CURVES]
    if top:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for r in top:
            history = c.get_metric_history(r["run_id"], "train_loss")
            ax.plot([h.step for h in history], [h.value for h in history], label=r["run"])
        ax.set_yscale("log")
        ax.set(title=f"Training loss of the top {len(top)} runs (by {val})", xlabel="epoch",
               ylabel="training loss (standardised, log scale)")
        ax.legend(fontsize="small")
        ax.grid(alpha=0.3)
        out["plots/loss_curves_top.png"] = fig

    pairs = {}
    for r in done:
        pairs.setdefault(r["fingerprint"], {})[r["device"]] = r
    pairs = {fp: p for fp, p in pairs.items() if "cpu" in p and "gpu" in p}
    if pairs:
        labels = [p["gpu"]["run"].replace(",gpu", "").replace("device=gpu,", "") for p in pairs.values()]
        x = range(len(pairs))
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
        left.bar([i - 0.2 for i in x], [p["cpu"]["train_time_s"] for p in pairs.values()], 0.4, label="cpu")
        left.bar([i + 0.2 for i in x], [p["gpu"]["train_time_s"] for p in pairs.values()], 0.4, label="gpu")
        left.set(title="Train time per configuration", ylabel="train time (s, log scale)", yscale="log")
        right.bar(list(x), [p["gpu"].get("speedup") or 0.0 for p in pairs.values()], 0.5, color="tab:green",
                  label="gpu over cpu")
        right.axhline(1.0, color="grey", lw=1, ls="--", label="parity")
        right.set(title="GPU-over-CPU speedup (train time)", ylabel="speedup (×)")
        for ax in (left, right):
            ax.set_xticks(list(x), labels, rotation=30, ha="right", fontsize="small")
            ax.set_xlabel("configuration")
            ax.legend(fontsize="small")
        fig.tight_layout()
        out["plots/time_and_speedup.png"] = fig
    return out


ORPHAN = "orphaned: its job ended without closing the run (killed?)"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def mark_orphans(c: Any, runs: list[Any], sweep_ended: bool) -> list[str]:
    """Mark child runs that a killed job left RUNNING as FAILED, with the reason; return their ids.

    When the sweep has ended every RUNNING child is an orphan; otherwise (a report while jobs may
    still run) only those whose process, on this host, no longer exists.
    """
    marked = []
    for r in runs:
        if r.info.status != "RUNNING":
            continue
        pid, host = r.data.tags.get("pid"), r.data.tags.get("host")
        gone = host == socket.gethostname() and pid is not None and pid.isdigit() and not _alive(int(pid))
        if sweep_ended or gone:
            c.set_tag(r.info.run_id, "failure_reason", ORPHAN)
            c.set_terminated(r.info.run_id, "FAILED")
            marked.append(r.info.run_id)
    return marked


def publish(c: Any, parent_run_id: str, out: Any = None, sweep_ended: bool = False) -> Board:
    """Build the leaderboard of a parent run's children, print it, and log it with plots and metrics.

    Children left RUNNING by killed jobs are marked FAILED first (see :func:`mark_orphans`).
    """
    import matplotlib.pyplot as plt

    out = out or sys.stdout
    parent = c.get_run(parent_run_id)
    runs = children(c, parent)
    orphans = mark_orphans(c, runs, sweep_ended)
    if orphans:
        print(f"marked {len(orphans)} orphaned run(s) FAILED: {', '.join(orphans)}", file=out)
        runs = children(c, parent)
    board = build(runs)
    skipped = [s for s in parent.data.tags.get("skipped_jobs", "").splitlines() if s]
    print(board.table(), file=out)

    with tempfile.TemporaryDirectory() as tmp:
        for name, text in (("summary.csv", board.csv()), ("summary.md", board.table("github") + "\n")):
            (Path(tmp) / name).write_text(text)
            c.log_artifact(parent_run_id, str(Path(tmp) / name))
    for name, fig in figures(c, board).items():
        c.log_figure(parent_run_id, fig, name)
        plt.close(fig)

    metrics: dict[str, float] = {f"n_{s.lower()}": sum(r["status"] == s for r in board.rows)
                                 for s in ("FINISHED", "FAILED", "KILLED")}
    metrics["n_skipped"] = len(skipped)
    tags = {}
    if board.best is not None:
        metrics[f"best_val_{board.metric}"] = board.best[f"val_{board.metric}"]
        tags = {"best_run_id": board.best["run_id"], "best_run": board.best["run"] or ""}
        print(f"best: {board.best['run']}  val_{board.metric}={board.best[f'val_{board.metric}']:.4g}  "
              f"(run {board.best['run_id']})", file=out)
    tracking.log_metrics(c, parent_run_id, metrics)
    if tags:
        c.set_tag(parent_run_id, "best_run_id", tags["best_run_id"])
        c.set_tag(parent_run_id, "best_run", tags["best_run"])
    from sweeper import advise  # the findings, after the leaderboard; advice.md and advice.* tags on the parent

    try:
        advise.publish(c, parent, runs, [r["run_id"] for r in board.rows], out)
    except Exception as e:  # an extra: whatever goes wrong in it, the sweep still ends and its parent closes
        print(f"sweeper: warning: no advice: {tracking.first_line(e)}", file=out)
    return board


def latest_parent(c: Any, experiment: str, uri: str) -> Any:
    exp = tracking.named_experiment(c, experiment, uri)
    parents = [r for r in tracking.search(c, [exp.experiment_id], "tags.sweep_dir != ''")]
    if not parents:
        raise tracking.TrackingError(f"--experiment={experiment} has no sweep (parent run): run python -m sweeper -m ... first")
    return max(parents, key=lambda r: r.info.start_time)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sweeper.report", description=__doc__.splitlines()[0])
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--experiment", help="report the latest sweep of this experiment")
    which.add_argument("--parent", help="report the sweep with this parent run id")
    ap.add_argument("--tracking-uri", default=tracking.DEFAULT_URI, help=f"default: {tracking.DEFAULT_URI}")
    args = ap.parse_args(argv)
    c = tracking.client(args.tracking_uri)
    try:
        parent = latest_parent(c, args.experiment, args.tracking_uri) if args.experiment else c.get_run(args.parent)
    except Exception as e:
        print(f"sweeper: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    print(f"Sweep {parent.info.run_name} (parent run {parent.info.run_id})")
    publish(c, parent.info.run_id)
    if parent.info.status == "RUNNING":  # its end-of-sweep step never ran
        c.set_terminated(parent.info.run_id, "FINISHED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
