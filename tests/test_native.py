"""MLflow-native records, checked through a live ``mlflow server`` (REST API): logged models, dataset
inputs, the experiment's kind, registration with an alias."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import mlflow
import numpy as np
import pandas as pd
import pytest

from conftest import FAST_ARGS, cli, command, copy_store, http_get, http_post, mlflow_server
from sweeper import tracking


@pytest.fixture(scope="module")
def served(tmp_path_factory, _template_store):
    """A 2-job sweep logged through a live server; yields the server's URL, the store and the sweep folder."""
    tmp = tmp_path_factory.mktemp("native")
    db = copy_store(_template_store, tmp)
    with mlflow_server(db) as url:
        proc = cli(tmp, "-m", "tracking=server", f"tracking.uri={url}", "lr=0.001,0.01", *FAST_ARGS)
        assert proc.returncode == 0, proc.stderr
        exp = json.loads(
            http_get(f"{url}/api/2.0/mlflow/experiments/get-by-name?experiment_name=diabetes")
        )
        yield {
            "url": url,
            "store": db,
            "tmp": tmp,
            "experiment": exp["experiment"],
            "stdout": proc.stdout,
        }


def _children(served):
    runs = http_post(
        f"{served['url']}/api/2.0/mlflow/runs/search",
        {"experiment_ids": [served["experiment"]["experiment_id"]]},
    )["runs"]
    return [r for r in runs if any(t["key"] == "mlflow.parentRunId" for t in r["data"]["tags"])]


@pytest.mark.slow
def test_the_experiment_opens_on_the_model_training_views(served):
    """MLflow 3.17's UI opens the views its page address names (``workflowType``; else GenAI, in a browser that
    never chose) whatever the experiment's kind tag says: the address a sweep ends with names the model-training
    views, and the UI this server serves reads that parameter."""
    tags = {t["key"]: t["value"] for t in served["experiment"].get("tags", [])}
    assert tags[tracking.EXPERIMENT_KIND] == "custom_model_development"
    (line,) = [ln for ln in served["stdout"].splitlines() if ln.startswith("browse with: ")]
    page = f"{served['url']}/#/experiments/{served['experiment']['experiment_id']}/runs?workflowType=machine_learning"
    # and opens the sweep's shared view (its columns in view): an experiment tag of MLflow's UI state (tracking.ui)
    key = re.fullmatch(
        rf"browse with: {re.escape(page)}&viewStateShareKey=(sweeper-[0-9a-f]{{32}})", line
    ).group(1)
    assert "mlflow.sharedViewState." + key in tags
    index = http_get(page.partition("#")[0]).decode()  # the hash part is the UI's own route
    script = re.search(r'src="(static-files/static/js/main\.[0-9a-f]+\.js)"', index).group(1)
    ui = http_get(f"{served['url']}/{script}").decode()
    assert 'get("workflowType")' in ui and '"machine_learning"' in ui


def test_each_child_has_a_logged_model_linked_to_its_run_and_metrics(served):
    children = _children(served)
    assert len(children) == 2
    found = http_post(
        f"{served['url']}/api/2.0/mlflow/logged-models/search",
        {"experiment_ids": [served["experiment"]["experiment_id"]]},
    )["models"]
    by_run = {m["info"]["source_run_id"]: m for m in found}
    assert set(by_run) == {c["info"]["run_id"] for c in children}
    for child in children:
        model = by_run[child["info"]["run_id"]]
        assert model["info"]["name"] == "model" and model["info"]["status"] == "LOGGED_MODEL_READY"
        metrics = {m["key"]: m for m in model["data"]["metrics"]}
        run_metrics = {m["key"]: m["value"] for m in child["data"]["metrics"]}
        assert metrics["val_mse"]["value"] == pytest.approx(run_metrics["val_mse"])
        assert metrics["test_mse"]["dataset_name"] == "diabetes"
        params = {p["key"]: p["value"] for p in model["data"]["params"]}
        assert params["lr"] in ("0.001", "0.01")
        outputs = child["outputs"]["model_outputs"]
        assert [o["model_id"] for o in outputs] == [model["info"]["model_id"]]


