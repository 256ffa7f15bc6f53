"""A log file that cannot be written (a full disk under the sweep folder, a read-only one): one
line on stderr, once a file, and its lines dropped, instead of Python's "--- Logging error ---"
block with a traceback for every line logged. Only a file's failure to write (``OSError``) is
met so; any other logging error is Python's as before. Imports only :mod:`sweeper.base.state`."""

from __future__ import annotations

import logging
import sys

from sweeper.base import state

__all__ = ["quiet_unwritable_files"]

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
