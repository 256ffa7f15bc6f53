"""MLflow's store: opening it (created once, under a lock, checked first), its
client (the experiments and finding runs: :mod:`sweeper.tracking.experiments`).

Calls are few and batched (each costs ~5-15 ms on SQLite, more over HTTP): a child
run is created with its tags (its name and ``overrides`` tag say what it is while
it runs), and when it ends one ``log_batch`` carries its params, metrics, system
metrics and loss curves (at most ``curve_points`` of each), then the artifacts
(resolved config, predictions, the whole curves, the model) and the status.
"""

from __future__ import annotations

import base64
import functools
import logging
import os
import re
import shutil
import sqlite3
import sys
import time
from contextlib import closing, suppress
from importlib.util import find_spec
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import unquote, urlsplit

from sweeper import ROOT, settled
from sweeper.base import state, stop
from sweeper.base.files import sqlite_path  # noqa: F401  (re-exported)
from sweeper.base.output import first_line, masked, unmasked
from sweeper.base.process import exclusive
from sweeper.tracking.storefile import TrackingError, check_database  # noqa: F401
from sweeper.tracking.storefile import check_writable, identity  # noqa: F401
from sweeper.tracking.storefile import schema_revision

from sweeper.base.environment import cache_root

# With the store file's errors and checks and the SQLite path of a
# URI, re-exported. UNREACHABLE is built on first use (``__getattr__`` below),
# so it is not in the list: ``from ... import *`` would build it at once.
__all__ = [
    "DEFAULT_URI",
    "MLFLOW_DEFAULTS",
    "TrackingError",
    "artifact_location",
    "check_database",
    "check_readable",
    "check_server",
    "check_writable",
    "client",
    "failures",
    "first_line",
    "identity",
    "mark_ended",
    "mlflow_defaults",
    "open_store",
    "sqlite_path",
    "when_unlocked",
]

# MLflow (~2 s to import) is imported only by the functions that talk to a store,
# so that `--help`, a refused value and the Hydra callback's module cost nothing
# of it. Importing this module changes nothing in the process: sweeper's MLflow
# settings (:func:`mlflow_defaults`) apply once sweeper's own tracking starts.
MLFLOW_DEFAULTS = MappingProxyType(
    {
        # MLflow's own tqdm bars while it copies a model's files would bury the job's output.
        "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
        # Bounded retries against a tracking server: MLflow's defaults (7 retries, backoff
        # factor 2, 120 s timeout) keep a job waiting for minutes when the server is gone.
        # Here: 3 retries over ~7 s.
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3",
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
        # MLflow sets its loggers' levels when imported, from this
        # variable (INFO by default; alembic's at WARNING or above)
        "MLFLOW_LOGGING_LEVEL": "WARNING",
    }
)


@functools.cache
def mlflow_defaults() -> None:
    """Sweeper's MLflow settings, for the process that uses sweeper's tracking (a job's task,
    a command, the writer): called before sweeper first imports MLflow or opens a client,
    never at import. A variable the user set keeps its value. MLflow reads the HTTP variables
    at each request; the logger levels are set here in case MLflow was imported before."""
    for key, value in MLFLOW_DEFAULTS.items():
        os.environ.setdefault(key, value)
    # a level's name only (getLevelName gives its number; another text: MLflow's import says so)
    level = os.environ["MLFLOW_LOGGING_LEVEL"].upper()
    if isinstance(logging.getLevelName(level), int):
        logging.getLogger("mlflow").setLevel(level)
    logging.getLogger("alembic").setLevel(logging.WARNING)


# The embedded store of conf/tracking/local.yaml, for the standalone commands.
DEFAULT_URI = f"sqlite:///{ROOT.as_posix()}/mlruns/mlflow.db"


# What a failing store or server raises (after MLflow's own retries):
# ``except tracking.UNREACHABLE``.
_UNREACHABLE = (
    ("mlflow.exceptions", "MlflowException"),
    ("requests.exceptions", "RequestException"),
    ("sqlalchemy.exc", "SQLAlchemyError"),
)  # the embedded store's own failures


