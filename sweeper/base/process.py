"""Processes on this host: whether one still runs; an exclusive lock between them; how one
ended. Imports nothing of ours but the base layer."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from sweeper.base import state
from sweeper.base.fmt import number
from sweeper.base.tags import PID
from sweeper.base.tested import optional


__all__ = [
    "HEARTBEAT",
    "MISSED_BEATS",
    "PID_START",
    "SLACK_S",
    "alive",
    "beat",
    "beating",
    "ended",
    "exclusive",
    "exit_with_parent",
    "heartbeat_interval",
    "hold",
    "holds",
    "identity",
    "lock_holder",
    "memory_limit",
    "oom_kills",
    "physical_memory",
    "release",
    "release_all",
    "sent",
    "start_mark",
    "stat_fields",
    "trim_heap",
    "usable_cpus",
]


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (one of another user's counts): not one that has
    ended and waits, a zombie, only for its parent to read its exit status (a sweep killed under a
    parent that has not waited for it yet holds nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    fields = stat_fields(pid)
    return fields is None or fields[0] != "Z"


def _read(path: str) -> str:
    """A file's text (``/proc``, ``/sys``: the kernel's); "" where it cannot be read (the
    process gone, no such file, no ``/proc``: macOS). The one read of this module that
    may fail: its callers parse what they get."""
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command's name (proc(5)'s third on: the
    state, the parent's pid, ...); None where it cannot be read (the process gone, no ``/proc``:
    macOS)."""
    _, paren, fields = _read(f"/proc/{pid}/stat").rpartition(")")
    return fields.split() if paren else None


def sent(conn: Any, message: Any) -> bool:
    """Whether ``message`` went down ``conn`` (a :class:`multiprocessing.connection.Connection`)
    to the process at its other end: False where that process is gone (a broken pipe) or this
    end is closed already (both OSError); the caller finds out so, or does not need to."""
    try:
        conn.send(message)
        return True
    except OSError:
        return False


def _stat(pid: int) -> tuple[float, int] | None:
    """The boot time (unix seconds, as ``/proc/stat`` says it) and process ``pid``'s start in clock
    ticks after it; None where ``/proc`` cannot be read (another system, the process gone)."""
    fields = stat_fields(pid)
    boot = next(
        (line[6:].strip() for line in _read("/proc/stat").splitlines() if line[:6] == "btime "),
        "",
    )
    if fields is None or len(fields) < 20 or not boot.isdigit() or not fields[19].isdigit():
        return None
    return float(boot), int(fields[19])


def started_at(pid: int) -> float | None:
    """When process ``pid`` started (unix time, to the clock tick; the boot time is whole seconds),
    from ``/proc``; None where that cannot be read (another system, the process gone)."""
    found = _stat(pid)
    return None if found is None else found[0] + found[1] / os.sysconf("SC_CLK_TCK")


# The tag beside a run's ``sweeper.pid`` that tells its process from a later one the
# system gave the same pid: the process's start as /proc gives it (:func:`start_mark`),
# compared exactly. (Bookkeeping: sweeper.base.tags.BOOK.)
PID_START = "sweeper.pid_start"


def start_mark(pid: int | None = None) -> str | None:
    """What tells process ``pid`` (this one by default) from any later process given its pid:
    its start as ``/proc`` gives it, ``<boot time>+<clock ticks after boot>`` (two integers,
    so two reads of one process give the same text); None where that cannot be read."""
    found = _stat(os.getpid() if pid is None else pid)
    return None if found is None else f"{found[0]:.0f}+{found[1]}"


def identity() -> dict[str, str]:
    """This process's tags for a run it starts: ``sweeper.pid``, and
    ``sweeper.pid_start`` where ``/proc`` gives it."""

    mark = start_mark()
    return {PID: str(os.getpid()), **({PID_START: mark} if mark else {})}


