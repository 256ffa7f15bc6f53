"""A logged model anyone can load (only what its requirements name), its named signature, the Model Registry
through promote --register, and the records an MLflow user reads (params, source, job folder, task)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import client_for, command, run_once
from test_text import DOCS, write_docs

# Run in a subprocess with -I (no PYTHONPATH, no cwd on the path) and these top-level packages refused: what a
# logged model may not need at load. The check that `sweeper` is not importable there is part of the script. It loads
# each model of its argument (a JSON list of [uri, inputs file, outputs file]) in turn: one interpreter for several
# models (each costs ~3.5 CPU-s, mostly MLflow's import).
ISOLATED = r"""
import importlib.abc, json, sys
BLOCKED = {"sweeper", "omegaconf", "hydra", "hydra_plugins", "sklearn"}
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (refused)")
sys.meta_path.insert(0, Refuse())
for name in BLOCKED:
    try:
        __import__(name)
    except ModuleNotFoundError:
        pass
    else:
        raise SystemExit(f"{name} is importable")
import mlflow.pyfunc, pandas as pd
for uri, inputs, out in json.loads(sys.argv[1]):
    model = mlflow.pyfunc.load_model(uri)
    pred = model.predict(pd.DataFrame(**json.load(open(inputs))))
    pred = pred.to_dict(orient="split") if hasattr(pred, "to_dict") else {"data": [float(v) for v in pred]}
    json.dump(pred, open(out, "w"))
loaded = sorted({m.split(".")[0] for m in sys.modules} & BLOCKED)
assert not loaded, loaded
"""


def _isolated(tmp_path: Path, uri: str, store: Path, frame: pd.DataFrame) -> dict:
    """What the model at ``uri`` predicts for ``frame`` in an isolated interpreter (:data:`ISOLATED`)."""
    return _isolated_many(tmp_path, store, [(uri, frame)])[0]


def _isolated_many(
    tmp_path: Path, store: Path, models: list[tuple[str, pd.DataFrame]]
) -> list[dict]:
    """What each model ``(uri, frame)`` predicts for its frame, all loaded by one isolated interpreter."""
    jobs = []
    for i, (uri, frame) in enumerate(models):
        inputs, out = tmp_path / f"in{i}.json", tmp_path / f"out{i}.json"
        # exact floats
        inputs.write_text(
            json.dumps({"data": frame.to_numpy().tolist(), "columns": list(frame.columns)})
        )
        jobs.append([uri, str(inputs), str(out)])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)} | {
        "MLFLOW_TRACKING_URI": f"sqlite:///{store}"
    }
    proc = subprocess.run(
        [sys.executable, "-I", "-c", ISOLATED, json.dumps(jobs)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(Path(out).read_text()) for _, _, out in jobs]


def _example(model: Path) -> pd.DataFrame:
    """The model's serving input example as a DataFrame."""
    split = json.loads((model / "serving_input_example.json").read_text())["dataframe_split"]
    return pd.DataFrame(split["data"], columns=split["columns"])


def _model_id(store: Path, run_id: str) -> str:
    return client_for(store).get_run(run_id).outputs.model_outputs[0].model_id


def _job(tmp_path: Path, store: Path, *overrides: str) -> tuple[dict, pd.DataFrame, np.ndarray]:
    """One finished run; the test rows as the model takes them; its predictions in the sweep's process."""
    result = run_once(tmp_path, *overrides, store=store)
    assert result["status"] == "FINISHED", result.get("reason")
    logged = pd.read_csv(tmp_path / "job" / "test_predictions.csv")
    example = json.loads(
        (tmp_path / "job" / "model" / "model" / "serving_input_example.json").read_text()
    )
    return result, logged, example


