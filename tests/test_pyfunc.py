"""The model folder: each run's is a copy of one template saved by MLflow per signature and input example
(sweeper.tracking.pyfunc), and is what ``mlflow.pyfunc.save_model`` would have written."""

from __future__ import annotations

import filecmp
from pathlib import Path

import mlflow.pyfunc
import numpy as np
import pytest
import yaml

from conftest import make_cfg
from sweeper import data
from sweeper.base import state
from sweeper.tracking import pyfunc
from sweeper.models.mlp import MLP, init_params

PER_MODEL = ("model_uuid", "utc_time_created")


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SWEEPER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(state.process(), "templates", {})
    return pyfunc.cache_dir()


def _save(folder: Path, seed: int, ds, cfg):
    params = init_params([ds.n_features, 8, 1], "tanh", seed, "float64")
    X = ds.test_inputs()
    pred = (
        MLP(np, params, "tanh", ds.task).predict((X - ds.x_mean) / ds.x_scale).ravel() * ds.y_scale
        + ds.y_mean
    )
    return pyfunc.save(folder / "model" / "model", params, ds, "tanh", X, pred, cfg.data), pred


def _inputs(ds):
    """The test rows as the model takes them: a DataFrame of the data set's columns."""
    import pandas as pd

    return pd.DataFrame(ds.test_inputs(), columns=ds.input_columns)


def _mlmodel(folder: Path) -> dict:
    return yaml.safe_load((folder / "MLmodel").read_text())


def test_a_model_copied_from_the_template_is_what_mlflow_saves(tmp_path, fresh_cache, monkeypatch):
    cfg = make_cfg("data=diabetes")
    ds = data.load(cfg.data, 0)
    first, _ = _save(tmp_path / "a", 0, ds, cfg)  # saved by MLflow, as the template
    second, pred = _save(tmp_path / "b", 1, ds, cfg)  # copied from it
    assert len(list(fresh_cache.iterdir())) == 1
    monkeypatch.setattr(state.process(), "templates", {})
    monkeypatch.setenv("SWEEPER_CACHE_DIR", str(tmp_path / "other"))
    direct, _ = _save(tmp_path / "c", 1, ds, cfg)  # the same model saved by MLflow itself

    files = sorted(p.relative_to(second).as_posix() for p in second.rglob("*") if p.is_file())
    assert files == sorted(
        p.relative_to(direct).as_posix() for p in direct.rglob("*") if p.is_file()
    )
    for f in files:
        if f != "MLmodel":
            assert filecmp.cmp(second / f, direct / f, shallow=False), f
    got, want = _mlmodel(second), _mlmodel(direct)
    assert got["model_uuid"] != _mlmodel(first)["model_uuid"]
    for name in ("weights", "meta"):
        assert got["flavors"]["python_function"]["artifacts"][name]["uri"] == str(
            tmp_path / "b" / "model" / f"{name}{'.npz' if name == 'weights' else '.json'}"
        )
        for d in (got, want):
            d["flavors"]["python_function"]["artifacts"][name].pop("uri")
    assert {k: v for k, v in got.items() if k not in PER_MODEL} == {
        k: v for k, v in want.items() if k not in PER_MODEL
    }
    loaded = mlflow.pyfunc.load_model(str(second))
    np.testing.assert_allclose(loaded.predict(_inputs(ds)), pred, rtol=1e-12)


def test_another_process_reuses_the_cached_template_and_a_broken_cache_is_not_used(
    tmp_path, fresh_cache, monkeypatch
):
    cfg = make_cfg("data=diabetes")
    ds = data.load(cfg.data, 0)
    _save(tmp_path / "a", 0, ds, cfg)
    (template,) = fresh_cache.iterdir()
    monkeypatch.setattr(state.process(), "templates", {})  # as a new process
    saved = []
    monkeypatch.setattr(mlflow.pyfunc, "save_model", lambda *a, **k: saved.append(a))
    _save(tmp_path / "b", 1, ds, cfg)
    assert saved == []  # from the cache
    (template / "MLmodel").unlink()  # a half-written template (a crash): never used, made again
    monkeypatch.undo()
    monkeypatch.setenv("SWEEPER_CACHE_DIR", str(fresh_cache.parent))
    monkeypatch.setattr(state.process(), "templates", {})
    folder, pred = _save(tmp_path / "c", 2, ds, cfg)
    assert (template / "MLmodel").is_file()  # repaired for the next process
    np.testing.assert_allclose(
        mlflow.pyfunc.load_model(str(folder)).predict(_inputs(ds)), pred, rtol=1e-12
    )


def test_a_cache_cleared_while_a_process_runs_is_made_again(tmp_path, fresh_cache):
    """A long process (the Python API, a pytest worker) keeps its template's path: the user clearing the cache
    folder meanwhile must not fail the next run's records ("its results could not be kept")."""
    import shutil

    cfg = make_cfg("data=diabetes")
    ds = data.load(cfg.data, 0)
    _save(tmp_path / "a", 0, ds, cfg)
    shutil.rmtree(fresh_cache)
    folder, pred = _save(tmp_path / "b", 1, ds, cfg)
    assert len(list(fresh_cache.iterdir())) == 1  # the template made again, in the cache
    np.testing.assert_allclose(
        mlflow.pyfunc.load_model(str(folder)).predict(_inputs(ds)), pred, rtol=1e-12
    )


def test_an_unwritable_cache_still_saves_models(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("SWEEPER_CACHE_DIR", str(blocker))
    monkeypatch.setattr(state.process(), "templates", {})
    cfg = make_cfg("data=diabetes")
    ds = data.load(cfg.data, 0)
    for i in range(2):
        folder, pred = _save(tmp_path / str(i), i, ds, cfg)
        np.testing.assert_allclose(
            mlflow.pyfunc.load_model(str(folder)).predict(_inputs(ds)), pred, rtol=1e-12
        )


def test_a_template_of_an_unknown_layout_is_not_copied_the_model_is_saved_by_mlflow(
    tmp_path, fresh_cache
):
    cfg = make_cfg("data=diabetes")
    ds = data.load(cfg.data, 0)
    _save(tmp_path / "a", 0, ds, cfg)
    (template,) = fresh_cache.iterdir()
    mlmodel = template / "MLmodel"  # a future MLflow that writes no model_uuid line
    mlmodel.write_text(
        "\n".join(l for l in mlmodel.read_text().splitlines() if not l.startswith("model_uuid:"))
        + "\n"
    )
    folder, pred = _save(tmp_path / "b", 1, ds, cfg)
    assert _mlmodel(folder)["model_uuid"]  # written by MLflow itself
    np.testing.assert_allclose(
        mlflow.pyfunc.load_model(str(folder)).predict(_inputs(ds)), pred, rtol=1e-12
    )
