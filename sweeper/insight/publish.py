"""A sweep at a glance, built from the MLflow store alone: the leaderboard, plots, the
advice and the parent's counts and status; orphaned runs closed. The end of every multirun
publishes it on the parent run; ``python -m sweeper.report`` rebuilds it from the store."""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sweeper import tracking
from sweeper.base import stop
from sweeper.base.fmt import cell, resume_command, text_cell
from sweeper.base.tags import HOST, ORPHAN, PID, REPLACED_BY, RETRIED, booked, model_name
from sweeper.tracking.ui import run_path, run_url
from sweeper.base.process import HEARTBEAT, PID_START, beating, holds
from sweeper.insight.leaderboard import Board, build, children
from sweeper.tracking import ending

__all__ = [
    "NOTE_CHARS",
    "children",
    "close",
    "description",
    "holder_alive",
    "incomplete",
    "latest_parent",
    "mark_orphans",
    "model_uri",
    "publish",
    "reclose",
    "records",
    "reused_runs",
    "single",
    "tally",
]

# leaderboard rows printed at a sweep's end (all of them: the parent's summary.csv and summary.md)
SHOWN = 50


def holder_alive(r: Any) -> bool | None:
    """Whether the job that created a run still runs: its ``heartbeat`` tag
    (:mod:`sweeper.tracking.run`) says so on another host; on this host its ``host`` and ``pid``
    tags do (the process that started the run, not a later one given its pid), whatever its
    heartbeat says: a suspended sweep's beats stop while it lives. None when nothing tells (another
    host, no heartbeat); False when it is this process, which runs no job while it reports."""

    pid, host = booked(r.data.tags, PID), booked(r.data.tags, HOST)
    here = host == socket.gethostname() and pid is not None and pid.isdigit()
    # its process, here, is the truth: a stopped (Ctrl-Z) or starved one beats late but lives
    if here:
        return int(pid) != os.getpid() and holds(
            int(pid), r.info.start_time / 1000, booked(r.data.tags, PID_START)
        )
    return beating(booked(r.data.tags, HEARTBEAT), time.time())


def mark_orphans(
    c: Any,
    runs: list[Any],
    sweep_ended: bool,
    status: str = "FAILED",
    reason: str = ORPHAN,
    returned: bool = False,
) -> list[str]:
    """Mark child runs that a killed job left RUNNING as ``status``
    (FAILED), with the reason; return their ids.

    ``returned``: every job has returned to the launching process, so every RUNNING child is
    an orphan. Else a run whose job is alive (:func:`holder_alive`: a fresh heartbeat, a live
    pid here) stays RUNNING, one whose job is gone is marked, and one that nothing tells about
    is marked when the sweep has ended (``sweep_ended``). A dead run whose configuration
    another child of the sweep FINISHED (an engine retried its job) is an attempt, not
    an orphan: KILLED with :data:`RETRIED`, and left out of the counts (:func:`tally`).
    """

    finished = {_config(r): r.info.run_id for r in runs if r.info.status == "FINISHED"}
    ends = []
    for r in runs:
        if r.info.status != "RUNNING":
            continue
        holder = None if returned else holder_alive(r)
        if holder is True or (holder is None and not (sweep_ended or returned)):
            continue
        again = finished.get(_config(r))
        end, why = ("KILLED", f"{RETRIED} as run {again}") if again else (status, reason)
        ends.append(ending.Ending(r.info.run_id, {"status": end, "tags": {"failure_reason": why}}))
    ending.end_runs(c, ends)  # on the embedded store in one transaction
    return [e.run_id for e in ends]


def _config(r: Any) -> tuple[str | None, str | None]:
    return r.data.tags.get("fingerprint"), r.data.tags.get("device")


def attempts(runs: list[Any]) -> tuple[list[Any], list[Any]]:
    """(the runs that count, the attempts an engine retried: :func:`mark_orphans`)."""
    retried = [r for r in runs if r.data.tags.get("failure_reason", "").startswith(RETRIED)]
    return [r for r in runs if r not in retried], retried


def reused_runs(c: Any, parent: Any, results: list[dict[str, Any]] | None = None) -> list[Any]:
    """The FINISHED runs that the jobs of a resumed sweep took over (``reused.<job>`` tags on the
    parent, which each such job sets, and the ``resumed_from`` of the ``results`` when given)."""
    ids = {v for k, v in parent.data.tags.items() if k.startswith("reused.")}
    ids |= {r["resumed_from"] for r in results or () if r.get("resumed_from")}
    if not ids:
        return []
    listed = ", ".join(f"'{i}'" for i in sorted(ids))
    return tracking.search(c, [parent.info.experiment_id], f"attributes.run_id IN ({listed})")


