"""An embedded (SQLite) store's file, asked of SQLite and the file system, never
of MLflow (no import of it): whether it can be used before MLflow opens it
(:func:`check_database`, :func:`check_writable`: a refusal costs milliseconds
and touches nothing), which runs it holds (:func:`runs_in_file`), and whether it
is still the file a sweep began with (:func:`identity`, :func:`replaced`)."""

from __future__ import annotations

import os
import sqlite3
import stat
from contextlib import closing
from pathlib import Path

from sweeper.base.files import sqlite_path, uri_problem

__all__ = [
    "TrackingError",
    "check_database",
    "check_writable",
    "identity",
    "query",
    "read_only",
    "replaced",
    "runs_in_file",
    "schema_revision",
]


class TrackingError(RuntimeError):
    """The tracking store cannot be used as configured; one line."""


def check_database(uri: str, existing: bool = False, key: str = "tracking.uri") -> None:
    """TrackingError (one line) unless ``uri`` names a store that can persist runs: not
    an in-memory database (:func:`~sweeper.base.files.uri_problem`), and
    for ``sqlite:///PATH`` a PATH that is no folder (MLflow would retry it for ~100 s) and,
    when the file exists, an SQLite database whose ``PRAGMA quick_check`` passes (random bytes
    in it would otherwise be read, and written to, as runs). ``existing``: a command that only
    reads the store (report, runs, promote) refuses a missing file instead of creating a store
    there; ``key``: how the line names the store (those commands: ``--tracking-uri``). No
    MLflow import: a refusal costs milliseconds and touches nothing."""

    problem = uri_problem(uri)
    if problem:
        raise TrackingError(f"{key}={uri} {problem}")
    db = sqlite_path(uri)
    if db is None:
        return
    what = (
        "is a folder"
        if db.is_dir()
        else "is not a regular file"
        if db.exists() and not db.is_file()
        else None
    )
    if what:
        raise TrackingError(
            f"{key}={uri} cannot be used: {db} {what}: expected the path of a database file "
            f"(e.g. sqlite:///{(db / 'mlflow.db').as_posix()})"
        )
    if not db.exists():
        if existing:
            raise TrackingError(
                f"{key}={uri}: no such store ({db} does not exist): expected an existing "
                "MLflow store (sqlite:///path/to/mlflow.db or a server URL)"
            )
        return
    # SQLite would read it as an empty database, and MLflow make it a store
    if existing and db.stat().st_size == 0:
        raise TrackingError(
            f"{key}={uri}: no such store ({db} is an empty file, 0 bytes): expected an existing "
            "MLflow store (sqlite:///path/to/mlflow.db or a server URL)"
        )
    damage = _damage(db)
    if damage:
        raise TrackingError(
            f"{key}={uri} cannot be used: {db} {damage}: restore a copy, or choose another "
            "path for a new store"
        )
    # an empty SQLite database: MLflow would make it a store
    if existing and _tables(db) == [] and db.stat().st_size > 0:
        raise TrackingError(
            f"{key}={uri}: no such store ({db} is an SQLite database without tables): expected an "
            "existing MLflow store (sqlite:///path/to/mlflow.db or a server URL)"
        )
    foreign = _foreign_tables(db)
    if foreign:
        shown = ", ".join(foreign[:5]) + (
            f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        )
        raise TrackingError(
            f"{key}={uri} cannot be used: {db} is another application's SQLite database (its "
            f"tables: {shown}), not an MLflow store: it is left as it is; give an MLflow store's "
            "path, "
            "or a new path for a new store"
        )


