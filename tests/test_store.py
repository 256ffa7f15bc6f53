"""sweeper.tracking.store: a new SQLite store is a copy of this MLflow's empty store (its migrated schema), made by
MLflow's migrations once per machine and version; the copy is what MLflow itself would have made."""
from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from mlflow import MlflowClient

from sweeper import tracking
from sweeper.tracking import store as store_module


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
        sql = sorted((kind, name, table, sorted(line.strip().rstrip(",") for line in (text or "").splitlines()))
                     for kind, name, table, text in con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
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


def test_a_second_new_store_is_a_copy_of_the_first_and_equal_to_what_mlflows_migrations_make(tmp_path, cache,
                                                                                           monkeypatch):
    first = tmp_path / "a" / "mlflow.db"
    tracking.open_store(f"sqlite:///{first}")
    template = store_module._template()
    assert template.is_file() and template.parent.parent == cache, "the first store's schema was not kept"
    with closing(sqlite3.connect(template)) as con:
        assert con.execute("SELECT count(*) FROM experiments").fetchone() == (0,)
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"

    copied = []
    real = store_module._from_template
    monkeypatch.setattr(store_module, "_from_template", lambda db: copied.append(real(db)) or copied[-1])
    second = tmp_path / "b" / "mlflow.db"
    c = tracking.open_store(f"sqlite:///{second}")
    assert copied == [True], "the second store was not copied from the template"
    assert tracking._is_wal_database(second)

    reference = _made_by_mlflow(tmp_path / "ref")
    assert _schema(second) == _schema(reference), "the copy's schema is not what MLflow's migrations make"
    # MLflow adds its Default experiment to the copy, where it would put it in a store of its own
    ref = MlflowClient(tracking_uri=f"sqlite:///{reference}")
    ours, theirs = c.get_experiment("0"), ref.get_experiment("0")
    assert (ours.name, ours.lifecycle_stage) == (theirs.name, theirs.lifecycle_stage) == ("Default", "active")
    assert ours.artifact_location == theirs.artifact_location
    assert c.create_experiment("x") == ref.create_experiment("x") == "1"
    run = c.create_run("1")
    c.log_metric(run.info.run_id, "m", 1.5)
    c.set_terminated(run.info.run_id)
    assert MlflowClient(tracking_uri=f"sqlite:///{second}").get_run(run.info.run_id).data.metrics == {"m": 1.5}


def test_a_template_of_another_schema_is_made_again_by_this_mlflows_migrations(tmp_path, cache):
    tracking.open_store(f"sqlite:///{tmp_path / 'a' / 'mlflow.db'}")
    template = store_module._template()
    assert store_module._schema_head() == _schema(template)[1][0][0], "the head read off MLflow's migrations"
    with closing(sqlite3.connect(template)) as con:  # as another MLflow version's migrations would have left it
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
    assert tracking.experiment_id(c, "works", f"sqlite:///{db}") and tracking._is_wal_database(db)
    assert not store_module._template().exists()
