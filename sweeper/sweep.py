"""A multirun as a whole: checked and given its parent run(s) before any job, summarised after the last.

The launching process writes ``<sweep dir>/sweep.json`` (parent run per store and experiment, job
count); each job reads it and writes ``<sweep dir>/<job>/result.json``. The summary reads only those
files and the store, so it also runs standalone: ``python -m sweeper.summary <sweep dir>``.
"""
from __future__ import annotations

import json
import logging
import os
import shlex
import socket
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from sweeper import data, metrics, speedup, tracking, writer
from sweeper.config import ConfigError, validate
from sweeper.report import cell, text_cell

log = logging.getLogger("sweeper")

SWEEP_FILE = "sweep.json"
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"

# The parent runs this process created, by sweep folder: what Ctrl-C closes even before sweep.json exists.
_created: dict[Path, dict[str, dict[str, Any]]] = {}


def _plain(cfg: DictConfig) -> dict[str, Any]:
    """The resolved job config without the ``hydra`` node, as plain containers."""
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.pop("hydra", None)
    return OmegaConf.to_container(cfg, resolve=True)


def job_configs(config: DictConfig) -> list[tuple[list[str], dict[str, Any]]]:
    """Every job of the multirun as (overrides, resolved config), composed exactly as the basic sweeper will.

    Other sweepers (e.g. Optuna) choose their jobs while running; for them only the base config is returned.
    """
    if config.hydra.sweeper.get("_target_") != BASIC_SWEEPER:
        return [([], _plain(config))] * int(config.hydra.sweeper.get("n_trials") or 1)
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = config.hydra.sweeper.get("params") or {}
    args = [f"{k}={v}" for k, v in params.items()] + list(config.hydra.overrides.task)
    batches = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(args), None)
    from sweeper.compose import compose_once

    loader = GlobalHydra.instance().config_loader()
    compose_once(loader)  # the sweeper's check and the launcher reuse these compositions
    jobs = []
    for overrides in batches[0]:
        try:
            cfg = loader.load_sweep_config.peek(config, list(overrides))  # read here, copied by later users
        except Exception as e:  # a composition error, e.g. a group choice that does not exist
            raise ConfigError(f"job {' '.join(overrides)}: {str(e).splitlines()[0]}") from e
        jobs.append((list(overrides), _plain(cfg)))
    return jobs


def swept_keys(jobs: list[tuple[list[str], Any]], config: DictConfig) -> list[str]:
    """The keys whose override value differs between jobs, in command order: what run names show.

    A search sweeper (Optuna) chooses values as it goes: its search space names the keys."""
    if config.hydra.sweeper.get("_target_") != BASIC_SWEEPER:
        return list(config.hydra.sweeper.get("params") or {})
    values: dict[str, set[str]] = {}
    for overrides, _ in jobs:
        for o in overrides:
            key, _, value = o.lstrip("+~").partition("=")
            values.setdefault(key, set()).add(value)
    return [k for k, v in values.items() if len(v) > 1]


# Hydra overrides that say how a sweep runs (launcher, sweeper) and belong in a command that repeats it;
# hydra.sweep.dir, hydra.run.dir and the like would make it write over this sweep's folder.
HOW_IT_RUNS = ("hydra/", "hydra.launcher.", "hydra.sweeper.")


def command_overrides(config: DictConfig) -> list[str]:
    """The sweep's command-line overrides, one argument each (the ``overrides`` tag joins them with
    spaces, which a value may contain): the task's, and the Hydra ones of :data:`HOW_IT_RUNS`."""
    how = [o for o in config.hydra.overrides.hydra if o.lstrip("+~").startswith(HOW_IT_RUNS)]
    return how + list(config.hydra.overrides.task)


