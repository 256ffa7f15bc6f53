"""What sweeper writes, made safe to read: a standard output or a log file that cannot be written, a
password in a URI, a spreadsheet formula in a CSV cell, a line break in a logged value. Imports only
:mod:`sweeper.base.state`.

A standard output that cannot be written — its reader closed it (``| head``, a killed
``tee``, a dropped ssh pipe) or it is a file on a full disk (``> /dev/full``) — is said
once on stderr and its further lines are dropped (the stream then writes into
``os.devnull``), instead of a ``BrokenPipeError`` traceback per line logged and a
command cut short where it printed: a sweep goes on and records every run in the store.

A URI's password (``http://alice:s3cr3t@host``, ``postgresql://bob:pw@host/db``) is
masked (:func:`masked`: ``http://alice:***@host``) in every line (the standard streams,
every log record), tag and file sweeper writes; the process that masked it keeps it to
connect again (:func:`unmasked`).

A log file that cannot be written (a full disk, a read-only folder): one line on stderr, once a
file, instead of Python's "--- Logging error ---" block per line (:func:`quiet_unwritable_files`);
any other logging error is Python's as before.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import Any, Callable

from sweeper.base import state

__all__ = [
    "csv_field",
    "drained",
    "first_line",
    "guard",
    "mask_files",
    "mask_log_records",
    "masked",
    "one_line",
    "quiet_unwritable_files",
    "quietly",
    "say",
    "spreadsheet_safe",
    "spreadsheet_value",
    "unmasked",
]

GOES_ON = "the command goes on"  # what the warning says comes next (a sweep: it records every run)


class _Masking:
    """A standard stream whose lines have every URI's password masked (:func:`masked`):
    an error line quotes the URI."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def write(self, text: str) -> int:
        self._stream.write(masked(text))
        return len(text)


class _Guarded(_Masking):
    """``sys.stdout``, masked, whose write or flush failing (``OSError``) points it at
    ``os.devnull``, said once."""

    def write(self, text: str) -> int:
        self._guarded(super().write, text)
        return len(text)

    def flush(self) -> None:
        self._guarded(self._stream.flush)

    def _guarded(self, call: Callable[..., Any], *args: Any) -> None:
        """``call(*args)``; its OSError points the stream at ``os.devnull``, said once."""
        try:
            call(*args)
        except OSError as e:
            self._broke(e)

    def _broke(self, e: OSError) -> None:
        p = state.process()
        if p.stdout_broken is None:
            p.stdout_broken = e.strerror or str(e)
            quietly(_to_devnull, self._stream)
            say(
                "sweeper: warning: the standard output cannot be written "
                f"({p.stdout_broken}): its lines are dropped "
                f"from here on; {GOES_ON}"
            )
        drained(self._stream)  # what was buffered goes to devnull now


def quietly(call: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """``call(*args, **kwargs)`` where a standard stream or a pipe may take nothing more: a
    terminal that is gone (SIGHUP), a pipe whose other end is gone (OSError; ValueError: the
    stream closed); what it would have written (or flushed, closing) is dropped. The one
    handler of sweeper's last-resort writes (:func:`say`, :func:`drained`, a broken stdout
    pointed at ``os.devnull``, a signal handler's line: :mod:`sweeper.base.stop`) and of
    closing a helper process's pipes (the painter's, the writer's)."""
    try:
        call(*args, **kwargs)
    except (OSError, ValueError):
        pass


def _to_devnull(stream: Any) -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, stream.fileno())
    os.close(null)


def say(line: str) -> None:
    """``line`` on the standard error, flushed, where it can still be written (see
    :func:`quietly`); else the line is dropped."""
    quietly(print, line, file=sys.stderr, flush=True)


def drained(*streams: Any) -> None:
    """Each stream flushed where it still can be (see :func:`quietly`)."""
    for stream in streams:
        quietly(stream.flush)


def guard(goes_on: str = GOES_ON) -> None:
    """From now on, the standard output that fails says so once and drops its lines
    (:class:`_Guarded`), and both standard streams mask a URI's password (:class:`_Masking`)."""
    global GOES_ON
    GOES_ON = goes_on or "the command ends with exit code 1 (its output is lost)"
    if not isinstance(sys.stdout, _Guarded) and sys.stdout is not None:
        sys.stdout = _Guarded(sys.stdout)
    if not isinstance(sys.stderr, _Masking) and sys.stderr is not None:
        sys.stderr = _Masking(sys.stderr)


# --- secrets: a URI's user info
# (RFC 3986: scheme://user:password@host) -----------------------------------------

MASK = "***"
# scheme://user:password@host, the password up to the last @ before the host (a raw @ in
# it stays hidden); a quote, a space or the path ends the address (a URI inside JSON,
# a shell-quoted argument, a sentence). Hydra's overrides of a sweep's job escape the
# colons (tracking.uri=http\://alice\:PW@host), and JSON its backslashes: read alike.
_USERINFO = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*\\*://[^\s:/?#@'\"\\]*)(?P<colon>\\*:)"
    r"(?P<password>[^\s/?#'\"]*)@(?P<host>[^\s/?#'\"@]*)"
)


