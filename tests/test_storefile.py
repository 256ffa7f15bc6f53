"""sweeper.tracking.storefile: a store is a real, persistent, healthy SQLite file of MLflow's before any work;
read commands never create one or change another application's database."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import NO_BASELINES, all_runs, cli, command, one_line
from sweeper import advise, compare, promote as promote_cmd, report, runs, tracking


def damaged(store: Path, folder: Path) -> Path:
    """A copy of ``store`` with random bytes written into its middle (its header intact)."""
    db = folder / "hurt.db"
    shutil.copy(store, db)
    size = db.stat().st_size
    with open(db, "r+b") as f:
        f.seek(size // 2)
        f.write(os.urandom(8192))
    return db


@pytest.mark.parametrize(
    "uri",
    [
        "sqlite:///:memory:",
        "sqlite://",
        "sqlite:///",
        "sqlite:////:memory:",
        "sqlite:////tmp/x/:memory:",
    ],
)
def test_an_in_memory_store_is_refused(uri):
    """Before: runs printed FINISHED into a database that vanished with the process. With four slashes, the store was
    a file ':memory:' at the file system's root, with the runs' artifacts in /artifacts (hostile pass 6)."""
    with pytest.raises(tracking.TrackingError, match="is not a persistent store"):
        tracking.check_database(uri)


@pytest.mark.parametrize("uri", ["sqlite:///:memory:", "sqlite://", "sqlite:////:memory:"])
def test_an_in_memory_store_is_refused_by_a_sweep_in_one_line_and_nothing_is_written(tmp_path, uri):
    proc = cli(tmp_path, "-m", "epochs=5,6", f"tracking.uri={uri}")
    assert proc.returncode == 2
    assert "sqlite:///PATH (a database file; not :memory:)" in one_line(proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == [], (
        "nothing is written, not even the sweep folder"
    )


def test_random_bytes_in_a_store_are_refused_and_the_file_is_left_as_it_was(tmp_path, store):
    """Before: the sweep ran on it (runs "FAILED: orphaned"); report, advise and promote read it, promote wrote a pin."""
    db = damaged(store, tmp_path)
    before = db.read_bytes()
    proc = cli(tmp_path, "-m", "epochs=5,6", f"tracking.uri=sqlite:///{db}")
    assert proc.returncode == 2
    assert f"{db} is damaged (" in one_line(proc.stderr)
    assert db.read_bytes() == before and not (tmp_path / "sweep").exists()
    assert not Path(f"{db}-wal").is_file() or Path(f"{db}-wal").stat().st_size == 0


@pytest.mark.parametrize("command", [report, advise, compare, promote_cmd])
def test_the_read_commands_refuse_a_damaged_store(tmp_path, store, capsys, command):
    db = damaged(store, tmp_path)
    out = tmp_path / "pins"
    args = ["--experiment", "diabetes", "--tracking-uri", f"sqlite:///{db}"]
    assert command.main(args + (["--out-dir", str(out)] if command is promote_cmd else [])) == 2
    assert "is damaged" in one_line(capsys.readouterr().err)
    assert not out.exists()


@pytest.mark.parametrize(
    "command, args",
    [
        (report, ["--experiment", "diabetes"]),
        (advise, ["--experiment", "diabetes"]),
        (compare, ["--experiment", "diabetes"]),
        (runs, []),
        (promote_cmd, ["--experiment", "diabetes"]),
        (report, ["--run", "f" * 32]),
    ],
)
def test_read_commands_never_create_a_store_at_a_mistyped_path(tmp_path, capsys, command, args):
    """Before: report and summary created a ~1 MB store at the mistyped path."""
    db = tmp_path / "typo" / "mlflow.db"
    assert command.main([*args, "--tracking-uri", f"sqlite:///{db}"]) == 2
    assert "no such store" in one_line(capsys.readouterr().err)
    assert not db.exists() and not db.parent.exists()


@pytest.mark.parametrize(
    "command, args",
    [
        (report, ["--experiment", "diabetes"]),
        (runs, []),
        (promote_cmd, ["--experiment", "diabetes"]),
    ],
)
def test_read_commands_never_make_an_empty_file_a_store(tmp_path, capsys, command, args):
    """Before: a 0-byte file (a failed copy, a touch) given to runs or report became a ~1 MB MLflow store, and runs
    listed its experiment Default with exit 0."""
    db = tmp_path / "empty.db"
    db.touch()
    assert command.main([*args, "--tracking-uri", f"sqlite:///{db}"]) == 2
    assert "is an empty file, 0 bytes" in one_line(capsys.readouterr().err)
    assert db.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


def _foreign(folder: Path) -> tuple[Path, bytes]:
    import sqlite3

    db = folder / "app.db"
    with contextlib.closing(sqlite3.connect(db)) as con:
        con.execute("CREATE TABLE people (name TEXT)")
        con.execute("INSERT INTO people VALUES ('ann')")
        con.commit()
    return db, db.read_bytes()


@pytest.mark.parametrize(
    "command, args",
    [
        (report, ["--experiment", "diabetes"]),
        (runs, []),
        (promote_cmd, ["--experiment", "diabetes"]),
    ],
)
def test_read_commands_refuse_another_applications_sqlite_database(tmp_path, capsys, command, args):
    """Before: a valid SQLite file that is not an MLflow store (another application's) given to runs or report got
    MLflow's 60 tables written into it and was switched to WAL; runs listed its experiment Default, exit 0."""
    db, before = _foreign(tmp_path)
    assert command.main([*args, "--tracking-uri", f"sqlite:///{db}"]) == 2
    assert (
        "is another application's SQLite database (its tables: people), not an MLflow store"
        in one_line(capsys.readouterr().err)
    )
    assert db.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


def test_a_sweep_into_another_applications_sqlite_database_is_refused_before_any_work(tmp_path):
    db, before = _foreign(tmp_path)
    for args in (["-m", "epochs=5,6"], ["epochs=5"]):
        proc = cli(tmp_path, *args, f"tracking.uri=sqlite:///{db}")
        assert proc.returncode == 2
        assert "not an MLflow store: it is left as it is" in one_line(proc.stderr)
        assert db.read_bytes() == before
    assert not (tmp_path / "sweep").exists() and not (tmp_path / "app.db.lock").exists()
    # before: the refused single run left its folder (.hydra/, an empty log)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command, args", [(report, ["--experiment", "diabetes"]), (runs, [])])
def test_read_commands_refuse_an_sqlite_database_without_tables(tmp_path, capsys, command, args):
    """Before (hostile pass 3): a 4 kB SQLite file without tables (what a deleted store's path can be left with) given
    to runs was made an MLflow store (its bytes changed)."""
    import sqlite3

    db = tmp_path / "blank.db"
    with contextlib.closing(sqlite3.connect(db)) as con:
        con.execute("CREATE TABLE t (x)")
        con.execute("DROP TABLE t")
        con.commit()
    before = db.read_bytes()
    assert len(before) > 0
    assert command.main([*args, "--tracking-uri", f"sqlite:///{db}"]) == 2
    assert "is an SQLite database without tables" in one_line(capsys.readouterr().err)
    assert db.read_bytes() == before


def test_the_runs_a_store_file_holds_are_found_among_more_ids_than_sqlite_binds_at_once(store):
    """Before: one query bound every run id; past SQLite's limit (999 in older builds, 32,766 or 250,000 in newer
    ones) it failed, read as "none held": every job of a sweep that large whose store was replaced would have been
    uploaded twice."""
    import sqlite3

    c = tracking.client(f"sqlite:///{store}")
    run = c.create_run(tracking.experiment_id(c, "x", f"sqlite:///{store}")).info.run_id
    limit = sqlite3.connect(":memory:").getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    ids = [f"{i:032x}" for i in range(limit)] + [run]
    assert tracking.runs_in_file(f"sqlite:///{store}", ids) == {run}


@pytest.mark.slow
def test_a_second_command_into_the_store_while_a_sweep_records_loses_none_of_the_sweeps_runs(
    tmp_path, store
):
    """Before (4 of 4 tries in the hostile round): a single run into the same store while a sweep ran left the sweep's
    second run RUNNING with no metrics and its parent RUNNING, while the sweep printed both FINISHED and exited 0.
    The sweep's own process opened and closed the database file with Python's open() (a header check a job), and on
    POSIX a close drops every lock the process holds on the file, SQLite's too: the other command's last close then
    checkpointed and deleted the WAL the sweep was still writing to."""
    args = [
        sys.executable,
        "-m",
        "sweeper",
        "-m",
        NO_BASELINES,
        "lr=0.001,0.002",
        "epochs=30000",
        "log_every=100",
        "hydra/launcher=basic",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"tracking.uri=sqlite:///{store}",
    ]
    proc = subprocess.Popen(
        args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        for line in proc.stdout:
            if "[1/2]" in line:
                (tmp_path / "other").mkdir()
                other = cli(tmp_path / "other", "lr=0.5", "epochs=5", store=store)
                assert other.returncode == 0, other.stderr[-2000:]
                break
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    runs = all_runs(store)
    assert len(runs) == 4 and {r.info.status for r in runs} == {"FINISHED"}, [
        (r.info.run_name, r.info.status) for r in runs
    ]
    sweep_runs = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(sweep_runs) == 2 and all("val_mse" in r.data.metrics for r in sweep_runs)


def test_a_store_refused_after_the_workers_started_exits(tmp_path):
    """Before: tracking.uri under /proc was refused in one line at 3.5 s, then the process never exited: its two warm
    CPU workers ignore SIGTERM (a SIGTERM to the sweep is the launching process's), and multiprocessing's exit
    handler, run before ours, SIGTERMed them and joined them for ever."""
    proc = command(
        "sweeper",
        "-m",
        "lr=0.1,0.2",
        "hydra.launcher.cpu_workers=2",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        "tracking.uri=sqlite:////proc/sweeper-test.db",
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert (
        "tracking.uri=sqlite:////proc/sweeper-test.db cannot be used: the folder /proc takes no new file "
        "(No such file or directory)"
    ) in one_line(proc.stderr)  # before: a raw FileNotFoundError of its .lock
    # before: the refused sweep left its folder and .sweep.lock
    assert not (tmp_path / "sweep").exists()


@pytest.mark.parametrize(
    "command, args",
    [
        (report, ["--experiment", "diabetes"]),
        (advise, ["--experiment", "diabetes"]),
        (compare, ["--experiment", "diabetes"]),
        (report, ["--run", "f" * 32]),
    ],
)
def test_read_commands_on_garbage_bytes_print_one_line(tmp_path, capsys, command, args):
    db = tmp_path / "mlflow.db"
    db.write_bytes(os.urandom(4096))
    assert command.main([*args, "--tracking-uri", f"sqlite:///{db}"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "not a database" in line and "it is not an MLflow store, or it is damaged" in line


def test_report_on_a_truncated_store_prints_one_line(tmp_path, store, capsys):
    db = tmp_path / "cut.db"
    db.write_bytes(store.read_bytes()[:20000])
    assert report.main(["--experiment", "diabetes", "--tracking-uri", f"sqlite:///{db}"]) == 2
    # refused by the store's check (issue 41) before MLflow reads it
    line = one_line(capsys.readouterr().err)
    assert (
        line.startswith(f"sweeper: error: --tracking-uri=sqlite:///{db} cannot be used: ")
        and "is damaged" in line
    )


def test_one_read_of_an_sqlite_file_is_its_rows_or_none(tmp_path):
    """storefile.query: the tables of a file, the runs it holds and the store template's schema were each read on a
    connection of their own, each with a handler for a file SQLite cannot answer."""
    import sqlite3

    from sweeper.tracking.storefile import query

    db = tmp_path / "a.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE runs (run_uuid TEXT)")
        con.executemany("INSERT INTO runs VALUES (?)", [("a",), ("b",)])
    assert query(db, "SELECT run_uuid FROM runs WHERE run_uuid IN (?)", ["b"]) == [("b",)]
    assert query(f"file:{db}?mode=ro", "SELECT count(*) FROM runs", uri=True) == [(2,)]
    assert query(db, "SELECT version_num FROM alembic_version") is None  # not a store (yet)
    (tmp_path / "text.db").write_text(
        "not a database, but text long enough to be read as a header " * 20
    )
    assert query(tmp_path / "text.db", "SELECT 1 FROM runs") is None
    assert tracking.runs_in_file(f"sqlite:///{tmp_path / 'text.db'}", ["a"]) == set()
    assert tracking.runs_in_file(f"sqlite:///{db}", [str(i) for i in range(1200)] + ["a"]) == {"a"}


@pytest.mark.parametrize("folder", ["plain", "a#b", "c?d", "e%41f", "g h"])
def test_a_stores_schema_revision_is_read_whatever_its_folder_is_named(tmp_path, folder):
    """SQLite's read-only file: address takes the path as a URI: a '#' or '?' in a folder's
    name ended it, a '%41' decoded to another folder (no revision read, no warning said)."""
    from sweeper.tracking.storefile import schema_revision

    db = tmp_path / folder / "mlflow.db"
    db.parent.mkdir()
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        con.execute("CREATE TABLE alembic_version (version_num TEXT)")
        con.execute("INSERT INTO alembic_version VALUES ('0123456789ab')")
    assert schema_revision(db) == "0123456789ab"
    assert sorted(p.name for p in db.parent.iterdir()) == ["mlflow.db"]  # nothing made