def tally(
    parent: Any, runs: list[Any], results: list[dict[str, Any]] | None = None
) -> dict[str, int]:
    """How the jobs of a sweep ended, for the parent's metrics: ``n_finished``,
    ``n_failed``, ``n_killed`` (child runs by status), ``n_skipped`` (jobs that
    trained nothing: no GPU, or resumed — ``n_reused`` of them), ``n_orphaned`` (children
    whose job died with them RUNNING) and ``n_not_run``: the parent's ``n_jobs`` less the
    jobs accounted for (a child run or a result), absent when the parent has no ``n_jobs``.

    From the store alone, skipped jobs are the parent's ``skipped.<job>`` tags
    (or its ``skipped_jobs`` lines); the jobs' ``results`` (result.json), when
    given, count too: a job whose tracking failed has no child run.
    """
    tags = parent.data.tags
    # stubs that upload replaced: their new run counts
    runs = [r for r in runs if REPLACED_BY not in r.data.tags]
    runs, retried = attempts(runs)
    counts = {
        f"n_{s.lower()}": sum(r.info.status == s for r in runs)
        for s in ("FINISHED", "FAILED", "KILLED")
    }
    counts["n_orphaned"] = sum(r.data.tags.get("failure_reason") == ORPHAN for r in runs)
    counts["n_running"], counts["n_retried"] = (
        sum(r.info.status == "RUNNING" for r in runs),
        len(retried),
    )
    if results is None:
        skipped = [k for k in tags if k.startswith("skipped.")] or [
            s for s in tags.get("skipped_jobs", "").splitlines() if s
        ]
        counts["n_skipped"], counts["n_reused"] = (
            len(skipped),
            sum(k.startswith("reused.") for k in tags),
        )
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
    """Why a sweep with these counts (:func:`tally`) did not complete
    — it is then KILLED — or None."""
    why = [
        f"{counts[k]} {what}"
        for k, what in (
            ("n_not_run", "job(s) not run"),
            ("n_killed", "run(s) killed"),
            ("n_orphaned", "run(s) orphaned"),
        )
        if counts.get(k)
    ]
    if why:
        return "incomplete: " + ", ".join(why)
    if not any(counts[k] for k in ("n_finished", "n_failed", "n_skipped")):
        return "incomplete: no job reported"
    return None


def publish(
    c: Any,
    parent_run_id: str,
    out: Any = None,
    sweep_ended: bool = False,
    results: list[dict[str, Any]] | None = None,
    returned: bool = False,
) -> tuple[Board, dict[str, int]]:
    """Build the leaderboard of a parent run's children and of the runs its
    jobs reused (resume), print it, and log it with plots and the counts of
    :func:`tally` (``results``: the jobs' result.json, when at hand).

    Children left RUNNING by killed jobs are marked FAILED first (see :func:`mark_orphans`).
    """
    # lazy: saves ~14 ms at this module's import (measured)
    from sweeper.insight import importance, plots

    out = out or sys.stdout
    parent = c.get_run(parent_run_id)
    runs = children(c, parent)
    orphans = mark_orphans(c, runs, sweep_ended, returned=returned)
    if orphans:
        runs = children(c, parent)
        retried = {r.info.run_id for r in attempts(runs)[1]}
        if set(orphans) - retried:
            print(
                f"marked {len(set(orphans) - retried)} orphaned run(s) FAILED: "
                f"{', '.join(sorted(set(orphans) - retried))}",
                file=out,
            )
        if set(orphans) & retried:
            print(
                f"marked {len(set(orphans) & retried)} run(s) KILLED as attempts their engine "
                "retried",
                file=out,
            )
    counts = tally(parent, runs, results)
    runs = attempts(runs)[0]
    mine = {r.info.run_id for r in runs}
    reused = [r for r in reused_runs(c, parent, results) if r.info.run_id not in mine]
    board = build(runs + reused, {r.info.run_id for r in reused})
    # the sweep's (started with it), or drawn here at collect()
    painter = plots.current() or plots.Painter()
    with tempfile.TemporaryDirectory() as tmp:
        folders = {
            r["run_id"]: Path(r["path"]).parent
            for r in results or ()
            if r.get("run_id") and r.get("path")
        }
        # each key's share of the variance, its interval
        found = importance.compute(records(board, runs + reused))
        figures = [*plots.specs(c, board, folders), *filter(None, [importance.spec(found)])]
        painter.submit(
            figures if plots.wanted() else [],  # SWEEPER_PLOTS=off: described, not drawn
            Path(tmp) / "figures",
        )  # drawn while the baselines are fitted and the rest is logged
        recorded = False
        try:
            # the baselines: fitted by the sweep's painter while its
            # jobs ran (its answer read first), or here
            _record(
                c,
                parent,
                board,
                counts,
                runs + reused,
                results,
                out,
                {"importance.json": found},
                Path(tmp),
                painter.baselines(),
            )
            recorded = True
        finally:  # any exception (Ctrl-C too), raised on
            if not recorded:
                painter.close()  # its answer to this request would be read as the next one's
        for name, path in painter.collect().items():
            c.log_artifact(parent_run_id, str(path), str(Path(name).parent))
    return board, counts


