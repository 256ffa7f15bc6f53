"""A run's record is the model that was scored: on every path that records a run (one at a time, a batched group in
the launching process or in a worker, submitit, Ray, resume, upload), a run whose weight ``seed`` differs from its
``data.split_seed`` logs a model that predicts its own test rows at its logged test metric, and a
``test_predictions.csv`` whose targets are its split's (before: a group computed in a worker was recorded with the
weight seed's split: another split's targets, scaler and encoder)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import mlflow.pyfunc
import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from conftest import all_runs, cli, client_for, copy_store
from sweeper import data

FAST = (
    "epochs=60",
    "log_every=10",
    "tracking.system_metrics=false",
    "dtype=float64",
    "baselines=none",
)
SEEDS = (
    "seed=1",
    "data.split_seed=0",
)  # the weights of seed 1 on split 0: the split seed is not the weight seed


def _expected(node: dict, fold: int | None) -> data.Dataset:
    """The rows the run was scored on, loaded here from its split seed (not through the code under test)."""
    return data.load(OmegaConf.create(node), int(node["split_seed"]), fold)


def assert_the_record_is_the_scored_model(store: Path, n: int, metric: str = "test_mse") -> None:
    """Every child run of ``store``: its logged model predicts its split's test rows at its logged ``metric`` (1e-9),
    and its test_predictions.csv holds that split's targets and those predictions."""
    c = client_for(store)
    runs = [
        r
        for r in all_runs(store)
        if "mlflow.parentRunId" in r.data.tags and r.info.lifecycle_stage == "active"
    ]
    assert len(runs) == n and {r.info.status for r in runs} == {"FINISHED"}
    for run in runs:
        rid = run.info.run_id
        node = OmegaConf.to_container(
            OmegaConf.load(c.download_artifacts(rid, "config_resolved.yaml"))
        )["data"]
        assert (run.data.params["seed"], node["split_seed"]) == ("1", 0)
        folds = int(node.get("folds") or 0)
        ds = _expected(node, 0 if folds else None)
        other = _expected({**node, "split_seed": 1}, 0 if folds else None)
        # the bug would show
        assert not np.allclose(ds.to_original(ds.y_test), other.to_original(other.y_test))
        mlflow.set_tracking_uri(f"sqlite:///{store}")  # runs:/ resolves in the current tracking URI
        model = mlflow.pyfunc.load_model(f"runs:/{rid}/model")
        pred = np.asarray(
            model.predict(pd.DataFrame(ds.test_inputs(), columns=ds.input_columns)), dtype=float
        ).ravel()
        y = ds.to_original(ds.y_test).ravel()
        assert float(np.mean((pred - y) ** 2)) == pytest.approx(
            run.data.metrics[metric], rel=1e-9, abs=1e-12
        ), rid
        with open(c.download_artifacts(rid, "test_predictions.csv")) as f:
            rows = list(csv.DictReader(f))
        np.testing.assert_allclose([float(r["y_true"]) for r in rows], y, rtol=1e-12)
        np.testing.assert_allclose([float(r["y_pred"]) for r in rows], pred, rtol=1e-9)


PATHS = {
    "one at a time": ("-m", "lr=0.01,0.02", "hydra/launcher=basic"),
    "a group in the launching process": ("-m", "lr=0.01,0.02", "hydra.launcher.cpu_workers=1"),
    "groups in workers": ("-m", "lr=0.01,0.02", "hydra.launcher.cpu_workers=2"),
    "submitit": ("-m", "lr=0.01,0.02", "hydra.launcher.engine=submitit_local"),
}


@pytest.fixture(autouse=True)
def _own_tracking_uri():
    yield
    mlflow.set_tracking_uri(None)