def __getattr__(name: str) -> Any:
    """``UNREACHABLE``, built without importing MLflow: an exception of a class
    whose module was never imported cannot have been raised, so the tuple holds the
    classes already loaded (and OSError), and stays fixed once all three are."""
    if name != "UNREACHABLE":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    found = tuple(
        c for m, n in _UNREACHABLE if (c := getattr(sys.modules.get(m), n, None)) is not None
    )
    if len(found) == len(_UNREACHABLE):
        globals()["UNREACHABLE"] = found + (OSError,)
    return found + (OSError,)


def failures(opening: bool = False) -> tuple[type[BaseException], ...]:
    """What a store that fails raises, for ``except tracking.failures()``: a store refused
    before MLflow's call (TrackingError), the embedded database's own error (sqlite3), a
    server or database that fails (:data:`UNREACHABLE`). ``opening``: also what opening a
    store at an address a user typed raises when it cannot be used (its database driver not
    installed: ImportError; an address the driver's parser refuses, e.g. a port that is no
    number: ValueError)."""
    found = (TrackingError, sqlite3.Error, *__getattr__("UNREACHABLE"))
    return (*found, ImportError, ValueError) if opening else found


def mark_ended(
    c: Any, run_id: str, status: str, reason: str, tags: dict[str, str] | None = None
) -> str | None:
    """Run ``run_id`` ended ``status`` with its ``failure_reason`` (and ``tags``), where its
    store (``c``: its client, or its URI) lets it: None, or the one line of the store's failure
    (the store that just failed may refuse this too; the run may have lived on another
    server). Nothing raised: what the caller was doing (an upload failing, a refused sweep) is
    what it says."""
    try:
        c = client(c) if isinstance(c, str) else c
        for key, value in {"failure_reason": reason, **(tags or {})}.items():
            c.set_tag(run_id, key, value)
        c.set_terminated(run_id, status)
    except __getattr__("UNREACHABLE") as e:
        return first_line(e)
    return None


def when_unlocked(call: Any, *args: Any, wait_s: float = 30.0) -> Any:
    """``call(*args)``, again while SQLite answers "database is locked" (at most ``wait_s``
    seconds). It answers so at once, without its busy wait, when another connection wrote
    between a transaction's read and its write (WAL): an interrupted sweep's parent stayed
    RUNNING for it (the heartbeats and the writer write meanwhile)."""

    deadline, delay = time.monotonic() + wait_s, 0.05
    while True:
        try:
            return call(*args)
        except __getattr__("UNREACHABLE") as e:
            if "database is locked" not in str(e) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(2 * delay, 1.0)


def check_readable(uri: str, key: str = "--tracking-uri") -> None:
    """What a read command (report, runs, promote, advise, compare) asks of its store before
    MLflow's client does: :func:`check_database` (an existing store: never one made at a
    mistyped path) and, for a server, :func:`check_server` (seconds, as a sweep's start:
    MLflow's client retries for ~10 s on a closed port and waits 130 s on a server that
    accepts connections and never answers). One line (TrackingError) naming ``key``."""
    check_database(uri, existing=True, key=key)
    if uri.startswith(("http://", "https://")):
        check_server(uri, key=key)


