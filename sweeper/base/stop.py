"""Stopping when asked: Ctrl-C (SIGINT), SIGTERM (``timeout``, ``docker stop``,
Kubernetes, SLURM) and SIGHUP (the terminal closed, an ssh session dropped).

Python delivers a signal to the main thread only, as a KeyboardInterrupt; threads that
train (a batched group's parts, a large epoch's column blocks) would run on until their
work ends, and a thread pool's exit waits for them. :func:`install` makes both signals set
one process-wide flag, :data:`STOP`, before the main thread gets its exception
(:class:`Terminated` for SIGTERM, :class:`HungUp` for SIGHUP: KeyboardInterrupts, so
every Ctrl-C path handles them); training loops hear it once an epoch
(:meth:`sweeper.base.backend.Backend.epoch`, which asks :func:`check`: one attribute read)
and end with :class:`Stopped`. A signal after the first (Ctrl-C pressed again and again)
raises nothing: the first one's bookkeeping (recording what finished, ending the runs still
open, stopping workers) is never cut short.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, NoReturn, TypeVar

from sweeper.base import state
from sweeper.base.output import first_line, quietly

__all__ = [
    "INTERRUPTED",
    "Refused",
    "STOP",
    "Stopped",
    "Terminated",
    "check",
    "deferred",
    "exit_code",
    "exiting",
    "extra",
    "ignore",
    "ignoring",
    "install",
    "masked",
    "raise_signalled",
    "reason",
    "refuse",
    "reset",
    "restore",
    "seen",
    "shielded",
]

STOP = threading.Event()

INTERRUPTED = 130  # the shell's code for a process ended by SIGINT (128 + 2)
TERMINATED = 143  # ... and by SIGTERM (128 + 15)
HUNG_UP = 129  # ... and by SIGHUP (128 + 1)
# SIGHUP: not Windows
SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


class Terminated(KeyboardInterrupt):
    """SIGTERM reached the main thread: handled as Ctrl-C is, with exit code 143."""


class HungUp(Terminated):
    """SIGHUP reached the main thread (the terminal went away): handled as SIGTERM is,
    with exit code 129."""


class Stopped(KeyboardInterrupt):
    """A training thread saw :data:`STOP` and ended its work early."""


def _exception(signum: int) -> KeyboardInterrupt:
    if signum == signal.SIGTERM:
        return Terminated()
    if signum == getattr(signal, "SIGHUP", None):
        return HungUp()
    return KeyboardInterrupt()


def _handler(signum: int, frame: Any) -> None:
    # the signal sent again: this time it raises where it lands (or at the end of a
    # deferred section)
    p = state.process()
    if p.again:
        if p.unraisable:  # it landed inside the hook that sent it (a loaded machine): later
            _resend_later(signum)
            return
        p.again.clear()
        if p.deferring:
            p.deferred.append(signum)
            return
        raise _exception(signum)
    again = STOP.is_set()
    p.signals.append(signum)
    STOP.set()
    if p.deferring:
        p.deferred.append(signum)
        return
    if again:  # the first signal's bookkeeping runs: it is not cut short (said once)
        if p.signals.count(signum) == 2:  # (a terminal that is gone, SIGHUP: not said)
            quietly(
                os.write,
                2,
                b"sweeper: still stopping: recording what finished (another signal is not "
                b"needed; "
                b"kill -9 would leave runs RUNNING)\n",
            )
        return
    raise _exception(signum)


@contextmanager
def deferred() -> Iterator[None]:
    """A section that Ctrl-C or SIGTERM must not cut in two (a run's result.json says FINISHED
    and is handed to the writer process: both, or neither; a store transaction; a model's
    files): a signal that comes inside sets :data:`STOP` at once (training threads end) and is
    raised as its exception when the section ends, also in place of an error the section
    raised meanwhile. Signals reach the main thread only: elsewhere this is a no-op."""
    if not _main_thread():
        yield
        return
    p = state.process()
    p.deferring += 1
    try:
        yield
    finally:
        p.deferring -= 1
        if not p.deferring and p.deferred:
            signum = p.deferred[0]
            p.deferred.clear()
            raise _exception(signum)  # noqa: B012  (the interruption is what the caller hears of)


def catch_swallowed() -> None:
    """``sys.unraisablehook`` wrapped once a process: a KeyboardInterrupt raised where Python cannot
    raise it (inside a ``__del__`` or a garbage collector's callback: SQLAlchemy has some) was
    printed as 'Exception ignored' and lost, and the command ran on to its end (a sweep to exit 0, 1
    of 14 hostile tries; promote, ~8 of 30). The signal is sent again once the callback is over: to
    our handler (:func:`install`), which then raises it, or to Python's own (a read command)."""
    hook = sys.unraisablehook
    if getattr(hook, "sweeper", False):
        return

    def unraisable(u: Any) -> None:
        if not isinstance(u.exc_value, KeyboardInterrupt):
            hook(u)
            return
        p = state.process()
        if p.again:  # sent again already
            return
        p.unraisable = True  # a signal sent again that lands before this returns: again
        try:
            signum = p.signals[-1] if p.signals else signal.SIGINT
            if p.signals:
                p.again.append(signum)
            _resend_later(signum)
        finally:
            p.unraisable = False

    unraisable.sweeper = True  # type: ignore[attr-defined]
    sys.unraisablehook = unraisable


def _resend_later(signum: int) -> None:
    """Send ``signum`` to this process again in 20 ms, from a thread of its own, started once a
    process before anything is asked of it: the caller (the hook above, in the main thread)
    never waits for a thread that may already be sending (a ``threading.Timer`` started in the
    hook: on a loaded machine its start outwaited its 20 ms, the signal landed inside the hook,
    where Python cannot raise it either, and the sweep ran on to exit 0, 1 in 40 tries)."""
    p = state.process()
    if p.resender is None or not p.resender[0].is_alive():  # none yet, or a fork's parent's
        asked: queue.SimpleQueue[int] = queue.SimpleQueue()
        thread = threading.Thread(
            target=_resender, args=(asked,), name="sweeper-signal-again", daemon=True
        )
        thread.start()
        p.resender = (thread, asked)
    p.resender[1].put(signum)


def _resender(asked: queue.SimpleQueue[int]) -> None:
    while True:
        signum = asked.get()
        time.sleep(0.02)
        os.kill(os.getpid(), signum)


@contextmanager
def shielded() -> Iterator[None]:
    """Start helper processes inside (the CPU workers): they begin with Ctrl-C, SIGTERM and SIGHUP
    blocked (a child inherits its parent's signal mask), as their work is the launching process's to
    stop. A terminal's Ctrl-C in their first second otherwise reached them while Python started,
    before they could ignore it: 21-46 lines of 'Fatal Python error: init_import_site ...
    KeyboardInterrupt'. A signal that comes meanwhile reaches this process when the section ends."""
    blocked = getattr(signal, "pthread_sigmask", None)
    before = blocked(signal.SIG_BLOCK, set(SIGNALS)) if blocked else None
    try:
        yield
    finally:
        if blocked:
            blocked(signal.SIG_SETMASK, before)


def install() -> dict[int, Any]:
    """Route SIGINT, SIGTERM and SIGHUP through :data:`STOP` (main thread only; a no-op
    elsewhere). A signal that was ignored when the process started (a background job of
    a shell) stays ignored. Returns the handlers replaced, for :func:`restore` (the
    Python API gives a notebook's kernel its own back)."""
    if not _main_thread():
        return {}
    before = {}
    for sig in SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            before[sig] = signal.signal(sig, _handler)
    catch_swallowed()
    return before


def _main_thread() -> bool:
    """Whether this is the main thread: the only one whose signal handlers can be set
    (elsewhere ``signal.signal`` raises ValueError)."""
    return threading.current_thread() is threading.main_thread()


def exiting(code: int) -> None:
    """A command's work is done: a Ctrl-C or SIGTERM from here on ends the process at once, in
    one line, with the command's own ``code`` (before: raised inside an atexit handler, it
    printed 'Exception ignored in atexit callback' with a traceback, and the command exited 0
    all the same). Main thread only; a no-op elsewhere."""

    def done(signum: int, frame: Any) -> None:
        try:
            os.write(2, b"sweeper: interrupted as it exited: its work was done\n")
        finally:
            os._exit(code)

    for sig in (signal.SIGINT, signal.SIGTERM) if _main_thread() else ():
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, done)


