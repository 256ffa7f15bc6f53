"""A function trainer: the user's own loop, from a folder outside the package, swept, recorded, failed honestly,
promoted and pinned."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import all_runs, cli, run_once, user_folder
from sweeper import ROOT

EXAMPLE = ROOT / "examples" / "my_loop" / "my_loop.py"
OTHERS = """
def boom(data, report, *, lr, epochs, seed):
    raise ValueError("the loop gave up at epoch 3")


def silent(data, report, *, lr, epochs, seed):
    xp = data.xp
    w = xp.linalg.lstsq(data.X_train, data.y_train, rcond=None)[0]
    return lambda X: X @ w


def nan_loss(data, report, *, lr, epochs, seed):
    report(0, train_loss=1.0, val_loss=1.0)
    report(5, train_loss=float("nan"), val_loss=float("inf"))
    return lambda X: X[:, :1]
"""


@pytest.fixture
def user(tmp_path, monkeypatch):
    return user_folder(
        tmp_path, monkeypatch, {"my_loop.py": EXAMPLE.read_text(), "loops.py": OTHERS}
    )


def test_a_function_trainer_run_has_its_curves_metrics_and_tags(user, tmp_path, store):
    result = run_once(
        tmp_path,
        "model._target_=my_loop.fit",
        "+model.l2=0.01",
        "lr=0.05",
        "epochs=100",
        store=store,
    )
    assert result["status"] == "FINISHED", result.get("reason")
    (run,) = all_runs(store)
    assert (
        run.data.tags["model_kind"] == "function trainer" and run.data.params["model.l2"] == "0.01"
    )
    assert {"val_mse", "test_mse", "val_r2", "train_time_s"} <= set(run.data.metrics)
    curve = np.load(tmp_path / "job" / "curves.npz")
    assert list(curve["val_loss_steps"]) == list(range(0, 101, 10))
    # reported on the standardised target: recorded in the metric's units (val_mse is in the target's units²)
    assert curve["val_loss_values"][-1] == pytest.approx(run.data.metrics["val_mse"], rel=1e-9)


def test_a_function_trainers_logged_model_loads_without_sweeper(user, tmp_path, store):
    import json

    import pandas as pd
    from test_model_records import _isolated

    result = run_once(tmp_path, "model._target_=my_loop.fit", "lr=0.05", "epochs=50", store=store)
    assert result["status"] == "FINISHED", result.get("reason")
    model = tmp_path / "job" / "model" / "model"
    split = json.loads((model / "serving_input_example.json").read_text())["dataframe_split"]
    out = _isolated(
        tmp_path, str(model), store, pd.DataFrame(split["data"], columns=split["columns"])
    )
    logged = pd.read_csv(tmp_path / "job" / "test_predictions.csv")
    np.testing.assert_allclose(out["data"], logged["y_pred"][: len(split["data"])], rtol=1e-12)


def test_a_raising_function_is_a_failed_run_with_its_message(user, tmp_path, store):
    result = run_once(tmp_path, "model._target_=loops.boom", "epochs=10", store=store)
    assert (
        result["status"] == "FAILED"
        and "ValueError: the loop gave up at epoch 3" in result["reason"]
    )
    (run,) = all_runs(store)
    assert run.info.status == "FAILED" and "the loop gave up" in run.data.tags["failure_reason"]


def test_a_function_that_reports_nothing_still_gets_metrics_and_says_no_curve(
    user, tmp_path, store, caplog
):
    import logging

    logging.getLogger("sweeper").addHandler(caplog.handler)
    caplog.set_level(logging.INFO, logger="sweeper")
    try:
        result = run_once(tmp_path, "model._target_=loops.silent", "epochs=10", store=store)
    finally:
        logging.getLogger("sweeper").removeHandler(caplog.handler)
    assert result["status"] == "FINISHED" and "val_mse" in result["metrics"]
    assert "reported no losses: no curve" in caplog.text


def test_a_non_finite_reported_loss_is_a_divergence(user, tmp_path, store):
    result = run_once(tmp_path, "model._target_=loops.nan_loss", "epochs=10", store=store)
    assert result["status"] == "FAILED" and result["reason"].startswith("diverged at epoch 5")


def test_a_keyword_the_function_does_not_take_is_a_one_line_refusal(user, tmp_path):
    proc = cli(user, "model._target_=my_loop.fit", "model.l3=1", store=tmp_path / "s" / "mlflow.db")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith("sweeper: error: model.l3 is not accepted by my_loop.fit")
    )


@pytest.mark.slow
def test_a_function_trainer_sweep_is_promoted_and_its_pin_re_runs(user, tmp_path):
    from sweeper import promote
    from sweeper.insight import pinned

    store = tmp_path / "mlruns" / "mlflow.db"
    proc = cli(
        user,
        "-m",
        "model._target_=my_loop.fit",
        "lr=0.01,0.05",
        "model.l2=0,0.01",
        "epochs=60",
        store=store,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "run one at a time: it runs its own loop" in proc.stdout + proc.stderr
    # said once, not per run
    assert (proc.stdout + proc.stderr).count("no gradients for sweeper to check") == 1
    runs = [r for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId")]
    assert len(runs) == 4 and all(r.info.status == "FINISHED" for r in runs)
    pins = tmp_path / "pins"
    promote.main(
        [
            "--experiment",
            "diabetes",
            "--tracking-uri",
            f"sqlite:///{store}",
            "--out-dir",
            str(pins),
            "--name",
            "loop",
        ]
    )
    assert "_target_: my_loop.fit" in (pins / "loop.yaml").read_text()
    again = tmp_path / "again" / "mlflow.db"
    again.parent.mkdir()
    proc = cli(user, f"hydra.searchpath=[file://{tmp_path}]", "+pins=loop", store=again)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (rerun,) = all_runs(again)
    rows = pinned.check(pinned.read_pinned(pins / "loop.yaml")["expected"], rerun.data.metrics)
    assert rows and not any(r.failed for r in rows)


def test_report_answers_whether_to_go_on_as_a_run_of_ours_would():
    from sweeper.job.trainer import Stop

    s = Stop(patience=20)
    answers = [
        s.go_on(e, (1.0, v))
        for e, v in (
            (0, 5.0),
            (10, 4.0),
            (20, 4.5),
            (25, 3.9),
            (35, 4.0),
            (40, 4.1),
            (45, 4.0),
            (50, 3.0),
            (60, 2.0),
        )
    ]
    assert answers == [True] * 6 + [
        False,
        False,
        False,
    ]  # 45 - 25 >= 20: stop at 45; every later report too
    assert s.tags() == {
        "stopped_at_epoch": "45",
        "stopped_by": "early stopping: patience=20 (best val_loss at epoch 25)",
        "stop_ignored": "2 report(s) came after report() answered False at epoch 45",
    }
    rung = Stop(rung=(40, "successive halving: the rung at 40 epochs"))
    assert [rung.go_on(e, (1.0, None)) for e in (0, 25, 50)] == [
        True,
        True,
        False,
    ] and rung.at == 50
    assert rung.tags()["stopped_by"] == "successive halving: the rung at 40 epochs"
    bad = Stop()
    assert (
        bad.go_on(0, (1.0, 1.0))
        and not bad.go_on(5, (float("nan"), None))
        and "non-finite" in bad.tags()["stopped_by"]
    )
    assert Stop(patience=0).go_on(1000, (1.0, 9.0)) and Stop().tags() == {}


def test_a_function_trainer_with_patience_stops_early_and_records_where_and_why(
    user, tmp_path, store
):
    result = run_once(
        tmp_path, "model._target_=my_loop.fit", "lr=0.05", "epochs=2000", "patience=30", store=store
    )
    assert result["status"] == "FINISHED", result.get("reason")
    (run,) = all_runs(store)
    stopped = int(run.data.tags["stopped_at_epoch"])
    assert stopped < 2000 and run.data.metrics["epochs_run"] == stopped
    assert run.data.tags["stopped_by"].startswith(
        "early stopping: patience=30 (best val_loss at epoch "
    )
    # where a run of ours stops: patience past the best
    assert stopped - int(run.data.metrics["best_epoch"]) == 30
    assert "stop_ignored" not in run.data.tags  # the example's loop honours the answer


@pytest.mark.slow
def test_successive_halving_stops_a_function_trainer_at_its_rung(user, tmp_path):
    store = tmp_path / "mlruns" / "mlflow.db"
    proc = cli(
        user,
        "-m",
        "model._target_=my_loop.fit",
        "lr=0.01,0.02,0.05,0.1",
        "epochs=270",
        "hydra.launcher.halving.eta=3",
        store=store,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (
        "halving: rung 100 epochs: 4 configurations reached it, 2 go on, 2 stop there"
        in proc.stdout + proc.stderr
    )
    runs = [r for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId")]
    pruned = [r for r in runs if r.data.tags.get("pruned_at_epoch")]
    assert len(runs) == 4 and len(pruned) == 2 and all(r.info.status == "FINISHED" for r in runs)
    for r in pruned:
        assert r.data.tags["stopped_at_epoch"] == "100" == r.data.tags["pruned_at_epoch"]
        assert (
            r.data.metrics["epochs_run"] == 100
            and r.data.tags["stopped_by"] == "successive halving: the rung at 100 epochs"
        )
    assert all(
        r.data.metrics["epochs_run"] == 270 and "stopped_at_epoch" not in r.data.tags
        for r in runs
        if r not in pruned
    )