def check_server(uri: str, timeout: float = 5.0, key: str = "tracking.uri") -> None:
    """Fail fast, in one line, when an http(s) tracking server does not answer ``GET /health``
    within ``timeout`` seconds (a closed port at once, one that accepts and never answers after
    ``timeout``). Credentials go as MLflow's client sends them: the URI's user info
    (``http://alice:PW@host``) as HTTP basic authentication, else ``MLFLOW_TRACKING_USERNAME`` /
    ``MLFLOW_TRACKING_PASSWORD``, or ``MLFLOW_TRACKING_TOKEN`` (a bearer token); the address asked
    is the URI without its user info (urllib would read ``alice:PW@host`` as the host's name)."""
    # lazy: saves ~154 ms at this module's import (measured)
    import urllib.request

    # lazy: saves ~1.2 ms at this module's import (measured)
    import urllib.error

    try:
        with urllib.request.urlopen(_health_request(uri), timeout=timeout) as r:
            r.read()
    except urllib.error.HTTPError as e:  # it answers, and refuses
        hint = (
            "the server refuses the credentials: give them in the URI "
            "(http://USER:PASSWORD@HOST:PORT) or in "
            "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"
            if e.code in (401, 403)
            else "expected an MLflow tracking server (mlflow server --host 127.0.0.1 --port PORT "
            "...)"
        )
        raise TrackingError(
            f"{key}={masked(uri)} answers GET /health with HTTP {e.code} ({e.reason}): {hint}"
        ) from None
    except OSError as e:
        raise TrackingError(
            f"{key}={masked(uri)} does not answer ({getattr(e, 'reason', e)}): start the server "
            "(mlflow server --host 127.0.0.1 --port PORT ...) or use the embedded store "
            "(tracking=local)"
        ) from None


def _health_request(uri: str) -> Any:
    """``GET <uri>/health`` with the credentials MLflow's client would
    send (:func:`check_server`)."""
    # lazy: saves ~154 ms at this module's import (measured)
    import urllib.request

    parts = urlsplit(uri.rstrip("/"))
    address = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    user, password = parts.username, parts.password
    if user is None and os.environ.get("MLFLOW_TRACKING_USERNAME"):
        user, password = (
            os.environ["MLFLOW_TRACKING_USERNAME"],
            os.environ.get("MLFLOW_TRACKING_PASSWORD", ""),
        )
    headers = {}
    if user is not None:
        pair = f"{unquote(user)}:{unquote(password or '')}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    elif os.environ.get("MLFLOW_TRACKING_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['MLFLOW_TRACKING_TOKEN']}"
    return urllib.request.Request(f"{address}/health", headers=headers)


def client(uri: str) -> Any:
    """A client of the store. A new SQLite store (or one not yet in WAL mode)
    is first created under an inter-process lock (:func:`_create_store`); an
    existing WAL store is opened without lock or probe."""

    # a store named by a sweep's files (their passwords masked): the one this process opened
    uri = unmasked(uri)
    mlflow_defaults()
    # imported (and frozen) already: no second freeze of what the sweep holds now
    if "mlflow" in sys.modules:
        MlflowClient = _client_class()
    else:
        # MLflow's modules (~500k objects): no GC pass while they load, none over them after
        with settled():
            MlflowClient = _client_class()
    # MLflow logs a store's failure (a full disk, a read-only file) with its
    # traceback before raising it; the raise is what we report, in one line
    quiet = logging.getLogger("mlflow.store.db.utils")
    if quiet.level != logging.CRITICAL:  # setLevel clears every logger's cache: not once a job
        quiet.setLevel(logging.CRITICAL)

    db = sqlite_path(uri)
    if db is not None:
        _sqlite_commits_without_fsync()
    held = state.current()
    clients = held.clients  # a URI's client, once its store exists
    if uri in clients and (db is None or identity(uri) == held.client_files.get(uri)):
        return clients[uri]  # the same file as when its client was made: no probe a job
    # lazy: saves ~11 ms at this module's import (measured)
    from sweeper.tracking.bulk import whole_sessions

    # an older MLflow's store: MLflow migrates it as its client opens it (said below)
    before = schema_revision(db) if db is not None and db.is_file() else None
    if db is not None and not _is_wal_database(db):
        clients.pop(uri, None)
        c = _create_store(db, uri)
    else:
        # one a store (MLflow keeps one store object a URI anyway)
        c = clients[uri] = MlflowClient(tracking_uri=uri)
        held.client_files[uri] = identity(uri)
    whole_sessions(c)  # a Ctrl-C waits for the transaction it comes in (opens the store)
    state.process().store_opened = True
    if before is not None and (after := schema_revision(db)) not in (None, before):
        _tell(
            f"MLflow {_mlflow_version()} upgraded the store {db} from schema {before} (an older "
            f"MLflow's) to {after}: an MLflow older than {_mlflow_version()} can no longer open it",
            logging.WARNING,
        )
    return c


