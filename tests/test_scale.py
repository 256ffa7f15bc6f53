"""Scale out: Hydra launchers, a remote tracking server, faults (Ctrl-C, SIGKILL, a dead server), resume (Optuna: test_optuna.py)."""

import json
import signal
import subprocess
import sys
import time

import pytest
from mlflow import MlflowClient

from conftest import (
    NO_BASELINES,
    command,
    command_env,
    FAST_ARGS,
    all_runs,
    cli,
    client_for,
    free_port,
    http_get,
    http_post,
    make_cfg,
    mlflow_server,
)
from sweeper.base.files import SWEEP_FILE
from sweeper.job import sweepdir
from sweeper.sweep import life as sweep
from sweeper.base.backend import FAKE_GPU_ENV
from sweeper.job.context import JobContext
from sweeper.job.record import run


def children(store):
    return [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]


def parents(store):
    return [r for r in all_runs(store) if "mlflow.parentRunId" not in r.data.tags]


@pytest.mark.slow
@pytest.mark.parametrize(
    "launcher",
    [["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], ["hydra/launcher=submitit_local"]],
    ids=["joblib", "submitit_local"],
)
def test_launchers_give_the_same_parent_children_speedup_and_summary(tmp_path, store, launcher):
    proc = cli(
        tmp_path,
        "-m",
        *launcher,
        "device=cpu,gpu",
        "lr=0.001,0.01",
        *FAST_ARGS,
        store=store,
        env={FAKE_GPU_ENV: "numpy"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    (parent,) = parents(store)
    kids = children(store)
    assert len(kids) == 4 and all(
        k.data.tags["mlflow.parentRunId"] == parent.info.run_id for k in kids
    )
    assert all(k.info.status == "FINISHED" for k in kids)
    pids = {k.data.tags["sweeper.pid"] for k in kids}
    # the jobs ran in other processes than the launching one
    assert parent.data.tags["sweeper.pid"] not in pids
    # joblib: its 2 workers; submitit: one a job
    assert len(pids) == (2 if launcher[0].endswith("joblib") else 4)
    gpu = [k for k in kids if k.data.tags["device"] == "gpu"]
    assert len(gpu) == 2 and all("speedup" in k.data.metrics for k in gpu)
    assert parent.data.metrics["n_finished"] == 4 and parent.info.status == "FINISHED"
    assert {a.path for a in client_for(store).list_artifacts(parent.info.run_id)} >= {
        "summary.csv",
        "summary.md",
    }


@pytest.mark.slow
def test_a_sweep_against_a_tracking_server(tmp_path, store):
    artifacts = tmp_path / "server_artifacts"
    with mlflow_server(store, artifacts=artifacts) as url:
        proc = cli(
            tmp_path, "-m", "tracking=server", f"tracking.uri={url}", "lr=0.001,0.01", *FAST_ARGS
        )
        assert proc.returncode == 0, proc.stderr
        exp = json.loads(
            http_get(f"{url}/api/2.0/mlflow/experiments/get-by-name?experiment_name=diabetes")
        )
        found = http_post(
            f"{url}/api/2.0/mlflow/runs/search",
            {"experiment_ids": [exp["experiment"]["experiment_id"]]},
        )["runs"]
        assert len(found) == 3  # the parent and two children
        child = next(
            r for r in found if any(t["key"] == "mlflow.parentRunId" for t in r["data"]["tags"])
        )
        listing = json.loads(
            http_get(f"{url}/api/2.0/mlflow/artifacts/list?run_id={child['info']['run_id']}")
        )
        assert {f["path"] for f in listing["files"]} >= {
            "config_resolved.yaml",
            "test_predictions.csv",
        }
        # the Python API's load from the server predicts as the model MLflow's own calls download
        # and load, and leaves no downloaded folder behind, however many loads
        import tempfile

        import mlflow
        import mlflow.pyfunc
        import numpy as np
        import pandas as pd

        from sweeper import api

        from sweeper.insight.publish import model_uri

        uri = model_uri(MlflowClient(url).get_run(child["info"]["run_id"]))  # what the API gives
        assert uri.startswith("models:/")
        before = mlflow.get_tracking_uri()
        mlflow.set_tracking_uri(url)  # MLflow's own path: the process-wide URI
        try:
            reference = mlflow.pyfunc.load_model(uri)
        finally:
            mlflow.set_tracking_uri(before)
        features = reference.metadata.get_input_schema().input_names()
        rows = pd.DataFrame(
            np.linspace(-0.1, 0.1, 3 * len(features)).reshape(3, -1), columns=features
        )
        scratch = tmp_path / "scratch"
        scratch.mkdir()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(tempfile, "tempdir", str(scratch))
            models = [api.load_model(uri, url) for _ in range(3)]
        assert not list(scratch.iterdir())
        for model in models:
            np.testing.assert_allclose(
                np.asarray(model.predict(rows)).ravel(),
                np.asarray(reference.predict(rows)).ravel(),
                rtol=1e-12,
            )
    assert list(artifacts.rglob("config_resolved.yaml"))  # stored by the server, under its own root


def test_an_unreachable_server_fails_before_any_job_in_one_line(tmp_path, monkeypatch):
    """Refused by one GET /health before MLflow's client is made (its HTTP calls retry for minutes)."""
    from sweeper import tracking
    from sweeper.tracking import store

    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setattr(
        store, "client", lambda uri: pytest.fail(f"MLflow was handed {uri}: its requests retry")
    )
    with pytest.raises(tracking.TrackingError, match="does not answer"):
        tracking.open_store(url)
    proc = cli(tmp_path, "-m", "tracking=server", f"tracking.uri={url}", "lr=0.1,0.2")
    assert proc.returncode == 2
    (line,) = [x for x in proc.stderr.splitlines() if x.strip()]
    assert (
        line.startswith("sweeper: error: tracking.uri=http://127.0.0.1:")
        and "does not answer" in line
    )
    assert not list((tmp_path / "sweep").glob("*/result.json"))


@pytest.mark.slow
def test_a_server_that_fails_mid_sweep_loses_nothing_and_upload_logs_it_later(
    tmp_path, store, monkeypatch
):
    # the bounded retries, shortened for the test
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    port = free_port()
    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir()
    (sweep_dir / SWEEP_FILE).write_text(json.dumps({"parents": [], "n_jobs": 1, "swept": ["lr"]}))
    cfg = make_cfg(
        "tracking=server", f"tracking.uri=http://127.0.0.1:{port}", "lr=0.01", *FAST_ARGS
    )
    result = run(
        cfg, JobContext(output_dir=sweep_dir / "0", overrides=["lr=0.01"], sweep_dir=sweep_dir)
    )
    assert result["status"] == "FINISHED" and result["pending_upload"] is True
    assert "failed at the start" in result["tracking_error"] and result["run_id"] is None
    assert result["metrics"]["test_mse"] > 0  # trained anyway: nothing lost
    assert sweep.exit_code(sweepdir.results(sweep_dir), 1) == 1

    with mlflow_server(store, port=port) as url:
        up = command("sweeper.upload", str(sweep_dir))
        assert up.returncode == 0, up.stderr
        (uploaded,) = [r for r in all_runs(store) if r.data.tags.get("uploaded_from")]
        assert uploaded.info.status == "FINISHED" and uploaded.data.params["lr"] == "0.01"
        assert uploaded.data.metrics["test_mse"] == pytest.approx(result["metrics"]["test_mse"])
        # the run's artifacts live behind the server (mlflow-artifacts:/)
        server = MlflowClient(url)
        assert len(server.get_metric_history(uploaded.info.run_id, "train_loss")) == 31
        assert {a.path for a in server.list_artifacts(uploaded.info.run_id)} >= {
            "config_resolved.yaml"
        }
        # the model, as a logged model
        (model,) = server.search_logged_models([uploaded.info.experiment_id])
        assert model.source_run_id == uploaded.info.run_id and model.status == "READY"
    after = json.loads((sweep_dir / "0" / "result.json").read_text())
    assert after["pending_upload"] is False and after["run_id"] == uploaded.info.run_id
    again = command("sweeper.upload", str(sweep_dir))
    assert again.returncode == 0 and "nothing to upload" in again.stdout


def _start_long_sweep(tmp_path, store):
    """A 2-job sweep: a short job, then one that would train for minutes; returns once the second runs."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sweeper",
            "-m",
            NO_BASELINES,
            "epochs=300,100000000",
            "log_every=100000000",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
            f"tracking.uri=sqlite:///{store}",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=command_env(),  # no figures (conftest.NO_PLOTS)
    )
    deadline = time.monotonic() + 120
    # the long job's run (the short one is RUNNING for a moment too: its run is created when it starts)
    while not any(
        r.info.status == "RUNNING" and r.info.run_name.startswith("epochs=100000000")
        for r in children(store)
    ):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.3)
    return proc  # its run is RUNNING: it trains, or is about to (a signal either way KILLs it)


@pytest.mark.slow
def test_ctrl_c_kills_the_running_job_and_keeps_the_finished_ones(tmp_path, store):
    proc = _start_long_sweep(tmp_path, store)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode != 0
    by_epochs = {r.data.params["epochs"]: r for r in children(store)}
    assert (
        by_epochs["300"].info.status == "FINISHED" and "test_mse" in by_epochs["300"].data.metrics
    )
    assert by_epochs["100000000"].info.status == "KILLED"
    (parent,) = parents(store)
    assert parent.info.status == "KILLED"
    result = json.loads(next((tmp_path / "sweep").glob("1/result.json")).read_text())
    assert result["status"] == "KILLED"


@pytest.mark.slow
def test_a_sigkilled_worker_leaves_no_run_running_after_the_report(tmp_path, store):
    proc = _start_long_sweep(tmp_path, store)
    proc.kill()
    proc.communicate(timeout=60)
    (orphan,) = [r for r in children(store) if r.info.status == "RUNNING"]
    report = command(
        "sweeper.report", "--experiment", "diabetes", "--tracking-uri", f"sqlite:///{store}"
    )
    assert report.returncode == 0, report.stderr
    assert "marked 1 orphaned run(s) FAILED" in report.stdout
    now = client_for(store).get_run(orphan.info.run_id)
    assert now.info.status == "FAILED" and now.data.tags["failure_reason"].startswith("orphaned")
    # the report closed the parent too: KILLED, since a job died with the sweep
    (parent,) = parents(store)
    assert (
        parent.info.status == "KILLED"
        and parent.data.tags["failure_reason"] == "incomplete: 1 run(s) orphaned"
    )
    # zero counts: tags only
    assert parent.data.metrics["n_finished"] == 1 and parent.data.tags["n_not_run"] == "0"


@pytest.mark.slow
def test_resume_skips_configurations_that_already_finished(tmp_path, store):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert cli(tmp_path / "a", "-m", "lr=0.001,0.01", *FAST_ARGS, store=store).returncode == 0
    proc = cli(tmp_path / "b", "-m", "lr=0.001,0.01,0.1", "resume=true", *FAST_ARGS, store=store)
    assert proc.returncode == 0, proc.stderr
    results = {r["overrides"][0]: r for r in sweepdir.results(tmp_path / "b" / "sweep")}
    assert results["lr=0.1"]["status"] == "FINISHED"
    assert results["lr=0.001"]["status"] == results["lr=0.01"]["status"] == "SKIPPED"
    assert results["lr=0.01"]["resumed_from"] in {r.info.run_id for r in children(store)}
    assert len(children(store)) == 3  # 2 + 1 new; nothing trained twice
    newest = max(parents(store), key=lambda r: r.info.start_time)
    assert newest.data.metrics["n_skipped"] == 2 and newest.data.metrics["n_finished"] == 1
    again = cli(tmp_path / "b", "-m", "lr=0.001,0.01,0.1", "resume=true", *FAST_ARGS, store=store)
    # one line per resumed run
    assert again.returncode == 0 and "SKIPPED 3 job(s)" not in again.stdout


@pytest.mark.slow
def test_ray_launcher_on_an_in_process_local_ray(tmp_path, store):
    """Ray (the ray extra, not installed by dev) started by the launcher itself, bound to the loopback."""
    pytest.importorskip(
        "hydra_plugins.hydra_ray_launcher",
        reason="hydra-ray-launcher is not installed: pip install -e '.[ray]'",
    )
    proc = cli(
        tmp_path,
        "-m",
        "hydra/launcher=ray",
        "+hydra.launcher.ray.init._node_ip_address=127.0.0.1",
        "+hydra.launcher.ray.init.include_dashboard=false",
        "lr=0.001,0.01",
        *FAST_ARGS,
        store=store,
    )
    assert proc.returncode == 0, proc.stderr
    (parent,) = parents(store)
    kids = children(store)
    assert len(kids) == 2 and all(k.info.status == "FINISHED" for k in kids)
    assert all(k.data.tags["mlflow.parentRunId"] == parent.info.run_id for k in kids)
    assert parent.info.status == "FINISHED" and parent.data.metrics["n_finished"] == 2