def holds(pid: int, since: float, mark: str | None = None) -> bool:
    """Whether process ``pid`` runs on this host and is the one that started a run at
    ``since`` (unix time), not a later process the system gave its pid: with ``mark``
    (the run's ``pid_start`` tag, :func:`start_mark`), when that process's start is
    exactly the one recorded; without one (a run recorded before the tag existed), when
    it started no later than a second after ``since`` (the boot time /proc gives is
    whole seconds). Where the start cannot be read, whether the pid exists."""
    if not alive(pid):
        return False
    if mark is not None and (now := start_mark(pid)) is not None:
        return now == mark
    start = started_at(pid)
    return start is None or start <= since + 1.0


@contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """An exclusive inter-process lock on ``path`` (``flock``; no lock where fcntl
    is missing: Windows)."""
    fcntl = optional("fcntl")  # lazy: saves ~1.0 ms at this module's import (measured)
    if fcntl is None:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def lock_holder(path: Path) -> str | None:
    """Who holds the lock of :func:`hold` on ``path`` now (its ``pid@host``), or None:
    nobody does, or this process (the lock is only tested, never kept)."""
    fcntl = optional("fcntl")  # lazy: saves ~1.0 ms at this module's import (measured)
    if fcntl is None:
        return None
    if str(path.absolute()) in state.process().locks:
        return None
    try:
        with open(path) as f:  # no file: nobody
            if not _locked(fcntl, f, fcntl.LOCK_SH | fcntl.LOCK_NB):
                return f.read().strip() or "another process"
    except OSError:
        pass
    return None  # taken and let go: the close releases it


def _locked(fcntl: Any, f: Any, flags: int) -> bool:
    """Whether ``flock(f, flags)`` took the lock; False where another process holds it
    (``LOCK_NB``: OSError)."""
    try:
        fcntl.flock(f, flags)
    except OSError:
        return False
    return True


def hold(path: Path) -> str | None:
    """Take an exclusive lock on ``path`` for the rest of this process (released by the
    OS when it ends, SIGKILL included: ``flock``); None when taken (or already held
    here), else what the file says of its holder (its ``pid@host``), which holds it now.
    No lock where fcntl is missing (Windows)."""
    fcntl = optional("fcntl")  # lazy: saves ~1.0 ms at this module's import (measured)
    if fcntl is None:
        return None
    key = str(path.absolute())
    held = state.process().locks
    if key in held:
        return None
    f = open(path, "a+")
    if not _locked(fcntl, f, fcntl.LOCK_EX | fcntl.LOCK_NB):
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        return holder
    # lazy: saves ~4.9 ms at this module's import (measured)
    import socket

    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}@{socket.gethostname()}\n")
    f.flush()
    held[key] = f
    return None


def release(path: Path) -> None:
    """Let go of the lock :func:`hold` took on ``path`` (a refused sweep, before its
    folder goes)."""
    f = state.process().locks.pop(str(path.absolute()), None)
    if f is not None:
        f.close()  # type: ignore[attr-defined]


def release_all() -> None:
    """Let go of every lock :func:`hold` took in this process (the Python API, as each
    sweep ends)."""
    for key in list(state.process().locks):
        release(Path(key))


# A running run's heartbeat: the tag ``sweeper.heartbeat`` = "<unix time> <interval s>" (a
# bookkeeping tag: sweeper.base.tags.BOOK), refreshed every interval while its job trains
# (sweeper.tracking.run). It says a run is alive on any host; a pid says so only on its own.
HEARTBEAT = "sweeper.heartbeat"
# a run whose heartbeat is older than this many intervals (plus SLACK_S) has lost its job
MISSED_BEATS = 3
SLACK_S = 2.0


def heartbeat_interval() -> float:
    """Seconds between two beats: ``SWEEPER_HEARTBEAT_S`` (default 30)."""
    value = number(os.environ.get("SWEEPER_HEARTBEAT_S", "30"))
    return 30.0 if value is None else max(0.05, value)


def beat(now: float, interval: float) -> str:
    return f"{now:.3f} {interval:g}"


def beating(value: str | None, now: float) -> bool | None:
    """Whether a heartbeat tag's value is recent (None without a readable one)."""
    read = [number(x) for x in (value or "").split()]
    if len(read) != 2 or None in read:
        return None
    t, interval = read
    return now - t <= MISSED_BEATS * interval + SLACK_S