def _record(
    c: Any,
    parent: Any,
    board: Board,
    counts: dict[str, int],
    runs: list[Any],
    results: list[dict[str, Any]] | None,
    out: Any,
    files: dict[str, Any],
    tmp: Path,
    prefitted: tuple[dict[str, Any], dict[str, Any]] | None = None,
) -> None:
    """What :func:`publish` records while its figures are drawn: the baselines (fitted
    once, by the sweep's painter while its jobs ran, ``prefitted``, or here; then read
    from the parent), the table, the parent's files (``files``: name → JSON), each run's
    rank and description, the address, the parent's counts, best run and advice."""
    # lazy: saves ~12 ms at this module's import (measured)
    from sweeper.insight import baselines as references, standing

    parent_run_id, experiment_id = parent.info.run_id, parent.info.experiment_id
    fitted = references.ensure(c, parent, results, out, prefitted=prefitted)
    board.baselines = references.rows(fitted, board.metric)
    print(board.table(limit=SHOWN), file=out)
    texts = {name: json.dumps(found, indent=1) + "\n" for name, found in files.items()}
    for name, text in {
        **texts,
        "summary.csv": board.csv(),
        "summary.md": board.markdown(experiment_id) + "\n",
    }.items():
        (tmp / name).write_text(text)
        c.log_artifact(parent_run_id, str(tmp / name))
    standing.record(c, board, runs, parent_run_id)  # each run's rank and description, on the run
    board.address = standing.address(c, c.tracking_uri, experiment_id, board, runs, parent_run_id)
    _conclude(c, parent, board, counts, runs, out, fitted)


def records(board: Board, runs: list[Any]) -> list[dict[str, Any]]:
    """The advisor's records of the board's runs, in its order (best first)."""
    # lazy: saves ~15 ms at this module's import (measured)
    from sweeper.insight.advice.evidence import record

    by_id = {r.info.run_id: r for r in runs}
    return [record(by_id[row["run_id"]]) for row in board.rows if row["run_id"] in by_id]