def start(config: DictConfig) -> dict[str, Any]:
    """Check every job, then create the store(s), experiment(s) and parent run(s); write ``sweep.json``.

    Raises :class:`ConfigError` (nothing written, no store touched) when any job's config is invalid or
    any data file the jobs read (each distinct ``data`` node once) cannot be used.
    """
    jobs = job_configs(config)
    read: set[str] = set()
    for i, (overrides, cfg) in enumerate(jobs):
        try:
            validate(cfg)
            node = json.dumps(cfg["data"], sort_keys=True)
            if "path" in cfg["data"] and node not in read:  # a data file, read once per data config, first seed
                read.add(node)
                data.load_plain(cfg["data"], cfg["seed"])
        except (ConfigError, data.DataError) as e:
            raise ConfigError(f"{e} [job {i + 1}/{len(jobs)}: {' '.join(overrides)}]") from None

    from sweeper import plots

    warming = warm_joblib_workers(config, jobs)
    uris = {cfg["tracking"]["uri"] for _, cfg in jobs}
    if writer.wanted(len(jobs), uris, str(config.hydra.launcher.get("_target_", ""))):
        if writer.start(uris):  # ends each job's run while the next one trains (sweeper.writer)
            log.info("each run's records go to the store from a writer process (pid %d) while the next job runs",
                     writer.WRITER.proc.pid)
    else:
        writer.stop()  # one the command line started (writer.prestart) that this sweep does not need
    # matplotlib's import (for the summary's plots) on the other core: now, beside MLflow's here; or, when that
    # core imports MLflow for the writer or joblib's workers, once the store is open
    importing = writer.WRITER is not None or warming is not None
    if not importing:
        plots.start()
    sweep_dir = Path(config.hydra.sweep.dir).absolute()
    sweep_dir.mkdir(parents=True, exist_ok=True)
    parents = _created.setdefault(sweep_dir, {})
    keys = [f"{cfg['tracking']['uri']}#{cfg['tracking']['experiment']}" for _, cfg in jobs]
    tracking.SWEEP_EXPERIMENTS.clear()
    for (_, cfg), key in zip(jobs, keys):
        uri, name = cfg["tracking"]["uri"], cfg["tracking"]["experiment"]
        if key in parents:
            continue
        client = tracking.open_store(uri)
        # n_jobs: this parent's jobs, which a report compares with its children; host and pid: the launcher's;
        # sweep_argv (one argument each) and sweeper: for the advisor's next command
        tags = {"sweep_dir": str(sweep_dir), "overrides": " ".join(config.hydra.overrides.task),
                "n_jobs": keys.count(key), "host": socket.gethostname(), "pid": os.getpid(),
                "sweep_argv": json.dumps(command_overrides(config)), "sweeper": str(config.hydra.sweeper.get("_target_"))}
        try:
            experiment = tracking.experiment_id(client, name, uri, in_sweep=True)
            run_id = tracking.start_run(client, experiment, f"sweep {sweep_dir.parent.name}/{sweep_dir.name}", tags)
        except tracking.UNREACHABLE as e:  # e.g. a database file MLflow cannot read: one line, no job started
            raise tracking.TrackingError(f"tracking.uri={uri} cannot be used: {tracking.first_line(e)}") from e
        parents[key] = {"uri": uri, "experiment": name, "experiment_id": experiment, "run_id": run_id}
    if warming is not None:
        warming.join()  # the workers are warm before the launcher hands them jobs
    if importing:
        plots.start()
    state = {"parents": list(parents.values()), "n_jobs": len(jobs), "swept": swept_keys(jobs, config), "started": time.time()}
    (sweep_dir / SWEEP_FILE).write_text(json.dumps(state, indent=2))
    return state


JOBLIB_LAUNCHER = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"


