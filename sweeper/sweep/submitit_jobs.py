"""submitit_local's jobs stopped with the sweep that started them.

submitit's local executor runs each job under a controller process
(``python -m submitit.local._local``) that is meant to outlive the Python session that started
it. Two things followed (hostile round four): a terminal's Ctrl-C reached the controllers too,
and each printed a KeyboardInterrupt traceback after the sweep's own line; and a SIGTERM (or
a Ctrl-C sent to the launching process alone) left the jobs training on for minutes after the
sweep had exited 143, their runs RUNNING while the sweep's line counted "0 killed".

So the controllers of a sweep start in a session of their own (:func:`own_session`: a
terminal's Ctrl-C reaches the launching process only), and the launching process, when it
is interrupted, hands Ctrl-C to each job itself (:func:`stop`): the job records its run
KILLED, as under a terminal's Ctrl-C, and its controller then ends without a word. Linux
and macOS: the jobs are found as the controllers' children (``/proc``, else ``ps``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import types

from sweeper.base.process import alive, stat_fields

__all__ = ["own_session", "stop"]


def own_session() -> None:
    """From now on, submitit_local's job controllers start in a new
    session (``start_new_session``)."""
    # lazy: saves ~50 ms at this module's import (measured)
    from submitit.local import local

    if getattr(local.subprocess, "sweeper_session", False):
        return
    # submitit.local.local's own view of subprocess: only its Popen differs
    shim = types.ModuleType("subprocess")
    shim.__dict__.update(subprocess.__dict__)

    def popen(*args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.setdefault("start_new_session", True)
        return subprocess.Popen(*args, **kwargs)

    shim.Popen = popen  # type: ignore[attr-defined]
    shim.sweeper_session = True  # type: ignore[attr-defined]
    local.subprocess = shim


def stop(wait: float = 10.0) -> int:
    """Ctrl-C to every job of the submitit_local controllers this process started (its
    children) that still run, then up to ``wait`` seconds for them to record their runs and
    end, SIGKILL for any left (and their controllers); returns how many jobs were stopped."""
    if "submitit.local.local" not in sys.modules:
        return 0
    controllers = [
        pid for pid in _children(os.getpid()) if "submitit.local._local" in _command(pid)
    ]
    jobs = [pid for c in controllers for pid in _children(c)]
    for pid in jobs:
        _signal(pid, signal.SIGINT)
    deadline = time.monotonic() + wait
    while any(alive(pid) for pid in jobs) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in jobs:
        if alive(pid):
            _signal(pid, signal.SIGKILL)
    # each controller ends once its job has (submitit polls it 24 times a second)
    deadline = time.monotonic() + 2.0
    while any(alive(pid) for pid in controllers) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in controllers:
        if alive(pid):
            _signal(pid, signal.SIGKILL)
    return len(jobs)


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return subprocess.run(
            ["ps", "-p", str(pid), "-o", "command="], capture_output=True, text=True
        ).stdout


def _children(pid: int) -> list[int]:
    """The pids of process ``pid``'s children: from ``/proc``, else ``ps`` (macOS)."""
    if stat_fields(os.getpid()) is None:  # no /proc
        out = subprocess.run(
            ["ps", "-A", "-o", "pid=,ppid="], capture_output=True, text=True
        ).stdout
        return [
            int(a)
            for a, b in (line.split() for line in out.splitlines() if line.strip())
            if int(b) == pid
        ]
    stats = {
        int(entry): stat_fields(int(entry)) for entry in os.listdir("/proc") if entry.isdigit()
    }
    return [p for p, fields in stats.items() if fields is not None and fields[1] == str(pid)]


def _signal(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False