def restore(before: dict[int, Any]) -> None:
    """Put back the handlers :func:`install` (or :func:`ignore`) replaced (main thread only;
    a no-op elsewhere)."""
    for sig, handler in before.items() if _main_thread() else ():
        signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def reset() -> None:
    """Forget an earlier stop (the Python API, called again in the same process)."""
    STOP.clear()
    p = state.process()
    p.signals.clear()
    p.deferred.clear()
    p.again.clear()


def seen() -> list[int]:
    """The signals this process received, in order (the first one decides its exit code)."""
    return state.process().signals


class Refused(SystemExit):
    """Bad input found once Hydra runs our code (a callback, the launcher, a sweeper): the
    line is printed and the command exits ``code``. A SystemExit, not an Exception: Hydra
    turns a callback's exception into a warning and goes on. The Python API
    (:mod:`sweeper.api`) raises ``ValueError(message)`` instead (RuntimeError for code 1)."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(code)
        self.message = message


def refuse(message: str, code: int = 2) -> NoReturn:
    """Print ``sweeper: error: MESSAGE`` on stderr and end with ``code`` (:class:`Refused`)."""
    print(f"sweeper: error: {message}", file=sys.stderr)
    raise Refused(message, code)


def ignore() -> None:
    """Ignore the stopping signals from now on: the bookkeeping after an interruption
    must not be cut short (main thread only; a no-op elsewhere)."""
    for sig in SIGNALS if _main_thread() else ():
        signal.signal(sig, signal.SIG_IGN)


@contextmanager
def ignoring() -> Iterator[None]:
    """:func:`ignore` for a section (a command's bookkeeping after its interruption),
    the handlers put back after it: a command called in-process (a test, a notebook)
    leaves its caller's signals as they were. Ignored for good, they were inherited by
    every process the caller started later (its SIGTERM then did nothing)."""
    before = {sig: signal.getsignal(sig) for sig in SIGNALS}
    ignore()
    try:
        yield
    finally:
        restore(before)


def check(halt: Any = None) -> None:
    """Raise :class:`Stopped` once a stop was asked for: Ctrl-C or SIGTERM set :data:`STOP`, or
    the caller's ``halt`` (an Event) is set. A training loop asks once an epoch, through
    :meth:`sweeper.base.backend.Backend.epoch`."""
    if STOP.is_set() or (halt is not None and halt.is_set()):
        raise Stopped()


def masked(e: BaseException | None = None) -> KeyboardInterrupt | None:
    """The exception of the signal received, for a caller whose ``except Exception`` caught
    something else that a signal caused (a library's ``finally`` that failed as the
    KeyboardInterrupt went through it, raising its own error instead: OmegaConf's 'cannot
    access local variable'); None when no signal came. With ``e``, also the KeyboardInterrupt
    in its chain of causes (a read command: Python's own handler, nothing recorded here)."""
    if (signals := seen()) and STOP.is_set():
        return _exception(signals[0])
    visited: set[int] = set()
    while e is not None and id(e) not in visited:
        if isinstance(e, KeyboardInterrupt):
            return e
        visited.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def raise_signalled(e: BaseException) -> None:
    """Raise the signal's KeyboardInterrupt (:func:`masked`) from ``e`` when ``e``, caught by an
    ``except Exception``, was a signal's doing; nothing otherwise (``e`` is the caller's)."""
    if (signalled := masked(e)) is not None:
        raise signalled from e


T = TypeVar("T")


def extra(what: str, out: Any, call: Callable[..., T], *args: Any) -> T | None:
    """An extra of a sweep's end (its baselines, the refit of its best run, its advice):
    ``call(*args)``, or None when it raised: its error is one line on ``out``
    (``sweeper: warning: no <what>: <type>: <first line>``) and the sweep still ends and its
    parent closes. An error a signal caused is the interruption, raised (:func:`masked`)."""
    try:
        return call(*args)
    except Exception as e:  # noqa: BLE001  (the one place an extra's fault is decided)
        raise_signalled(e)
        print(f"sweeper: warning: no {what}: {first_line(e)}", file=out)
        return None


def reason() -> str:
    """Why a run or a sweep was interrupted, for its ``failure_reason``: the first
    signal (Ctrl-C by default)."""
    first = seen()[:1]
    if first == [signal.SIGTERM]:
        return "interrupted (SIGTERM)"
    if first == [getattr(signal, "SIGHUP", None)]:
        return "interrupted (SIGHUP: the terminal closed)"
    return "interrupted (Ctrl-C)"


def exit_code(e: BaseException) -> int:
    """130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP."""
    if isinstance(e, HungUp):
        return HUNG_UP
    return TERMINATED if isinstance(e, Terminated) else INTERRUPTED