def warm_joblib_workers(config: DictConfig, jobs: list[tuple[list[str], dict[str, Any]]]) -> Any:
    """With ``hydra/launcher=joblib``, start its worker processes now and have each import what a job needs
    (sweeper, MLflow: ~2 s a worker) and open the jobs' stores, in a thread, while this process opens them too;
    return the thread.

    The launcher's ``Parallel`` is called with the same arguments as here (hydra_joblib_launcher's
    ``launch``), so joblib hands it the same, already warm, loky workers; were they to differ, joblib would
    start new ones, as it does without this. None when there is nothing to warm (another launcher, one
    worker: joblib then runs the jobs in this process)."""
    if str(config.hydra.launcher.get("_target_")) != JOBLIB_LAUNCHER:
        return None
    import threading

    try:
        from hydra_plugins.hydra_joblib_launcher._core import process_joblib_cfg
        from joblib import Parallel, delayed, effective_n_jobs
    except ImportError:
        return None
    cfg = {k: v for k, v in OmegaConf.to_container(config.hydra.launcher, resolve=True).items() if k != "_target_"}
    cfg["backend"] = "loky"  # as the launcher sets it
    process_joblib_cfg(cfg)
    workers = min(effective_n_jobs(cfg.get("n_jobs") or 1), len(jobs))
    uris = sorted({c["tracking"]["uri"] for _, c in jobs})
    if workers <= 1:
        return None

    def warm() -> None:
        try:
            pids = Parallel(**cfg)(delayed(_warm_worker)(uris) for _ in range(workers))
            log.info("joblib: %d worker processes warmed (pids %s)", len(set(pids)), ", ".join(map(str, sorted(set(pids)))))
        except Exception as e:  # noqa: BLE001  (the launcher starts its workers itself, as without this)
            log.warning("joblib's workers could not be warmed: %s", e)

    thread = threading.Thread(target=warm, name="sweeper-warm-joblib", daemon=True)
    thread.start()
    return thread


def _warm_worker(uris: list[str]) -> int:
    """In a joblib worker: import what its jobs will (the task's modules, MLflow and its pyfunc flavour) and
    open their stores (MLflow keeps a store per URI)."""
    import time

    from sweeper import settled

    t = time.perf_counter()
    with settled():  # as the launching process imports MLflow: no GC passes over its modules
        from sweeper import pyfunc, run  # noqa: F401  (pyfunc imports MLflow)

    for uri in uris:
        try:
            tracking.client(uri)
        except Exception:  # noqa: BLE001  (the job says what is wrong with it)
            pass

    time.sleep(max(0.0, 0.05 - (time.perf_counter() - t)))  # an already warm worker leaves this task to another
    return os.getpid()


def _state(sweep_dir: Path) -> dict[str, Any]:
    """The sweep's sweep.json; read once per version of the file (each job consults it several times)."""
    path = sweep_dir / SWEEP_FILE
    return _read_state(path, path.stat().st_mtime_ns) if path.is_file() else {"parents": [], "n_jobs": 0}


@lru_cache(maxsize=8)
def _read_state(path: Path, mtime_ns: int) -> dict[str, Any]:
    return json.loads(path.read_text())


def parent_run_id(sweep_dir: Path, uri: str, experiment: str) -> str | None:
    for p in _state(sweep_dir)["parents"]:
        if p["uri"] == uri and p["experiment"] == experiment:
            return p["run_id"]
    return None


def job_count(sweep_dir: Path | None) -> int:
    return _state(sweep_dir)["n_jobs"] if sweep_dir is not None else 1


def job_tags(sweep_dir: Path, num: int) -> dict[str, str]:
    """The tags a search sweeper gives job ``num`` (sweep.json's ``jobs``: its trial number, study, round)."""
    return dict(_state(sweep_dir).get("jobs", {}).get(str(num), {}))


def swept(sweep_dir: Path | None) -> list[str] | None:
    return _state(sweep_dir).get("swept") if sweep_dir is not None else None


def results(sweep_dir: Path) -> list[dict[str, Any]]:
    """Every job's result.json in the sweep folder, in job order."""
    found = []
    for path in sweep_dir.glob("*/result.json"):
        r = json.loads(path.read_text())
        r["job"], r["path"] = path.parent.name, str(path)
        found.append(r)
    return sorted(found, key=lambda r: (not r["job"].isdigit(), int(r["job"]) if r["job"].isdigit() else r["job"]))


