"""The user's code, run so that it cannot end sweeper's process.

A model's import, constructor, gradient check and training, a function trainer and a loss
run through :func:`call_user`: an attempt to end the process becomes :class:`UserCodeError`,
the run FAILED with one line that names the user's file and line (:func:`user_line`), the
whole traceback kept for the run's error file (:func:`user_traceback`).
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, Callable

from sweeper.base import state, stop
from sweeper.base.output import first_line

# --- the user's code, run so that it cannot end the
# process ---------------------------------------------------
#
# Besides raising an error, Python code can end its process three ways, and :func:`call_user`
# catches each: ``sys.exit(n)`` / ``raise SystemExit(n)``; ``os._exit(n)`` (replaced, for the
# thread inside call_user only, by a function that raises instead: a module imported inside it
# that binds ``from os import _exit`` binds the replacement; ``posix._exit`` or an exit from C
# is not seen, and in a CPU worker process ends the worker, which the launcher records as
# lost); ``raise KeyboardInterrupt`` (the user's Ctrl-C reaches sweeper's signal handler
# first, which sets :data:`sweeper.base.stop.STOP` before the exception is raised: one without
# it is the code's own). Each becomes :class:`UserCodeError` (an Exception: the run is FAILED,
# the sweep goes on), raised outside any ``except`` clause so that no KeyboardInterrupt hangs
# in its context (:func:`sweeper.base.stop.masked` would take it for a signal).

__all__ = [
    "UserCodeError",
    "attempt",
    "call_user",
    "guarded",
    "raised",
    "user_line",
    "user_traceback",
]

# sweeper's own code and the interpreter's: a frame elsewhere is the user's
_HERE = Path(__file__).resolve().parent  # models/
_OURS = tuple(
    str(p) + os.sep
    for p in (
        _HERE,
        _HERE.parent / "data",
        Path(stop.__file__).resolve().parents[1],
        Path(traceback.__file__).resolve().parent,
    )
)
_LIBRARIES = tuple(
    str(Path(p).resolve()) + os.sep for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}
)


class UserCodeError(Exception):
    """User code tried to end the process (``sys.exit``, ``os._exit``) or raised
    ``KeyboardInterrupt`` itself.

    ``kind``: what it did (``SystemExit``, ``os._exit``,
    ``KeyboardInterrupt``); ``where``: the user's ``file:line in function`` (None when
    no frame of the user's was found); ``detail``: the whole traceback."""

    def __init__(self, kind: str, message: str, where: str | None, detail: str) -> None:
        super().__init__(message)
        self.kind, self.where, self.detail = kind, where, detail

    def __reduce__(self) -> Any:  # sent back from a worker process whole
        return UserCodeError, (self.kind, str(self), self.where, self.detail)


class _Exited(SystemExit):
    """``os._exit(code)`` called inside :func:`call_user`."""


_REAL_EXIT = os._exit
_PATCH = threading.Lock()


def _exit(code: int) -> None:
    p = state.process()  # its user_depth: thread ident -> how deep it is in call_user()
    if os.getpid() == p.user_pid and p.user_depth.get(threading.get_ident()):
        raise _Exited(code)
    _REAL_EXIT(code)  # another thread (a watcher's own os._exit), or a child forked meanwhile


def _enter() -> None:
    with _PATCH:
        inside = state.process().user_depth
        if not inside:
            state.process().user_pid = os.getpid()
            os._exit = _exit
        inside[threading.get_ident()] += 1


def _leave() -> None:
    with _PATCH:
        me = threading.get_ident()
        inside = state.process().user_depth
        inside[me] -= 1
        if inside[me] <= 0:
            del inside[me]
        if not inside:
            os._exit = _REAL_EXIT


def _a_signal() -> bool:
    """Whether a KeyboardInterrupt here may be the user's Ctrl-C: sweeper's handler said
    so (STOP), or Python's own handler is in place (a process that did not install
    sweeper's: it cannot be told apart, so it is one)."""
    return stop.STOP.is_set() or signal.getsignal(signal.SIGINT) is signal.default_int_handler


def call_user(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, the process's ends it would take turned into
    :class:`UserCodeError`."""
    _enter()
    err: UserCodeError | None = None
    try:
        return fn(*args, **kwargs)
    except _Exited as e:
        err = _error("os._exit", f"os._exit({e.code!r}) called", e)
    except SystemExit as e:
        if isinstance(e, stop.Refused):  # sweeper's own one-line refusal
            raise
        err = _error("SystemExit", f"sys.exit({e.code!r}) called", e)
    except KeyboardInterrupt as e:
        if _a_signal():
            raise
        err = _error(
            "KeyboardInterrupt", "KeyboardInterrupt raised by the code itself, not a Ctrl-C", e
        )
    finally:
        _leave()
    raise err


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` always run through :func:`call_user` (a decorator; the function keeps
    its name: it pickles by reference)."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        return call_user(fn, *args, **kwargs)

    return run


def _error(kind: str, what: str, e: BaseException) -> UserCodeError:
    at = user_frame(e)
    return UserCodeError(
        kind,
        f"{what}{f' ({at})' if at else ''}: user code must not end the process (raise an "
        "exception to fail a run)",
        at,
        user_traceback(e),
    )


def user_frame(e: BaseException) -> str | None:
    """The user's ``file:line in function`` where ``e`` was raised: the innermost frame
    outside sweeper and the interpreter (its standard library and installed packages);
    None when there is none."""
    if isinstance(e, UserCodeError):
        return e.where
    frames = traceback.extract_tb(e.__traceback__)
    for f in reversed(frames):
        path = (
            str(Path(f.filename).resolve())
            if f.filename and not f.filename.startswith("<")
            else f.filename
        )
        if path and not path.startswith(_OURS + _LIBRARIES):
            shown = os.path.relpath(path) if path.startswith(os.getcwd() + os.sep) else path
            return f"{shown}:{f.lineno} in {f.name}"
    return None


def user_line(e: BaseException) -> str:
    """What a failed run says: the error's type, its message's first line, and the
    user's file:line."""
    if isinstance(e, UserCodeError):  # what it called is its first words: sys.exit(3) called (...)
        return str(e)
    at = user_frame(e)
    return first_line(e) + (f" ({at})" if at else "")


def raised(what: str, e: BaseException) -> str:
    """One line for what the user's code raised: ``<what> raised <Type>: <its first line>``
    (``<what>: sys.exit(3) called (...)`` for a :class:`UserCodeError`). The model's import, its
    constructor, the gradient check's steps and the stacked proof all say it so."""
    if isinstance(e, UserCodeError):
        return f"{what}: {e}"
    return f"{what} raised {first_line(e)}"


def attempt(
    error: type[Exception], what: str, fn: Callable[..., Any], /, *a: Any, **kw: Any
) -> Any:
    """``fn(*a, **kw)`` of the user's code; its error is ``error`` with its one line
    (:func:`raised`), the user's traceback left out."""
    try:
        return fn(*a, **kw)
    except Exception as e:  # noqa: BLE001  (the user's code: its error is the caller's one line)
        raise error(raised(what, e)) from None


def user_traceback(e: BaseException) -> str:
    """The whole traceback of ``e``, as Python prints it (for the run's error file)."""
    if isinstance(e, UserCodeError):
        return e.detail
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))
