"""Interrupted sweeps: Ctrl-C (one line, exit 130, everything closed), a SIGKILL then a report (the parent
KILLED, the jobs that never ran counted), and a resumed sweep whose leaderboard keeps the runs it reused."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

import sweeper
from conftest import NO_BASELINES, all_runs, cli, client_for, command_env, no_baselines
from sweeper import report, tracking
from sweeper.base import process
from sweeper.base.files import SWEEP_FILE
from sweeper.base.process import PID_START
from sweeper.insight import publish
from sweeper.sweep import life as sweep
from sweeper.job.context import JobContext
from sweeper.job.record import run

SWEEP = (
    "-m",
    "lr=0.001,0.002,0.003",
    "epochs=200000",
    "log_every=100",
)  # each job trains for seconds
ONE_AT_A_TIME = "hydra/launcher=basic"  # a first job that trains while the others wait
ONE_LINE = re.compile(
    r"sweeper: interrupted: (\d+) finished, (\d+) killed, (\d+) not run; "
    r"resume with: python -m sweeper (.*) resume=true"
)


def parents(store: Path) -> list:
    return [r for r in all_runs(store) if "mlflow.parentRunId" not in r.data.tags]


def children(store: Path) -> list:
    return [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]


def ctrl_c(
    tmp_path: Path, store: Path, ready: Path, *args: str
) -> tuple[subprocess.CompletedProcess, list[str]]:
    """``python -m sweeper ARGS`` in a subprocess, sent SIGINT (what Ctrl-C sends) once ``ready`` exists."""
    argv = [
        *args,
        *no_baselines(args),
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"hydra.run.dir={tmp_path / 'run'}",
        f"tracking.uri=sqlite:///{store}",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweeper", *argv],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=command_env(),  # no figures (conftest.NO_PLOTS)
        # a background shell ignores it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), argv


def assert_one_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 130, proc.stderr
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[-1]


# --- Ctrl-C, for real -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_ctrl_c_in_the_first_job_kills_it_and_the_sweep_in_one_line(tmp_path, store):
    # config_resolved.yaml is written once the job's run exists in the store
    proc, argv = ctrl_c(
        tmp_path, store, tmp_path / "sweep" / "0" / "config_resolved.yaml", *SWEEP, ONE_AT_A_TIME
    )
    line = assert_one_line(proc)
    m = ONE_LINE.fullmatch(line)
    assert m and m.groups()[:3] == ("0", "1", "2"), line
    assert shlex.split(m.group(4)) == argv  # the very command, to resume it
    (parent,) = parents(store)
    (child,) = children(store)
    assert (
        child.info.status == "KILLED"
        and child.data.tags["failure_reason"] == "interrupted (Ctrl-C)"
    )
    assert parent.info.status == "KILLED" and parent.data.tags["failure_reason"].startswith(
        "sweep interrupted (Ctrl-C)"
    )
    assert parent.data.metrics["n_killed"] == 1 and parent.data.metrics["n_not_run"] == 2
    assert parent.data.metrics["n_finished"] == 0


@pytest.mark.slow
def test_ctrl_c_before_the_first_job_run_still_kills_the_parent(tmp_path, store):
    proc, _ = ctrl_c(tmp_path, store, tmp_path / "sweep" / SWEEP_FILE, *SWEEP)
    m = ONE_LINE.fullmatch(assert_one_line(proc))
    # the first job: cut short or not begun
    assert m and m.group(1) == "0" and int(m.group(2)) + int(m.group(3)) == 3
    (parent,) = parents(store)
    assert parent.info.status == "KILLED"
    assert all(c.info.status == "KILLED" for c in children(store))  # none left RUNNING


@pytest.mark.slow
def test_ctrl_c_in_a_single_run_names_the_run(tmp_path, store):
    proc, _ = ctrl_c(
        tmp_path, store, tmp_path / "run" / "config_resolved.yaml", "data=xor", "epochs=20000000"
    )
    line = assert_one_line(proc)
    (run_,) = all_runs(store)
    assert (
        line == f"sweeper: interrupted: run {run_.info.run_id} KILLED"
        and run_.info.status == "KILLED"
    )


# --- the same bookkeeping in-process, on sweeps built by sweep.start ---------------------------------------


def start_sweep(sweep_dir: Path, store: Path, lrs: str, *overrides: str):
    """A multirun over ``lr=lrs`` begun as the launching process begins it (sweep.start: parent run, sweep.json);
    returns its job configs, as Hydra composes them, and the sweep's state."""
    with initialize_config_dir(config_dir=str(sweeper.CONF_DIR), version_base="1.3"):
        base = [
            f"hydra.sweep.dir={sweep_dir}",
            f"tracking.uri=sqlite:///{store}",
            "epochs=300",
            "log_every=10",
            *overrides,
        ]
        config = compose(config_name="config", overrides=base, return_hydra_config=True)
        with open_dict(config):
            config.hydra.sweeper.params = {"lr": lrs}
        state = sweep.start(config)
        jobs = [
            compose(config_name="config", overrides=[*base, o])
            for o in (f"lr={lr}" for lr in lrs.split(","))
        ]
    return jobs, state


