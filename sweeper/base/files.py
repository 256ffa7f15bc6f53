"""The files a job and a sweep leave, the names that become a file or folder, and the store's
address (its SQLite file; an address refused). Imports nothing of ours."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, TypeVar
from urllib.parse import unquote, urlsplit

T = TypeVar("T")

__all__ = [
    "CURVES_FILE",
    "ERROR_FILE",
    "MAX_NAME_BYTES",
    "RESULT_FILE",
    "SWEEP_FILE",
    "name_problem",
    "read_json",
    "sqlite_path",
    "uri_problem",
]

RESULT_FILE = "result.json"  # a job's outcome, in its Hydra output folder
ERROR_FILE = "error.txt"  # a failed run's whole traceback, in its folder and among its artifacts
CURVES_FILE = "curves.npz"  # the loss curves, kept with result.json so a run can be uploaded later
SWEEP_FILE = "sweep.json"  # a sweep's parent run(s) and job count, in its sweep folder
# The longest name that becomes one file or folder name (an experiment's artifact folder, a pinned
# file's NAME_1.yaml, a sweep folder's part): file systems allow 255 bytes, and a suffix may follow.
MAX_NAME_BYTES = 200


def read_json(path: Path, parse: Callable[[Any], T] = lambda v: v) -> T | None:
    """``parse`` of the JSON value in ``path`` read whole, or None: a file that is not there
    (its folder deleted), was cut short (its writer killed), or has another version's shape
    (``parse`` raised KeyError, TypeError, ...) is none. A machine's cache, a sweep's
    halving.json, a job's result.json where its absence is an outcome of its own."""
    try:
        return parse(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be one file or folder name (None when it can): too long,
    empty, ``.``/``..``, or holding ``/`` or a NUL."""
    if not name or name in (".", ".."):
        return "expected a non-empty name"
    if "/" in name or "\0" in name:
        return "expected a name without / (it names one file or folder)"
    size = len(name.encode("utf-8", "surrogateescape"))
    if size > MAX_NAME_BYTES:
        return (
            f"{size} bytes long: expected a name of at most {MAX_NAME_BYTES} bytes (it names "
            "a file or folder)"
        )
    return None


def uri_problem(uri: str) -> str | None:
    """Why a tracking URI cannot be used (None when it looks usable): an address Python cannot parse
    (``http://[::1``), or an http(s) address without a host."""

    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018  (a port that is no number raises here)
    except ValueError as e:
        return f"cannot be read as an address ({e}): expected sqlite:///PATH or http(s)://HOST:PORT"
    if parts.scheme in ("http", "https") and not parts.hostname:
        return "names no host: expected http(s)://HOST:PORT"
    if parts.scheme == "sqlite":
        path = uri[len("sqlite:///") :] if uri.startswith("sqlite:///") else ""
        # sqlite:////:memory: is a file ":memory:" (at /): meant in-memory
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if (
            path in ("", ":memory:")
            or path.startswith(("file:", ":memory:"))
            or "mode=memory" in path
            or name.startswith(":memory:")
        ):
            return (
                "is not a persistent store (an in-memory database keeps nothing once the command "
                "ends): "
                "expected sqlite:///PATH/TO/mlflow.db"
            )
    return None


def sqlite_path(uri: str):
    """The database file of a ``sqlite:///`` tracking URI, else None: the file
    SQLAlchemy opens (its URL rules: ``%20`` is a space, a ``?query`` no part of the
    path), so the checks, the folder made and the lock are of that file (before:
    ``a%20b/`` was made and checked while MLflow retried ``a b/x.db`` for ~100 s)."""

    return (
        Path(unquote(uri[len("sqlite:///") :].partition("?")[0]))
        if uri.startswith("sqlite:///")
        else None
    )
