"""sweeper.sweep.submitit_jobs: submitit_local's jobs stop with their sweep."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import NO_BASELINES, all_runs, one_line


def _submitit_sweep(tmp_path: Path, store: Path) -> subprocess.Popen:
    """A 2-job submitit_local sweep (minutes a job) in a process group of its own, once both jobs' runs are RUNNING."""
    import signal

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sweeper",
            "-m",
            NO_BASELINES,
            "lr=0.001,0.002",
            "epochs=5000000",
            "log_every=1000",
            "hydra/launcher=submitit_local",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
            f"tracking.uri=sqlite:///{store}",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if [r.info.status for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags] == [
            "RUNNING"
        ] * 2:
            return proc
        time.sleep(0.5)
    proc.kill()
    raise AssertionError(f"the jobs did not start: {proc.communicate()}")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["terminal Ctrl-C", "SIGTERM"])
def test_submitit_local_jobs_stop_with_their_sweep_in_one_line(tmp_path, store, how):
    """Before: a terminal's Ctrl-C reached submitit's job controllers too, each printing a KeyboardInterrupt
    traceback after the sweep's line; a SIGTERM to the sweep left its jobs training on for minutes after it exited
    143, their runs RUNNING, while its line said '0 killed'."""
    import signal

    proc = _submitit_sweep(tmp_path, store)
    if how == "SIGTERM":
        proc.send_signal(signal.SIGTERM)
    else:
        # what a terminal does: every process of its foreground group
        os.killpg(proc.pid, signal.SIGINT)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == (143 if how == "SIGTERM" else 130), err
    assert "sweeper: interrupted: 0 finished, 2 killed, 0 not run" in one_line(err)
    runs = all_runs(store)
    assert sorted(r.info.status for r in runs) == ["KILLED"] * 3
    left = subprocess.run(
        ["pgrep", "-f", f"submitit.*{tmp_path}"], capture_output=True, text=True
    ).stdout
    assert not left.strip(), left


def test_a_jobs_processes_are_found_from_proc_and_a_zombie_is_not_running(monkeypatch):
    """submitit_jobs finds the controllers' jobs as their children and waits while they run: from /proc, else ps
    (macOS); a zombie its parent has not reaped ended; a pid that is gone is not running. (It read /proc/PID/stat
    with handlers of its own; process.stat_fields reads it for every caller, and process.alive, which it waits
    on, counts no zombie.)"""
    from sweeper.base import process
    from sweeper.sweep import submitit_jobs

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert child.pid in submitit_jobs._children(os.getpid())
        assert submitit_jobs._children(child.pid) == []
        assert process.alive(child.pid)
        with monkeypatch.context() as m:  # no /proc: ps and a signal 0 say the same
            m.setattr(submitit_jobs, "stat_fields", lambda pid: None)
            m.setattr(process, "stat_fields", lambda pid: None)
            assert child.pid in submitit_jobs._children(os.getpid())
            assert process.alive(child.pid)
        child.kill()
        deadline = time.monotonic() + 10
        while process.stat_fields(child.pid)[0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not process.alive(child.pid)  # a zombie: not yet reaped, not running
        assert child.pid in submitit_jobs._children(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert not process.alive(child.pid)  # gone
    assert process.stat_fields(child.pid) is None
    assert child.pid not in submitit_jobs._children(os.getpid())