def run_job(jobs, sweep_dir: Path, num: int) -> dict:
    """Job ``num`` of the sweep through the CLI's code path, then what Hydra calls after it (on_job_end)."""
    ctx = JobContext(
        output_dir=sweep_dir / str(num),
        overrides=[f"lr={jobs[num].lr}"],
        sweep_dir=sweep_dir,
        num=num,
    )
    result = run(jobs[num], ctx)
    sweep.note_job(sweep_dir, ctx.output_dir, num)
    return result


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def orphan(store: Path, parent_id: str, pid: int) -> str:
    """A child run left RUNNING by a job whose process is gone (SIGKILL): the tags of run.py's _tags."""
    c = client_for(store)
    exp = c.get_run(parent_id).info.experiment_id
    tags = {
        "device": "cpu",
        "fingerprint": "f" * 16,
        "overrides": "lr=0.002",
        "sweeper.host": socket.gethostname(),
        "sweeper.pid": pid,
    }
    return tracking.start_run(c, exp, "lr=0.002,cpu", tags, parent_run_id=parent_id)


def test_a_report_on_a_sigkilled_sweep_kills_the_parent_and_counts_the_jobs_that_never_ran(
    tmp_path, store, capsys
):
    sweep_dir = tmp_path / "sweep"
    jobs, state = start_sweep(sweep_dir, store, "0.001,0.002,0.003")
    (p,) = state["parents"]
    assert client_for(store).get_run(p["run_id"]).data.tags["n_jobs"] == "3"
    assert run_job(jobs, sweep_dir, 0)["status"] == "FINISHED"
    # job 1 was SIGKILLed in training; job 2 never began
    stray = orphan(store, p["run_id"], dead_pid())

    assert report.main(["--parent", p["run_id"], "--tracking-uri", f"sqlite:///{store}"]) == 0
    out = capsys.readouterr().out
    c = client_for(store)
    parent = c.get_run(p["run_id"])
    assert parent.info.status == "KILLED"
    assert parent.data.tags["failure_reason"] == "incomplete: 1 job(s) not run, 1 run(s) orphaned"
    m = {
        k: parent.data.metrics.get(k, 0)
        for k in ("n_finished", "n_failed", "n_killed", "n_not_run", "n_orphaned")
    }
    assert (m["n_finished"], m["n_failed"], m["n_killed"], m["n_not_run"], m["n_orphaned"]) == (
        1,
        1,
        0,
        1,
        1,
    )
    assert c.get_run(stray).info.status == "FAILED"
    assert f"parent run {p['run_id']} KILLED: incomplete: 1 job(s) not run" in out
    assert "finish the sweep with: python -m sweeper -m " in out and "resume=true" in out

    # python -m sweeper.summary on the same folder (sweep.finish, from result.json) agrees: KILLED, not FINISHED
    c.set_terminated(p["run_id"], "RUNNING")
    assert sweep.finish(sweep_dir, out=io.StringIO()) == 1
    parent = c.get_run(p["run_id"])
    assert parent.info.status == "KILLED" and parent.data.metrics["n_not_run"] == 1


