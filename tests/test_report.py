"""A sweep at a glance: leaderboard and plots on the parent run, a live MLflow server, loadable models."""
import csv
import io
import json
import subprocess
import sys

import mlflow
import numpy as np
import pytest

from sweeper import data
from conftest import all_runs, cli, client_for, http_get, http_post, make_cfg, mlflow_server

FAST = ("epochs=300", "log_every=10")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, _template_store):
    """One real 4-run multirun (lr x depth) into its own store, shared by the tests of this module."""
    import shutil

    tmp = tmp_path_factory.mktemp("report")
    store = tmp / "mlruns" / "mlflow.db"
    store.parent.mkdir()
    shutil.copy(_template_store, store)
    proc = cli(tmp, "-m", "lr=0.001,0.01", "depth=1,2", *FAST, store=store)
    assert proc.returncode == 0, proc.stderr
    (parent,) = [r for r in all_runs(store) if "mlflow.parentRunId" not in r.data.tags]
    return {"store": store, "tmp": tmp, "proc": proc, "parent": parent}


@pytest.fixture
def server(sweep):
    """``mlflow server`` on 127.0.0.1 (a free port) over the sweep's store; stopped after the test."""
    with mlflow_server(sweep["store"]) as url:
        yield url


def test_a_live_server_shows_the_parent_its_children_and_the_summary(sweep, server):
    experiments = json.loads(http_get(f"{server}/api/2.0/mlflow/experiments/get-by-name?experiment_name=diabetes"))
    exp_id = experiments["experiment"]["experiment_id"]
    runs = http_post(f"{server}/api/2.0/mlflow/runs/search", {"experiment_ids": [exp_id], "max_results": 100})["runs"]
    tags = [{t["key"]: t["value"] for t in r["data"].get("tags", [])} for r in runs]
    parents = [r for r, t in zip(runs, tags) if "mlflow.parentRunId" not in t]
    children = [r for r, t in zip(runs, tags) if t.get("mlflow.parentRunId") == sweep["parent"].info.run_id]
    assert len(parents) == 1 and len(children) == 4
    for child in children:
        names = {m["key"] for m in child["data"]["metrics"]}
        assert {"test_mse", "test_mae", "wall_time_s"} <= names
        assert child["info"]["status"] == "FINISHED"
    parent_id = parents[0]["info"]["run_id"]
    listing = json.loads(http_get(f"{server}/api/2.0/mlflow/artifacts/list?run_id={parent_id}"))
    assert {"summary.csv", "summary.md", "plots"} <= {f["path"] for f in listing["files"]}
    plots = json.loads(http_get(f"{server}/api/2.0/mlflow/artifacts/list?run_id={parent_id}&path=plots"))
    assert {"plots/val_metric_vs_lr.png", "plots/loss_curves_top.png"} <= {f["path"] for f in plots["files"]}


def test_leaderboard_is_sorted_and_logged_on_the_parent(sweep):
    c = client_for(sweep["store"])
    parent = c.get_run(sweep["parent"].info.run_id)
    rows = list(csv.DictReader(io.StringIO(open(c.download_artifacts(parent.info.run_id, "summary.csv")).read())))
    assert len(rows) == 4
    assert {"run", "lr", "depth", "val_mse", "test_mse", "train_time_s", "status", "run_id"} <= set(rows[0])
    val = [float(r["val_mse"]) for r in rows]
    assert val == sorted(val)  # best first
    assert parent.data.metrics["best_val_mse"] == pytest.approx(val[0])
    assert parent.data.tags["best_run_id"] == rows[0]["run_id"]
    assert parent.data.metrics["n_finished"] == 4 and parent.data.metrics["n_failed"] == 0
    assert rows[0]["run"] == f"lr={rows[0]['lr']},depth={rows[0]['depth']},cpu"  # readable run names
    png = open(c.download_artifacts(parent.info.run_id, "plots/val_metric_vs_lr.png"), "rb").read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    out = sweep["proc"].stdout
    assert "[1/4]" in out and "[4/4]" in out and "val_mse=" in out  # a line per finished job
    assert "mlflow ui --backend-store-uri sqlite:///" in out


