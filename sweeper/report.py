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

from sweeper.helptext import describe
from sweeper import tracking
from sweeper.metrics import LOWER_IS_BETTER, TIE_BREAK, rank_key


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


def cell(v: Any) -> str:
    """How sweeper prints a value, in every table and line it shows: a float to 4 significant digits, an
    integral float below 1e15 as the integer it is (MLflow keeps counts such as epochs_run as floats), None as
    ``-``, anything else (an int, a name, an id) as it is. Param and override text goes through :func:`text_cell`."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else f"{v:.4g}"
    return str(v)


def text_cell(text: Any) -> str:
    """A param's or an override's value as sweeper prints it: the number it holds, through :func:`cell`, when 4
    significant digits change it (Optuna's ``0.006260326907499732`` → ``0.00626``), else as written (``1e-3``,
    ``200``, ``tanh``). Commands keep the exact text: a resumed sweep must match the runs it reuses."""
    from sweeper.pinned import parse_param

    x = parse_param(str(text)) if text is not None else None
    if isinstance(x, float) and math.isfinite(x) and float(cell(x)) != x:
        return cell(x)
    return cell(text)


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


ORPHAN = "orphaned: its job ended without closing the run (killed?)"
INTERRUPTED = "interrupted (Ctrl-C)"


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def holder_alive(r: Any) -> bool | None:
    """Whether the process that created a run (its ``host`` and ``pid`` tags) still runs: None when it ran on
    another host or left no pid; False when it is this process, which runs no job while it reports."""
    pid, host = r.data.tags.get("pid"), r.data.tags.get("host")
    if host != socket.gethostname() or pid is None or not pid.isdigit():
        return None
    return int(pid) != os.getpid() and alive(int(pid))


def mark_orphans(c: Any, runs: list[Any], sweep_ended: bool, status: str = "FAILED", reason: str = ORPHAN) -> list[str]:
    """Mark child runs that a killed job left RUNNING as ``status`` (FAILED), with the reason; return their ids.

    When the sweep has ended every RUNNING child is an orphan; otherwise (a report while jobs may
    still run, or Ctrl-C in the launching process) only those whose process, on this host, no longer
    exists or is this one (which runs no job while it reports).
    """
    marked = []
    for r in runs:
        if r.info.status != "RUNNING":
            continue
        if sweep_ended or holder_alive(r) is False:
            c.set_tag(r.info.run_id, "failure_reason", reason)
            c.set_terminated(r.info.run_id, status)
            marked.append(r.info.run_id)
    return marked


def reused_runs(c: Any, parent: Any, results: list[dict[str, Any]] | None = None) -> list[Any]:
    """The FINISHED runs that the jobs of a resumed sweep took over (``reused.<job>`` tags on the parent,
    which each such job sets, and the ``resumed_from`` of the ``results`` when given)."""
    ids = {v for k, v in parent.data.tags.items() if k.startswith("reused.")}
    ids |= {r["resumed_from"] for r in results or () if r.get("resumed_from")}
    if not ids:
        return []
    listed = ", ".join(f"'{i}'" for i in sorted(ids))
    return tracking.search(c, [parent.info.experiment_id], f"attributes.run_id IN ({listed})")


def tally(parent: Any, runs: list[Any], results: list[dict[str, Any]] | None = None) -> dict[str, int]:
    """How the jobs of a sweep ended, for the parent's metrics: ``n_finished``, ``n_failed``, ``n_killed``
    (child runs by status), ``n_skipped`` (jobs that trained nothing: no GPU, or resumed — ``n_reused`` of
    them), ``n_orphaned`` (children whose job died with them RUNNING) and ``n_not_run``: the parent's
    ``n_jobs`` less the jobs accounted for (a child run or a result), absent when the parent has no ``n_jobs``.

    From the store alone, skipped jobs are the parent's ``skipped.<job>`` tags (or its ``skipped_jobs``
    lines); the jobs' ``results`` (result.json), when given, count too: a job whose tracking failed has
    no child run.
    """
    tags = parent.data.tags
    counts = {f"n_{s.lower()}": sum(r.info.status == s for r in runs) for s in ("FINISHED", "FAILED", "KILLED")}
    counts["n_orphaned"] = sum(r.data.tags.get("failure_reason") == ORPHAN for r in runs)
    if results is None:
        skipped = [k for k in tags if k.startswith("skipped.")] or [s for s in tags.get("skipped_jobs", "").splitlines() if s]
        counts["n_skipped"], counts["n_reused"] = len(skipped), sum(k.startswith("reused.") for k in tags)
        accounted = len(runs) + len(skipped)
    else:
        counts["n_skipped"] = sum(r["status"] == "SKIPPED" for r in results)
        counts["n_reused"] = sum(bool(r.get("resumed_from")) for r in results)
        logged = {r.get("run_id") for r in results}
        accounted = len(results) + sum(r.info.run_id not in logged for r in runs)
    if str(tags.get("n_jobs", "")).isdigit():
        counts["n_not_run"] = max(0, int(tags["n_jobs"]) - accounted)
    return counts


def incomplete(counts: dict[str, int]) -> str | None:
    """Why a sweep with these counts (:func:`tally`) did not complete — it is then KILLED — or None."""
    why = [f"{counts[k]} {what}" for k, what in (("n_not_run", "job(s) not run"), ("n_killed", "run(s) killed"),
                                                  ("n_orphaned", "run(s) orphaned")) if counts.get(k)]
    if why:
        return "incomplete: " + ", ".join(why)
    if not any(counts[k] for k in ("n_finished", "n_failed", "n_skipped")):
        return "incomplete: no job reported"
    return None


def publish(c: Any, parent_run_id: str, out: Any = None, sweep_ended: bool = False,
            results: list[dict[str, Any]] | None = None) -> tuple[Board, dict[str, int]]:
    """Build the leaderboard of a parent run's children and of the runs its jobs reused (resume), print it,
    and log it with plots and the counts of :func:`tally` (``results``: the jobs' result.json, when at hand).

    Children left RUNNING by killed jobs are marked FAILED first (see :func:`mark_orphans`).
    """
    from sweeper import plots

    out = out or sys.stdout
    parent = c.get_run(parent_run_id)
    runs = children(c, parent)
    orphans = mark_orphans(c, runs, sweep_ended)
    if orphans:
        print(f"marked {len(orphans)} orphaned run(s) FAILED: {', '.join(orphans)}", file=out)
        runs = children(c, parent)
    counts = tally(parent, runs, results)
    mine = {r.info.run_id for r in runs}
    reused = [r for r in reused_runs(c, parent, results) if r.info.run_id not in mine]
    board = build(runs + reused, {r.info.run_id for r in reused})
    print(board.table(), file=out)

    with tempfile.TemporaryDirectory() as tmp:
        painter = plots.PAINTER or plots.Painter()  # the sweep's (started with it), or drawn here at collect()
        folders = {r["run_id"]: Path(r["path"]).parent for r in results or () if r.get("run_id") and r.get("path")}
        painter.submit(plots.specs(c, board, folders), Path(tmp) / "figures")  # drawn while the rest is logged
        for name, text in (("summary.csv", board.csv()), ("summary.md", board.table("github") + "\n")):
            (Path(tmp) / name).write_text(text)
            c.log_artifact(parent_run_id, str(Path(tmp) / name))
        _conclude(c, parent, board, counts, runs + reused, out)
        for name, path in painter.collect().items():
            c.log_artifact(parent_run_id, str(path), str(Path(name).parent))
    return board, counts


def _conclude(c: Any, parent: Any, board: Board, counts: dict[str, int], runs: list[Any], out: Any) -> None:
    """The parent's counts, best run (metric, tags, line) and the advisor's findings."""
    parent_run_id = parent.info.run_id
    metrics: dict[str, float] = dict(counts)
    tags = {}
    if board.best is not None:
        metrics[f"best_val_{board.metric}"] = board.best[f"val_{board.metric}"]
        tags = {"best_run_id": board.best["run_id"], "best_run": board.best["run"] or ""}
        print(f"best: {board.best['run']}  val_{board.metric}={cell(board.best[f'val_{board.metric}'])}  "
              f"(run {board.best['run_id']}{', reused' if board.best['reused'] else ''})", file=out)
    tracking.log_metrics(c, parent_run_id, metrics)
    if tags:
        c.set_tag(parent_run_id, "best_run_id", tags["best_run_id"])
        c.set_tag(parent_run_id, "best_run", tags["best_run"])
    from sweeper import advise  # the findings, after the leaderboard; advice.md and advice.* tags on the parent

    try:
        advise.publish(c, parent, runs, [r["run_id"] for r in board.rows], out)
    except Exception as e:  # an extra: whatever goes wrong in it, the sweep still ends and its parent closes
        print(f"sweeper: warning: no advice: {tracking.first_line(e)}", file=out)


def close(c: Any, parent: Any, counts: dict[str, int], out: Any = None) -> str:
    """End a parent run: FINISHED, or KILLED with the reason (said on ``out``) when the sweep is incomplete
    (:func:`incomplete`); return the status."""
    from sweeper.sweep import resume_command

    why = incomplete(counts)
    if why:
        c.set_tag(parent.info.run_id, "failure_reason", why)
        again = resume_command(["-m", *parent.data.tags.get("overrides", "").split()])
        print(f"parent run {parent.info.run_id} KILLED: {why}; finish the sweep with: {again}", file=out or sys.stdout)
    status = "KILLED" if why else "FINISHED"
    c.set_terminated(parent.info.run_id, status)
    return status


def latest_parent(c: Any, experiment: str, uri: str) -> Any:
    exp = tracking.named_experiment(c, experiment, uri)
    parents = [r for r in tracking.search(c, [exp.experiment_id], "tags.sweep_dir != ''")]
    if not parents:
        raise tracking.TrackingError(f"--experiment={experiment} has no sweep (parent run): run python -m sweeper -m ... first")
    return max(parents, key=lambda r: r.info.start_time)


def single(c: Any, run: Any, uri: str, out: Any = None) -> None:
    """A report of one run that is not a sweep's parent: status, its metrics, params and where to see it."""
    from sweeper.sweep import run_url

    out = out or sys.stdout
    info, data = run.info, run.data
    reason = data.tags.get("failure_reason")
    print(f"Run {info.run_name} ({info.run_id}): {info.status}" + (f" ({reason})" if reason else ""), file=out)
    parent = data.tags.get("mlflow.parentRunId")
    if parent:
        print(f"  in the sweep of parent run {parent}: python -m sweeper.report --parent {parent}", file=out)
    quality = sorted(k for k in data.metrics if k.startswith(("val_", "test_")))
    times = [k for k in ("train_time_s", "wall_time_s", "epochs_run", "best_epoch") if k in data.metrics]
    for k in quality + times:
        print(f"  {k:<16} {cell(data.metrics[k])}", file=out)
    shown = {k: v for k, v in sorted(data.params.items()) if not k.startswith(("tracking.", "hydra"))}
    if shown:
        print("  params: " + " ".join(f"{k}={text_cell(v)}" for k, v in shown.items()), file=out)
    print(f"  UI: {run_url(uri, info.experiment_id, info.run_id)}", file=out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sweeper.report", description=describe(__doc__))
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--experiment", help="report the latest sweep of this experiment (with --latest, or alone)")
    which.add_argument("--parent", help="report the sweep with this parent run id (a run id that is no sweep's "
                                        "parent gets a report of that single run)")
    which.add_argument("--run", help="report this single run")
    ap.add_argument("--latest", action="store_true", help="with --experiment: its latest sweep (the default)")
    ap.add_argument("--tracking-uri", default=tracking.DEFAULT_URI, help=f"default: {tracking.DEFAULT_URI}")
    args = ap.parse_args(argv)
    if args.latest and not args.experiment:
        print("sweeper: error: --latest needs --experiment NAME: expected --experiment NAME --latest", file=sys.stderr)
        return 2
    c = tracking.client(args.tracking_uri)
    try:
        if args.experiment:
            parent = latest_parent(c, args.experiment, args.tracking_uri)
        else:
            parent = c.get_run(args.parent or args.run)
    except Exception as e:
        print(f"sweeper: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    if args.run or "sweep_dir" not in parent.data.tags:
        single(c, parent, args.tracking_uri)
        return 0
    print(f"Sweep {parent.info.run_name} (parent run {parent.info.run_id})")
    _, counts = publish(c, parent.info.run_id)
    if parent.info.status == "RUNNING" and holder_alive(parent):
        print(f"the sweep is still running (pid {parent.data.tags['pid']}): its parent run stays RUNNING")
    elif parent.info.status == "RUNNING":  # its end-of-sweep step never ran
        close(c, parent, counts)
    return 0


if __name__ == "__main__":
    from sweeper import main_exit

    main_exit(main)