def test_a_report_on_a_sweep_without_children_kills_the_parent(tmp_path, store, capsys):
    _, state = start_sweep(tmp_path / "sweep", store, "0.001,0.002,0.003")
    (p,) = state["parents"]
    assert report.main(["--parent", p["run_id"], "--tracking-uri", f"sqlite:///{store}"]) == 0
    parent = client_for(store).get_run(p["run_id"])
    assert parent.info.status == "KILLED" and parent.data.metrics["n_not_run"] == 3
    assert parent.data.tags["failure_reason"] == "incomplete: 3 job(s) not run"


def test_a_report_leaves_a_sweep_whose_launcher_still_runs_running(tmp_path, store, capsys):
    _, state = start_sweep(tmp_path / "sweep", store, "0.001,0.002")
    (p,) = state["parents"]
    c = client_for(store)
    # the launching process: its pid and its start, as recorded
    launcher = subprocess.Popen(["sleep", "60"])
    try:
        c.set_tag(p["run_id"], "sweeper.pid", str(launcher.pid))
        c.set_tag(p["run_id"], PID_START, process.start_mark(launcher.pid))
        assert report.main(["--parent", p["run_id"], "--tracking-uri", f"sqlite:///{store}"]) == 0
        assert c.get_run(p["run_id"]).info.status == "RUNNING"
        assert f"the sweep is still running (pid {launcher.pid})" in capsys.readouterr().out
    finally:
        launcher.kill()
        launcher.wait()


def test_ctrl_c_before_any_child_kills_the_parent_and_counts_the_jobs(tmp_path, store):
    sweep_dir = tmp_path / "sweep"
    jobs, state = start_sweep(sweep_dir, store, "0.001,0.002,0.003")
    (p,) = state["parents"]
    line = sweep.interrupted(sweep_dir, ["-m", "lr=0.001,0.002,0.003", "resume=false"])
    assert line == (
        "sweeper: interrupted: 0 finished, 0 killed, 3 not run; "
        "resume with: python -m sweeper -m lr=0.001,0.002,0.003 resume=true"
    )
    parent = client_for(store).get_run(p["run_id"])
    assert parent.info.status == "KILLED" and parent.data.metrics["n_not_run"] == 3


@pytest.mark.parametrize("how", ["interrupted", "launcher failed"])
def test_a_parent_whose_store_fails_as_the_sweep_ends_is_said_in_the_line_and_raises_nothing(
    tmp_path, store, monkeypatch, how
):
    """An interrupted sweep, or one whose launcher failed, ends each parent run; one whose store fails then is
    said in the sweep's one line (never a traceback: the interruption or the launcher's failure is what the
    caller hears of), and is not said KILLED."""
    from mlflow.exceptions import MlflowException

    sweep_dir = tmp_path / "sweep"
    _, state = start_sweep(sweep_dir, store, "0.001,0.002")
    (p,) = state["parents"]
    ended = sweep._end_parent
    if how == "launcher failed":
        line = sweep.launcher_failed(sweep_dir, RuntimeError("boom"))
        assert (
            line
            == f"sweeper: error: the launcher failed: RuntimeError: boom; parent run(s) {p['run_id']} KILLED"
        )
        assert client_for(store).get_run(p["run_id"]).info.status == "KILLED"
        client_for(store).set_terminated(p["run_id"], "RUNNING")

    def fails(*a, **k):
        raise MlflowException("the server went away\nsecond line")

    monkeypatch.setattr(sweep, "_end_parent", fails)
    failed = f"tracking.uri={p['uri']} failed: MlflowException: the server went away"
    if how == "interrupted":
        line = sweep.interrupted(sweep_dir, ["-m", "lr=0.001,0.002"])
        assert (
            line.startswith("sweeper: interrupted: 0 finished, 0 killed, 2 not run")
            and failed in line
        )
    else:
        line = sweep.launcher_failed(sweep_dir, RuntimeError("boom"))
        assert line == f"sweeper: error: the launcher failed: RuntimeError: boom; {failed}"
    monkeypatch.setattr(sweep, "_end_parent", ended)
    assert client_for(store).get_run(p["run_id"]).info.status == "RUNNING"