@pytest.mark.slow
def test_a_single_run_records_the_model_it_scored(tmp_path, store):
    proc = cli(tmp_path, *SEEDS, "lr=0.01", *FAST, store=store)
    assert proc.returncode == 0, proc.stderr
    runs = all_runs(store)
    assert len(runs) == 1
    # read as the others are
    client_for(store).set_tag(runs[0].info.run_id, "mlflow.parentRunId", "none")
    assert_the_record_is_the_scored_model(store, 1)


@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS)
def test_each_recording_path_records_the_model_it_scored(tmp_path, store, path):
    proc = cli(tmp_path, *PATHS[path], *SEEDS, *FAST, store=store)
    assert proc.returncode == 0, proc.stderr
    if path == "groups in workers":  # each group computed in a worker process, recorded in this one
        assert {
            r.data.tags.get("sweeper.batch_worker")
            for r in all_runs(store)
            if "mlflow.parentRunId" in r.data.tags
        } <= {"cpu0", "cpu1"}
    assert_the_record_is_the_scored_model(store, 2)


@pytest.mark.slow
def test_a_ray_worker_records_the_model_it_scored(tmp_path, store):
    pytest.importorskip(
        "ray", reason="Ray is not installed: pip install 'ray[default]' (not in the dev extra)"
    )
    proc = cli(
        tmp_path,
        "-m",
        "lr=0.01,0.02",
        *SEEDS,
        *FAST,
        "hydra.launcher.engine=ray",
        "+hydra.launcher.ray.init._node_ip_address=127.0.0.1",
        "+hydra.launcher.ray.init.num_cpus=2",
        store=store,
        env={"RAY_USAGE_STATS_ENABLED": "0"},
    )
    assert proc.returncode == 0, proc.stderr
    assert_the_record_is_the_scored_model(store, 2)


@pytest.mark.slow
def test_a_resumed_sweep_and_an_upload_record_the_model_they_scored(
    tmp_path, store, _template_store
):
    """resume=true trains what the first sweep lacked (in a worker); upload logs a job folder's files elsewhere."""
    for folder in ("a", "b", "other"):
        (tmp_path / folder).mkdir()
    first = cli(tmp_path / "a", "-m", "lr=0.01", *SEEDS, *FAST, store=store)
    assert first.returncode == 0, first.stderr
    again = cli(
        tmp_path / "b",
        "-m",
        "lr=0.01,0.02,0.03",
        *SEEDS,
        *FAST,
        "resume=true",
        "hydra.launcher.cpu_workers=2",
        store=store,
    )
    assert again.returncode == 0, again.stderr
    assert_the_record_is_the_scored_model(store, 3)

    from sweeper import upload

    sweep_dir = tmp_path / "b" / "sweep"
    # the runs it trained, as a store that failed at their end leaves them
    for path in sweep_dir.glob("*/result.json"):
        result = json.loads(path.read_text())
        if result["status"] == "FINISHED":
            path.write_text(json.dumps({**result, "pending_upload": True}))
    other = copy_store(_template_store, tmp_path / "other")
    assert upload.main([str(sweep_dir), "--tracking-uri", f"sqlite:///{other}"]) == 0
    assert_the_record_is_the_scored_model(other, 2)


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["hydra/launcher=basic", "hydra.launcher.cpu_workers=2"])
def test_a_cross_validated_run_logs_fold_0s_model_at_fold_0s_test_score(tmp_path, store, launcher):
    """data.folds=k: the run keeps fold 0's weights; its model uses fold 0's scaler and scores test_<metric>_fold0
    (test_<metric> is the mean over the fold models)."""
    proc = cli(tmp_path, "-m", "lr=0.01,0.02", *SEEDS, *FAST, "data.folds=3", launcher, store=store)
    assert proc.returncode == 0, proc.stderr
    assert_the_record_is_the_scored_model(store, 2, "test_mse_fold0")
    for run in all_runs(store):
        m = run.data.metrics
        if "test_mse_fold0" in m:
            assert m["test_mse"] == pytest.approx(
                np.mean([m[f"test_mse_fold{i}"] for i in range(3)]), rel=1e-12
            )