def _damage(db: Path) -> str | None:
    """Why the existing file ``db`` is not a healthy SQLite database (None when it is,
    or is empty: SQLite reads an empty file as an empty database):
    ``PRAGMA quick_check`` (a read of every page, ~ms a MB), which writes nothing. Read
    through SQLite only, never Python's ``open()`` (see :func:`_is_wal_database`)."""
    try:
        if db.stat().st_size == 0:
            return None
    except OSError:
        return None  # unreadable: check_writable and MLflow name it
    try:
        # an ordinary connection: a read-only one would leave a WAL
        # store's -wal and -shm files behind it
        with closing(sqlite3.connect(db, timeout=30)) as con:
            rows = con.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as e:
        text = str(e)
        if "not a database" in text:
            return (
                "is not a database (its first bytes are not SQLite's header): it is not an "
                "MLflow store, or it is damaged"
            )
        if "malformed" in text or "corrupt" in text:
            return f"is damaged ({text})"
        # locked, cannot be opened (a WAL store in a read-only folder): MLflow's own open decides
        return None
    first = rows[0][0] if rows else "ok"
    return (
        None
        if first == "ok"
        else f"is damaged (PRAGMA quick_check: {' '.join(str(first).split())[:120]})"
    )


def _foreign_tables(db: Path) -> list[str]:
    """The tables of the healthy SQLite file ``db`` when it holds some and none is MLflow's
    (another application's database, which MLflow would otherwise fill with its schema and
    switch to WAL); [] for an MLflow store, a store MLflow is creating (``experiments``
    comes first, ``alembic_version`` with the migrations) or an empty file."""
    tables = _tables(db)
    return [] if not tables or {"experiments", "alembic_version"} & set(tables) else tables


def query(db: Path | str, sql: str, params: tuple | list = (), uri: bool = False) -> list | None:
    """The rows of one read of the SQLite file ``db`` (``uri``: a ``file:...?mode=ro`` address),
    on a connection of its own; None where SQLite cannot answer it: locked past 30 s, damaged,
    not a database, no such table (not a store yet). The caller makes sure the file exists:
    SQLite would create it."""
    try:
        with closing(sqlite3.connect(db, timeout=30, uri=uri)) as con:
            return con.execute(sql, params).fetchall()
    except sqlite3.Error:
        return None


def schema_revision(db: Path) -> str | None:
    """The schema revision an SQLite store's file is at (MLflow's ``alembic_version``), read
    only; None where it has none (not a store yet) or cannot be read."""
    rows = query(read_only(db), "SELECT version_num FROM alembic_version", uri=True)
    return rows[0][0] if rows else None


def read_only(db: Path | str) -> str:
    """SQLite's read-only address of the file ``db``, its path percent-encoded: a ``#``, ``?`` or
    ``%`` in a folder's name would otherwise end the path or decode to another one."""
    return f"{Path(os.path.abspath(db)).as_uri()}?mode=ro"