def test_ctrl_c_kills_the_running_child_of_this_process(tmp_path, store):
    """Ctrl-C outside training (say, while a run logs its model) leaves no run RUNNING behind."""
    sweep_dir = tmp_path / "sweep"
    jobs, state = start_sweep(sweep_dir, store, "0.001,0.002,0.003")
    (p,) = state["parents"]
    run_job(jobs, sweep_dir, 0)
    cut = orphan(store, p["run_id"], os.getpid())
    (sweep_dir / "1" / ".hydra").mkdir(parents=True)  # Hydra had begun job 1
    line = sweep.interrupted(sweep_dir, ["-m", "lr=0.001,0.002,0.003"])
    assert line.startswith("sweeper: interrupted: 1 finished, 1 killed, 1 not run; resume with: ")
    c = client_for(store)
    assert (
        c.get_run(cut).info.status == "KILLED"
        and c.get_run(cut).data.tags["failure_reason"] == "interrupted (Ctrl-C)"
    )
    parent = c.get_run(p["run_id"])
    assert parent.info.status == "KILLED"
    assert (
        parent.data.metrics["n_finished"],
        parent.data.metrics["n_killed"],
        parent.data.metrics["n_not_run"],
    ) == (1, 1, 1)


# --- resume: the reused runs stay on the leaderboard ---------------------------------------------------------


def test_a_resumed_sweep_ranks_the_runs_it_reused(tmp_path, store):
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    jobs, _ = start_sweep(first_dir, store, "0.001,0.02")
    firsts = [run_job(jobs, first_dir, i) for i in range(2)]
    assert sweep.finish(first_dir, out=io.StringIO()) == 0
    jobs, state = start_sweep(second_dir, store, "0.001,0.02,0.05", "resume=true")
    seconds = [run_job(jobs, second_dir, i) for i in range(3)]
    assert [r.get("resumed_from") for r in seconds[:2]] == [r["run_id"] for r in firsts]
    out = io.StringIO()
    assert sweep.finish(second_dir, out=out) == 0
    text = out.getvalue()

    (p,) = state["parents"]
    parent = client_for(store).get_run(p["run_id"])
    best = min([*firsts, seconds[2]], key=lambda r: r["metrics"]["val_mse"])
    # lr=0.02 of the first sweep: the reused run is the best
    assert best["run_id"] == firsts[1]["run_id"]
    assert parent.data.tags["best_run_id"] == best["run_id"]
    assert f"(run {best['run_id']}, reused)" in text
    rows = [x for x in text.splitlines() if x.startswith("lr=")]
    # reused column: their ids
    assert len(rows) == 3 and sum(r["run_id"] in x for r in firsts for x in rows) == 2
    assert parent.info.status == "FINISHED"
    m = {
        k: parent.data.metrics.get(k, 0)
        for k in ("n_finished", "n_skipped", "n_reused", "n_not_run")
    }
    assert (m["n_finished"], m["n_skipped"], m["n_reused"], m["n_not_run"]) == (1, 2, 2, 0)
    assert {k: v for k, v in parent.data.tags.items() if k.startswith("reused.")} == {
        "reused.0": firsts[0]["run_id"],
        "reused.1": firsts[1]["run_id"],
    }

    # the store alone (python -m sweeper.report) rebuilds the same leaderboard
    board, counts = publish.publish(client_for(store), p["run_id"], out=io.StringIO())
    assert [r["run_id"] for r in board.rows][:1] == [best["run_id"]] and len(board.rows) == 3
    assert counts["n_reused"] == 2 and counts["n_not_run"] == 0


