"""A standard output that cannot be written — its reader closed it (``| head``, a killed ``tee``, a dropped ssh
pipe) or it is a file on a full disk (``> /dev/full``) — is said once on stderr and its further lines are dropped
(the stream then writes into ``os.devnull``), instead of a ``BrokenPipeError`` traceback per line logged and a
command cut short where it printed: a sweep goes on and records every run in the store. Imports nothing of ours."""
from __future__ import annotations

import os
import sys
from typing import Any

BROKEN: list[str] = []  # why the standard output could not be written (empty: it could)
GOES_ON = "the command goes on"  # what the warning says comes next (a sweep: it records every run)


class _Guarded:
    """``sys.stdout`` whose write or flush failing (``OSError``) points it at ``os.devnull``, said once."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as e:
            self._broke(e)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            self._broke(e)

    def _broke(self, e: OSError) -> None:
        if not BROKEN:
            BROKEN.append(e.strerror or str(e))
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, self._stream.fileno())
                os.close(null)
            except (OSError, ValueError):
                pass
            try:
                print(f"sweeper: warning: the standard output cannot be written ({BROKEN[0]}): its lines are dropped "
                      f"from here on; {GOES_ON}", file=sys.stderr, flush=True)
            except OSError:
                pass
        try:  # what was buffered goes to devnull now
            self._stream.flush()
        except (OSError, ValueError):
            pass


def guard(goes_on: str = GOES_ON) -> None:
    """From now on, the standard output that fails says so once and drops its lines (:class:`_Guarded`)."""
    global GOES_ON
    GOES_ON = goes_on or "the command ends with exit code 1 (its output is lost)"
    if not isinstance(sys.stdout, _Guarded) and sys.stdout is not None:
        sys.stdout = _Guarded(sys.stdout)