def test_report_command_rebuilds_the_same_leaderboard_from_the_store(sweep):
    c = client_for(sweep["store"])
    parent_id = sweep["parent"].info.run_id
    before = open(c.download_artifacts(parent_id, "summary.md")).read()
    proc = subprocess.run(
        [sys.executable, "-m", "sweeper.report", "--experiment", "diabetes", "--tracking-uri", f"sqlite:///{sweep['store']}"],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    table = [line for line in proc.stdout.splitlines() if line.startswith(("run ", "lr=", "---"))]
    assert len(table) == 6 and "\n".join(table) in sweep["proc"].stdout  # the very table printed at the end
    assert open(c.download_artifacts(parent_id, "summary.md")).read() == before
    bad = subprocess.run([sys.executable, "-m", "sweeper.report", "--experiment", "nope", "--tracking-uri",
                          f"sqlite:///{sweep['store']}"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("sweeper: error: --experiment=nope does not exist")


def test_report_takes_latest_and_reports_single_runs(sweep):
    """In process (the command's main): --experiment NAME --latest is the latest sweep; --run ID (or a --parent
    that is no sweep's parent) reports that one run; --latest alone is refused in one line."""
    import contextlib

    from sweeper import report

    uri = f"sqlite:///{sweep['store']}"
    child = next(r for r in all_runs(sweep["store"]) if "mlflow.parentRunId" in r.data.tags)
    outs = []
    for args in (["--experiment", "diabetes", "--latest"], ["--run", child.info.run_id],
                 ["--parent", child.info.run_id]):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert report.main([*args, "--tracking-uri", uri]) == 0
        outs.append(buf.getvalue())
    assert f"parent run {sweep['parent'].info.run_id}" in outs[0] and "best:" in outs[0]
    assert outs[1] == outs[2] and outs[1].startswith(f"Run {child.info.run_name} ({child.info.run_id}): FINISHED")
    assert f"val_mse          {child.data.metrics['val_mse']:.4g}" in outs[1]
    assert f"#/experiments/{child.info.experiment_id}/runs/{child.info.run_id}" in outs[1]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert report.main(["--latest", "--run", child.info.run_id, "--tracking-uri", uri]) == 2
    assert err.getvalue().strip() == "sweeper: error: --latest needs --experiment NAME: expected --experiment NAME --latest"


def test_pyfunc_model_reproduces_the_logged_test_predictions(sweep):
    c = client_for(sweep["store"])
    child = next(r for r in all_runs(sweep["store"]) if "mlflow.parentRunId" in r.data.tags)
    mlflow.set_tracking_uri(f"sqlite:///{sweep['store']}")
    model = mlflow.pyfunc.load_model(f"runs:/{child.info.run_id}/model")
    logged = np.loadtxt(c.download_artifacts(child.info.run_id, "test_predictions.csv"), delimiter=",", skiprows=1)
    ds = data.load(make_cfg("data=diabetes").data, seed=0)
    np.testing.assert_allclose(model.predict(ds.raw(ds.X_test)), logged[:, 1], rtol=1e-12)
    np.testing.assert_allclose(logged[:, 0], ds.to_original(ds.y_test).ravel())
    mse = float(np.mean((logged[:, 1] - logged[:, 0]) ** 2))
    assert child.data.metrics["test_mse"] == pytest.approx(mse, rel=1e-12)
    assert model.metadata.signature is not None


def test_the_painter_draws_what_the_launching_process_would_and_a_dead_one_is_replaced(tmp_path):
    """The sweep's painter process (sweeper.plots) and an in-process draw give the same PNG files; a painter
    that died is not waited for: the figures are drawn here."""
    from sweeper import plots

    figure = {"name": "plots/a.png", "size": [4, 3], "axes": [{"title": "t", "xlabel": "x", "ylabel": "y", "yscale": "log",
                                                              "lines": [{"x": [1, 2, 3], "y": [3.0, 2.0, 1.5], "label": "run"}]}]}
    here = plots.draw_all([figure], tmp_path / "here")
    painter = plots.Painter().start()
    try:
        painter.submit([figure], tmp_path / "there")
        there = painter.collect()
        assert there == {"plots/a.png": tmp_path / "there" / "plots" / "a.png"}
        assert there["plots/a.png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert there["plots/a.png"].stat().st_size == here["plots/a.png"].stat().st_size
        painter.proc.kill()
        painter.proc.wait()
        painter.submit([figure], tmp_path / "after")
        assert painter.collect() == {"plots/a.png": tmp_path / "after" / "plots" / "a.png"} and painter.proc is None
    finally:
        painter.close()