def _primary(result: dict[str, Any], split: str) -> str:
    """``val_mse=3145`` for a job's primary metric, or ``-``."""
    if result.get("task") is None:
        return "-"
    name = f"{split}_{metrics.PRIMARY[result['task']][0]}"
    value = result["metrics"].get(name)
    return f"{name}={cell(value)}" if value is not None else "-"


def label(overrides: list[str], device: str | None = None, keys: list[str] | None = None) -> str:
    """A readable name from a job's overrides (those of ``keys`` only, when given), without where it
    logs: ``lr=0.005,depth=2,cpu``; a value that 4 significant digits change (Optuna's) is rounded to them
    (the run's params keep it whole)."""
    parts = [o for o in overrides if not o.lstrip("+~").startswith(("tracking", "hydra"))]
    parts = [f"{k}={text_cell(v)}" if eq else k for k, eq, v in (o.partition("=") for o in parts)]
    if keys is not None:
        parts = [o for o in parts if o.lstrip("+~").partition("=")[0] in keys]
    if device is None:
        return ",".join(parts) or "defaults"
    parts = [o.split("=", 1)[1] if o.startswith("device=") else o for o in parts]
    return ",".join(parts + ([] if device in parts else [device]))


def job_line(result: dict[str, Any], num: int, total: int, keys: list[str] | None = None) -> str:
    """``[3/12] lr=0.005,depth=2  val_mse=2901  test_mse=3012  0.41 s  FINISHED``"""
    t = result["metrics"].get("train_time_s")
    parts = [f"[{num + 1}/{total}]", label(result["overrides"], keys=keys)]
    if result.get("task"):
        parts += [_primary(result, "val"), _primary(result, "test")]
    if t is not None:
        parts.append(f"{cell(t)} s")
    parts.append(result["status"] + (f" ({result['reason']})" if result.get("reason") else ""))
    if result.get("run_id"):
        parts.append(f"run {result['run_id']}")
    return "  ".join(parts)


def ui_command(uri: str) -> str:
    if tracking.sqlite_path(uri) is not None:
        return f"mlflow ui --backend-store-uri {uri} --port 5000"
    return f"open {uri} in a browser"


# MLflow 3.17's UI picks its model-training views (runs table, models, charts) or its GenAI ones (traces,
# evaluations) from the page address's workflowType, else from what this browser chose last (GenAI at
# first); it does not read the experiment's mlflow.experimentKind tag. So every address sweeper prints
# asks for the model-training views.
UI_VIEW = "workflowType=machine_learning"


def _ui_base(uri: str) -> str:
    """The UI of a tracking server, or the one ``mlflow ui`` (:func:`ui_command`) serves for an embedded store."""
    return uri.rstrip("/") if uri.startswith(("http://", "https://")) else "http://127.0.0.1:5000"


def run_url(uri: str, experiment_id: str, run_id: str) -> str:
    """Where the MLflow UI shows a run, on its model-training views."""
    return f"{_ui_base(uri)}/#/experiments/{experiment_id}/runs/{run_id}?{UI_VIEW}"


def experiment_url(uri: str, experiment_id: str) -> str:
    """Where the MLflow UI shows an experiment's runs table (sweeps expand into their runs)."""
    return f"{_ui_base(uri)}/#/experiments/{experiment_id}/runs?{UI_VIEW}"


def ui_line(uri: str, url: str) -> str:
    """``url``, and for an embedded store the command that serves it."""
    ui = ui_command(uri)
    return url + ("" if ui.startswith("open") else f"  (after: {ui})")


def add_speedups(rows: list[dict[str, Any]]) -> None:
    """Pair CPU and GPU jobs of the sweep by fingerprint; log the speedups and keep them in each result.json."""
    for uri in {r["tracking_uri"] for r in rows}:
        finished = [
            {"run_id": r["run_id"], "device": r["device"], "fingerprint": r["fingerprint"],
             "batch_size": r.get("batch_size"), **r["metrics"]}
            for r in rows
            if r["status"] == "FINISHED" and r["tracking_uri"] == uri
        ]
        found = speedup.pair(finished)
        speedup.log(uri, found)
        for r in rows:
            if r.get("run_id") in found:
                r["metrics"].update(found[r["run_id"]])
                path = Path(r["path"])
                path.write_text(json.dumps({k: v for k, v in r.items() if k not in ("job", "path")}, indent=2))


