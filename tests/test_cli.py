"""The command line for real: Hydra multiruns in subprocesses, a real MLflow store, bad input refused."""

import hashlib
import json

import pytest
from hydra import compose, initialize_config_dir

import sweeper
from conftest import all_runs, cli, client_for, command, copy_store, make_cfg

FAST = ("epochs=300", "log_every=10")
REGRESSION_METRICS = {
    "test_mse",
    "test_mae",
    "test_rmse",
    "test_r2",
    "val_mse",
    "val_mae",
    "val_rmse",
    "val_r2",
}
TIMES = {"wall_time_s", "train_time_s", "epochs_per_s", "best_epoch"}


@pytest.fixture(scope="module")
def lr_sweep(tmp_path_factory, _template_store):
    """One real 2-job multirun (lr=0.001,0.005) into its own store, shared by the tests of this module that
    only read it (``sweeper.summary`` re-publishes the same summary): its folder, store and process."""
    tmp = tmp_path_factory.mktemp("lr_sweep")
    store = copy_store(_template_store, tmp)
    proc = cli(tmp, "-m", "lr=0.001,0.005", *FAST, store=store)
    assert proc.returncode == 0, proc.stderr
    return tmp, store, proc


def test_multirun_logs_one_parent_and_a_child_per_job(lr_sweep):
    tmp_path, store, proc = lr_sweep

    runs = all_runs(store)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 2
    parent = parents[0]
    assert parent.info.status == "FINISHED" and parent.data.metrics["n_finished"] == 2
    assert {c.data.params["lr"] for c in children} == {"0.001", "0.005"}
    for child in children:
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert child.info.status == "FINISHED"
        assert REGRESSION_METRICS | TIMES <= set(child.data.metrics)
        assert child.data.tags["device"] == "cpu" and len(child.data.tags["fingerprint"]) == 16
        assert child.data.tags["overrides"].startswith("lr=0.00")
        assert child.data.params["data.name"] == "diabetes" and child.data.params["epochs"] == "300"
        history = client_for(store).get_metric_history(child.info.run_id, "train_loss")
        assert [m.step for m in history] == [*range(0, 300, 10), 300]
        artifacts = [a.path for a in client_for(store).list_artifacts(child.info.run_id)]
        assert artifacts == [
            "config_resolved.yaml",
            "curves.npz",
            "test_predictions.csv",
        ]  # the model: a logged model
    assert children[0].data.tags["fingerprint"] != children[1].data.tags["fingerprint"]

    results = sorted((tmp_path / "sweep").glob("*/result.json"))
    assert len(results) == 2
    for path in results:
        result = json.loads(path.read_text())
        assert result["status"] == "FINISHED" and result["run_id"] in {
            c.info.run_id for c in children
        }
        assert REGRESSION_METRICS <= set(result["metrics"])
    assert "mlflow ui --backend-store-uri sqlite:///" in proc.stdout
    assert "lr=0.001" in proc.stdout and "lr=0.005" in proc.stdout


@pytest.mark.slow
def test_single_run_has_no_parent(tmp_path, store):
    proc = cli(tmp_path, "data=xor", "depth=1", "width=4", "lr=0.5", "epochs=2000", store=store)
    assert proc.returncode == 0, proc.stderr
    (run,) = all_runs(store)
    assert "mlflow.parentRunId" not in run.data.tags
    assert run.data.metrics["test_accuracy"] == 1.0
    assert json.loads((tmp_path / "run" / "result.json").read_text())["run_id"] == run.info.run_id
    # the id, for promote --run-id
    assert f"FINISHED  run {run.info.run_id}" in proc.stdout + proc.stderr
    again = cli(
        tmp_path,
        "data=xor",
        "depth=1",
        "width=4",
        "lr=0.5",
        "epochs=2000",
        "resume=true",
        store=store,
    )
    assert (
        again.returncode == 0
        and f"already FINISHED as run {run.info.run_id}" in again.stdout + again.stderr
    )
    assert len(all_runs(store)) == 1


@pytest.mark.slow
def test_a_diverged_run_is_recorded_and_the_sweep_finishes(tmp_path, store):
    proc = cli(tmp_path, "-m", "depth=0", "lr=0.01,50", *FAST, store=store)
    assert proc.returncode == 0, proc.stderr
    by_lr = {r.data.params["lr"]: r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags}
    assert by_lr["0.01"].info.status == "FINISHED"
    assert by_lr["50"].info.status == "FAILED"
    assert by_lr["50"].data.tags["failure_reason"].startswith("diverged at epoch")
    assert "FAILED: diverged at epoch" in proc.stdout  # the summary ran
    (parent,) = [r for r in all_runs(store) if "mlflow.parentRunId" not in r.data.tags]
    assert parent.data.metrics["n_failed"] == 1 and parent.data.metrics["n_finished"] == 1


def digest(db):
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(db.parent.glob("mlflow.db*"))
    }


BAD_INPUTS = [
    ["lr=abc"],
    ["lr=0"],
    ["lr=-1"],
    ["depth=-1"],
    ["width=0"],
    ["epochs=0"],
    ["activation=foo"],
    ["data=nope"],
    ["-m", "lr=0.001,abc"],
    ["-m", "depth=1,-1"],
    ["-m", "data=xor,nope"],
    ["-m", "data=csv"],
]


@pytest.mark.parametrize("args", BAD_INPUTS, ids=" ".join)
def test_bad_input_exits_non_zero_in_one_line_and_leaves_the_store_unchanged(tmp_path, store, args):
    before = digest(store)
    proc = cli(tmp_path, *args, store=store)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("sweeper: error: ")
    assert (
        "is not allowed: expected" in errors[0] or "is missing for data=csv: expected" in errors[0]
    )
    assert digest(store) == before
    assert not (tmp_path / "sweep").exists() or not list((tmp_path / "sweep").glob("*/result.json"))


@pytest.mark.slow
def test_summary_command_rebuilds_the_table(tmp_path, lr_sweep):
    proc = command("sweeper.summary", str(lr_sweep[0] / "sweep"))
    assert proc.returncode == 0, proc.stderr
    assert "2 of 2 jobs reported" in proc.stdout and proc.stdout.count("FINISHED") == 2
    missing = command("sweeper.summary", str(tmp_path))
    assert missing.returncode == 2 and "holds no sweep.json" in missing.stderr


def test_named_seed_sweep_reproduces_the_seed_experiments():
    cfg = make_cfg("+sweep=seed")
    assert cfg.data.name == "diabetes"
    # The sweep is defined in the config, where Hydra's basic sweeper reads it.
    with initialize_config_dir(config_dir=str(sweeper.CONF_DIR), version_base="1.3"):
        full = compose(config_name="config", overrides=["+sweep=seed"], return_hydra_config=True)
    assert dict(full.hydra.sweeper.params) == {
        "lr": "0.001,0.005",
        "depth": "1,2",
        "epochs": "2000,10000",
    }


@pytest.mark.slow
def test_named_seed_sweep_runs_eight_jobs(tmp_path, store):
    proc = cli(tmp_path, "-m", "+sweep=seed", "log_every=100", store=store)
    assert proc.returncode == 0, proc.stderr
    children = [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == 8 and all(c.info.status == "FINISHED" for c in children)
    assert {
        (c.data.params["lr"], c.data.params["depth"], c.data.params["epochs"]) for c in children
    } == {(lr, d, e) for lr in ("0.001", "0.005") for d in ("1", "2") for e in ("2000", "10000")}