def masked(text: str) -> str:
    """``text`` with the password of every URI in it replaced by
    ``***``: ``http://alice:***@127.0.0.1:5000`` (a user name without a password is left
    as it is). The password is kept in this process for :func:`unmasked`."""
    if "@" not in text or "://" not in text:
        return text

    def hide(m: re.Match) -> str:
        if m["password"] != MASK:
            state.process().passwords[(m["head"], m["host"])] = m["password"]
        return f"{m['head']}{m['colon']}{MASK}@{m['host']}"

    return _USERINFO.sub(hide, text)


def unmasked(uri: str) -> str:
    """A URI that :func:`masked` hid in this process, with its password again (a sweep's
    parents and jobs, read back from its sweep.json); one masked by another process
    (``upload`` of a sweep folder) without its user info, so that MLflow takes the
    credentials from ``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD``."""
    if MASK not in uri:
        return uri

    def back(m: re.Match) -> str:
        if m["password"] != MASK:
            return m[0]
        known = state.process().passwords.get((m["head"], m["host"]))
        if known is not None:
            return f"{m['head']}{m['colon']}{known}@{m['host']}"
        return f"{m['head'].partition('://')[0]}://{m['host']}"

    return _USERINFO.sub(back, uri)


def mask_files(paths: list[Any]) -> None:
    """Each of these text files (Hydra's ``.hydra/*.yaml`` of a job, its
    sweep's ``multirun.yaml``: the command line as typed) written again with its URIs'
    passwords masked, where it holds one; a file that is gone is skipped."""
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if (safe := masked(text)) != text:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(safe)
        except (OSError, UnicodeError):  # gone, unreadable: nothing of it is shown
            continue


def mask_log_records() -> None:
    """From now on in this process, every log record's message has its URIs' passwords
    masked (:func:`masked`), for every handler: the terminal, a job's log file, a
    worker's output (Hydra's own lines quote the overrides)."""
    make = logging.getLogRecordFactory()
    if getattr(make, "masks", False):
        return

    def record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        r = make(*args, **kwargs)
        try:
            text = r.getMessage()
        # a message that does not format: logging's own error says so when a handler emits it
        except Exception:
            return r
        if "@" in text and (safe := masked(text)) != text:
            r.msg, r.args = safe, None
        return r

    record.masks = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(record)


# --- files and lines a person reads: a CSV cell a spreadsheet would run, a value that
# would start a log line --------

# OWASP's CSV injection rule: a cell beginning with one of these is run as a formula by
# a spreadsheet
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# -3.2, +1e-3: a spreadsheet's number
_NUMBER = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*")


def spreadsheet_safe(value: Any) -> Any:
    """A CSV cell that no spreadsheet runs as a formula (OWASP): text beginning with ``=``,
    ``+``, ``-``, ``@``, tab or carriage return gets a leading ``'`` (so does text that is
    ``'`` before one of them: the rule stays reversible, :func:`spreadsheet_value`); a
    number, and text that reads as a plain number (``-3.2``), are left as they are."""
    if (
        not isinstance(value, str)
        or not value.lstrip("'").startswith(FORMULA_START)
        or _NUMBER.fullmatch(value)
    ):
        return value
    return "'" + value


def spreadsheet_value(text: Any) -> Any:
    """The value :func:`spreadsheet_safe` wrote as ``text`` (a CSV cell read back: the
    leaderboard of the Python API)."""
    if (
        isinstance(text, str)
        and text.startswith("'")
        and text[1:].lstrip("'").startswith(FORMULA_START)
    ):
        return text[1:]
    return text


def csv_field(text: str) -> str:
    """A text CSV field: spreadsheet-safe (:func:`spreadsheet_safe`), quoted when it
    holds a comma, quote or line break."""
    text = spreadsheet_safe(text)
    return '"' + text.replace('"', '""') + '"' if any(ch in text for ch in ',"\n\r') else text


def one_line(text: str) -> str:
    """``text`` with its line breaks written ``\\n`` and ``\\r``: a value from a user's
    file (a category, a column name) cannot start a line of its own in a log (a forged
    ``[...][sweeper][INFO]`` line)."""
    return text.replace("\r", "\\r").replace("\n", "\\n") if "\n" in text or "\r" in text else text


def first_line(e: BaseException) -> str:
    """The one line of an error, the one formatter of sweeper's messages: ``Type: its first
    line`` (``Type`` alone for an empty message); not SQLAlchemy's note that a query flushed
    ("(raised as a result of Query-invoked autoflush; ...)"), which comes before what failed."""
    text = [t for t in str(e).strip().splitlines() if not t.startswith("(raised as a result of ")]
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


_PYTHONS = logging.Handler.handleError


def _handle_error(self: logging.Handler, record: logging.LogRecord) -> None:
    e = sys.exc_info()[1]
    if not isinstance(e, OSError) or not isinstance(self, logging.FileHandler):
        _PYTHONS(self, record)
        return
    name = self.baseFilename
    said = state.process().logs_said
    if name not in said:
        said.add(name)
        print(
            f"sweeper: warning: the log file {name} cannot be written ({e.strerror or e}): its "
            "lines are dropped "
            "from here on; the sweep goes on and records every run in the store",
            file=sys.stderr,
        )


def quiet_unwritable_files() -> None:
    """From now on in this process, a file handler whose writes fail says so once
    (:func:`_handle_error`)."""
    logging.FileHandler.handleError = _handle_error  # type: ignore[method-assign]