def test_each_child_logs_its_three_splits_as_dataset_inputs(served):
    for child in _children(served):
        inputs = child["inputs"]["dataset_inputs"]
        contexts = {
            next(t["value"] for t in i["tags"] if t["key"] == "mlflow.data.context"): i["dataset"]
            for i in inputs
        }
        assert set(contexts) == {"training", "validation", "test"}
        assert {d["name"] for d in contexts.values()} == {"diabetes"}
        assert len({d["digest"] for d in contexts.values()}) == 3  # three different splits
        assert json.loads(contexts["test"]["source"]) == {"tags": {"sweeper.data": "diabetes"}}
        assert json.loads(contexts["training"]["profile"])["num_features"] == 10


def test_the_run_model_loads_as_before_through_the_server(served):
    (child, *_) = _children(served)
    mlflow.set_tracking_uri(served["url"])
    model = mlflow.pyfunc.load_model(f"runs:/{child['info']['run_id']}/model")
    out = model.predict(
        pd.DataFrame(
            np.zeros((3, 10)), columns=["age", "sex", "bmi", "bp", *(f"s{i}" for i in range(1, 7))]
        )
    )
    assert out.shape == (3,) and np.isfinite(out).all()
    assert model.metadata.run_id == child["info"]["run_id"]


def test_promote_register_loads_by_alias_and_predicts_as_the_run_did(served):
    out = served["tmp"] / "promoted"
    proc = command(
        "sweeper.promote",
        "--experiment",
        "diabetes",
        "--tracking-uri",
        served["url"],
        "--out-dir",
        str(out),
        "--register",
        "diabetes_mlp",
        cwd=served["tmp"],
    )
    assert proc.returncode == 0, proc.stderr
    assert "models:/diabetes_mlp@champion" in proc.stdout
    alias = json.loads(
        http_get(
            f"{served['url']}/api/2.0/mlflow/registered-models/alias"
            "?name=diabetes_mlp&alias=champion"
        )
    )["model_version"]
    best = next(
        line.split("run ")[1].split()[0] for line in proc.stdout.splitlines() if " run " in line
    )
    assert alias["run_id"] == best and alias["source"].startswith("models:/m-")
    mlflow.set_tracking_uri(served["url"])
    X = pd.DataFrame(
        np.random.default_rng(0).normal(size=(5, 10)),
        columns=["age", "sex", "bmi", "bp", *(f"s{i}" for i in range(1, 7))],
    )
    by_alias = mlflow.pyfunc.load_model("models:/diabetes_mlp@champion").predict(X)
    by_run = mlflow.pyfunc.load_model(f"runs:/{best}/model").predict(X)
    np.testing.assert_array_equal(by_alias, by_run)


@pytest.mark.slow
def test_runs_lists_the_experiments_and_their_sweeps_as_the_store_holds_them(served):
    def runs(*args):
        proc = command("sweeper.runs", "--tracking-uri", served["url"], *args)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    parent = next(
        r
        for r in http_post(
            f"{served['url']}/api/2.0/mlflow/runs/search",
            {"experiment_ids": [served["experiment"]["experiment_id"]]},
        )["runs"]
        if not any(t["key"] == "mlflow.parentRunId" for t in r["data"]["tags"])
    )
    row = next(line.split() for line in runs().splitlines() if line.startswith("diabetes"))
    assert row[:3] == ["diabetes", "1", "2"]  # one sweep, two runs
    listing = runs("--experiment", "diabetes")
    row = next(
        line.split() for line in listing.splitlines() if line.startswith(parent["info"]["run_id"])
    )
    assert row[row.index("mlp") :][:4] == ["mlp", "2", "2", "0"]  # model, jobs, finished, failed
    assert "best_val_mse=" in listing
    bad = command("sweeper.runs", "--tracking-uri", served["url"], "--experiment", "nope")
    assert bad.returncode == 2 and bad.stderr.startswith(
        "sweeper: error: --experiment=nope does not exist"
    )


HELP_COMMANDS = [
    "sweeper.runs",
    "sweeper.report",
    "sweeper.advise",
    "sweeper.compare",
    "sweeper.summary",
    "sweeper.promote",
    "sweeper.upload",
]