@pytest.fixture(scope="module")
def models(tmp_path_factory, _template_store) -> dict[str, dict]:
    """A tabular, a multiclass and a text model, each logged by a job of its own into one store, and what each
    predicts in one isolated interpreter (:func:`_isolated_many`): ``{kind: {folder, result, logged, ds, out}}``."""
    from sweeper import data
    from conftest import copy_store, make_cfg

    root = tmp_path_factory.mktemp("models")
    store = copy_store(_template_store, root)
    made, asked = {}, []
    for kind, overrides in {
        "tabular": ("data=diabetes", "depth=1", "width=8", "epochs=50"),
        "multiclass": ("data=iris", "depth=1", "width=8", "epochs=50", "lr=0.1"),
        "text": ("data=text", "data.ngram_max=2", "depth=1", "width=4", "epochs=50"),
    }.items():
        folder = root / kind
        folder.mkdir()
        if kind == "text":
            overrides += (f"data.path={write_docs(folder / 'docs.csv', DOCS)}",)
        result, logged, _ = _job(folder, store, *overrides)
        data_keys = [o for o in overrides if o.startswith("data")]
        ds = data.load(make_cfg(*data_keys).data, 0)
        if kind == "text":
            frame = pd.DataFrame(
                {"text": [str(d) for d in ds.text_test] + ["win a free prize", "unseen words only"]}
            )
            uri = f"runs:/{result['run_id']}/model"
        else:
            frame = pd.DataFrame(ds.raw(ds.X_test), columns=ds.input_columns)
            uri = f"models:/{_model_id(store, result['run_id'])}"
        # the multiclass model is handed its columns in reverse order
        asked.append((uri, frame[frame.columns[::-1]] if kind == "multiclass" else frame))
        made[kind] = {
            "folder": folder,
            "result": result,
            "logged": logged,
            "ds": ds,
            "frame": frame,
        }
    for found, out in zip(made.values(), _isolated_many(root, store, asked)):
        found["out"] = out
    return made


def test_a_tabular_model_loads_without_sweeper_takes_named_columns_in_any_order(models):
    import mlflow.pyfunc
    from mlflow.exceptions import MlflowException

    ds, frame, logged, out = (models["tabular"][k] for k in ("ds", "frame", "logged", "out"))
    folder = models["tabular"]["folder"]
    assert list(frame.columns)[:3] == ["age", "sex", "bmi"]
    np.testing.assert_allclose(out["data"], logged["y_pred"], rtol=1e-12)
    requirements = (folder / "job" / "model" / "model" / "requirements.txt").read_text().split()
    assert sorted(r.split("==")[0] for r in requirements) == ["mlflow", "numpy", "pandas"]

    model = mlflow.pyfunc.load_model(str(folder / "job" / "model" / "model"))
    assert [c.name for c in model.metadata.get_input_schema().inputs] == ds.input_columns
    np.testing.assert_array_equal(model.predict(frame[frame.columns[::-1]]), model.predict(frame))
    with pytest.raises(MlflowException, match="bmi"):
        model.predict(frame.drop(columns="bmi"))


def test_a_multiclass_model_names_its_classes_and_loads_without_sweeper(models):
    ds, logged, out = (models["multiclass"][k] for k in ("ds", "logged", "out"))
    assert out["columns"] == ["p_setosa", "p_versicolor", "p_virginica"]
    np.testing.assert_allclose(out["data"], logged[out["columns"]].to_numpy(), rtol=1e-12)
    assert set(logged["y_true"]) <= set(ds.classes)  # labels, not indices


def test_a_text_model_loads_without_sweeper_or_scikit_learn(models):
    folder, logged, out = (models["text"][k] for k in ("folder", "logged", "out"))
    np.testing.assert_allclose(out["data"][: len(logged)], logged["y_pred"], rtol=1e-12)
    requirements = (folder / "job" / "model" / "model" / "requirements.txt").read_text().split()
    assert sorted(r.split("==")[0] for r in requirements) == ["mlflow", "numpy", "pandas", "scipy"]


@pytest.mark.slow
def test_mlflow_models_predict_serves_it_with_the_local_environment(tmp_path, store):
    result, logged, example = _job(
        tmp_path, store, "data=diabetes", "depth=1", "width=8", "epochs=50"
    )
    frame = pd.read_csv(tmp_path / "job" / "test_predictions.csv")
    src = tmp_path / "job" / "model" / "model"
    out = tmp_path / "pred.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlflow",
            "models",
            "predict",
            "-m",
            str(src),
            "-i",
            str(src / "serving_input_example.json"),
            "-t",
            "json",
            "-o",
            str(out),
            "--env-manager",
            "local",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    n = len(example["dataframe_split"]["data"])
    assert len(json.loads(out.read_text())["predictions"]) == n and n == min(5, len(frame))


