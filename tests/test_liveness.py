"""Records after faults: a run's heartbeat says whether its job lives (on any host), a summary never closes a
live run, an engine's retry is an attempt and not an orphan, upload re-closes the parent, and the printed
resume command keeps the sweep's launcher."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import sweeper
from conftest import all_runs, client_for, wait_for
from test_interrupt import run_job, start_sweep as interrupt_sweep
from sweeper import tracking, upload
from sweeper.base.process import (
    HEARTBEAT,
    MISSED_BEATS,
    PID_START,
    SLACK_S,
    beat,
    beating,
    start_mark,
)
from sweeper.sweep import life as sweep


def start_sweep(sweep_dir: Path, store: Path, lrs: str, *overrides: str):
    """A multirun over ``lr=lrs`` begun as the launching process begins it (no model files); its job configs and
    state."""
    return interrupt_sweep(sweep_dir, store, lrs, "tracking.log_model=false", *overrides)


# Job 1 of the sweep in its own process, as on another node (its host tag is not this one's): it trains for
# minutes, so only its heartbeat tells a report that it lives.
REMOTE_JOB = textwrap.dedent("""
    import socket, sys
    from pathlib import Path
    socket.gethostname = lambda: "node-7"
    from hydra import compose, initialize_config_dir
    import sweeper
    from sweeper.job.context import JobContext
    from sweeper.job.record import run
    sweep_dir, store = Path(sys.argv[1]), sys.argv[2]
    with initialize_config_dir(config_dir=str(sweeper.CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"tracking.uri=sqlite:///{store}", "lr=0.002",
                      "epochs=5000000", "log_every=1000", "tracking.log_model=false", "tracking.system_metrics=false"])
    run(cfg, JobContext(output_dir=sweep_dir / "1", overrides=["lr=0.002"], sweep_dir=sweep_dir, num=1))
