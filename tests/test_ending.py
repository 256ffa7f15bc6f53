"""sweeper.tracking.ending: every way of ending runs records the same (as Optuna's ``pytest_storages``).

One set of runs (finished, failed, killed, one whose artifact went with its job folder, one refused; with one
logged model, two, none) is ended through each implementation behind ``ending.end_runs``: MLflow's client calls on the embedded SQLite store
(``SWEEPER_PUBLIC_ONLY=bulk``), the bulk transaction on it, and the client calls through a tracking server. What
``MlflowClient`` reads back of each store is compared, run by run. (MLflow 3 refuses a file store unless
``MLFLOW_ALLOW_FILE_STORE`` is set, and the project does not offer one.)"""

from __future__ import annotations

import contextlib
import sqlite3

import numpy as np
import pytest
from mlflow.entities import LoggedModelStatus, Metric
from mlflow.exceptions import MlflowException

from conftest import copy_store, mlflow_server
from sweeper import tracking
from sweeper.base import tested
from sweeper.tracking import ending

WAYS = ["calls", "bulk", pytest.param("server", marks=pytest.mark.slow)]
# the runs ended together, each with what its end changes of _end's, and its logged models' names
RUNS = {
    "finished": {},
    "failed": {
        "status": "FAILED",
        "tags": {"failure_reason": "ZeroDivisionError: division by zero"},
    },
    "killed": {"status": "KILLED", "metrics": {}, "curves": {}},
    "gone": {"status": "FINISHED"},  # its artifact deleted before the end (its job folder went)
}
MODELS = {
    "finished": ["model"],
    "failed": ["model", "extra"],
    "after": ["model"],
}
# a run that gets nothing more than a reason and a status (publish.mark_orphans), over an earlier reason
ORPHANED = {"status": "FAILED", "tags": {"failure_reason": "orphaned: its job died"}}
START_PARAMS = {"lr": 0.01, "data.name": "iris"}
START_PARAMS_TEXT = {"lr": "0.01", "data.name": "iris"}


def _end(X, folder, name):
    """records.finish_run's arguments for a run of ours: final metrics (NaN, inf), a curve with a repeated last
    step, system samples, params (one logged at its start again), tags (one past MLflow's length), data sets and
    an artifact."""
    artifact = folder / f"curves_{name}.txt"
    artifact.write_text("0 1 2")
    models = {}
    for model in MODELS.get(name, ()):
        models[model] = folder / f"{model}_{name}"
        models[model].mkdir(exist_ok=True)
        (models[model] / "MLmodel").write_text("flavors: {}\nmodel_id: null\n")
        (models[model] / "weights.txt").write_text(f"{model} {name}")
    return dict(
        models=models,
        metrics={
            "val_mse": 2.5,
            "train_time_s": 0.01,
            "test_mae": float("nan"),
            "big": float("inf"),
        },
        curves={
            "train_loss": (list(range(0, 300, 3)) + [300, 300], [1.0 / (i + 1) for i in range(102)])
        },
        system=[
            Metric("system/cpu_utilization_percentage", 50.0 + i, 1000 * i, i) for i in range(3)
        ],
        params={"lr": 0.01, "depth": 2},
        tags={"note": "ü", "sweeper.status": "FINISHED", "long": "x" * 9000},
        datasets=tracking.dataset_inputs(
            "d", "diabetes", {"training": (X, X[:, 0]), "validation": (X + 1, X[:, 0])}
        ),
        artifacts=[artifact],
        curve_points=20,
    )


