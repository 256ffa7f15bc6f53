"""sweeper.tracking.store: a new SQLite store is a copy of this MLflow's empty store (its migrated schema), made by
MLflow's migrations once per machine and version; the copy is what MLflow itself would have made. A server that does
not answer is one line, from one health check, before MLflow's client (its requests retry for minutes) is made."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest
from mlflow import MlflowClient

from sweeper import tracking
from sweeper.tracking import store as store_module
from conftest import all_runs, cli, command, one_line, wait_for


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty cache of sweeper's (no store template yet)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("SWEEPER_CACHE_DIR", str(folder))
    return folder


def _schema(db: Path) -> tuple[list, list]:
    """Every table's and index's definition (its clauses as a set: two runs of MLflow's migrations order a rebuilt
    table's constraints differently) and the schema's version."""
    with closing(sqlite3.connect(db)) as con:
        sql = sorted(
            (
                kind,
                name,
                table,
                sorted(line.strip().rstrip(",") for line in (text or "").splitlines()),
            )
            for kind, name, table, text in con.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master"
            )
        )
        version = con.execute("SELECT version_num FROM alembic_version").fetchall()
    return sql, version


def _made_by_mlflow(folder: Path) -> Path:
    """A store made the way MLflow makes one (its migrations), switched to WAL as sweeper does."""
    db = folder / "mlflow.db"
    folder.mkdir(parents=True)
    MlflowClient(tracking_uri=f"sqlite:///{db}").search_experiments()
    with closing(sqlite3.connect(db)) as con:
        con.execute("PRAGMA journal_mode=WAL")
    return db


def test_a_second_new_store_is_a_copy_of_the_first_and_equal_to_what_mlflows_migrations_make(
    tmp_path, cache, monkeypatch
):
    first = tmp_path / "a" / "mlflow.db"
    tracking.open_store(f"sqlite:///{first}")
    template = store_module._template()
    assert template.is_file() and template.parent.parent == cache, (
        "the first store's schema was not kept"
    )
    with closing(sqlite3.connect(template)) as con:
        assert con.execute("SELECT count(*) FROM experiments").fetchone() == (0,)
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"

    copied = []
    real = store_module._from_template
    monkeypatch.setattr(
        store_module, "_from_template", lambda db: copied.append(real(db)) or copied[-1]
    )
    second = tmp_path / "b" / "mlflow.db"
    c = tracking.open_store(f"sqlite:///{second}")
    assert copied == [True], "the second store was not copied from the template"
    assert store_module._is_wal_database(second)

    reference = _made_by_mlflow(tmp_path / "ref")
    assert _schema(second) == _schema(reference), (
        "the copy's schema is not what MLflow's migrations make"
    )
    # MLflow adds its Default experiment to the copy, where it would put it in a store of its own
    ref = MlflowClient(tracking_uri=f"sqlite:///{reference}")
    ours, theirs = c.get_experiment("0"), ref.get_experiment("0")
    assert (
        (ours.name, ours.lifecycle_stage)
        == (theirs.name, theirs.lifecycle_stage)
        == ("Default", "active")
    )
    assert ours.artifact_location == theirs.artifact_location
    assert c.create_experiment("x") == ref.create_experiment("x") == "1"
    run = c.create_run("1")
    c.log_metric(run.info.run_id, "m", 1.5)
    c.set_terminated(run.info.run_id)
    assert MlflowClient(tracking_uri=f"sqlite:///{second}").get_run(
        run.info.run_id
    ).data.metrics == {"m": 1.5}


def test_a_template_of_another_schema_is_made_again_by_this_mlflows_migrations(tmp_path, cache):
    tracking.open_store(f"sqlite:///{tmp_path / 'a' / 'mlflow.db'}")
    template = store_module._template()
    assert store_module._schema_head() == _schema(template)[1][0][0], (
        "the head read off MLflow's migrations"
    )
    # as another MLflow version's migrations would have left it
    with closing(sqlite3.connect(template)) as con:
        con.execute("UPDATE alembic_version SET version_num = 'aaaaaaaaaaaa'")
        con.commit()
    db = tmp_path / "b" / "mlflow.db"
    assert not store_module._from_template(db) and not template.exists() and not db.exists()
    c = tracking.open_store(f"sqlite:///{db}")
    assert tracking.experiment_id(c, "works", f"sqlite:///{db}")
    assert _schema(db) == _schema(_made_by_mlflow(tmp_path / "ref"))
    assert _schema(template)[1] == _schema(db)[1], "the template was not made again"


def test_an_existing_database_is_never_overwritten_by_the_template(tmp_path, cache):
    """Only an absent or empty file becomes a copy: a store MLflow made in its own journal mode is opened as it is."""
    tracking.open_store(f"sqlite:///{tmp_path / 'a' / 'mlflow.db'}")
    db = tmp_path / "theirs" / "mlflow.db"
    db.parent.mkdir()
    mine = MlflowClient(tracking_uri=f"sqlite:///{db}")
    kept = mine.create_experiment("kept")
    c = tracking.open_store(f"sqlite:///{db}")
    assert c.get_experiment(kept).name == "kept"


def test_a_cache_that_cannot_be_written_costs_only_the_migrations(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("SWEEPER_CACHE_DIR", str(blocker))
    db = tmp_path / "a" / "mlflow.db"
    c = tracking.open_store(f"sqlite:///{db}")
    assert tracking.experiment_id(c, "works", f"sqlite:///{db}") and store_module._is_wal_database(
        db
    )
    assert not store_module._template().exists()


def test_a_store_path_that_is_a_folder_is_refused_at_once(tmp_path, monkeypatch):
    """Before: 104-112 s of MLflow's retries, then a traceback-free but late refusal. Now refused before MLflow is
    handed the store (which is what retried)."""
    from sweeper.tracking import store

    folder = tmp_path / "store"
    folder.mkdir()
    monkeypatch.setattr(
        store, "client", lambda uri: pytest.fail(f"MLflow was handed {uri}: it retries ~100 s")
    )
    with pytest.raises(
        tracking.TrackingError, match="is a folder: expected the path of a database file"
    ):
        tracking.open_store(f"sqlite:///{folder}")
    proc = cli(tmp_path, "epochs=5", f"tracking.uri=sqlite:///{folder}")
    assert proc.returncode == 2
    assert f"{folder} is a folder: expected the path of a database file" in one_line(proc.stderr)
    assert list(folder.iterdir()) == []


def test_a_store_that_answers_locked_at_once_is_asked_again(monkeypatch):
    """SQLite answers "database is locked" without its busy wait when another connection wrote between a
    transaction's read and its write; the interrupted sweep's parent then stayed RUNNING (its end was not tried
    again). The first line of such an error names the lock, not SQLAlchemy's autoflush note."""
    from sqlalchemy.exc import OperationalError

    note = "(raised as a result of Query-invoked autoflush; consider using a session.no_autoflush block)"
    locked = OperationalError("INSERT INTO metrics", {}, Exception("database is locked"))
    locked.args = (f"{note}\n(sqlite3.OperationalError) database is locked",)
    calls = []

    def flaky(n: int) -> int:
        calls.append(n)
        if len(calls) < 3:
            raise locked
        return n

    assert tracking.when_unlocked(flaky, 5) == 5 and calls == [5, 5, 5]
    assert (
        tracking.first_line(locked)
        == "OperationalError: (sqlite3.OperationalError) database is locked"
    )
    # it gives up once the next wait would pass wait_s: on a clock of its own (no wall-clock verdict), waits of
    # 0.05 and 0.1 s, then 0.2 s more would end past 0.3 s
    clock, slept = [0.0], []
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(
        time, "sleep", lambda s: (slept.append(s), clock.__setitem__(0, clock[0] + s))
    )
    calls.clear()
    with pytest.raises(OperationalError):
        tracking.when_unlocked(lambda: calls.append(1) or (_ for _ in ()).throw(locked), wait_s=0.3)
    assert slept == [0.05, 0.1] and calls == [1, 1, 1]
    monkeypatch.undo()
    calls.clear()
    with pytest.raises(OperationalError):
        tracking.when_unlocked(
            lambda: (
                calls.append(1)
                or (_ for _ in ()).throw(OperationalError("x", {}, Exception("no such table")))
            )
        )
    assert calls == [1]  # another failure is not asked again


@pytest.mark.parametrize("name, folder", [("..", "__"), (".", "_"), ("a/../b", "a_.._b")])
def test_an_experiment_name_of_dots_stays_in_the_artifacts_folder(tmp_path, name, folder):
    """Before: tracking.experiment=.. wrote run folders and models/ beside the database."""
    db = tmp_path / "db" / "mlflow.db"
    assert (
        tracking.artifact_location(f"sqlite:///{db}", name)
        == (tmp_path / "db" / "artifacts" / folder).as_uri()
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [["epochs=5000000", "log_every=1000"], ["-m", "lr=0.001,0.002", "epochs=5000"]],
    ids=["single run", "sweep"],
)
def test_ctrl_c_while_a_new_store_is_created_leaves_a_whole_store(tmp_path, args):
    """Before (a single run, 2 of 8 tries): Ctrl-C while MLflow created the schema left a half-built file that every
    later command refused ('OperationalError: table spans already exists'). Now the signal waits for the schema."""
    import signal

    db = tmp_path / "new.db"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sweeper",
            *args,
            f"tracking.uri=sqlite:///{db}",
            f"hydra.run.dir={tmp_path / 'run'}",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    seen = []
    for line in proc.stdout:
        seen.append(line)
        # then inside MLflow's migrations once they have written to the file
        if "opening the store" in line:
            wait_for(
                lambda: db.is_file() and db.stat().st_size > 0, "the new store's first table", proc
            )
            proc.send_signal(signal.SIGINT)
            break
    out = "".join(seen) + proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, out
    assert "OperationalError" not in out and "Traceback" not in out, out
    after = command("sweeper.runs", "--tracking-uri", f"sqlite:///{db}", timeout=120)
    assert after.returncode == 0, after.stderr
    assert "RUNNING" not in {r.info.status for r in all_runs(db)}


def test_a_new_store_where_a_deleted_one_left_its_wal_file_is_a_new_store(tmp_path, cache):
    """rm mlflow.db after a killed sweep leaves mlflow.db-wal and -shm beside it: SQLite would
    replay that log into the new file (the old store's experiment tags in a store without its
    experiments: 'Experiment(name=...) already exists'). The new store removes them and says so."""
    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    killed = (
        "import os, sys; from sweeper.tracking import store; "
        "store.open_store(sys.argv[1]).create_experiment('old', tags={'k': 'v'}); os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", killed, uri], check=True, timeout=120)
    wal = db.with_name(db.name + "-wal")
    assert wal.is_file() and wal.stat().st_size  # the killed process left its log
    db.unlink()
    out = subprocess.run(
        [sys.executable, "-c", killed.replace("; os._exit(0)", ""), uri],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert f"removed {wal.name}" in out.stdout
    with closing(sqlite3.connect(db)) as con:
        names = [n for (n,) in con.execute("SELECT name FROM experiments ORDER BY experiment_id")]
        tags = con.execute("SELECT key, value FROM experiment_tags WHERE key = 'k'").fetchall()
    assert names == ["Default", "old"] and tags == [("k", "v")]


def test_a_run_is_marked_ended_where_its_store_lets_it_and_its_failure_is_one_line(tmp_path):
    """tracking.mark_ended: a failed upload's run, the job's replaced first run and a refused search's parents
    each ended a run with a reason under a handler of their own; the store's failure is now the caller's line."""
    from mlflow.exceptions import MlflowException

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    c = tracking.client(uri)
    run = c.create_run(tracking.experiment_id(c, "x", uri)).info.run_id
    assert tracking.mark_ended(uri, run, "FAILED", "refused", {"replaced_by": "r2"}) is None
    got = c.get_run(run)
    assert got.info.status == "FAILED"
    assert (got.data.tags["failure_reason"], got.data.tags["replaced_by"]) == ("refused", "r2")

    class Gone:
        def set_tag(self, *a):
            raise MlflowException("the server went away\nmore")

    assert (
        tracking.mark_ended(Gone(), run, "KILLED", "x") == "MlflowException: the server went away"
    )
    with pytest.raises(AttributeError):  # a bug is not a store that failed
        tracking.mark_ended(object(), run, "KILLED", "x")


# --- a store's server that does not answer: read commands give up in seconds (issue 55, finding 12) ---

READERS = [
    ("report", ["--experiment", "x"]),
    ("runs", []),
    ("promote", ["--experiment", "x"]),
    ("advise", ["--experiment", "x"]),
]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("command, args", READERS)
def test_a_read_command_on_a_closed_port_is_one_line_without_mlflows_retries(command, args, capsys):
    """Before: 8-15 s of MLflow's retries, then 'API request to ... failed with exception HTTPConnectionPool'."""
    import importlib

    url = f"http://127.0.0.1:{_closed_port()}"
    assert importlib.import_module(f"sweeper.{command}").main([*args, "--tracking-uri", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"sweeper: error: --tracking-uri={url} does not answer ("
    )


@pytest.mark.slow
@pytest.mark.parametrize("command, args", READERS)
def test_a_read_command_gives_up_on_a_server_that_accepts_and_never_answers(command, args, capsys):
    """Before: 130 s (MLflow's 30 s timeout, retried). Now only the health check is asked, with its 5-s timeout."""
    import importlib

    asked: list[bytes] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)
            conn.settimeout(10)
            try:
                asked.append(conn.recv(4096).split(b"\r\n")[0])
            except OSError:
                pass

    threading.Thread(target=accept, daemon=True).start()
    url = f"http://127.0.0.1:{server.getsockname()[1]}"
    try:
        assert (
            importlib.import_module(f"sweeper.{command}").main([*args, "--tracking-uri", url]) == 2
        )
    finally:
        server.close()
        for c in held:
            c.close()
    assert capsys.readouterr().err == (
        f"sweeper: error: --tracking-uri={url} does not answer (timed out): start the "
        "server (mlflow server --host 127.0.0.1 --port PORT ...) or use the embedded "
        "store (tracking=local)\n"
    )
    # MLflow's client never asked (it would have waited 130 s)
    assert asked == [b"GET /health HTTP/1.1"]


@pytest.mark.parametrize(
    "value, level", [("debug", 10), ("ERROR", 40), ("bogus", None), ("10", None)]
)
def test_mlflows_logging_level_is_set_from_a_levels_name_and_left_alone_otherwise(
    monkeypatch, value, level
):
    """store.mlflow_defaults: MLFLOW_LOGGING_LEVEL named a level (any case) sets MLflow's logger; another text
    leaves it (MLflow's own import says so), raising nothing."""
    import logging

    from sweeper.tracking import store

    logger = logging.getLogger("mlflow")
    monkeypatch.setattr(logger, "level", logging.NOTSET)
    monkeypatch.setenv("MLFLOW_LOGGING_LEVEL", value)
    store.mlflow_defaults.cache_clear()  # once a process: asked afresh
    store.mlflow_defaults()
    assert logger.level == (logging.NOTSET if level is None else level)


def test_a_store_that_fails_is_its_family_of_errors_and_a_bug_is_not(tmp_path, monkeypatch):
    """tracking.failures: what a store that fails raises (the handlers that keep a sweep going past one catch
    these, not every error); opening one at a typed address adds a driver not installed and an address its
    parser refuses. open_store makes those one line; a bug of ours (TypeError) goes on with its traceback."""
    import requests
    import sqlalchemy.exc
    from mlflow.exceptions import MlflowException

    family = (tracking.TrackingError, sqlite3.Error, MlflowException)
    family += (requests.RequestException, sqlalchemy.exc.SQLAlchemyError, OSError)
    assert tracking.failures() == family
    assert tracking.failures(opening=True) == (*family, ImportError, ValueError)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    for raised, line in [
        (ModuleNotFoundError("No module named 'psycopg'"), "No module named 'psycopg'"),
        (sqlalchemy.exc.OperationalError("SELECT", {}, "disk I/O error"), "disk I/O error"),
        (MlflowException("Unexpected URI scheme"), "Unexpected URI scheme"),
    ]:
        monkeypatch.setattr(store_module, "client", lambda uri, e=raised: (_ for _ in ()).throw(e))
        with pytest.raises(tracking.TrackingError) as refused:
            tracking.open_store(uri)
        said = str(refused.value)
        assert said.startswith(f"tracking.uri={uri} cannot be used: ") and line in said
    monkeypatch.setattr(
        store_module, "client", lambda uri: (_ for _ in ()).throw(TypeError("ours"))
    )
    with pytest.raises(TypeError, match="ours"):
        tracking.open_store(uri)


# --- a store of another MLflow version's schema ---


def _revision(db: Path) -> str:
    with closing(sqlite3.connect(db)) as con:
        return con.execute("SELECT version_num FROM alembic_version").fetchone()[0]


def _tables(db: Path) -> set[str]:
    with closing(sqlite3.connect(db)) as con:
        return {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _back_to_fewer_tables(db: Path) -> str:
    """The store moved back by MLflow's own migrations until it lacks a table this MLflow has:
    as an older MLflow left it (3.17's store under 3.18), the kind MLflow upgrades as its client
    opens it (a store that has every table but an older revision it refuses instead: `mlflow db
    upgrade`). Returns that revision."""
    import sqlalchemy
    from alembic import command as alembic
    from mlflow.store.db.utils import _get_alembic_config

    uri, every = f"sqlite:///{db}", _tables(db)
    engine = sqlalchemy.create_engine(uri)
    config = _get_alembic_config(uri)
    for _ in range(30):
        with engine.begin() as con:
            config.attributes["connection"] = con
            alembic.downgrade(config, "-1")
        if _tables(db) < every:
            break
    engine.dispose()
    assert _tables(db) < every, "no recent migration of this MLflow adds a table"
    return _revision(db)


@pytest.mark.parametrize("wal", [True, False], ids=["wal", "rollback-journal"])
def test_an_older_mlflows_store_is_upgraded_by_mlflow_and_that_is_said_once(tmp_path, wal):
    """MLflow migrates an older MLflow's SQLite store as its client opens it, and sweeper had its
    log line silenced: the store then no longer opened in the other environment's older MLflow,
    and nothing had said why. A store in WAL mode (sweeper's) opens on one path, one that an
    MLflow made (rollback journal) on another: each says it."""
    db = _made_by_mlflow(tmp_path / "store")
    head = _revision(db)
    older = _back_to_fewer_tables(db)
    if not wal:
        with closing(sqlite3.connect(db)) as con:
            con.execute("PRAGMA journal_mode=DELETE")
    assert older != head
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    first = cli(tmp_path / "a", "epochs=5", store=db)
    assert first.returncode == 0, first.stderr
    said = [x for x in (first.stdout + first.stderr).splitlines() if "upgraded the store" in x]
    assert len(said) == 1 and f"from schema {older}" in said[0] and f"to {head}" in said[0], said
    assert _revision(db) == head
    again = cli(tmp_path / "b", "epochs=5", store=db)
    assert again.returncode == 0 and "upgraded the store" not in again.stdout + again.stderr


def test_a_newer_mlflows_store_is_refused_in_one_line_that_says_so(tmp_path):
    """A store whose schema revision this MLflow's migrations do not know (a newer MLflow wrote
    it): MLflow calls it out of date and asks for `mlflow db upgrade`, which cannot help; the line
    says a newer MLflow's schema and what to do, and the store is left as it was."""
    db = _made_by_mlflow(tmp_path / "store")
    with closing(sqlite3.connect(db)) as con, con:
        con.execute("UPDATE alembic_version SET version_num = '0123456789ab'")
    proc = cli(tmp_path, "epochs=5", store=db)
    assert proc.returncode == 2
    line = one_line(proc.stderr)
    assert "revision 0123456789ab" in line and "newer MLflow" in line, line
    assert "pip install -U mlflow" in line and "db upgrade" not in line, line
    assert _revision(db) == "0123456789ab" and not all_runs_or_none(db)


def test_an_older_mlflows_store_that_mlflow_refuses_says_the_command_that_upgrades_it(tmp_path):
    """An older MLflow's store that has every table this MLflow has: MLflow refuses it (it
    migrates only one that lacks a table) and asks to run `mlflow db upgrade <database_uri>`;
    the line names the command with this store's URI, and the store is left as it was."""
    import sqlalchemy
    from alembic import command as alembic
    from mlflow.store.db.utils import _get_alembic_config

    db = _made_by_mlflow(tmp_path / "store")
    uri, every = f"sqlite:///{db}", _tables(db)
    engine = sqlalchemy.create_engine(uri)
    config = _get_alembic_config(uri)
    with engine.begin() as con:
        config.attributes["connection"] = con
        alembic.downgrade(config, "-1")
    engine.dispose()
    older = _revision(db)
    if _tables(db) != every:
        pytest.skip(
            "this MLflow's last migration adds a table: MLflow migrates such a store itself"
        )
    proc = cli(tmp_path, "epochs=5", store=db)
    assert proc.returncode == 2
    line = one_line(proc.stderr)
    assert f"revision {older}" in line and "older MLflow" in line, line
    assert f"mlflow db upgrade {uri}" in line and "<database_uri>" not in line, line
    assert _revision(db) == older


def all_runs_or_none(db: Path) -> list:
    with closing(sqlite3.connect(db)) as con:
        return con.execute("SELECT run_uuid FROM runs").fetchall()
