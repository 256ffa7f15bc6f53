"""Issue 41 (the fourth hostile round): the store is a real, persistent, healthy SQLite file before any work, read
commands never create one, Hydra's parse errors are one line, and no guess goes unsaid. Each test names the case."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import cli
from sweeper import advise, compare, report, runs, tracking
from sweeper import promote as promote_cmd


def one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def damaged(store: Path, folder: Path) -> Path:
    """A copy of ``store`` with random bytes written into its middle (its header intact)."""
    db = folder / "hurt.db"
    shutil.copy(store, db)
    size = db.stat().st_size
    with open(db, "r+b") as f:
        f.seek(size // 2)
        f.write(os.urandom(8192))
    return db


# --- (1) the store is checked before any work -----------------------------------------------------------

@pytest.mark.parametrize("uri", ["sqlite:///:memory:", "sqlite://", "sqlite:///"])
def test_an_in_memory_store_is_refused(uri):
    """Before: runs printed FINISHED into a database that vanished with the process."""
    with pytest.raises(tracking.TrackingError, match="is not a persistent store"):
        tracking.check_database(uri)


@pytest.mark.parametrize("uri", ["sqlite:///:memory:", "sqlite://"])
def test_an_in_memory_store_is_refused_by_a_sweep_in_one_line_and_nothing_is_written(tmp_path, uri):
    proc = cli(tmp_path, "-m", "epochs=5,6", f"tracking.uri={uri}")
    assert proc.returncode == 2
    assert "sqlite:///PATH (a database file; not :memory:)" in one_line(proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing is written, not even the sweep folder"


def test_a_store_path_that_is_a_folder_is_refused_at_once(tmp_path):
    """Before: 104-112 s of MLflow's retries, then a traceback-free but late refusal."""
    folder = tmp_path / "store"
    folder.mkdir()
    started = time.monotonic()
    proc = cli(tmp_path, "epochs=5", f"tracking.uri=sqlite:///{folder}")
    assert time.monotonic() - started < 20
    assert proc.returncode == 2
    assert f"{folder} is a folder: expected the path of a database file" in one_line(proc.stderr)
    assert list(folder.iterdir()) == []


def test_random_bytes_in_a_store_are_refused_and_the_file_is_left_as_it_was(tmp_path, store):
    """Before: the sweep ran on it (runs "FAILED: orphaned"); report, advise and promote read it, promote wrote a pin."""
    db = damaged(store, tmp_path)
    before = db.read_bytes()
    proc = cli(tmp_path, "-m", "epochs=5,6", f"tracking.uri=sqlite:///{db}")
    assert proc.returncode == 2
    assert f"{db} is damaged (" in one_line(proc.stderr)
    assert db.read_bytes() == before and not (tmp_path / "sweep").exists()


@pytest.mark.parametrize("command", [report, advise, compare, promote_cmd])
def test_the_read_commands_refuse_a_damaged_store(tmp_path, store, capsys, command):
    db = damaged(store, tmp_path)
    out = tmp_path / "pins"
    args = ["--experiment", "diabetes", "--tracking-uri", f"sqlite:///{db}"]
    assert command.main(args + (["--out-dir", str(out)] if command is promote_cmd else [])) == 2
    assert "is damaged" in one_line(capsys.readouterr().err)
    assert not out.exists()


@pytest.mark.parametrize("command, args", [(report, ["--experiment", "diabetes"]), (advise, ["--experiment", "diabetes"]),
                                           (compare, ["--experiment", "diabetes"]), (runs, []),
                                           (promote_cmd, ["--experiment", "diabetes"]), (report, ["--run", "f" * 32])])
def test_read_commands_never_create_a_store_at_a_mistyped_path(tmp_path, capsys, command, args):
    """Before: report and summary created a ~1 MB store at the mistyped path."""
    db = tmp_path / "typo" / "mlflow.db"
    assert command.main([*args, "--tracking-uri", f"sqlite:///{db}"]) == 2
    assert "no such store" in one_line(capsys.readouterr().err)
    assert not db.exists() and not db.parent.exists()


@pytest.mark.slow
def test_a_store_deleted_mid_sweep_is_said_and_the_sweep_fails(tmp_path, store):
    """Before: every record was lost while the sweep printed a full leaderboard and exited 0."""
    args = [sys.executable, "-m", "sweeper", "-m", "lr=0.001,0.002,0.003", "epochs=30000", "log_every=100",
            "hydra/launcher=basic", f"hydra.sweep.dir={tmp_path / 'sweep'}", f"tracking.uri=sqlite:///{store}"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "[1/3]" in line:
            for f in store.parent.glob(store.name + "*"):
                f.unlink()
            break
    out = "".join(seen) + proc.communicate(timeout=300)[0]
    assert proc.returncode == 1, out
    assert re.search(f"tracking.uri=sqlite:///{re.escape(str(store))} was (deleted|replaced by another file) "
                     r"during the sweep: the 3 run\(s\) recorded there are not in it", out), out