def _read(c, run_id, folder):
    """A run as MlflowClient reads it back, without what differs by store (ids, times, its ``folder``)."""
    run = c.get_run(run_id)
    history = {
        k: [(m.step, repr(m.value)) for m in c.get_metric_history(run_id, k)]
        for k in run.data.metrics
    }
    inputs = sorted(
        (
            d.dataset.name,
            d.dataset.digest,
            d.dataset.source,
            tuple((t.key, t.value) for t in d.tags),
        )
        for d in run.inputs.dataset_inputs
    )
    models = []
    for output in run.outputs.model_outputs if run.outputs else ():
        m = c.get_logged_model(output.model_id)
        models.append(
            {
                "name": m.name,
                "status": str(m.status),
                "step": output.step,
                "source_run": m.source_run_id == run_id,
                "where": (m.experiment_id, m.model_type or None),  # a server says "" for none
                "location": m.artifact_location.replace(m.model_id, "<id>").replace(
                    str(folder), ""
                ),
                "tags": m.tags,
                "params": m.params,
                "metrics": sorted(
                    (
                        x.key,
                        repr(x.value),
                        x.step,
                        x.dataset_name,
                        x.dataset_digest,
                        x.run_id == run_id,
                    )
                    for x in m.metrics or ()
                ),
                "files": sorted(
                    (f.path, f.file_size) for f in c.list_logged_model_artifacts(m.model_id)
                ),
            }
        )
    return {
        "models": sorted(models, key=lambda m: m["name"]),
        "status": run.info.status,
        "ended": run.info.end_time is not None,
        "metrics": {k: repr(v) for k, v in run.data.metrics.items()},  # nan == nan
        "params": run.data.params,
        "tags": {k: v.replace(str(folder), "<folder>") for k, v in run.data.tags.items()},
        "history": history,
        "inputs": inputs,
        "artifacts": sorted((f.path, f.is_dir, f.file_size) for f in c.list_artifacts(run_id)),
    }


def _with(end, change):
    """``end`` with ``change`` (its tags added to the others)."""
    return {**end, **change, "tags": {**end["tags"], **change.get("tags", {})}}


@contextlib.contextmanager
def _store(way, folder, template):
    """A client of a fresh store that ends runs ``way``, and the SQLite file behind it."""
    db = copy_store(template, folder)
    with pytest.MonkeyPatch.context() as mp:
        if way == "calls":
            mp.setenv(tested.PUBLIC_ONLY, "bulk")
        tested.shortcut.cache_clear()  # asked again under this setting
        try:
            if way == "server":
                with mlflow_server(db) as url:
                    yield tracking.client(url), db
            else:
                yield tracking.client(f"sqlite:///{db}"), db
        finally:
            mp.undo()
            tested.shortcut.cache_clear()


def _end_all(way, folder, template):
    """Every run of RUNS (and two refused) ended ``way``; what the store holds of each, by run name."""
    X = np.random.default_rng(0).normal(size=(20, 3))
    with _store(way, folder, template) as (c, db):
        experiment = c.create_experiment("ends", artifact_location=(folder / "artifacts").as_uri())
        names = [*RUNS, "orphaned", "refused", "after"]
        ids = {
            n: tracking.start_run(c, experiment, n, {"device": "cpu", "note": "ü"}, START_PARAMS)
            for n in names
        }
        for run_id in ids.values():
            c.set_tag(run_id, "sweeper.status", "RUNNING")
            c.log_metric(run_id, "big", 1.0, step=5)  # a latest value the last batch (step 0) keeps
            c.log_metric(run_id, "val_mse", 9.0, timestamp=1)  # one it replaces (step 0, earlier)
        c.set_tag(ids["orphaned"], "failure_reason", "an earlier reason")
        ends = [ending.Ending(ids[n], _with(_end(X, folder, n), RUNS[n])) for n in RUNS]
        ends.insert(2, ending.Ending(ids["orphaned"], ORPHANED))
        (folder / "curves_gone.txt").unlink()
        expected = "bulk" if way == "bulk" else "calls"
        assert ending.way(c, ends) == expected
        assert ending.end_runs(c, ends) == expected
        # a param logged again with another value: refused, and nothing of the call written
        refused = ending.Ending(
            ids["refused"], {**_end(X, folder, "refused"), "params": {"lr": 0.5}}
        )
        after = ending.Ending(ids["after"], _end(X, folder, "after"))
        with pytest.raises(MlflowException, match="Changing param values"):
            ending.end_runs(c, [refused, after])
        held = {n: _read(c, ids[n], folder) for n in ("refused", "after")}
        # each alone (the writer's way): the one refused says why, the other ends
        outcomes = ending.end_each(c, [after, refused])
        assert outcomes[0] is None and "Changing param values" in str(outcomes[1])
        records = {n: _read(c, ids[n], folder) for n in names}
    with contextlib.closing(sqlite3.connect(db)) as con:
        datasets = con.execute("SELECT name, digest FROM datasets").fetchall()
        made = con.execute("SELECT source_run_id, name, status FROM logged_models").fetchall()
    by_name = {run_id: n for n, run_id in ids.items()}
    models = sorted((by_name[r], name, status) for r, name, status in made)
    return {"runs": records, "held": held, "datasets": sorted(datasets), "models": models}