def _mlflow_version() -> str:
    # lazy: saves ~20 ms at this module's import (measured: -X importtime, 17-26 ms)
    from importlib.metadata import version

    return version("mlflow")


def _schema_refused(e: BaseException, uri: str) -> str | None:
    """MLflow's refusal of a store of another schema revision, said with what to do: an older
    MLflow's store that has every table (MLflow migrates one that lacks a table itself): back it
    up and run ``mlflow db upgrade`` on this very URI; a revision its migrations do not know (a
    newer MLflow wrote it; MLflow still calls it out of date and asks for ``mlflow db upgrade``,
    which cannot help): upgrade MLflow. None for any other error."""
    found = re.search(r"found version (\w+), but expected (\w+)", str(e))
    if found is None:
        return None
    if found[1] in _revisions()[0]:
        return (
            f"its schema (revision {found[1]}) is an older MLflow's than this MLflow "
            f"{_mlflow_version()} writes ({found[2]}): back the file up, then run: mlflow db "
            f"upgrade {uri} (an MLflow older than {_mlflow_version()} cannot open it afterwards)"
        )
    return (
        f"its schema (revision {found[1]}) is a newer MLflow's than this MLflow "
        f"{_mlflow_version()} knows (its newest: {found[2]}): upgrade MLflow here "
        "(pip install -U mlflow), or choose another tracking.uri"
    )


@functools.cache
def _client_class() -> type:
    """MLflow's client, whose tag and param values have a URI's password
    masked (:func:`sweeper.base.output.masked`): a run's tags quote its
    command line, overrides and errors, and none of them keeps a password."""
    # lazy: saves ~3180 ms at this module's import (measured)
    from mlflow import MlflowClient
    from mlflow.entities import Param, RunTag

    class Client(MlflowClient):
        def set_tag(
            self, run_id: str, key: str, value: Any, synchronous: bool | None = None
        ) -> Any:
            return super().set_tag(
                run_id, key, masked(value) if isinstance(value, str) else value, synchronous
            )

        def log_batch(
            self,
            run_id: str,
            metrics: Any = (),
            params: Any = (),
            tags: Any = (),
            synchronous: bool | None = None,
        ) -> Any:
            params = [Param(p.key, masked(str(p.value))) for p in params]
            tags = [RunTag(t.key, masked(str(t.value))) for t in tags]
            return super().log_batch(run_id, metrics, params, tags, synchronous)

    return Client


@functools.cache
def _sqlite_commits_without_fsync() -> None:
    """Every SQLite connection in WAL mode that this process opens from now on (MLflow's
    engines) commits with ``synchronous=NORMAL``: a commit is then durable against a
    crash of the process and the database stays consistent, only the last commits before
    a power cut can be lost (SQLite's documentation recommends it for WAL; other journal
    modes, e.g. an Optuna storage's, keep their setting). With FULL, each of a job's ~15
    commits waits for an fsync, and the writer process's fsyncs stall this process's
    file writes in the file system's journal (measured: docs/benchmarks.md)."""
    # lazy: saves ~400 ms at this module's import (measured)
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def tune(dbapi_connection: Any, record: Any) -> None:
        if isinstance(dbapi_connection, sqlite3.Connection):
            try:
                if dbapi_connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                    dbapi_connection.execute("PRAGMA synchronous=NORMAL")
            # not a database: MLflow's own first query says so (a failing connect would be
            except sqlite3.Error:
                pass  # retried for minutes)

    event.listen(Engine, "connect", tune)  # once per process (functools.cache)


def artifact_location(uri: str, experiment: str) -> str | None:
    """Artifacts of an embedded store sit beside its database, at an
    absolute path (not the cwd's)."""
    db = sqlite_path(uri)
    if db is None:
        return None  # a server decides
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", experiment)
    # "." or "..": the folder would be artifacts/ itself, or the database's folder
    if not safe.strip("."):
        safe = safe.replace(".", "_")
    return (db.resolve().parent / "artifacts" / safe).as_uri()