def test_a_child_runs_params_are_its_hyperparameters_and_its_tags_name_its_source(tmp_path, store):
    result = run_once(tmp_path, "data=diabetes", "epochs=20", store=store)
    run = client_for(store).get_run(result["run_id"])
    params, tags = run.data.params, run.data.tags
    assert not [
        k for k in params if k.startswith("tracking.") or k in ("resume", "sync_every_epoch")
    ], params
    assert params["lr"] and params["data.name"] == "diabetes"
    assert tags["config.tracking.curve_points"] and tags["config.resume"] == "False"
    assert tags["hydra.job_dir"] == str((tmp_path / "job").resolve())
    # the UI's Source column: a short name (its last /-part: the whole command's was a cut path); the command: its own tag
    assert (
        tags["mlflow.source.name"] == "python -m sweeper" and tags["mlflow.source.type"] == "LOCAL"
    )
    assert tags["sweeper.rerun"].startswith("python -m sweeper")
    # its logged model keeps the name runs:/<id>/model resolves, and is found by its run's name (the Models tab)
    c = client_for(store)
    found = c.search_logged_models(
        [run.info.experiment_id], filter_string=f"tags.run_name = '{run.info.run_name}'"
    )
    assert [(m.source_run_id, m.name) for m in found] == [(run.info.run_id, "model")]
    assert tags["mlflow.user"] and tags["task"] == "regression"
    metrics = client_for(store).get_run(result["run_id"]).data.metrics
    assert "val_mse" in metrics


def _promote(cwd: Path, store: Path, *args: str) -> subprocess.CompletedProcess:
    return command(
        "sweeper.promote",
        "--experiment",
        "diabetes",
        "--tracking-uri",
        f"sqlite:///{store}",
        "--out-dir",
        str(cwd / "frozen"),
        *args,
        cwd=cwd,
        timeout=300,
    )


@pytest.mark.slow
def test_promote_register_with_a_tracking_uri_from_another_folder(tmp_path, store):
    import mlflow.pyfunc

    result = run_once(tmp_path, "data=diabetes", "epochs=50", store=store)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = _promote(elsewhere, store, "--register", "diabetes_mlp")
    assert proc.returncode == 0, proc.stderr
    assert "models:/diabetes_mlp@champion" in proc.stdout
    assert sorted(p.name for p in elsewhere.iterdir()) == ["frozen"]  # no stray mlflow.db or mlruns
    c = client_for(store)
    (version,) = c.search_model_versions("name='diabetes_mlp'")
    assert (
        version.run_id == result["run_id"]
        and c.get_model_version_by_alias("diabetes_mlp", "champion").version == version.version
    )
    mlflow.set_tracking_uri(f"sqlite:///{store}")
    try:
        model = mlflow.pyfunc.load_model("models:/diabetes_mlp@champion")
    finally:
        mlflow.set_tracking_uri(None)
    frame = _example(tmp_path / "job" / "model" / "model")
    assert np.isfinite(model.predict(frame)).all()


def test_a_failed_registration_writes_no_pin_and_no_empty_model(tmp_path, store):
    result = run_once(tmp_path, "data=diabetes", "epochs=50", store=store)
    c = client_for(store)
    # the source cannot be resolved: the version fails
    c.delete_logged_model(_model_id(store, result["run_id"]))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = _promote(elsewhere, store, "--register", "broken")
    assert (
        proc.returncode == 2
        and proc.stderr.startswith("sweeper: error: --register=broken")
        and len(proc.stderr.strip().splitlines()) == 1
    ), proc.stderr
    assert list(elsewhere.iterdir()) == []  # no pin, no stray store
    assert c.search_registered_models() == []


@pytest.mark.parametrize(
    "fails, undone",
    [
        ("create_model_version", ["delete_registered_model"]),  # the registered model it created
        ("set_registered_model_alias", ["delete_model_version"]),  # one that existed: its version
        (None, []),
    ],
)
def test_a_registration_cut_short_deletes_what_it_created_and_a_done_one_nothing(
    tmp_path, fails, undone
):
    """records.register: whatever ends it early (the store's error, Ctrl-C: a BaseException) deletes what it
    created and is raised on; a registration that succeeds deletes nothing."""
    from types import SimpleNamespace

    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import RESOURCE_ALREADY_EXISTS

    from sweeper.tracking import records

    calls = []

    class Client:
        tracking_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

        def get_run(self, run_id):
            return SimpleNamespace(outputs=None)

        def __getattr__(self, name):
            def call(*args, **kwargs):
                calls.append(name)
                if name == fails:
                    raise KeyboardInterrupt
                if name == "create_registered_model" and fails == "set_registered_model_alias":
                    raise MlflowException("exists", error_code=RESOURCE_ALREADY_EXISTS)
                return SimpleNamespace(version="1")

            return call

    if fails:
        with pytest.raises(KeyboardInterrupt):
            records.register(Client(), "r1", "m")
    else:
        assert records.register(Client(), "r1", "m").version == "1"
    assert [c for c in calls if c.startswith("delete")] == undone


