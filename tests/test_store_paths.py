"""Stores only where asked (issue 55, finding 13): a store's own folder is made inside a folder that exists, never a
path of missing folders; a ``-shm`` SQLite could not write is refused before anything opens the store; a writer
process killed by a bus error (SIGBUS) is one line, and its runs are kept for upload."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from conftest import client_for, command
from sweeper import tracking, upload
from sweeper.tracking import writer
from test_writer import _job


def _sweep(tmp_path, uri: str) -> subprocess.CompletedProcess:
    return command(
        "sweeper",
        "-m",
        "lr=0.01,0.02",
        "epochs=20",
        "log_every=10",
        f"tracking.uri={uri}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        cwd=tmp_path,
        timeout=600,
    )


@pytest.mark.parametrize("path", ["nonexistent/dir/x.db", "u19.db/../u19b.db"])
def test_a_store_path_through_missing_folders_is_refused_and_makes_none(tmp_path, path):
    """Before: sqlite:////nonexistent/dir/x.db made /nonexistent/dir (at the file system's root, as root), and
    u19.db/../u19b.db made a folder named u19.db."""
    uri = f"sqlite:///{tmp_path / path}"
    out = _sweep(tmp_path, uri)
    assert out.returncode == 2, out.stderr[-2000:]
    (line,) = out.stderr.strip().splitlines()
    assert (
        line.startswith(f"sweeper: error: tracking.uri={uri} cannot be used: its folder ")
        and "does not exist" in line
    )
    # no folder of the path, no sweep folder
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_store_folder_itself_is_made_inside_one_that_exists(tmp_path):
    """The documented rule: mlruns/ (or any one new folder) in a folder that exists is made for the store."""
    tracking.check_writable(tmp_path / "mlruns" / "mlflow.db", "sqlite:///...")  # no error
    with pytest.raises(tracking.TrackingError, match="does not exist, nor"):
        tracking.check_writable(tmp_path / "a" / "mlruns" / "mlflow.db", "sqlite:///...")
    assert not (tmp_path / "a").exists()


def test_a_shm_sqlite_cannot_write_is_refused_before_the_store_opens(tmp_path, store):
    """Before: a folder in place of the store's -shm went through to MLflow, which retried for ~16 s and said 'attempt
    to write a readonly database'."""
    (store.parent / f"{store.name}-shm").mkdir()
    out = _sweep(tmp_path, f"sqlite:///{store}")
    assert out.returncode == 2, out.stderr[-2000:]
    (line,) = out.stderr.strip().splitlines()
    assert f"{store}-shm (SQLite's shared memory beside the store) is a folder" in line
    assert not (tmp_path / "sweep").exists()


def test_a_writer_killed_by_a_bus_error_says_so_and_keeps_its_runs_for_upload(tmp_path, store):
    """The bus error a -shm that cannot be written gives (SIGBUS, which no handler turns into a line): the sweep's
    side names it and keeps the run for upload; the upload records it."""
    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    run_id, path, end = _job(tmp_path, c, uri, "0.004")
    w = writer.Writer()
    try:
        os.kill(w.proc.pid, signal.SIGBUS)
        w.submit(uri, run_id, None, end, path)
        (failed,) = w.drain()
    finally:
        w.close()
    assert (
        "the writer process ended (killed by SIGBUS: the store's -shm file could not be written"
        in failed
    )
    r = json.loads(path.read_text())
    assert r["pending_upload"] and r["tracking_error"] == failed
    assert client_for(store).get_run(upload.upload(path)).info.status == "FINISHED"