""")


@pytest.mark.slow
def test_a_summary_leaves_a_live_job_running_and_closes_it_once_its_heartbeat_stops(
    tmp_path, store
):
    sweep_dir = tmp_path / "sweep"
    jobs, state = start_sweep(sweep_dir, store, "0.001,0.002")
    (p,) = state["parents"]
    assert run_job(jobs, sweep_dir, 0)["status"] == "FINISHED"
    env = {**os.environ, "SWEEPER_HEARTBEAT_S": "0.5", "PYTHONPATH": str(sweeper.ROOT)}
    job = subprocess.Popen(
        [sys.executable, "-c", REMOTE_JOB, str(sweep_dir), str(store)],
        env=env,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        live = lambda: [
            r
            for r in all_runs(store)
            if r.info.status == "RUNNING" and r.data.tags.get("sweeper.host") == "node-7"
        ]

        def last_beat() -> float:
            return float(live()[0].data.tags[HEARTBEAT].split()[0]) if live() else 0.0

        wait_for(lambda: last_beat() > 0, "the remote job's run to beat", job)
        first = last_beat()
        # beats past the time its first one went stale (3 beats + the slack): only a refreshed heartbeat is fresh now
        wait_for(
            lambda: last_beat() - first > MISSED_BEATS * 0.5 + SLACK_S,
            "the job's heartbeats to go on",
            job,
        )
        out = io.StringIO()
        sweep.finish(sweep_dir, out=out)  # python -m sweeper.summary while the job still trains
        (child,) = live()
        assert child.info.status == "RUNNING", out.getvalue()
        c = client_for(store)
        assert c.get_run(p["run_id"]).info.status == "RUNNING"
        assert "stays RUNNING: 1 run(s) still running" in out.getvalue()
    finally:
        job.send_signal(signal.SIGKILL)
        job.wait()
    gone = c.get_run(child.info.run_id).data.tags[HEARTBEAT]
    wait_for(lambda: beating(gone, time.time()) is False, "the killed job's heartbeat to go stale")
    out = io.StringIO()
    sweep.finish(sweep_dir, out=out)
    dead = c.get_run(child.info.run_id)
    assert dead.info.status == "FAILED" and dead.data.tags["failure_reason"].startswith("orphaned")
    parent = c.get_run(p["run_id"])
    assert parent.info.status == "KILLED" and parent.data.metrics["n_orphaned"] == 1, out.getvalue()


def test_an_engine_retry_is_an_attempt_not_an_orphan(tmp_path, store):
    sweep_dir = tmp_path / "sweep"
    jobs, state = start_sweep(sweep_dir, store, "0.001,0.002")
    (p,) = state["parents"]
    results = [run_job(jobs, sweep_dir, i) for i in range(2)]
    c = client_for(store)
    # the first attempt of job 1, killed on its node; the engine ran the job again (the FINISHED run above)
    tags = {
        "device": "cpu",
        "fingerprint": results[1]["fingerprint"],
        "sweeper.host": "node-7",
        "sweeper.pid": "12",
        HEARTBEAT: beat(time.time() - 600, 30),
    }
    exp = c.get_run(p["run_id"]).info.experiment_id
    first = tracking.start_run(c, exp, "lr=0.002,cpu", tags, parent_run_id=p["run_id"])
    out = io.StringIO()
    assert sweep.finish(sweep_dir, out=out, returned=True) == 0, out.getvalue()
    attempt = c.get_run(first)
    assert attempt.info.status == "KILLED" and attempt.data.tags["failure_reason"].startswith(
        "an attempt"
    )
    parent = c.get_run(p["run_id"])
    assert parent.info.status == "FINISHED", out.getvalue()
    m = parent.data.metrics
    got = tuple(
        m.get(k, 0) for k in ("n_finished", "n_failed", "n_killed", "n_orphaned", "n_retried")
    )
    assert got == (2, 0, 0, 0, 1), m
    assert "finish the sweep with" not in out.getvalue()


def test_upload_recloses_the_parent_and_the_resume_command_keeps_the_launcher(
    tmp_path, store, capsys
):
    sweep_dir = tmp_path / "sweep"
    jobs, state = start_sweep(sweep_dir, store, "0.001,0.002", "hydra/launcher=basic")
    (p,) = state["parents"]
    c = client_for(store)
    assert json.loads(c.get_run(p["run_id"]).data.tags["sweep_argv"])[0] == "hydra/launcher=basic"
    results = [run_job(jobs, sweep_dir, i) for i in range(2)]
    # job 1's run was handed to a writer process that was killed: RUNNING, silent, its result kept for upload
    c.set_terminated(results[1]["run_id"], "RUNNING")
    c.set_tag(results[1]["run_id"], HEARTBEAT, beat(time.time() - 600, 30))
    path = sweep_dir / "1" / "result.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "pending_upload": True}))
    out = io.StringIO()
    sweep.finish(sweep_dir, out=out)
    parent = c.get_run(p["run_id"])
    assert (
        parent.info.status == "KILLED"
        and parent.data.tags["failure_reason"] == "incomplete: 1 run(s) orphaned"
    )
    line = next(x for x in out.getvalue().splitlines() if "finish the sweep with:" in x)
    assert line.split("finish the sweep with: ")[1].startswith(
        "python -m sweeper -m hydra/launcher=basic "
    ), line

    assert upload.main([str(sweep_dir)]) == 0
    parent = c.get_run(p["run_id"])
    assert parent.info.status == "FINISHED" and "failure_reason" not in parent.data.tags, (
        capsys.readouterr().out
    )
    assert parent.data.metrics.get("n_orphaned", 0) == 0
    # before: the metrics were counted again, the tags the summary wrote kept the counts from before the upload
    assert parent.data.tags["n_orphaned"] == "0" and parent.data.tags["n_finished"] == "2"
    assert (
        "re-closed FINISHED (was KILLED: incomplete: 1 run(s) orphaned)" in capsys.readouterr().out
    )


# --- through the command line ------------------------------------------------------------------------------

FAST = ("epochs=300", "log_every=10", "tracking.log_model=false")


@pytest.mark.slow
def test_a_launcher_that_cannot_start_kills_the_parent_in_one_line(tmp_path, store):
    from conftest import cli

    # no SLURM here
    proc = cli(
        tmp_path, "-m", "lr=0.001,0.002", *FAST, "hydra/launcher=submitit_slurm", store=store
    )
    assert proc.returncode == 2, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("sweeper: error: the launcher failed: "), (
        proc.stderr
    )
    (parent,) = all_runs(store)
    assert parent.info.status == "KILLED" and parent.data.tags["failure_reason"] in lines[0]
    assert parent.data.metrics["n_not_run"] == 2 and "srun" in lines[0]


@pytest.mark.slow
def test_resume_under_a_one_job_launcher_launches_only_what_did_not_finish(tmp_path, store):
    from conftest import cli

    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    first = cli(tmp_path / "a", "-m", "lr=0.001,0.002", *FAST, "hydra/launcher=basic", store=store)
    assert first.returncode == 0, first.stderr
    again = cli(
        tmp_path / "b",
        "-m",
        "lr=0.001,0.002,0.003",
        *FAST,
        "hydra/launcher=basic",
        "resume=true",
        store=store,
    )
    assert again.returncode == 0, again.stderr
    sweep_dir = tmp_path / "b" / "sweep"
    launched = sorted(p.parent.name for p in sweep_dir.glob("*/.hydra"))
    assert (
        launched == ["0"]
        and "lr=0.003" in (sweep_dir / "0" / ".hydra" / "overrides.yaml").read_text()
    )
    reused = [json.loads(p.read_text()) for p in sweep_dir.glob("resumed_*/result.json")]
    assert sorted(r["overrides"][0] for r in reused) == ["lr=0.001", "lr=0.002"]
    assert all(r["status"] == "SKIPPED" and r["resumed_from"] for r in reused)
    parent = client_for(store).get_run(
        json.loads((sweep_dir / "sweep.json").read_text())["parents"][0]["run_id"]
    )
    assert parent.info.status == "FINISHED" and parent.data.metrics["n_reused"] == 2, again.stdout


def test_a_suspended_job_on_this_host_is_alive_whatever_its_heartbeat_says_and_a_reused_pid_is_not():
    """A sweep stopped with Ctrl-Z (SIGSTOP) beats no more, but lives: a report meanwhile marked its runs FAILED
    "orphaned" and the sweep, once resumed, ended a complete parent KILLED (hostile pass 2, row 40). On this host
    the run's process decides; a pid the system gave to a process started after the run does not count."""
    from types import SimpleNamespace
    import socket

    from sweeper.insight.publish import holder_alive

    from sweeper.base.tags import HOST, PID

    stale = beat(time.time() - 3600, 30)  # an hour old: 3 beats missed many times over

    def run_of(pid: int, started: float, mark: str | None = None, before_the_prefix: bool = False):
        tags = {
            HOST: socket.gethostname(),
            PID: str(pid),
            HEARTBEAT: stale,
            **({PID_START: mark} if mark else {}),
        }
        # a run recorded before bookkeeping tags had their prefix: its bare names
        if before_the_prefix:
            tags = {k.removeprefix("sweeper."): v for k, v in tags.items()}
        return SimpleNamespace(
            info=SimpleNamespace(start_time=int(started * 1000)), data=SimpleNamespace(tags=tags)
        )

    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        job.send_signal(signal.SIGSTOP)
        mark = start_mark(job.pid)
        # a process's own, read the same each time
        assert mark == start_mark(job.pid) and mark != start_mark()
        # the process recorded (its pid and its start): alive, suspended, its heartbeat an hour old; and whenever the
        # run's start time says it began (the launching process may start long before its run, or under load after)
        assert holder_alive(run_of(job.pid, time.time(), mark)) is True
        assert holder_alive(run_of(job.pid, time.time() - 3600, mark)) is True
        boot, ticks = mark.split("+")
        # another process that had this pid: started a tick earlier
        other = f"{boot}+{int(ticks) - 1}"
        assert holder_alive(run_of(job.pid, time.time(), other)) is False
        # a run recorded without the start (an older sweeper): the pid's process must have begun by the run's start
        assert holder_alive(run_of(job.pid, time.time())) is True
        assert holder_alive(run_of(job.pid, time.time() - 3600)) is False
        # a store from before
        assert holder_alive(run_of(job.pid, time.time(), mark, before_the_prefix=True)) is True
    finally:
        job.kill()
        job.wait()
    assert holder_alive(run_of(job.pid, time.time(), mark)) is False  # gone
    # the reporting process runs no job
    assert holder_alive(run_of(os.getpid(), time.time())) is False