def _conclude(
    c: Any,
    parent: Any,
    board: Board,
    counts: dict[str, int],
    runs: list[Any],
    out: Any,
    fitted: dict[str, dict[str, float]] | None = None,
) -> None:
    """The parent's counts, best run (metric, tags, line), its description
    (the best run and the board) and the advisor's findings."""
    # lazy: saves ~1273 ms at this module's import (measured)
    from mlflow.entities import RunTag

    parent_run_id = parent.info.run_id
    # zero counters: tags only (no empty charts)
    metrics: dict[str, float] = {k: v for k, v in counts.items() if v}
    tags = {k: str(v) for k, v in counts.items()}
    best = ""
    if board.best is not None:
        metrics[f"best_val_{board.metric}"] = board.best[f"val_{board.metric}"]
        tags |= {"best_run_id": board.best["run_id"], "best_run": board.best["run"] or ""}
        tags["best_model_uri"] = model_uri(
            next((r for r in runs if r.info.run_id == board.best["run_id"]), None),
            board.best["run_id"],
        )
        best = (
            f"**Best:** [{board.best['run']}]("
            f"{run_path(parent.info.experiment_id, board.best['run_id'])}) "
            f"val_{board.metric}={cell(board.best[f'val_{board.metric}'])}, model `"
            f"{tags['best_model_uri']}`\n\n"
        )
        over = ""
        # seeds: the best configuration by its mean; best_run is its run closest to the mean
        if board.groups:
            g = board.groups[0]
            metrics[f"best_val_{board.metric}_mean"], metrics["best_n"] = (
                g[f"val_{board.metric}"],
                g["n"],
            )
            if g[f"val_{board.metric}_std"] is not None:
                metrics[f"best_val_{board.metric}_std"] = g[f"val_{board.metric}_std"]
            spread = (
                f" ± {cell(g[f'val_{board.metric}_std'])}"
                if g[f"val_{board.metric}_std"] is not None
                else ""
            )
            over = (
                f"  (best configuration by its mean over {g['n']} seed(s): "
                f"{cell(g[f'val_{board.metric}'])}{spread}; "
                "this is its run closest to the mean)"
            )
        # a baseline that beats the network is named on the best: line
        beaten = _beside(runs, board, fitted)
        if beaten is not None:
            tags["best_baseline"], metrics[f"best_baseline_val_{board.metric}"] = (
                beaten[0],
                beaten[2],
            )
            best += f"**Baseline:** {beaten[1]}\n\n"
        print(
            f"best: {board.best['run']}  val_{board.metric}="
            f"{cell(board.best[f'val_{board.metric}'])}  "
            f"(run {board.best['run_id']}{', reused' if board.best['reused'] else ''}){over}"
            + (f"; {beaten[1]}" if beaten else ""),
            file=out,
        )
        # cross-validated: best_run and best_model_uri are the refit's
        # lazy: saves ~16 ms at this module's import (measured)
        from sweeper.insight import refit

        refitted = refit.for_parent(
            c, parent, next((r for r in runs if r.info.run_id == board.best["run_id"]), None), out
        )
        if refitted is not None:
            more_tags, more_metrics, note = refit.parent_record(
                board.best, refitted, board.metric, model_uri(refitted), out
            )
            tags |= more_tags
            metrics |= more_metrics
            best += note
    # here, not at the top: sweep.pruning imports the job's compute, ~60-90 ms that
    # `python -m sweeper.report` would pay at its start (-X importtime, measured 2026-12-06)
    from sweeper.sweep import pruning

    pruned = pruning.parent_record(parent, runs)
    metrics |= pruned[0]
    tags |= pruned[1]
    tags["mlflow.note.content"] = description(best, board, parent.info.experiment_id)
    tracking.log_metrics(c, parent_run_id, metrics)
    c.log_batch(parent_run_id, tags=[RunTag(k, v) for k, v in tags.items()])
    # the findings, after the leaderboard; advice.md and advice.* tags on the parent
    # lazy: saves ~33 ms at this module's import (measured)
    from sweeper.insight.advice import (
        advisor,
    )

    # an extra: whatever goes wrong in it, the sweep still ends and its parent closes
    stop.extra(
        "advice",
        out,
        advisor.publish,
        c,
        parent,
        runs,
        [r["run_id"] for r in board.rows],
        out,
        fitted,
    )


def _beside(
    runs: list[Any], board: Board, fitted: dict[str, dict[str, float]] | None
) -> tuple[str, str, float] | None:
    """The baseline that beats the network's best beyond the noise:
    its name, words and score (None: none does)."""
    if not fitted:
        return None
    # lazy: saves ~15 ms at this module's import (measured)
    from sweeper.insight.advice.outside_grid import beside_best

    return beside_best(records(board, runs), fitted)


NOTE_CHARS = 7000  # the parent's description at most (MLflow keeps a tag's first 8,000 characters)


def description(best: str, board: Board, experiment_id: str) -> str:
    """The parent's description in MLflow's UI: its best run (``best``:
    markdown) and its leaderboard's first rows, as many of :data:`SHOWN`
    as :data:`NOTE_CHARS` holds (summary.md has them all)."""
    for limit in (SHOWN, 20, 10, 5, 1):
        text = best + board.markdown(experiment_id, limit)
        if len(text) <= NOTE_CHARS:
            return text
    return text[:NOTE_CHARS]


def model_uri(run: Any, run_id: str | None = None) -> str:
    """Where a run's model loads from: its logged model
    (``models:/<id>``), else ``runs:/<run id>/model``."""
    outputs = run.outputs if run is not None else None
    model_id = next((o.model_id for o in (outputs.model_outputs if outputs else [])), None)
    return f"models:/{model_id}" if model_id else f"runs:/{run_id or run.info.run_id}/model"


