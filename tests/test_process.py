"""sweeper.base.process: a worker process ends with its parent."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import NO_BASELINES, running_children, wait_for


@pytest.mark.slow
def test_a_kill_9_of_a_joblib_sweep_ends_its_workers_and_their_hold_on_its_output(tmp_path, store):
    """Before: loky's workers trained on after the sweep was killed, holding its stdout: a caller reading the
    output waited for minutes."""
    import signal
    import threading

    args = [
        sys.executable,
        "-m",
        "sweeper",
        "-m",
        NO_BASELINES,
        "lr=0.001,0.002",
        "epochs=2000000",
        "log_every=1000",
        "hydra/launcher=joblib",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"tracking.uri=sqlite:///{store}",
        "tracking.log_model=false",
    ]
    proc = subprocess.Popen(
        args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    watchdog = threading.Timer(180, proc.kill)
    watchdog.start()
    try:
        for line in proc.stdout:
            if "Launching" in line:
                break
        # the workers train once both jobs' runs are RUNNING (a job creates its run, then trains)
        wait_for(lambda: running_children(store) == 2, "both jobs' runs RUNNING", proc)
        proc.send_signal(signal.SIGKILL)
        ended = threading.Event()
        threading.Thread(target=lambda: (proc.stdout.read(), ended.set()), daemon=True).start()
        assert ended.wait(20), (
            "the sweep's output stayed open 20 s after its kill -9 (its workers live on)"
        )
    finally:
        watchdog.cancel()
        proc.kill()


def test_a_message_to_a_process_that_is_gone_is_not_sent_and_raises_nothing():
    """process.sent: the writer's requests and answers, a CPU worker's results and its stop each caught the broken
    pipe of a process that went with a handler of their own."""
    import multiprocessing

    from sweeper.base.process import sent

    mine, theirs = multiprocessing.Pipe()
    assert sent(mine, {"run": 1}) and theirs.recv() == {"run": 1}
    theirs.close()  # the other process went
    assert not sent(mine, {"run": 2})
    mine.close()  # this end closed already
    assert not sent(mine, None)


def test_a_process_that_has_ended_is_not_alive_while_its_parent_has_not_read_its_status():
    """process.alive: a zombie (ended, its exit status not yet read by its parent) is found by kill(pid, 0) but runs
    no more: a sweep's holder that is one holds nothing, and `report` must not call its sweep running."""
    from sweeper.base.process import alive, stat_fields

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        wait_for(
            lambda: (stat_fields(child.pid) or ["?"])[0] == "Z", "the child to end, unwaited for"
        )
        assert not alive(child.pid)
        assert alive(os.getpid())
    finally:
        child.wait()
    assert not alive(child.pid)


def test_a_heartbeat_tag_and_its_interval_are_read_as_numbers_or_not_at_all(monkeypatch):
    """process.beating and heartbeat_interval read through fmt.number: a tag that is not two numbers is no
    heartbeat (None), not an error; an interval that is no number is the default, one too small 0.05 s."""
    from sweeper.base import process

    assert process.beating("100.0 30", 150.0) is True
    assert process.beating("100.0 30", 100.0 + 3 * 30 + 2.5) is False
    for tag in (None, "", "100.0", "100.0 30 1", "soon 30", "100.0 often"):
        assert process.beating(tag, 150.0) is None, tag
    for value, interval in (("2.5", 2.5), ("0", 0.05), ("often", 30.0)):
        monkeypatch.setenv("SWEEPER_HEARTBEAT_S", value)
        assert process.heartbeat_interval() == interval, value


def test_the_machines_memory_and_cpus_or_the_fallbacks_where_the_system_does_not_say(monkeypatch):
    """process.physical_memory and usable_cpus: the one reading of each that memory_limit, the batched
    launcher's budget (groups.default_budget), cores.cores and backend's host threads share."""
    from sweeper.base import process
    from sweeper.sweep import cores, groups

    machine = process.physical_memory()
    assert machine is not None and machine > 1 << 28  # bytes, not pages
    assert groups.default_budget() == machine // 4 and process.memory_limit()[0] <= machine
    assert cores.cores() == process.usable_cpus() == len(os.sched_getaffinity(0))

    def unsaid(name):
        raise ValueError(f"unrecognized configuration name {name}")

    monkeypatch.setattr(os, "sysconf", unsaid)
    monkeypatch.delattr(os, "sched_getaffinity")
    assert process.physical_memory() is None and groups.default_budget() == 2 << 30
    assert (process.memory_limit() or (0, ""))[1] != "this machine's memory"
    assert process.usable_cpus() == (os.cpu_count() or 1)