def test_a_run_records_the_process_that_started_it_pid_and_start(tmp_path, store):
    from conftest import run_once

    result = run_once(tmp_path, "epochs=20", "tracking.log_model=false", store=store)
    tags = client_for(store).get_run(result["run_id"]).data.tags
    assert tags["sweeper.pid"] == str(os.getpid()) and tags[PID_START] == start_mark() is not None


def test_a_heartbeat_the_store_refuses_is_skipped_and_a_bug_ends_the_beats():
    """run.Heartbeat: a beat a failing store refuses (tracking.failures: locked, a server's blip) is skipped
    and the next one tried; an error that is no store's ends the thread with its traceback."""
    import sqlite3
    import threading

    from sweeper.tracking import run

    class Owner:
        run_id = "r1"

    owner, tried = Owner(), []

    def set_tags(client, ids, key, value):
        tried.append(ids)
        if len(tried) == 3:
            h._done.set()
        raise raised

    h = run.Heartbeat.__new__(run.Heartbeat)
    h.interval, h._lock, h._done = 0.001, threading.Lock(), threading.Event()
    h.client, h._owners = None, {"r1": lambda: owner}
    real, run.bulk.set_tag_on_runs = run.bulk.set_tag_on_runs, set_tags
    try:
        raised = sqlite3.OperationalError("database is locked")
        h._loop()
        assert tried == [["r1"]] * 3
        tried.clear()
        h._done.clear()
        raised = TypeError("ours")
        with pytest.raises(TypeError, match="ours"):
            h._loop()
        assert tried == [["r1"]]
    finally:
        run.bulk.set_tag_on_runs = real