@pytest.fixture(scope="module")
def ended(tmp_path_factory, _template_store):
    """The records of each way, made once a module (a way's runs: seconds)."""
    made = {}

    def of(way):
        if way not in made:
            made[way] = _end_all(way, tmp_path_factory.mktemp(way), _template_store)
        return made[way]

    return of


@pytest.mark.parametrize("way", WAYS)
def test_each_way_of_ending_runs_records_what_each_run_was_given(ended, way):
    """The records expected of the runs' ends, whichever way ended them (values from _end, not from the code)."""
    got = ended(way)
    runs = got["runs"]
    assert {n: (r["status"], r["ended"]) for n, r in runs.items()} == {
        "finished": ("FINISHED", True),
        "failed": ("FAILED", True),
        "killed": ("KILLED", True),
        "gone": ("FINISHED", True),
        "orphaned": ("FAILED", True),
        "refused": ("RUNNING", False),
        "after": ("FINISHED", True),
    }
    for name in ("finished", "failed", "gone", "after"):
        r = runs[name]
        # inf at step 0 does not replace 1.0 at step 5; NaN kept as NaN
        assert {k: r["metrics"][k] for k in ("val_mse", "test_mae", "big", "train_time_s")} == {
            "val_mse": "2.5",
            "test_mae": "nan",
            "big": "1.0",
            "train_time_s": "0.01",
        }
        assert r["metrics"]["system/cpu_utilization_percentage"] == "52.0"
        steps = [s for s, *_ in r["history"]["train_loss"]]
        assert 10 < len(steps) <= 21 and steps[0] == 0 and steps[-1] == 300
        assert r["params"] == {"lr": "0.01", "data.name": "iris", "depth": "2"}
        assert r["tags"]["note"] == "ü" and r["tags"]["sweeper.status"] == "FINISHED"
        assert 0 < len(r["tags"]["long"]) < 9000
        assert [(i[0], i[3]) for i in r["inputs"]] == [
            ("d", (("mlflow.data.context", "training"),)),
            ("d", (("mlflow.data.context", "validation"),)),
        ]
    assert runs["killed"]["metrics"].keys() == {
        "big",
        "val_mse",
        "system/cpu_utilization_percentage",
    }
    assert runs["failed"]["tags"]["failure_reason"] == "ZeroDivisionError: division by zero"
    assert [a[0] for a in runs["finished"]["artifacts"]] == ["curves_finished.txt"]
    assert (
        runs["gone"]["artifacts"] == []
        and "curves_gone.txt" in runs["gone"]["tags"]["artifacts_missing"]
    )
    orphaned = runs["orphaned"]
    assert orphaned["tags"]["failure_reason"] == "orphaned: its job died"  # replaced
    assert (
        orphaned["metrics"] == {"big": "1.0", "val_mse": "9.0"}
        and orphaned["params"] == START_PARAMS_TEXT
    )
    assert orphaned["inputs"] == [] and orphaned["artifacts"] == []
    assert (
        orphaned["tags"]["sweeper.status"] == "RUNNING"
    )  # the last batch's tags are not a reason's
    # refused: nothing of the call written, the refused run's own params unchanged
    for name in ("refused", "after"):
        assert got["held"][name]["status"] == "RUNNING"
        assert (
            got["held"][name]["metrics"] == {"big": "1.0", "val_mse": "9.0"}
            and got["held"][name]["inputs"] == []
        )
    assert runs["refused"]["params"] == START_PARAMS_TEXT
    assert runs["refused"]["metrics"] == {"big": "1.0", "val_mse": "9.0"}
    # each data set once in the store, every run linked to it
    assert len(got["datasets"]) == 2
    # logged models: READY linked to their run (step 0), the run's params and name
    models = {n: [(m["name"], m["status"]) for m in r["models"]] for n, r in runs.items()}
    assert models == {
        "finished": [("model", "READY")],
        "failed": [("extra", "READY"), ("model", "READY")],
        "killed": [],
        "gone": [],
        "orphaned": [],
        "refused": [],
        "after": [("model", "READY")],
    }
    model = runs["finished"]["models"][0]
    assert (model["step"], model["source_run"], model["tags"]) == (
        0,
        True,
        {"run_name": "finished"},
    )
    assert model["params"] == {"lr": "0.01", "depth": "2"}
    assert model["files"] == [("MLmodel", model["files"][0][1]), ("weights.txt", 14)]
    # a run's one model: its final metrics (with the data set each was scored on); two models: none
    assert model["metrics"] == [
        ("big", repr(1.7976931348623157e308), 0, None, None, True),
        ("test_mae", "0.0", 0, None, None, True),
        ("train_time_s", "0.01", 0, None, None, True),
        ("val_mse", "2.5", 0, "d", model["metrics"][3][4], True),
    ]
    assert all(m["metrics"] == [] for m in runs["failed"]["models"])


