"""sweeper.tracking.experiments: where MLflow's Default experiment keeps its artifacts."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import all_runs, cli, one_line
from sweeper import tracking


@pytest.mark.slow
def test_mlflows_default_experiment_outside_the_store_folder_is_refused(tmp_path, _template_store):
    """Before: tracking.experiment=Default wrote the runs' files and models under ./mlruns/0 of the folder the store
    was first opened from, outside the store's folder. MLflow's Default experiment is made there with the store."""
    from conftest import copy_store

    store = copy_store(_template_store, tmp_path / "elsewhere")
    (tmp_path / "here").mkdir()
    c = tracking.open_store(f"sqlite:///{store}")
    where = c.get_experiment("0").artifact_location
    assert not where.startswith(str(store.parent)) and not where.startswith(
        store.parent.as_uri()
    ), where
    for args in (["epochs=5"], ["-m", "epochs=5,6"]):
        proc = cli(tmp_path / "here", *args, "tracking.experiment=Default", store=store)
        assert proc.returncode == 2, proc.stderr
        assert "tracking.experiment=Default keeps its artifacts in " in one_line(proc.stderr)
        assert "outside the store folder" in proc.stderr
        # no mlruns/, no sweep or run folder
        assert sorted(p.name for p in (tmp_path / "here").iterdir()) == []
    assert len(all_runs(store)) == 0


def test_mlflows_default_experiment_in_a_new_store_is_refused_before_the_store_is_made(tmp_path):
    """Before: the refusal came once MLflow had made the store, and left it (d.db, -wal, -shm, .lock): a store whose
    Default experiment points outside its folder for good. Now refused before the store is made."""
    store = tmp_path / "elsewhere" / "d.db"
    (tmp_path / "here").mkdir()
    for args in (["epochs=5"], ["-m", "epochs=5,6"]):
        proc = cli(tmp_path / "here", *args, "tracking.experiment=Default", store=store)
        assert proc.returncode == 2, proc.stderr
        line = one_line(proc.stderr)
        assert (
            "tracking.experiment=Default would keep its artifacts in " in line
            and "outside the store folder" in line
        )
        assert str(tmp_path / "here" / "mlruns" / "0") in line and "a new store's Default" in line
        assert (
            not (tmp_path / "elsewhere").exists() or list((tmp_path / "elsewhere").iterdir()) == []
        )
        assert list((tmp_path / "here").iterdir()) == []


def test_mlflows_default_in_a_new_store_is_where_sweeper_expects_it(tmp_path, monkeypatch):
    """The prediction above is MLflow's own: a new store made here puts its Default experiment under ./mlruns/0,
    named "Default\"."""
    from mlflow.entities import Experiment

    from sweeper.tracking import experiments

    monkeypatch.chdir(tmp_path)
    assert experiments.DEFAULT_EXPERIMENT == Experiment.DEFAULT_EXPERIMENT_NAME
    c = tracking.open_store(f"sqlite:///{tmp_path / 'sub' / 'x.db'}")
    where = c.get_experiment("0").artifact_location
    assert where.removeprefix("file://") == str(Path(experiments.new_store_artifact_root()) / "0")
