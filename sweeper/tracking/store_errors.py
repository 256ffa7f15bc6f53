"""The read commands (report, advise, compare) on a store that fails — not an MLflow
database, truncated, read-only, on a full disk, an address that cannot be parsed:
one line naming the store and exit 2, never MLflow's or SQLAlchemy's traceback."""

from __future__ import annotations

import sys
from typing import Callable

from sweeper.base.files import uri_problem
from sweeper.tracking import store


__all__ = ["guarded"]


def line(uri: str, e: BaseException) -> str:
    if isinstance(e, store.TrackingError):
        return f"sweeper: error: {e}"
    if getattr(e, "error_code", None) == "RESOURCE_DOES_NOT_EXIST":  # MLflow's: a run id it lacks
        return (
            f"sweeper: error: {str(e).strip().splitlines()[0]} in {uri}: expected a run id of "
            "this store (python -m sweeper.runs --experiment NAME lists them)"
        )
    text = store.first_line(e)
    hint = ""
    if "not a database" in text or "malformed" in text:
        hint = (
            ": it is not an MLflow store, or it is damaged (restore a copy, or choose "
            "another --tracking-uri)"
        )
    elif "readonly" in text or "read-only" in text:
        hint = (
            ": the store is read-only, and this command writes to it (make it writable, or "
            "work on a copy)"
        )
    elif "disk is full" in text or "No space left" in text:
        hint = ": the disk is full (free space and run it again)"
    return f"sweeper: error: tracking.uri={uri} failed: {text}{hint}"


def guarded(uri: str, fn: Callable[[], int]) -> int:
    """``fn()``, or one line on stderr and 2 when the store at ``uri`` fails."""
    problem = uri_problem(uri)
    if problem:
        print(f"sweeper: error: --tracking-uri={uri} {problem}", file=sys.stderr)
        return 2
    try:
        # a mistyped path is refused (never created as an empty store), a silent server in seconds
        store.check_readable(uri)
        return fn()
    except store.failures() as e:  # not a bug of ours
        print(line(uri, e), file=sys.stderr)
        return 2