@pytest.mark.parametrize("way", WAYS[1:])
def test_every_way_of_ending_runs_holds_the_same_records(ended, way):
    """The store ended ``way`` holds, run by run, what the client calls on the embedded store hold."""
    want, got = ended("calls"), ended(way)
    for when in ("runs", "held"):
        for name, record in want[when].items():
            for part, value in record.items():
                # the one difference: bulk copies every run's files before its transaction is refused, the
                # client calls stop at the refused run (the files are copied again when the run is ended)
                if (when, name, part) != ("held", "after", "artifacts"):
                    assert (when, name, part, got[when][name][part]) == (when, name, part, value)
    assert got["datasets"] == want["datasets"]
    # every logged model made once; in bulk the refused call's (its transaction written in none of its
    # runs) stays made, PENDING and unlinked, and each run ended alone after reuses its own
    pending = LoggedModelStatus.PENDING.to_int()
    extra = [("after", "model", pending)] if way != "server" else []
    assert got["models"] == sorted(want["models"] + extra)


def test_the_bulk_way_is_taken_only_where_it_applies(store, tmp_path, monkeypatch):
    """A new run name ends through the client calls even on the SQL store (a logged model does not); so does every
    run where the bulk shortcut is off."""
    c = tracking.client(f"sqlite:///{store}")
    ends = [ending.Ending("x", {"metrics": {"val_mse": 1.0}})]
    assert ending.way(c, ends) == ending.BULK
    assert (
        ending.way(c, [*ends, ending.Ending("y", {"models": {"model": tmp_path}})]) == ending.BULK
    )
    assert ending.way(c, [ending.Ending("y", {"tags": {"mlflow.runName": "new"}})]) == ending.CALLS
    monkeypatch.setenv(tested.PUBLIC_ONLY, "bulk")
    tested.shortcut.cache_clear()
    try:
        assert ending.way(c, ends) == ending.CALLS
    finally:
        monkeypatch.undo()
        tested.shortcut.cache_clear()