def open_store(uri: str) -> Any:
    """Check that the store can be used and return a client (TrackingError, one line, if not).

    An embedded store's folder must be writable (checked first: MLflow would retry
    for ~100 s); a new SQLite store is created safely against any number of processes
    (see :func:`client`); a server must answer ``GET /health`` and a first request.
    """
    uri = unmasked(uri)
    db = sqlite_path(uri)
    if db is not None:
        check_writable(db, uri)
        check_database(uri)
    creating = db is not None and not db.is_file()
    # seconds of silence otherwise
    if creating or ("mlflow" not in sys.modules and sys.stdout.isatty()):
        _tell(f"opening the store {uri}" + (_creating() if creating else "") + "…")
    if uri.startswith(("http://", "https://")):
        check_server(uri)
    try:
        c = client(uri)  # MLflow opens (and checks) an SQLite store here
        if db is None:
            c.search_experiments(max_results=1)  # checks a server is up
    except failures(opening=True) as e:
        why = _schema_refused(e, masked(uri)) or first_line(e)
        raise TrackingError(f"tracking.uri={uri} cannot be used: {why}") from e
    return c


def _creating() -> str:
    if _template().is_file():
        return " (creating it)"
    return (
        " (creating it: the first store of this MLflow version on this machine takes a few seconds)"
    )


def _tell(line: str, level: int = logging.INFO) -> None:
    """A line a user must see: through logging where a handler shows it (a job), else printed
    (a sweep's start, a command, before Hydra configures logging): a progress line (INFO)
    on stdout, so that stderr keeps only what went wrong; a warning on stderr."""
    log = logging.getLogger("sweeper")
    if log.isEnabledFor(level) and (log.handlers or logging.getLogger().handlers):
        log.log(level, line)
    else:
        out = sys.stderr if level > logging.INFO else sys.stdout
        print(f"sweeper: {line}", file=out, flush=True)


def _create_store(db: Path, uri: str) -> Any:
    """Create the SQLite store ``db`` (schema, then WAL journal mode) and return a client.

    Several processes creating one store at once race in MLflow's schema migrations and can leave it
    unusable, so the creation holds an exclusive lock on ``<db>.lock`` (the file stays;
    it is empty). The schema is a copy of this MLflow's empty store (:func:`_template`,
    made by its migrations the first time, ~4 s; a copy then takes ~0.2 s); MLflow adds
    its Default experiment to it as to a store it made. The WAL switch comes last: a WAL
    header means a complete schema, which :func:`client` trusts without the lock. WAL
    lets parallel jobs log without "database is locked".
    """

    MlflowClient = _client_class()
    # the store's own folder only: check_writable refuses a path of missing folders
    db.parent.mkdir(exist_ok=True)
    # Ctrl-C or SIGTERM waits for the schema (a few seconds): cut short, MLflow's migrations
    # left a half-built file that every later command refused ("table spans already exists")
    with exclusive(db.with_name(db.name + ".lock")), stop.deferred():
        if _is_wal_database(db):  # made by another process while this one waited
            return MlflowClient(tracking_uri=uri)
        _remove_orphans(db)
        copied = _from_template(db)
        # creates the schema of a new store (or adds Default to a copy)
        c = MlflowClient(tracking_uri=uri)
        c.search_experiments(max_results=1)  # a store MLflow cannot read fails here, unchanged
        with closing(sqlite3.connect(db)) as con:
            con.execute("PRAGMA journal_mode=WAL")
        if not copied:
            _keep_template(db)
    return c


def _remove_orphans(db: Path) -> None:
    """Remove the log files a deleted store left beside ``db`` (absent or empty): ``rm mlflow.db``
    after a killed sweep leaves ``mlflow.db-wal`` and ``-shm``, and SQLite replays such a log into
    the new file of that name (the old store's rows in the new one: "Experiment(name=...) already
    exists"). A non-empty ``db`` keeps its files: its journal may be what recovers it."""
    if db.exists() and db.stat().st_size:
        return
    left = [
        f for f in (db.with_name(db.name + s) for s in ("-wal", "-shm", "-journal")) if f.exists()
    ]
    for f in left:
        f.unlink()
    if left:
        names = ", ".join(f.name for f in left)
        _tell(
            f"removed {names}: left beside {db.name} by a deleted store, not a part of the new one"
        )