def exit_code(rows: list[dict[str, Any]], n_jobs: int) -> int:
    """0 when at least one job FINISHED (or was resumed) and none failed with an error; else 1.

    A diverged run (FAILED) and a GPU job SKIPPED for want of a GPU are results, not errors, but a
    sweep in which nothing finished, a job that crashed or never reported, or a result that could not
    be logged (pending upload) exits 1.
    """
    crashed = any(r.get("error") or r.get("pending_upload") for r in rows) or len(rows) < n_jobs
    useful = any(r["status"] == "FINISHED" or r.get("resumed_from") for r in rows)
    return 0 if useful and not crashed else 1


def finish(sweep_dir: Path, out: Any = None) -> int:
    """End a sweep: add speedups, publish each parent's leaderboard and plots, close the parent run(s).

    Returns the exit code of :func:`exit_code`.
    """
    from sweeper import report

    out = out or sys.stdout
    writer.drain()  # every run handed to the writer is in the store (or kept for upload) before the summary
    rows = results(sweep_dir)
    state = _state(sweep_dir)
    failed_parents = False
    try:
        add_speedups(rows)
    except tracking.UNREACHABLE as e:
        print(f"sweeper: error: speedups not logged: {tracking.first_line(e)}", file=out)
    print(f"\nSweep {sweep_dir}: {len(rows)} of {state['n_jobs']} jobs reported", file=out)
    for parent in state["parents"]:
        mine = [r for r in rows if r["tracking_uri"] == parent["uri"] and r["experiment"] == parent["experiment"]]
        client = tracking.client(parent["uri"])
        skipped = [r for r in mine if r["status"] == "SKIPPED"]
        lines = [f"{' '.join(r['overrides'])}: {r['reason']}" for r in skipped]
        print(f"\nExperiment '{parent['experiment']}', parent run {parent['run_id']}:", file=out)
        browse = ui_command(parent["uri"])
        try:
            if lines:
                client.set_tag(parent["run_id"], "skipped_jobs", "\n".join(lines))
            _, counts = report.publish(client, parent["run_id"], out=out, sweep_ended=True, results=mine)
            run = client.get_run(parent["run_id"])
            report.close(client, run, counts, out)
            browse = ui_line(parent["uri"], experiment_url(parent["uri"], run.info.experiment_id))
        except tracking.UNREACHABLE as e:
            print(f"sweeper: error: tracking.uri={parent['uri']} failed: {tracking.first_line(e)}; "
                  f"rebuild the summary later with python -m sweeper.report --parent {parent['run_id']}", file=out)
            failed_parents = True
        reused = [r for r in skipped if r.get("resumed_from")]
        if reused:
            print(f"REUSED {len(reused)} job(s) that already FINISHED (resume=true): the table's reused column", file=out)
        for reason in dict.fromkeys(r["reason"] for r in skipped if not r.get("resumed_from")):
            jobs = [label(r["overrides"], keys=state.get("swept")) for r in skipped if r["reason"] == reason]
            print(f"SKIPPED {len(jobs)} job(s): {reason}\n  " + "\n  ".join(jobs), file=out)
        print(f"browse with: {browse}", file=out)
    from sweeper import plots

    plots.stop()
    writer.stop()
    pending = [r["job"] for r in rows if r.get("pending_upload")]
    if pending:
        print(f"{len(pending)} job(s) could not be logged (jobs {', '.join(pending)}); their results are kept: "
              f"python -m sweeper.upload {sweep_dir}", file=out)
    return 1 if failed_parents else exit_code(rows, state["n_jobs"])