def test_a_data_set_another_process_added_meanwhile_is_found_and_linked_on_a_second_try(
    store, tmp_path, monkeypatch
):
    """Two jobs ending their first runs of an experiment at once (a joblib sweep on a loaded machine) each found no
    row of its data set and each inserted one: the second transaction failed on the data sets' unique key, its run was
    left for upload and orphaned. Here another connection commits the row between the bulk ending's read and its
    insert (the ending wrote nothing before: no tag to replace, no model); the ending tries once more, finds that row
    and links its run to it."""
    from sweeper.tracking import bulk

    c = tracking.client(f"sqlite:///{store}")
    experiment = c.create_experiment("race", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = tracking.start_run(c, experiment, "first", {"device": "cpu"}, START_PARAMS)
    X = np.random.default_rng(0).normal(size=(20, 3))
    end = {**_end(X, tmp_path, "first"), "tags": {}}
    read, calls = bulk._input_rows, []
    columns = "dataset_uuid, experiment_id, name, digest, dataset_source_type, dataset_source, dataset_schema, dataset_profile"

    def raced(session, ids, runs, datasets):
        rows = read(session, ids, runs, datasets)
        calls.append(len(rows[0]))
        if len(calls) == 1:  # the other process's row, its own id, committed now
            with contextlib.closing(sqlite3.connect(store)) as con, con:
                for row in rows[0]:
                    con.execute(
                        "INSERT INTO datasets ("
                        + columns
                        + ") VALUES ("
                        + ", ".join(f":{k}" for k in columns.split(", "))
                        + ")",
                        {**row, "dataset_uuid": f"other{row['dataset_uuid'][5:]}"},
                    )
        return rows

    monkeypatch.setattr(bulk, "_input_rows", raced)
    assert ending.end_runs(c, [ending.Ending(run_id, end)]) == ending.BULK
    assert calls[0] > 0 and calls[1:] == [
        0
    ]  # the second try inserts no data set: it found the other's
    with contextlib.closing(sqlite3.connect(store)) as con:
        rows = con.execute("SELECT dataset_uuid FROM datasets").fetchall()
        linked = con.execute(
            "SELECT source_id FROM inputs WHERE destination_id = ? AND source_type = 'DATASET'",
            (run_id,),
        ).fetchall()
    assert sorted(rows) == sorted(linked) and all(u.startswith("other") for (u,) in rows), (
        rows,
        linked,
    )
    run = c.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.metrics["val_mse"] == 2.5


@pytest.mark.parametrize("way", ["calls", "bulk"])
def test_a_logged_model_whose_folder_went_ends_failed_and_the_run_says_so(
    way, tmp_path, _template_store
):
    """A model's folder deleted under the sweep before its run ended: MLflow's local log_artifacts copies nothing from a
    missing folder and raises nothing, so the model ended READY with no files. Now it ends FAILED, and the run's
    artifacts_missing tag names it, both ways."""
    with _store(way, tmp_path, _template_store) as (c, db):
        experiment = c.create_experiment(
            "gone", artifact_location=(tmp_path / "artifacts").as_uri()
        )
        run_id = tracking.start_run(c, experiment, "gone", {"device": "cpu"}, START_PARAMS)
        end = {"metrics": {"val_mse": 1.0}, "models": {"model": tmp_path / "deleted"}}
        ending.end_runs(c, [ending.Ending(run_id, end)])
        run = c.get_run(run_id)
    with contextlib.closing(sqlite3.connect(db)) as con:
        (status,) = con.execute("SELECT status FROM logged_models").fetchone()
    assert status == LoggedModelStatus.FAILED.to_int(), LoggedModelStatus.from_int(status)
    assert (
        run.info.status == "FINISHED"
        and "model (the logged model)" in run.data.tags["artifacts_missing"]
    )