def close(c: Any, parent: Any, counts: dict[str, int], out: Any = None) -> str:
    """End a parent run: FINISHED, or KILLED with the reason (said on ``out``, with the
    command that finishes the sweep) when the sweep is incomplete (:func:`incomplete`);
    return the status. A parent with children still running (a fresh heartbeat) stays
    RUNNING. A parent already ended is re-closed with the status its runs now support
    (after ``upload`` recovered them, or their jobs ended after a summary)."""
    out = out or sys.stdout
    pid = parent.info.run_id
    if counts.get("n_running"):
        print(
            f"parent run {pid} stays RUNNING: {counts['n_running']} run(s) still running (their "
            "heartbeat is "
            f"fresh); rebuild the summary once they end: python -m sweeper.report --parent {pid}",
            file=out,
        )
        return "RUNNING"
    why = incomplete(counts)
    status = "KILLED" if why else "FINISHED"
    before = parent.info.status, parent.data.tags.get("failure_reason")
    if before[0] != "RUNNING" and before == (status, why):
        return status
    if why:
        c.set_tag(pid, "failure_reason", why)
        print(
            f"parent run {pid} KILLED: {why}; finish the sweep with: "
            f"{sweep_resume_command(parent)}",
            file=out,
        )
    elif before[1] is not None:
        c.delete_tag(pid, "failure_reason")
    if before[0] != "RUNNING" and before[0] != status:
        print(
            f"parent run {pid} re-closed {status} (was {before[0]}"
            + (f": {before[1]}" if before[1] else "")
            + ")",
            file=out,
        )
    c.set_terminated(pid, status)
    return status


def sweep_resume_command(parent: Any) -> str:
    """The command that finishes a parent's sweep: its own arguments (``sweep_argv``:
    the launcher and engine included), else its ``overrides`` tag."""
    tags = parent.data.tags
    try:
        argv = [str(a) for a in json.loads(tags["sweep_argv"])]
    except (KeyError, ValueError, TypeError):
        argv = tags.get("overrides", "").split()
    return resume_command(["-m", *argv])


def reclose(c: Any, parent_run_id: str, out: Any = None) -> str:
    """Count a parent's runs again from the store and close it with the status they support
    (``upload`` after it recovered runs); a parent whose sweep still runs is left as it is."""
    parent = c.get_run(parent_run_id)
    if parent.info.status == "RUNNING" and holder_alive(parent) is not False:
        return "RUNNING"
    counts = tally(parent, children(c, parent))
    tracking.log_metrics(c, parent_run_id, counts)
    # lazy: saves ~1273 ms at this module's import (measured)
    from mlflow.entities import RunTag

    # the tags the summary wrote too
    c.log_batch(parent_run_id, tags=[RunTag(k, str(v)) for k, v in counts.items()])
    return close(c, parent, counts, out)


def latest_parent(c: Any, experiment: str, uri: str) -> Any:
    exp = tracking.named_experiment(c, experiment, uri)
    parents = [r for r in tracking.search(c, [exp.experiment_id], "tags.sweep_dir != ''")]
    if not parents:
        raise tracking.TrackingError(
            f"--experiment={experiment} has no sweep (parent run): run python -m sweeper -m ... "
            "first"
        )
    return max(parents, key=lambda r: r.info.start_time)


def single(c: Any, run: Any, uri: str, out: Any = None) -> None:
    """A report of one run that is not a sweep's parent: status, its
    metrics, params and where to see it."""
    out = out or sys.stdout
    info, data = run.info, run.data
    reason = data.tags.get("failure_reason")
    print(
        f"Run {info.run_name} ({info.run_id}): {info.status}" + (f" ({reason})" if reason else ""),
        file=out,
    )
    print(
        f"  model: {model_name(data.tags)}"
        + (f" ({data.tags['model_kind']})" if data.tags.get("model_kind") else ""),
        file=out,
    )
    parent = data.tags.get("mlflow.parentRunId")
    if parent:
        print(
            f"  in the sweep of parent run {parent}: python -m sweeper.report --parent {parent}",
            file=out,
        )
    quality = sorted(k for k in data.metrics if k.startswith(("val_", "test_")))
    times = [
        k for k in ("train_time_s", "wall_time_s", "epochs_run", "best_epoch") if k in data.metrics
    ]
    for k in quality + times:
        print(f"  {k:<16} {cell(data.metrics[k])}", file=out)
    shown = {
        k: v for k, v in sorted(data.params.items()) if not k.startswith(("tracking.", "hydra"))
    }
    if shown:
        print("  params: " + " ".join(f"{k}={text_cell(v)}" for k, v in shown.items()), file=out)
    print(f"  UI: {run_url(uri, info.experiment_id, info.run_id)}", file=out)