def _template() -> Path:
    """The empty store of this MLflow version (its migrated schema, no
    experiment), kept in sweeper's cache."""
    return Path(cache_root()) / "store-templates" / f"mlflow-{_mlflow_version()}.db"


def _schema_head() -> str | None:
    """The schema revision this MLflow's migrations end at, read off their
    files (alembic's own reading of them takes ~1 s): the revision no other
    names as its ``down_revision``. None when that is not one revision."""
    return _revisions()[1]


@functools.cache
def _revisions() -> tuple[frozenset[str], str | None]:
    """Every schema revision of this MLflow's migrations, and their head (:func:`_schema_head`)."""
    spec = find_spec("mlflow")
    if spec is None or not spec.submodule_search_locations:
        return frozenset(), None
    folder = Path(list(spec.submodule_search_locations)[0]) / "store" / "db_migrations" / "versions"
    revisions, downs = set(), set()
    for script in folder.glob("*.py"):
        text = script.read_text(encoding="utf-8", errors="replace")
        if (rev := re.search(r"^revision = [\"']([0-9a-z_]+)[\"']", text, re.M)) is None:
            continue
        revisions.add(rev.group(1))
        if (down := re.search(r"^down_revision = (.*)$", text, re.M)) is not None:
            downs.update(re.findall(r"[\"']([0-9a-z_]+)[\"']", down.group(1)))
    heads = revisions - downs
    return frozenset(revisions), (heads.pop() if len(heads) == 1 else None)


def _from_template(db: Path) -> bool:
    """Copy the cached empty store to ``db`` (absent, or an empty file);
    False when there is none to copy, or the one cached is of another schema
    than this MLflow's (it is removed: the migrations make it again)."""
    template = _template()
    if not template.is_file() or (db.exists() and db.stat().st_size):
        return False
    held = schema_revision(template)
    if held is None or held != _schema_head():
        with suppress(OSError):
            template.unlink()
        return False
    new = db.with_name(f".{db.name}.{os.getpid()}.new")
    try:
        shutil.copyfile(template, new)
        os.replace(new, db)  # whole or not at all: a crash leaves no half-copied store at db
    except OSError:
        with suppress(OSError):
            new.unlink()
        return False
    return True


def _keep_template(db: Path) -> None:
    """Keep the store MLflow's migrations just made (its schema;
    Default left out) for the next new store. A cache that cannot be
    written costs the next store its migrations again, nothing more."""
    template = _template()
    if template.is_file():
        return
    new = template.with_name(f".{template.name}.{os.getpid()}.new")
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(db)) as src, closing(sqlite3.connect(new)) as dst:
            src.backup(dst)
            dst.execute("DELETE FROM experiment_tags")
            dst.execute("DELETE FROM experiments")
            dst.commit()
            dst.execute("PRAGMA journal_mode=DELETE")
        os.replace(new, template)
    except (OSError, sqlite3.Error):
        with suppress(OSError):
            new.unlink()


def _is_wal_database(db: Path) -> bool:
    """Whether ``db`` is an SQLite database already in WAL mode, asked
    of SQLite (``PRAGMA journal_mode``).

    Never through Python's ``open()``: on POSIX, closing any descriptor of a file drops every
    lock this process holds on it, SQLite's included (sqlite.org/howtocorrupt.html, 2.2). A
    sweep asks this as each job opens its client, while its own connections write; with their
    locks gone, another command's last close of the store checkpointed and deleted the WAL this
    sweep was still writing to, and runs printed FINISHED were lost. SQLite's own connections
    share their locks within the process, so a connection opened and closed here drops none."""
    try:
        if db.stat().st_size == 0:
            return False
        with closing(sqlite3.connect(db, timeout=30)) as con:
            return str(con.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal"
    except (OSError, sqlite3.Error):  # no such file, not a database: not WAL
        return False