def trim_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``): what a
    batched group freed (its arrays, its runs' records) otherwise stays in the
    allocator's arenas and in the process's RSS — ~100 MB a group of 1,024 on this
    machine. Nothing elsewhere (another libc, another system)."""
    # lazy: saves ~3.4 ms at this module's import (measured)
    import ctypes

    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # musl or another libc: no malloc_trim
        pass


def exit_with_parent(interval: float = 0.5, helper: bool = False) -> None:
    """In a worker process (sweeper's CPU workers, joblib's loky, which Hydra's joblib
    launcher uses) or a helper process of the sweep (``helper``: the painter): end this
    process, quietly, once its parent is gone. A ``kill -9`` of the sweep otherwise left
    its workers training on, holding the caller's stdout open (a script reading the
    sweep's output never saw it end), then printing BrokenPipeError tracebacks. A daemon
    thread; once a process; nothing in the launching process itself."""
    # lazy: saves ~8.8 ms at this module's import (measured)
    import multiprocessing

    worker = (
        multiprocessing.parent_process() is not None
        or "Loky" in multiprocessing.current_process().name
    )
    if state.process().watched is not None or not (worker or helper):
        return
    parent = os.getppid()
    state.process().watched = parent

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(1)  # the parent went: nobody records what this worker would finish

    threading.Thread(target=watch, name="sweeper-parent-watch", daemon=True).start()


def oom_kills() -> int | None:
    """How many processes the kernel's out-of-memory killer has ended on this host since it
    started (``oom_kill`` of ``/proc/vmstat``, cgroup limits included; ``SWEEPER_OOM_COUNTER``:
    a file holding that count instead, for tests); None where it cannot be read."""
    text = _read(os.environ.get("SWEEPER_OOM_COUNTER") or "/proc/vmstat")
    if not text:
        return None
    for line in text.splitlines():
        key, _, value = line.rpartition(" ")
        if key in ("oom_kill", "") and value.strip().isdigit():
            return int(value)
    return None


def usable_cpus() -> int:
    """The CPUs this process may use (its affinity; every CPU where that cannot be read: not
    Linux)."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    return len(getaffinity(0)) if getaffinity is not None else os.cpu_count() or 1


def physical_memory() -> int | None:
    """This machine's memory in bytes; None where the system does not say (no ``sysconf``
    or no such name: Windows, some BSDs)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def memory_limit() -> tuple[int, str] | None:
    """The memory this process may use, and what bounds it: the machine's physical
    memory, or less where a cgroup (a container's limit) or ``ulimit -v`` (RLIMIT_AS)
    sets less; None where none can be read."""
    found: list[tuple[int, str]] = []
    if machine := physical_memory():
        found.append((machine, "this machine's memory"))
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        value = _read(path).strip()
        if value.isdigit() and int(value) < 1 << 60:
            found.append((int(value), "this container's memory limit (cgroup)"))
    # imported on first use (~1.1 ms at this module's import, measured); no ``resource``:
    # Windows. (getrlimit of a resource the module defines raises nothing: its ValueError
    # is an unknown resource's, its OSError a failing system call's, which Linux's never does)
    resource = optional("resource")
    soft = resource.getrlimit(resource.RLIMIT_AS)[0] if resource is not None else None
    if soft is not None and soft != resource.RLIM_INFINITY:
        found.append((soft, "this process's address-space limit (ulimit -v)"))
    return min(found) if found else None


def ended(code: int | None) -> str:
    """How a process ended, in words: ``exit code 3``, or the signal that killed it
    (``killed by SIGKILL``); a bus error (SIGBUS) in a process that writes a store is
    SQLite's write to its ``-shm`` that the file system could not back."""

    if code is None or code >= 0:
        return f"exit code {code}"
    bus = (
        ": the store's -shm file could not be written (a full disk, or the file cut short under it)"
    )
    return f"killed by {signal.Signals(-code).name}" + (bus if -code == signal.SIGBUS else "")