@pytest.mark.slow
def test_the_cli_summary_of_a_resumed_sweep_names_the_reused_best_and_lists_every_run(
    tmp_path, store
):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    fast = ("epochs=300", "log_every=10")
    assert cli(tmp_path / "a", "-m", "lr=0.001,0.02", *fast, store=store).returncode == 0
    first = {r.data.params["lr"]: r.info.run_id for r in children(store)}
    proc = cli(tmp_path / "b", "-m", "lr=0.001,0.02,0.05", "resume=true", *fast, store=store)
    assert proc.returncode == 0, proc.stderr
    # (and, where a baseline beats it beyond the noise, "; beside it, the boosting baseline scores ...")
    best = re.search(
        r"^best: (\S+)  val_mse=\S+  \(run (\w+)(, reused)?\)(; beside it, .*)?$", proc.stdout, re.M
    )
    assert best and best.groups()[:3] == ("lr=0.02,cpu", first["0.02"], ", reused"), proc.stdout
    table = proc.stdout[proc.stdout.index("\nrun ") : proc.stdout.index("\nbest: ")]
    assert table.split()[:3] == [
        "run",
        "lr",
        "val_mse",
    ]  # no resume column: it differs, but says nothing
    ranked = [
        x.split()[0]
        for x in table.splitlines()[3:]
        if x.strip() and not x.startswith(("[baseline]", "([baseline]"))
    ]
    assert ranked == ["lr=0.02,cpu", "lr=0.05,cpu", "lr=0.001,cpu"]
    assert first["0.02"] in table and first["0.001"] in table  # the reused column


def _single_run_doing(store, out_dir, monkeypatch):
    """This process as a single run's job into ``store`` (output in ``out_dir``) while it runs, as
    :func:`sweeper.sweep.callbacks.interrupted` reads it."""
    from sweeper.base import state

    with initialize_config_dir(config_dir=str(sweeper.CONF_DIR), version_base="1.3"):
        job = compose(
            config_name="config",
            overrides=[f"tracking.uri=sqlite:///{store}"],
            return_hydra_config=True,
        )
    with open_dict(job):
        job.hydra.runtime.output_dir = str(out_dir)
    monkeypatch.setitem(state.process().doing, "job", job)
    monkeypatch.setitem(state.process().doing, "since", time.time())
    # its store opened (its run is created after that)
    monkeypatch.setattr(state.process(), "store_opened", True)


def test_ctrl_c_outside_training_in_a_single_run_kills_its_run(tmp_path, store, monkeypatch):
    """Ctrl-C between the run's creation and its training (or while it logs): the run of this process is
    KILLED from the store; a result.json an earlier run left in the same folder is not taken for it."""
    from sweeper.sweep import callbacks

    _single_run_doing(store, tmp_path / "run", monkeypatch)
    (tmp_path / "run").mkdir()
    old = tmp_path / "run" / "result.json"
    old.write_text('{"run_id": "an-earlier-run", "status": "FINISHED"}')
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    c = client_for(store)
    exp = tracking.experiment_id(c, "diabetes", f"sqlite:///{store}")
    mine = tracking.start_run(
        c, exp, "defaults,cpu", {"sweeper.host": socket.gethostname(), "sweeper.pid": os.getpid()}
    )
    other = tracking.start_run(
        c, exp, "defaults,cpu", {"sweeper.host": socket.gethostname(), "sweeper.pid": dead_pid()}
    )
    assert callbacks.interrupted(["epochs=10"]) == f"sweeper: interrupted: run {mine} KILLED"
    assert c.get_run(mine).info.status == "KILLED" and c.get_run(other).info.status == "RUNNING"


