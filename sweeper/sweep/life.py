"""A multirun as a whole: checked and given its parent run(s) before
any job, summarised after the last.

The launching process writes ``<sweep dir>/sweep.json`` (parent run per store and experiment, job
count); each job reads it and writes ``<sweep dir>/<job>/result.json``. The summary reads only those
files and the store, so it also runs standalone: ``python -m sweeper.summary <sweep dir>``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from sweeper import data, tracking
from sweeper.base import process, stop
from sweeper.base.state import current as current_state
from sweeper.base.process import hold, lock_holder, release
from sweeper.base.tags import HOST, RERUN, SWEEP_FROM
from sweeper.base.fmt import PYTHON_CALL, label, resume_command
from sweeper.base.files import SWEEP_FILE
from sweeper.tracking.ui import ui_command, ui_line
from sweeper.contract.config import ConfigError, validate
from sweeper.insight import speedup
from sweeper.job.sweepdir import sweep_state, folder_lost, parent_run_id, results
from sweeper.sweep import cores, submitit_jobs
from sweeper.sweep.plan import check_sweep_gradients, command_overrides, job_configs, swept_keys
from sweeper.tracking import writer

__all__ = [
    "LOCK_FILE",
    "claim_run_dir",
    "exit_code",
    "finish",
    "interrupted",
    "launcher_failed",
    "note_job",
    "reused_job",
    "space",
    "start",
]

log = logging.getLogger("sweeper")


LOCK_FILE = ".sweep.lock"  # held (flock) by the launching process of the sweep that uses the folder


def start(config: DictConfig, caller: str = "cli") -> dict[str, Any]:
    """Check every job, then create the store(s), experiment(s) and
    parent run(s); write ``sweep.json``.
    ``caller``: ``python`` for a sweep of :func:`sweeper.multirun`
    (the parent's ``sweep_from`` tag).

    Raises :class:`ConfigError` (nothing written, no store touched) when any job's config is
    invalid or any data file the jobs read (each distinct ``data`` node once) cannot be used;
    :class:`ModelError` when a model of yours computes wrong gradients.
    """
    every, jobs = _checked_jobs(config)
    uris = {cfg["tracking"]["uri"] for _, cfg in jobs}
    # a store that cannot persist runs, a folder, a damaged file: before any process starts
    for uri in sorted(uris):
        tracking.check_database(uri)
        db = tracking.sqlite_path(uri)
        if db is not None:
            # a folder that takes no new file (/proc, /sys): one line, now
            tracking.check_writable(db, uri)
    for uri, name in sorted(
        {(cfg["tracking"]["uri"], cfg["tracking"]["experiment"]) for _, cfg in jobs}
    ):
        # refused once the store is made, and the store left behind
        tracking.check_new_default(uri, name)
    sweep_dir = Path(config.hydra.sweep.dir).absolute()
    made = _claim(sweep_dir)
    try:
        return _begin(config, every, jobs, uris, sweep_dir, caller)
    except (
        ConfigError,
        tracking.TrackingError,
    ):  # refused: no folder left behind but one that was there
        _unclaim(sweep_dir, made)
        raise


def _begin(
    config: DictConfig, every: list, jobs: list, uris: set[str], sweep_dir: Path, caller: str
) -> dict[str, Any]:
    """:func:`start` once the sweep folder is claimed: workers,
    writer, stores, parents, sweep.json."""
    # lazy: saves ~13 ms at this module's import (measured)
    from sweeper.insight import baselines, plots

    launcher = config.hydra.launcher
    if (
        "submitit" in str(launcher.get("_target_", ""))
        or str(launcher.get("engine", "")) == "submitit_local"
    ):
        # a terminal's Ctrl-C reaches this process alone: it stops the jobs (interrupted)
        submitit_jobs.own_session()
    # the batched launcher's CPU workers import and load their data while the store opens
    cores.warm(config, jobs)
    if writer.wanted(len(jobs), uris, str(config.hydra.launcher.get("_target_", ""))):
        # ends each job's run while the next one trains (sweeper.tracking.writer)
        if writer.start(uris):
            log.info(
                "each run's records go to the store from a writer process (pid %d) while the "
                "next job runs",
                writer.current().pid,
            )
    else:
        # one the command line started (writer.prestart) that this sweep does not need
        writer.stop()
    # matplotlib's import (for the summary's plots) on the other core: now, beside MLflow's here;
    # or, when that core imports MLflow for the writer, once the store is open
    importing = writer.current() is not None
    if not importing:  # the painter fits the baselines while the jobs run
        plots.start(baselines.request([cfg for _, cfg in jobs]))
    parents = _open_parents(config, jobs, sweep_dir, caller)
    if importing:
        plots.start(baselines.request([cfg for _, cfg in jobs]))
    state = {
        "parents": list(parents.values()),
        "n_jobs": len(every),
        "swept": swept_keys(every, config),
        "started": time.time(),
        "stores": {uri: tracking.identity(uri) for uri in sorted(uris)},
        "argv": command_overrides(config),
        "sweeper": str(config.hydra.sweeper.get("_target_")),
    }  # upload's parent
    try:
        writer.write_result(sweep_dir / SWEEP_FILE, state)
    # the folder deleted (or its disk full) while the store opened: the parents end, one line
    except OSError as e:
        why = (
            f"hydra.sweep.dir={sweep_dir} was deleted before the first job"
            if not sweep_dir.is_dir()
            else f"hydra.sweep.dir={sweep_dir} cannot be written: {e.strerror or e}"
        ) + ": no job ran"
        raise ConfigError(
            launcher_failed(sweep_dir, e, why).removeprefix("sweeper: error: ")
        ) from None
    current_state().sweep_files[sweep_dir] = state
    return state


def _checked_jobs(config: DictConfig) -> tuple[list, list]:
    """Every job's (overrides, resolved config or None), and those resolved here,
    each checked: its config, and each distinct data node whose rows check it read once
    (:func:`sweeper.data.read_to_check`); a launcher's engine and a search sweeper's settings
    before that."""
    if "sweeper_batched_launcher" in str(config.hydra.launcher.get("_target_", "")):
        # lazy: saves ~67 ms at this module's import (measured)
        from sweeper.sweep import engines

        engines.check(config.hydra.launcher)  # before any store: a bad engine is one line
    if "sweeper_optuna_sweeper" in str(config.hydra.sweeper.get("_target_", "")):
        # lazy: saves ~71 ms at this module's import (measured)
        from hydra_plugins.sweeper_optuna_sweeper._core import check

        check(config)  # a refused search setting writes no parent run
    every = job_configs(config)
    # a job resolved only inside its job (${hydra:...}, a ??? its task fills
    # in) is checked and reported by its own run; its store and experiment
    # are known once it runs (a parent of the same ones is found then)
    jobs = [(overrides, cfg) for overrides, cfg in every if cfg is not None]
    read: set[str] = set()
    for i, (overrides, cfg) in enumerate(jobs):
        try:
            validate(cfg)
            node = json.dumps(cfg["data"], sort_keys=True)
            # a data file, or a fold count the rows must allow: read once per data config
            if data.read_to_check(cfg["data"]) and node not in read:
                read.add(node)
                data.load_plain(cfg["data"])
        except (ConfigError, data.DataError) as e:
            raise ConfigError(f"{e} [job {i + 1}/{len(jobs)}: {' '.join(overrides)}]") from None
    # a model of yours: its gradients against finite differences, before anything trains
    # (a wrong one: ModelError, refused in its one line by the start's boundary, start_failed)
    check_sweep_gradients([cfg for _, cfg in jobs])
    return every, jobs


def _usable(key: str, folder: Path, lock: bool = False) -> tuple[Path | None, str | None]:
    """``folder`` made with its parents: the first folder that made (None: it was there), and
    with ``lock``, :func:`hold`'s answer on its lock file. One line (ConfigError) for a folder
    that cannot be made or locked (OSError: a file on the way, /proc, a read-only or full disk)."""
    try:
        made = _made(Path(os.path.abspath(folder)))
        folder.mkdir(parents=True, exist_ok=True)
        return made, hold(folder / LOCK_FILE) if lock else None
    except OSError as e:
        raise ConfigError(
            f"{key}={folder} cannot be used: {e.strerror or e}"
            + (f" ({e.filename})" if e.filename else "")
            + ": choose a writable folder"
        ) from None


def _not_in(uri: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The jobs whose runs the file now at ``uri``'s path does not hold (a later job may have
    made a new store there and recorded its run in it): all of them when no file is there."""
    held = tracking.runs_in_file(
        uri, [r["run_id"] for r in rows if isinstance(r.get("run_id"), str)]
    )
    return [r for r in rows if r.get("run_id") not in held]


def _keep_for_upload(rows: list[dict[str, Any]]) -> int:
    """The ended jobs of a store deleted under the sweep marked pending in
    their result.json, so ``upload`` logs them again (before: it said there
    was nothing to upload, and runs printed FINISHED were lost for good)."""
    kept = 0
    for r in rows:
        if (
            r["status"] in ("FINISHED", "FAILED", "KILLED")
            and not r.get("resumed_from")
            and r.get("config")
        ):
            writer.write_result(
                Path(r["path"]),
                {k: v for k, v in r.items() if k not in ("job", "path")}
                | {
                    "pending_upload": True,
                    "reason_pending": "the store was deleted during the sweep",
                },
            )
            kept += 1
    return kept


def _made(folder: Path) -> Path | None:
    """The first folder of ``folder``'s path that does not exist yet
    (what a mkdir of it makes), or None."""
    top = None
    for f in [folder, *folder.parents]:
        if f.exists():
            break
        top = f
    return top


def _claim(sweep_dir: Path) -> Path | None:
    """The sweep folder made and locked for this process; one line when it cannot be used or a live
    sweep holds it or a folder it lies in (its job folders would be mixed with that sweep's; ``..``
    in the path resolved first). Returns the first folder it made (None: the folder was there)."""
    for folder in Path(os.path.abspath(sweep_dir)).parents:
        holder = lock_holder(folder / LOCK_FILE)
        if holder:
            raise ConfigError(
                f"hydra.sweep.dir={sweep_dir} lies inside the folder of a live sweep (process "
                f"{holder}, "
                f"its folder {folder}): choose another hydra.sweep.dir"
            )
    # locked: two live sweeps in one folder would write over each other's jobs
    made, holder = _usable("hydra.sweep.dir", sweep_dir, lock=True)
    if holder:
        raise ConfigError(
            f"hydra.sweep.dir={sweep_dir} is in use by a live sweep (process {holder}): wait for "
            "it to "
            "end, or choose another hydra.sweep.dir"
        )
    return made


def _unclaim(sweep_dir: Path, made: Path | None) -> None:
    """A refused sweep's folder goes again when this sweep made it and
    it holds nothing but its lock."""
    if made is None or any(p.is_file() and p != sweep_dir / LOCK_FILE for p in made.rglob("*")):
        return
    release(sweep_dir / LOCK_FILE)
    shutil.rmtree(made, ignore_errors=True)


def claim_run_dir(run_dir: Path) -> None:
    """A single run's ``hydra.run.dir`` made; one line when it cannot be, or when it
    is a live sweep's folder or lies inside one (its lock held by a live process)."""
    for folder in [run_dir, *Path(os.path.abspath(run_dir)).parents]:
        holder = lock_holder(folder / LOCK_FILE)
        if holder:
            raise ConfigError(
                f"hydra.run.dir={run_dir} is in use by a live sweep (process {holder}, its folder "
                f"{folder}): choose another hydra.run.dir"
            )
    # outputs/ of outputs/DATE/TIME
    current_state().new_run_dir = _usable("hydra.run.dir", run_dir)[0]


def _open_parents(
    config: DictConfig, jobs: list, sweep_dir: Path, caller: str
) -> dict[str, dict[str, Any]]:
    """A parent run per store and experiment the jobs use (once a
    sweep folder: a key already there is kept)."""
    now = current_state()
    # the parent runs this process created, by sweep folder
    parents = now.parents.setdefault(sweep_dir, {})
    keys = [f"{cfg['tracking']['uri']}#{cfg['tracking']['experiment']}" for _, cfg in jobs]
    now.experiments.clear()  # found again by this sweep
    for (_, cfg), key in zip(jobs, keys):
        uri, name = cfg["tracking"]["uri"], cfg["tracking"]["experiment"]
        if key in parents:
            continue
        client = tracking.open_store(uri)
        # n_jobs: this parent's jobs, which a report compares with its children; host and pid: the
        # launcher's; sweep_argv (one argument each) and sweeper: for the advisor's next command
        tags = {
            "sweep_dir": str(sweep_dir),
            "overrides": " ".join(config.hydra.overrides.task),
            "n_jobs": keys.count(key),
            HOST: socket.gethostname(),
            **process.identity(),
            "sweep_argv": json.dumps(command_overrides(config)),
            "sweeper": str(config.hydra.sweeper.get("_target_")),
            **tracking.source_tags(["python", "-m", "sweeper", "-m", *command_overrides(config)]),
        }
        # MLflow's source: the call that started it (the command line would do the same)
        if caller == "python":
            tags |= {
                SWEEP_FROM: caller,
                "mlflow.source.name": PYTHON_CALL.rstrip("("),
                RERUN: f"{PYTHON_CALL}{command_overrides(config)!r})"[:5000],
            }
        try:
            experiment = tracking.experiment_id(client, name, uri, in_sweep=True)
            # created and kept as one step a Ctrl-C or SIGTERM waits for: one between the run's
            # creation and its params left it RUNNING, unknown to the interruption's line
            with stop.deferred():
                run_id = tracking.start_run(
                    client,
                    experiment,
                    f"sweep {sweep_dir.parent.name}/{sweep_dir.name}",
                    tags,
                    space(config),
                )
                parents[key] = {
                    "uri": uri,
                    "experiment": name,
                    "experiment_id": experiment,
                    "run_id": run_id,
                }
        # e.g. a database file MLflow cannot read: one line, no job started
        except tracking.UNREACHABLE as e:
            raise tracking.TrackingError(
                f"tracking.uri={uri} cannot be used: {tracking.first_line(e)}"
            ) from e
    return parents


def space(config: DictConfig) -> dict[str, str]:
    """The swept space as the parent's params: each task override's key and its
    values as given (``lr`` → ``0.001,0.01``), and a search sweeper's ``params`` for
    the keys the command line did not give; not the tracking and resume settings."""
    out = {}
    for o in config.hydra.overrides.task:
        key, _, value = o.lstrip("+~").partition("=")
        if not key.startswith(tracking.NOT_PARAMS):
            out[key] = value[:6000]
    # a key given on the command line
    for key, value in (config.hydra.sweeper.get("params") or {}).items():
        # replaced its entry (a fixed value took it out of the space)
        out.setdefault(str(key), str(value)[:6000])
    return out


def add_speedups(rows: list[dict[str, Any]]) -> None:
    """Pair CPU and GPU jobs of the sweep by fingerprint; log the
    speedups and keep them in each result.json."""
    for uri in {r["tracking_uri"] for r in rows}:
        finished = [
            {
                "run_id": r["run_id"],
                "device": r["device"],
                "fingerprint": r["fingerprint"],
                "batch_size": r.get("batch_size"),
                **r["metrics"],
            }
            for r in rows
            if r["status"] == "FINISHED" and r["tracking_uri"] == uri
        ]
        found = speedup.pair(finished)
        speedup.log(uri, found)
        for r in rows:
            if r.get("run_id") in found:
                r["metrics"].update(found[r["run_id"]])
                writer.write_result(
                    Path(r["path"]), {k: v for k, v in r.items() if k not in ("job", "path")}
                )


def _restore_sweep_file(
    sweep_dir: Path,
    state: dict[str, Any],
    rows: list[dict[str, Any]],
    err: Any,
    stored: bool = True,
) -> None:
    """The sweep folder was deleted while the sweep ran: say so (how many jobs' result.json
    went with it, and how many jobs it made fail: their folder gone as they recorded), and
    write its sweep.json again (summary, upload and resume read it). ``stored``: the store
    is still the one the sweep began with (its own line says when not)."""
    try:
        sweep_dir.mkdir(parents=True, exist_ok=True)
        writer.write_result(sweep_dir / SWEEP_FILE, state)
        again = f"; {sweep_dir / SWEEP_FILE} is written again"
    except OSError as e:
        again = f"; {SWEEP_FILE} could not be written again ({e.strerror or e})"
    failed = sum(
        r["status"] == "FAILED"
        and str(r.get("reason", "")).startswith("its results could not be kept (FileNotFoundError")
        for r in rows
    )
    print(
        f"sweeper: error: hydra.sweep.dir={sweep_dir} was deleted during the sweep: the "
        "result.json of "
        f"{state['n_jobs'] - len(rows)} of its {state['n_jobs']} jobs went with it"
        + (
            f", and {failed} job(s) FAILED for it (their folder gone as they recorded)"
            if failed
            else ""
        )
        + ("; their runs are in the store (the leaderboard below reads it)" if stored else "")
        + again,
        file=err,
    )


def exit_code(rows: list[dict[str, Any]], n_jobs: int) -> int:
    """0 when at least one job FINISHED (or was resumed) and none failed with an error; else 1.

    A diverged run (FAILED) and a GPU job SKIPPED for want of a GPU are results, not errors, but a
    sweep in which nothing finished, a job that crashed or never reported, or a result
    that could not be logged (pending upload) exits 1.
    """
    crashed = any(r.get("error") or r.get("pending_upload") for r in rows) or len(rows) < n_jobs
    useful = any(r["status"] == "FINISHED" or r.get("resumed_from") for r in rows)
    return 0 if useful and not crashed else 1


def finish(sweep_dir: Path, out: Any = None, returned: bool = False) -> int:
    """End a sweep: add speedups, publish each parent's leaderboard
    and plots, close the parent run(s).

    ``returned``: every job returned to this launching process (Hydra's end of the
    multirun), so a child left RUNNING is an orphan. Without it
    (``python -m sweeper.summary``, whose launcher may have died while its jobs still run
    elsewhere) a child whose heartbeat is fresh stays RUNNING, and so does its parent.

    Returns the exit code of :func:`exit_code`.
    """
    # lazy: saves ~18 ms at this module's import (measured)
    from sweeper.insight import publish

    out = out or sys.stdout
    err = sys.stderr if out is sys.stdout else out  # what failed: on stderr, apart from the summary
    cores.stop()  # the sweep's CPU workers: their groups are all recorded
    # every run handed to the writer is in the store (or kept for upload) before the summary
    writer.drain()
    rows = results(sweep_dir)
    state = sweep_state(sweep_dir)
    failed_parents = False
    # a store deleted or replaced during the sweep: its client would create
    # an empty store there, and the summary would show runs it does not hold
    lost = {
        p["uri"]: tracking.replaced(p["uri"], state.get("stores", {}).get(p["uri"]))
        for p in state["parents"]
    }
    # deleted while the sweep ran: its jobs here kept their parent (sweep.json in memory)
    if folder_lost(sweep_dir):
        _restore_sweep_file(sweep_dir, state, rows, err, stored=not any(lost.values()))
        failed_parents = True
    try:
        add_speedups(rows)
    except tracking.UNREACHABLE as e:
        print(f"sweeper: error: speedups not logged: {tracking.first_line(e)}", file=err)
    print(f"\nSweep {sweep_dir}: {len(rows)} of {state['n_jobs']} jobs reported", file=out)
    for parent in state["parents"]:
        mine = [
            r
            for r in rows
            if r["tracking_uri"] == parent["uri"] and r["experiment"] == parent["experiment"]
        ]
        if lost[parent["uri"]]:
            gone = _not_in(parent["uri"], mine)
            kept = _keep_for_upload(gone)
            print(
                f"sweeper: error: tracking.uri={parent['uri']} {lost[parent['uri']]} during the "
                f"sweep: the {len(gone)} run(s) "
                f"recorded there are not in it; each job's result.json under {sweep_dir} keeps "
                "its outcome"
                + (
                    f", and {kept} wait for an upload: python -m sweeper.upload {sweep_dir} "
                    "(into a store at that "
                    "path, or --tracking-uri another)"
                    if kept
                    else ""
                ),
                file=err,
            )
            failed_parents = True
            continue
        client = tracking.client(parent["uri"])
        skipped = [r for r in mine if r["status"] == "SKIPPED"]
        lines = [f"{' '.join(r['overrides'])}: {r['reason']}" for r in skipped]
        print(f"\nExperiment '{parent['experiment']}', parent run {parent['run_id']}:", file=out)
        browse = ui_command(parent["uri"])
        try:
            if lines:
                client.set_tag(parent["run_id"], "skipped_jobs", "\n".join(lines))
            board, counts = publish.publish(
                client, parent["run_id"], out=out, sweep_ended=True, results=mine, returned=returned
            )
            publish.close(client, client.get_run(parent["run_id"]), counts, out)
            browse = ui_line(parent["uri"], board.address)  # the sweep's runs, best first
        except tracking.UNREACHABLE as e:
            print(
                f"sweeper: error: tracking.uri={parent['uri']} failed: {tracking.first_line(e)}; "
                "rebuild the summary later with python -m sweeper.report --parent "
                f"{parent['run_id']}",
                file=err,
            )
            failed_parents = True
        _say_untrained(mine, skipped, state.get("swept"), out)
        print(f"browse with: {browse}", file=out)
    # lazy: saves ~8.8 ms at this module's import (measured)
    from sweeper.insight import plots

    plots.stop(keep=True)  # an idle painter kept for this process's next sweep (the Python API's)
    writer.stop()
    pending = [r["job"] for r in rows if r.get("pending_upload")]
    if pending:
        print(
            f"{len(pending)} job(s) could not be logged (jobs {', '.join(pending)}); their "
            "results are kept: "
            f"python -m sweeper.upload {sweep_dir}",
            file=out,
        )
    return 1 if failed_parents else exit_code(rows, state["n_jobs"])


def _say_untrained(
    mine: list[dict[str, Any]], skipped: list[dict[str, Any]], swept: Any, out: Any
) -> None:
    """A parent's jobs that trained nothing this time: reused
    (resume=true), not reused, skipped (by reason)."""
    if reused := [r for r in skipped if r.get("resumed_from")]:
        print(
            f"REUSED {len(reused)} job(s) that already FINISHED (resume=true): the table's "
            "reused column",
            file=out,
        )
    # FINISHED before on another version of the data file
    if stale := [r for r in mine if r.get("not_reused")]:
        print(
            f"NOT REUSED {len(stale)} job(s) (resume=true): their configuration FINISHED on "
            "another version of "
            "the data file (changed since, or not recorded then): trained again",
            file=out,
        )
    for reason in dict.fromkeys(r["reason"] for r in skipped if not r.get("resumed_from")):
        jobs = [label(r["overrides"], keys=swept) for r in skipped if r["reason"] == reason]
        print(f"SKIPPED {len(jobs)} job(s): {reason}\n  " + "\n  ".join(jobs), file=out)


def note_job(sweep_dir: Path, output_dir: Path, num: int) -> None:
    """After a job that trained nothing (SKIPPED: no GPU, or resumed), tag the
    sweep's parent run with it (``skipped.<num>``, and ``reused.<num>``: the run it
    took over), so that a report from the store alone counts it and ranks the reused
    run. A tracking failure is logged: finish() still has the result.json."""
    path = output_dir / "result.json"
    if not path.is_file():
        return
    r = json.loads(path.read_text())
    parent = (
        parent_run_id(sweep_dir, r["tracking_uri"], r["experiment"])
        if r.get("status") == "SKIPPED"
        else None
    )
    if parent is None:
        return
    tags = {f"skipped.{num}": f"{' '.join(r['overrides'])}: {r['reason']}"}
    if r.get("resumed_from"):
        tags[f"reused.{num}"] = r["resumed_from"]
    # lazy: saves ~1091 ms at this module's import (measured)
    from mlflow.entities import RunTag

    try:
        tracking.client(r["tracking_uri"]).log_batch(
            parent, tags=[RunTag(k, v) for k, v in tags.items()]
        )
    except tracking.UNREACHABLE as e:
        log.error("job %s not noted on parent run %s: %s", num, parent, tracking.first_line(e))


def interrupted(sweep_dir: Path, args: list[str]) -> str:
    """Ctrl-C in the launching process: close the sweep in the store
    and return the one line to print.

    Each parent run (from sweep.json, or as far as :func:`start` got) is KILLED with the
    jobs' counts; its children that this process or a dead one on this host left RUNNING
    are KILLED too. Finished runs stay as they are; ``resume=true`` re-runs the rest.
    """
    # submitit_local's jobs: each records its run KILLED (they run on past a SIGTERM otherwise)
    submitit_jobs.stop()
    cores.stop()
    writer.interrupt()  # the jobs that finished are recorded FINISHED, not taken for killed ones
    state = sweep_state(sweep_dir) if (sweep_dir / SWEEP_FILE).is_file() else None
    parents = (
        state["parents"] if state else list(current_state().parents.get(sweep_dir, {}).values())
    )
    rows = results(sweep_dir) if state else []
    # started, no result
    cut = [d for d in sweep_dir.glob("*/.hydra") if not (d.parent / "result.json").is_file()]
    ended = [_closed(p, rows) for p in parents]  # each one's counts, or its store's failure
    failures = [failure for _, failure in ended if failure is not None]
    stored = [counts for counts, failure in ended if failure is None]
    if state is None:
        done = (
            f"parent run(s) {', '.join(p['run_id'] for p in parents)} KILLED"
            if parents
            else "nothing recorded"
        )
        return f"sweeper: interrupted before any job started: {done}" + "".join(
            f"; {f}" for f in failures
        )
    status = [r["status"] for r in rows]
    reused = sum(bool(r.get("resumed_from")) for r in rows)
    parts = [f"{status.count('FINISHED')} finished"]
    parts += [
        f"{n} {what}"
        for n, what in (
            (status.count("FAILED"), "failed"),
            (reused, "reused"),
            (status.count("SKIPPED") - reused, "skipped"),
        )
        if n
    ]
    killed, not_run = (
        status.count("KILLED") + len(cut),
        max(0, state["n_jobs"] - len(rows) - len(cut)),
    )
    if parents and len(stored) == len(parents) and all("n_not_run" in c for c in stored):
        # from the store: a batched group's members KILLED with no folder of their own count too
        parts[0] = f"{sum(c['n_finished'] for c in stored)} finished"
        killed, not_run = sum(c["n_killed"] for c in stored), sum(c["n_not_run"] for c in stored)
    parts += [f"{killed} killed", f"{not_run} not run"]
    # else every job had ended as it would have (Ctrl-C at the end)
    left = killed or not_run or status.count("FAILED")
    return (
        f"sweeper: interrupted: {', '.join(parts)}; "
        + "".join(f"{f}; " for f in failures)
        + (
            f"resume with: {resume_command(args)}"
            if left
            else "every job had ended: nothing to resume"
        )
    )


def _closed(
    p: dict[str, Any], rows: list[dict[str, Any]] | None, why: str | None = None
) -> tuple[dict[str, int] | None, str | None]:
    """Parent ``p`` ended as :func:`_end_parent` ends it, with its jobs among ``rows`` (retried
    while its SQLite store is locked): its counts and None, or None and the one line of its
    store's failure, which the sweep's line says (the other parents are ended all the same)."""
    mine = rows and [
        r for r in rows if r["tracking_uri"] == p["uri"] and r["experiment"] == p["experiment"]
    ]
    try:
        return tracking.when_unlocked(_end_parent, p, mine, why), None
    except tracking.UNREACHABLE as e:
        return None, f"tracking.uri={p['uri']} failed: {tracking.first_line(e)}"


def _end_parent(
    p: dict[str, Any], mine: list[dict[str, Any]] | None, why: str | None = None
) -> dict[str, int]:
    """Parent ``p`` KILLED with its jobs' counts, and its children this process or a
    dead one left RUNNING: an interrupted sweep's (``why`` None: the children KILLED)
    or one that cannot go on (``why``: the cause, on the children too, not 'killed?').
    A parent closed already (Ctrl-C during the summary) keeps its status."""
    # lazy: saves ~18 ms at this module's import (measured)
    from sweeper.insight import publish

    c = tracking.client(p["uri"])
    parent = c.get_run(p["run_id"])
    runs = publish.children(c, parent)
    orphans = ("KILLED", stop.reason()) if why is None else ("FAILED", f"ended unfinished: {why}")
    if publish.mark_orphans(c, runs, False, *orphans):
        runs = publish.children(c, parent)
    counts = publish.tally(parent, runs, mine)
    if parent.info.status == "RUNNING":
        left = publish.incomplete(counts)  # None when Ctrl-C came during the summary
        tracking.log_metrics(c, p["run_id"], counts)
        c.set_tag(
            p["run_id"],
            "failure_reason",
            why or f"sweep {stop.reason()}" + (f": {left}" if left else ""),
        )
        c.set_terminated(p["run_id"], "KILLED")
    return counts


def reused_job(
    sweep_dir: Path, name: str, overrides: list[str], plain: dict[str, Any], run_id: str
) -> None:
    """A ``resume=true`` configuration that already FINISHED as run ``run_id``
    and that the sweeper did not launch (:mod:`sweeper.sweep.resuming_sweeper`):
    its result.json in ``<sweep dir>/<name>`` and its tags on the parent, as the
    job would have left them had it run and skipped itself."""
    # lazy: saves ~2.1 ms at this module's import (measured)
    from sweeper.contract.fingerprint import fingerprint

    folder = sweep_dir / name
    folder.mkdir(parents=True, exist_ok=True)
    reason = f"resume: this configuration already FINISHED as run {run_id}"
    result = {
        "status": "SKIPPED",
        "fingerprint": fingerprint(plain),
        "device": plain["device"],
        "overrides": overrides,
        "run_id": None,
        "tracking_uri": plain["tracking"]["uri"],
        "experiment": plain["tracking"]["experiment"],
        "metrics": {},
        "config": plain,
        "reason": reason,
        "resumed_from": run_id,
    }
    writer.write_result(folder / "result.json", result)
    # the tag's suffix: a folder name, not a number
    note_job(sweep_dir, folder, name)  # type: ignore[arg-type]


def launcher_failed(sweep_dir: Path, e: BaseException, why: str | None = None) -> str:
    """The launcher (or its engine) failed as a whole (or ``why``: the sweep could not start):
    each parent run KILLED with the reason and the jobs' counts; return the one line to print."""
    why = why or f"the launcher failed: {tracking.first_line(e)}"
    cores.stop()
    writer.drain()
    state = (
        sweep_state(sweep_dir)
        if (sweep_dir / SWEEP_FILE).is_file()
        else {"parents": list(current_state().parents.get(sweep_dir, {}).values())}
    )
    killed = []
    for p in state["parents"]:
        failure = _closed(p, None, why)[1]
        if failure is None:
            killed.append(p["run_id"])
        else:
            why += f"; {failure}"
    writer.stop()
    return f"sweeper: error: {why}" + (
        f"; parent run(s) {', '.join(killed)} KILLED" if killed else ""
    )