def _tables(db: Path) -> list[str] | None:
    """The tables of the SQLite file ``db`` (SQLite's own left out); None where it cannot
    be read (locked, unreadable: MLflow's own open decides, as for :func:`_damage`)."""
    rows = query(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    return None if rows is None else [r[0] for r in rows if not r[0].startswith("sqlite_")]


def runs_in_file(uri: str, run_ids: list[str]) -> set[str]:
    """Which of ``run_ids`` the database file now at an embedded store's path
    holds, asked of that file itself (a client made earlier may still read a
    deleted file through its open connections); none for a server, or no file."""
    db = sqlite_path(uri)
    if db is None or not db.is_file() or not run_ids:
        return set()
    held: set[str] = set()
    # SQLite's bound-parameter limit (999 in older builds)
    for i in range(0, len(run_ids), 500):
        part = run_ids[i : i + 500]
        sql = f"SELECT run_uuid FROM runs WHERE run_uuid IN ({','.join('?' * len(part))})"
        if (rows := query(db, sql, part)) is None:  # no runs table (not a store yet), locked
            return set()
        held |= {r[0] for r in rows}
    return held


def identity(uri: str) -> list[int] | None:
    """The device and inode of an embedded store's file (None for a server, or a file not there)."""
    db = sqlite_path(uri)
    try:
        st = db.stat() if db is not None else None
    except OSError:
        return None
    return [st.st_dev, st.st_ino] if st else None


def replaced(uri: str, before: list[int] | None) -> str | None:
    """How the store a sweep began with (its :func:`identity` then:
    ``before``) is gone now, or None."""
    if before is None:
        return None
    now = identity(uri)
    # a file there now: another, or a new store the sweep's later jobs
    # made after the first was deleted
    return (
        None
        if now == list(before)
        else "was deleted"
        if now is None
        else "was deleted or replaced by another file"
    )


def check_writable(db: Path, uri: str) -> None:
    """TrackingError unless the database ``db`` can be created or written: SQLite writes its journal
    (``-wal``, ``-shm``) beside the file, so the folder must be writable too. Uses the real uid
    (``os.access``), so a folder of mode 555 fails for a user and a read-only file
    system for anyone.

    A store is made only where asked: its own folder is created when the folder it lies in exists
    (``mlruns/`` in the working directory), never a path of missing folders
    (``/nonexistent/dir/x.db``, or ``u19.db/../x.db``, which would make a folder named ``u19.db``).
    An existing store's ``-shm`` file must be one SQLite can write (:func:`_shm_problem`)."""
    folder = db.parent if str(db.parent) else Path(".")
    # the store's own folder is made, in one that exists
    existing = folder if folder.exists() else folder.parent
    hint = "choose a writable place for tracking.uri"
    if not existing.exists():
        raise TrackingError(
            f"tracking.uri={uri} cannot be used: its folder {folder} does not exist, nor "
            f"{existing}: "
            "sweeper makes a store's own folder only inside a folder that exists; create it "
            "first, or "
            "choose another path"
        )
    if not existing.is_dir():
        raise TrackingError(
            f"tracking.uri={uri} cannot be used: {existing} is a file, not a folder; {hint}"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise TrackingError(
            f"tracking.uri={uri} cannot be used: the folder {existing} is not writable; {hint}"
        )
    # root passes os.access everywhere: /proc and /sys take no new file all the same
    if not db.exists():
        # lazy: saves ~1 ms at this module's import (measured)
        import tempfile

        try:
            fd, probe = tempfile.mkstemp(prefix=".sweeper-probe-", dir=existing)
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            raise TrackingError(
                f"tracking.uri={uri} cannot be used: the folder {existing} takes no new file "
                f"({e.strerror or e}); {hint}"
            ) from None
    if db.exists() and not os.access(db, os.R_OK | os.W_OK):
        raise TrackingError(
            f"tracking.uri={uri} cannot be used: the database {db} is not writable; {hint}"
        )
    shm = db.with_name(db.name + "-shm")
    if db.exists() and (problem := _shm_problem(shm)):
        raise TrackingError(
            f"tracking.uri={uri} cannot be used: {shm} (SQLite's shared memory beside the store) "
            f"{problem}: SQLite would fail on it, or end the process with a bus error (SIGBUS); "
            "remove "
            "it while no process uses the store, or free the disk"
        )


def _shm_problem(shm: Path) -> str | None:
    """Why SQLite could not write a WAL store's shared-memory file (None when it can, or there
    is none yet): no regular file (a folder, a link: SQLite opens it without following links),
    not writable, or a sparse file whose missing pages the disk has no room for — SQLite maps
    it without extending it, and the first write to a page the file system cannot allocate
    kills the process with SIGBUS, which no handler can turn into a line. Never opened here:
    closing a descriptor of a file drops every lock this process holds on it, SQLite's on a
    live store's -shm included (see :func:`sweeper.tracking.store._is_wal_database`)."""

    try:
        st = os.lstat(shm)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if not stat.S_ISREG(st.st_mode):
        return "is " + (
            "a folder"
            if stat.S_ISDIR(st.st_mode)
            else "a symbolic link"
            if stat.S_ISLNK(st.st_mode)
            else "not a regular file"
        )
    if not os.access(shm, os.R_OK | os.W_OK):
        return "is not writable"
    unallocated = st.st_size - st.st_blocks * 512
    if unallocated > 0:
        disk = os.statvfs(shm.parent)
        free = disk.f_bavail * disk.f_frsize
        if free < unallocated:
            return (
                f"is a sparse file of {st.st_size} bytes, {unallocated} of them not yet on a "
                f"disk that has {free} "
                "bytes free"
            )
    return None