@pytest.mark.parametrize("status", ["FINISHED", "FAILED", "KILLED"])
def test_ctrl_c_after_a_single_run_ended_says_how_it_ended(tmp_path, store, monkeypatch, status):
    """SIGTERM after the run had ended and been recorded (its result.json written, the process on
    its way out: found at 2.42 and 2.50 s into a run) said "run X KILLED" of a run the store keeps
    FINISHED. The line says how it ended; a run its job ended KILLED is said KILLED."""
    from sweeper.sweep import callbacks

    _single_run_doing(store, tmp_path / "run", monkeypatch)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "result.json").write_text(json.dumps({"run_id": "r1", "status": status}))
    line = callbacks.interrupted(["epochs=10"])
    if status == "KILLED":
        assert line == "sweeper: interrupted: run r1 KILLED"
    else:
        assert (
            line == f"sweeper: interrupted after run r1 ended {status}: it is recorded as it ended"
        )


def test_ctrl_c_whose_recording_fails_is_still_one_line(tmp_path, monkeypatch):
    """Ctrl-C in a single run whose store fails now (a file that is not a database): the
    interruption's line says the recording failed and where to look, without a traceback; it
    is what ``python -m sweeper`` and :func:`sweeper.run` print (neither catches it itself)."""
    from sweeper.sweep import callbacks

    bad = tmp_path / "mlflow.db"
    bad.write_text("not a database\n" * 100)
    _single_run_doing(bad, tmp_path / "run", monkeypatch)
    line = callbacks.interrupted(["epochs=10"])
    assert line.startswith(
        "sweeper: interrupted; recording it in the store failed ("
    ) and line.endswith("): see python -m sweeper.report"), line
    assert "\n" not in line