def test_help_names_every_key_with_its_default_the_groups_and_the_sub_commands():
    from omegaconf import OmegaConf

    from sweeper import CONF_DIR
    from sweeper.contract.config import GROUPS, TOP_LEVEL, TRACKING, group_options

    proc = command("sweeper", "--help")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    cfg = OmegaConf.load(CONF_DIR / "config.yaml")
    for key in [k for k in cfg if k not in ("defaults", "hydra")]:
        (line,) = [ln for ln in lines if ln.split()[:1] == [key]]
        value = str(cfg[key]).lower() if isinstance(cfg[key], bool) else str(cfg[key])
        assert f"default {value};" in line and TOP_LEVEL[key].allowed in line
    for key in [*(f"tracking.{k}" for k in TRACKING), "data.val_fraction", "data.test_fraction"]:
        assert any(ln.split()[:1] == [key] for ln in lines), key
    for group in GROUPS:
        assert any(
            ln.split()[:1] == [group] and ", ".join(group_options(group)) in ln for ln in lines
        ), group
    for name in HELP_COMMANDS:
        assert any(ln.split()[:1] == [name.split(".")[1]] for ln in lines), name
    assert sum(ln.strip().startswith("python -m sweeper") for ln in lines) >= 3  # three examples
    assert "-m, --multirun" in proc.stdout and "``" not in proc.stdout


@pytest.mark.parametrize("module", HELP_COMMANDS)
def test_sub_command_help_is_plain_text(module):
    proc = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True)
    assert (
        proc.returncode == 0
        and "``" not in proc.stdout
        and "usage: python -m " + module in proc.stdout
    )
    if module == "sweeper.promote":
        assert "required" in proc.stdout and "by default the data set's name" not in proc.stdout


def test_hydra_help_stays_hydras():
    proc = command("sweeper", "--hydra-help")
    assert proc.returncode == 0 and proc.stdout.startswith("Hydra (")


def test_one_tie_break_for_the_leaderboard_the_best_run_and_promote(tmp_path, store):
    """Runs with the same val_accuracy: the lower val_log_loss wins, then the earlier run, in the leaderboard (and so
    the parent's best_run_id) and in promote alike, even when it is the older run (the leaderboard used to keep
    the store's order, newest first, on equal run names)."""
    from conftest import all_runs, run_once
    from sweeper.insight import leaderboard as report, promotion as promote

    args = ("data=xor", "epochs=2000", "log_every=100", "tracking.log_model=false")
    first = run_once(tmp_path / "a", *args, "lr=2.0", store=store)
    second = run_once(tmp_path / "b", *args, "lr=0.5", store=store)
    assert first["metrics"]["val_accuracy"] == second["metrics"]["val_accuracy"]
    assert first["metrics"]["val_log_loss"] < second["metrics"]["val_log_loss"]
    runs = all_runs(store)
    assert report.build(runs).best["run_id"] == first["run_id"]
    assert promote._ranked(runs, "val_accuracy", 1)[0].info.run_id == first["run_id"]

    # the same metrics as the first, later
    again = run_once(tmp_path / "c", *args, "lr=2.0", store=store)
    assert again["metrics"] == {
        **again["metrics"],
        **{k: first["metrics"][k] for k in ("val_accuracy", "val_log_loss")},
    }
    runs = all_runs(store)
    assert report.build(runs).best["run_id"] == first["run_id"]
    assert promote._ranked(runs, "val_accuracy", 3)[0].info.run_id == first["run_id"]


@pytest.mark.slow
def test_a_single_run_ends_naming_its_experiment_run_folder_and_ui_url(tmp_path, store):
    from conftest import all_runs
    from test_report import long_numbers

    # an lr with as many digits as Optuna's
    proc = cli(tmp_path, *FAST_ARGS, "lr=0.0012345678", store=store)
    assert proc.returncode == 0, proc.stderr
    (run,) = all_runs(store)
    *_, job, where, ui = proc.stdout.strip().splitlines()
    assert where == f"experiment diabetes  run {run.info.run_id}  output {tmp_path / 'run'}"
    assert ui == (
        f"UI: http://127.0.0.1:5000/#/experiments/{run.info.experiment_id}/runs/{run.info.run_id}"
        f"?workflowType=machine_learning  (after: mlflow ui --backend-store-uri sqlite:///{store} --port 5000)"
    )
    assert "[1/1]  epochs=300,log_every=10,lr=0.001235  val_mse=" in job and long_numbers(job) == []
    assert (
        run.info.run_name == "epochs=300,log_every=10,lr=0.001235,cpu"
        and run.data.params["lr"] == "0.0012345678"
    )