def note_job(sweep_dir: Path, output_dir: Path, num: int) -> None:
    """After a job that trained nothing (SKIPPED: no GPU, or resumed), tag the sweep's parent run with it
    (``skipped.<num>``, and ``reused.<num>``: the run it took over), so that a report from the store alone
    counts it and ranks the reused run. A tracking failure is logged: finish() still has the result.json."""
    path = output_dir / "result.json"
    if not path.is_file():
        return
    r = json.loads(path.read_text())
    parent = parent_run_id(sweep_dir, r["tracking_uri"], r["experiment"]) if r.get("status") == "SKIPPED" else None
    if parent is None:
        return
    tags = {f"skipped.{num}": f"{' '.join(r['overrides'])}: {r['reason']}"}
    if r.get("resumed_from"):
        tags[f"reused.{num}"] = r["resumed_from"]
    from mlflow.entities import RunTag

    try:
        tracking.client(r["tracking_uri"]).log_batch(parent, tags=[RunTag(k, v) for k, v in tags.items()])
    except tracking.UNREACHABLE as e:
        log.error("job %s not noted on parent run %s: %s", num, parent, tracking.first_line(e))


def resume_command(args: list[str]) -> str:
    """The command line that finishes an interrupted sweep: the same arguments, ``resume=true``."""
    kept = [a for a in args if a.lstrip("+~").partition("=")[0] != "resume"]
    return shlex.join(["python", "-m", "sweeper", *kept, "resume=true"])


def interrupted(sweep_dir: Path, args: list[str]) -> str:
    """Ctrl-C in the launching process: close the sweep in the store and return the one line to print.

    Each parent run (from sweep.json, or as far as :func:`start` got) is KILLED with the jobs' counts;
    its children that this process or a dead one on this host left RUNNING are KILLED too. Finished
    runs stay as they are; ``resume=true`` re-runs the rest.
    """
    from sweeper import report

    writer.interrupt()  # the jobs that finished are recorded FINISHED, not taken for killed ones
    state = _state(sweep_dir) if (sweep_dir / SWEEP_FILE).is_file() else None
    parents = state["parents"] if state else list(_created.get(sweep_dir, {}).values())
    rows = results(sweep_dir) if state else []
    cut = [d for d in sweep_dir.glob("*/.hydra") if not (d.parent / "result.json").is_file()]  # started, no result
    failures = []
    for p in parents:
        mine = [r for r in rows if r["tracking_uri"] == p["uri"] and r["experiment"] == p["experiment"]]
        try:
            c = tracking.client(p["uri"])
            parent = c.get_run(p["run_id"])
            runs = report.children(c, parent)
            if report.mark_orphans(c, runs, False, "KILLED", report.INTERRUPTED):
                runs = report.children(c, parent)
            if parent.info.status == "RUNNING":
                counts = report.tally(parent, runs, mine)
                why = report.incomplete(counts)  # None when Ctrl-C came during the summary
                tracking.log_metrics(c, p["run_id"], counts)
                c.set_tag(p["run_id"], "failure_reason", f"sweep {report.INTERRUPTED}" + (f": {why}" if why else ""))
                c.set_terminated(p["run_id"], "KILLED")
        except tracking.UNREACHABLE as e:
            failures.append(f"tracking.uri={p['uri']} failed: {tracking.first_line(e)}")
    if state is None:
        done = f"parent run(s) {', '.join(p['run_id'] for p in parents)} KILLED" if parents else "nothing recorded"
        return f"sweeper: interrupted before any job started: {done}" + "".join(f"; {f}" for f in failures)
    status = [r["status"] for r in rows]
    reused = sum(bool(r.get("resumed_from")) for r in rows)
    parts = [f"{status.count('FINISHED')} finished"]
    parts += [f"{n} {what}" for n, what in ((status.count("FAILED"), "failed"), (reused, "reused"),
                                              (status.count("SKIPPED") - reused, "skipped")) if n]
    parts += [f"{status.count('KILLED') + len(cut)} killed", f"{max(0, state['n_jobs'] - len(rows) - len(cut))} not run"]
    return (f"sweeper: interrupted: {', '.join(parts)}; " + "".join(f"{f}; " for f in failures)
            + f"resume with: {resume_command(args)}")