@pytest.mark.slow
def test_a_model_loads_in_a_fresh_virtual_environment_of_its_requirements_only(tmp_path, store):
    """A venv without sweeper (no --system-site-packages), from the model's requirements.txt alone (pip's cache)."""
    result, logged, _ = _job(tmp_path, store, "data=diabetes", "depth=1", "width=8", "epochs=50")
    src = tmp_path / "job" / "model" / "model"
    venv = tmp_path / "venv"
    # no pip of its own (ensurepip: ~4 CPU-s): this process's pip installs into it (pip --python)
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300
    )
    py = venv / "bin" / "python"
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(py),
            "install",
            "-q",
            "--no-compile",
            "--disable-pip-version-check",
            "-r",
            str(src / "requirements.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if pip.returncode != 0:
        pytest.skip(
            f"the requirements could not be installed here: {pip.stderr.strip().splitlines()[-1:]}"
        )
    assert (
        subprocess.run(
            [str(py), "-c", "import sweeper"], capture_output=True, cwd=tmp_path
        ).returncode
        != 0
    )
    frame = _example(src)
    inputs, out = tmp_path / "in.json", tmp_path / "out.json"
    inputs.write_text(
        json.dumps({"data": frame.to_numpy().tolist(), "columns": list(frame.columns)})
    )
    script = (
        "import json, sys, mlflow.pyfunc, pandas as pd; m = mlflow.pyfunc.load_model(sys.argv[1]); "
        "json.dump([float(v) for v in m.predict(pd.DataFrame(**json.load(open(sys.argv[2]))))], open(sys.argv[3], 'w'))"
    )
    proc = subprocess.run(
        [str(py), "-I", "-c", script, str(src), str(inputs), str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    np.testing.assert_allclose(
        json.loads(out.read_text()), logged["y_pred"][: len(frame)], rtol=1e-12
    )


def test_a_binary_run_logs_its_confusion_matrix_roc_and_pr_curves_and_targets_print_as_in_the_data(
    tmp_path, store
):
    from sklearn.metrics import roc_auc_score

    result = run_once(
        tmp_path, "data=breast_cancer", "depth=1", "width=8", "epochs=50", store=store
    )
    assert {"confusion_matrix.csv", "roc_curve.csv", "pr_curve.csv"} <= set(
        result["artifacts"]["files"]
    )
    job = tmp_path / "job"
    pred = pd.read_csv(job / "test_predictions.csv")
    roc = pd.read_csv(job / "roc_curve.csv")
    assert (roc.iloc[0]["fpr"], roc.iloc[0]["tpr"], roc.iloc[-1]["fpr"], roc.iloc[-1]["tpr"]) == (
        0,
        0,
        1,
        1,
    )
    auc = float(
        np.sum(np.diff(roc["fpr"]) * (roc["tpr"].to_numpy()[1:] + roc["tpr"].to_numpy()[:-1]) / 2)
    )
    assert auc == pytest.approx(roc_auc_score(pred["y_true"], pred["y_pred"]), rel=1e-12)
    confusion = pd.read_csv(job / "confusion_matrix.csv", index_col=0)
    assert confusion.to_numpy().sum() == len(pred) and confusion.shape == (2, 2)
    assert np.trace(confusion.to_numpy()) / len(pred) == pytest.approx(
        result["metrics"]["test_accuracy"]
    )
    assert len(pd.read_csv(job / "pr_curve.csv")) == len(roc) - 1

    run_once(tmp_path / "r", "data=diabetes", "epochs=20", store=store)
    lines = (tmp_path / "r" / "job" / "test_predictions.csv").read_text().splitlines()[1:]
    targets = [line.split(",")[0] for line in lines]
    # 72, not 71.99999999999999
    assert all(len(t.replace("-", "").replace(".", "")) <= 4 for t in targets), targets[:5]


def test_a_models_requirements_are_pinned_to_this_processs_versions_and_one_not_installed_is_named_alone(
    monkeypatch,
):
    """pyfunc.requirements_for reads each version through tested.installed (None: not installed under that name,
    mlflow-skinny say), the one reading of a distribution's version."""
    from importlib import metadata

    from sweeper.tracking import pyfunc

    assert pyfunc.requirements_for(False) == [
        f"{n}=={metadata.version(n)}" for n in ("mlflow", "numpy", "pandas")
    ]
    monkeypatch.setattr(pyfunc, "installed", lambda n: None if n == "mlflow" else "1.0")
    assert pyfunc.requirements_for(True) == ["mlflow", "numpy==1.0", "pandas==1.0", "scipy==1.0"]