@pytest.mark.slow
def test_ctrl_c_while_halving_trains_a_rung_is_one_line_and_leaves_nothing_running(tmp_path, store):
    # the first rung's groups train for seconds; Ctrl-C lands while they do (after the sweep's start)
    ready = tmp_path / "sweep" / SWEEP_FILE
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sweeper",
            "-m",
            NO_BASELINES,
            "lr=0.001,0.003,0.01",
            "width=8,16",
            "epochs=300000",
            "log_every=100",
            "hydra.launcher.halving.eta=3",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
            f"tracking.uri=sqlite:///{store}",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # the first rung's groups go to the workers once the launch line is followed by the line that splits them into
    # the workers' chunks (no run exists yet: halving opens them after its last rung)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "split into" in line and any("Launching 6 jobs" in x for x in seen):
            break
    assert ready.exists() and proc.poll() is None, "".join(seen)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    line = assert_one_line(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    m = ONE_LINE.fullmatch(line)
    assert m and m.group(1) == "0" and int(m.group(2)) + int(m.group(3)) == 6, line
    (parent,) = parents(store)
    assert parent.info.status == "KILLED"
    assert all(c.info.status == "KILLED" for c in children(store))  # none left RUNNING
    # no summary of a halving that did not end
    assert not (tmp_path / "sweep" / "halving.json").exists()


def _sampling() -> set:
    """The system-metrics sampler threads alive now (sweeper.tracking.system)."""
    import threading

    return {t for t in threading.enumerate() if t.name == "sweeper-system-metrics" and t.is_alive()}


@pytest.mark.parametrize("where", ["here", "on workers"])
def test_ctrl_c_while_a_group_trains_stops_its_system_metrics_with_the_launch(
    tmp_path, store, monkeypatch, where
):
    """A group's runs open RUNNING before it trains, its system metrics sampled on a thread; Ctrl-C
    while it trains (in this process, or on the CPU workers: each group's runs open here as a worker
    takes it) stops that sampling with the launch. No sampler outlives the sweep (in a notebook the
    kernel goes on: it would sample, and log to the KILLED runs, for ever)."""
    from sweeper.sweep import cores, launch

    before = _sampling()

    def trains(members, tags=None):
        assert _sampling() - before, "the group's runs sample while it trains"
        raise KeyboardInterrupt

    monkeypatch.setattr(launch, "compute_group", trains)
    if where == "on workers":
        monkeypatch.setattr(cores, "warm", lambda config, jobs: None)

        def computed_groups(launcher, groups, compute, n, taking):
            for members in groups:  # each taken by a worker: its runs open here
                taking(members, {"sweeper.worker": "cpu0"})
            compute(groups[0])  # Ctrl-C while they train
            yield from ()

        monkeypatch.setattr(cores, "computed_groups", computed_groups)
    workers = "1" if where == "here" else "2"
    with pytest.raises(KeyboardInterrupt):
        sweeper.multirun(
            [
                "lr=0.001,0.002",
                "depth=1,2",
                "hydra.launcher.pack=false",  # a group a depth
                NO_BASELINES,
                f"hydra.launcher.cpu_workers={workers}",
                "tracking.system_metrics=true",
                "tracking.system_metrics_min_s=0",
                f"hydra.sweep.dir={tmp_path / 'sweep'}",
                f"tracking.uri=sqlite:///{store}",
            ]
        )
    assert not _sampling() - before
    runs = children(store)
    assert runs and all(r.info.status == "KILLED" for r in runs)


# Ctrl-C (a KeyboardInterrupt, raised where it lands) at the place the first argument names, then
# `python -m sweeper ARGS` (the other arguments) as the command line runs it: "import M" as the
# module M is imported; "class C" as the class C's body begins to run; "signal F" a SIGTERM this
# process sends itself as the function F is first called (its handler runs as a real one does)
CUT_AN_IMPORT = r"""
import importlib.abc, os, runpy, signal, sys

KIND, NAME = sys.argv.pop(1).split()

class CtrlC(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == NAME:
            sys.meta_path.remove(self)
            raise KeyboardInterrupt
        return None

def tracer(frame, event, arg):
    if event == "call" and frame.f_code.co_name == NAME:
        sys.settrace(None)
        if KIND == "signal":
            os.kill(os.getpid(), signal.SIGTERM)
        else:
            raise KeyboardInterrupt

if KIND == "import":
    sys.meta_path.insert(0, CtrlC())
else:
    sys.settrace(tracer)
sys.argv = ["sweeper", *sys.argv[1:]]
runpy.run_module("sweeper", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(
    "cut",
    ["import mlflow.tracking", "class SqlRun"],
    ids=["inside-mlflows-import", "inside-its-sql-stores-tables"],
)
def test_ctrl_c_before_a_single_runs_store_opened_says_nothing_was_recorded(tmp_path, store, cut):
    """A single run whose Ctrl-C landed while the job imported MLflow, or MLflow's SQL store's
    tables (each found by SIGTERM 0.9-1.8 s into a run), created no run; recording the
    interruption imported those modules again, which fails half-way ("partially initialized module
    'mlflow'", "Table 'experiments' is already defined"), so the line blamed the store. It says
    nothing was recorded, exit 130."""
    proc = subprocess.run(
        [sys.executable, "-c", CUT_AN_IMPORT, cut, "epochs=5", f"tracking.uri=sqlite:///{store}"]
        + [f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=command_env(None),
        timeout=300,
    )
    assert assert_one_line(proc) == "sweeper: interrupted before any run started: nothing recorded"
    assert not store.exists() or not all_runs(store)


def test_sigterm_as_the_sweeps_parent_run_is_created_kills_it_and_says_so(tmp_path, store):
    """SIGTERM between the parent run's creation and its params (the first log_batch): the run was
    in the store but not yet kept as the sweep's parent, so it stayed RUNNING while the line said
    nothing was recorded (found by SIGTERM 2.8 s into a 16-job sweep). The parent is now created
    and kept as one step that a signal waits for: it ends KILLED, and the line names it."""
    proc = subprocess.run(
        [sys.executable, "-c", CUT_AN_IMPORT, "signal log_batch", "-m", "lr=0.01,0.02"]
        + ["epochs=5", f"tracking.uri=sqlite:///{store}", f"hydra.sweep.dir={tmp_path / 's'}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=command_env(None),
        timeout=300,
    )
    assert proc.returncode == 143, proc.stderr
    line = [x for x in proc.stderr.splitlines() if x.strip()][-1]
    (parent,) = all_runs(store)
    assert parent.info.status == "KILLED", (parent.info.status, line)
    assert (
        line.startswith("sweeper: interrupted before any job started")
        and parent.info.run_id in line
    )
