"""Training behaviour: XOR is learned, runs are deterministic, divergence and early stopping are handled."""

import math
import os
import signal

import numpy as np
import pytest

from sweeper import models
from conftest import all_runs, client_for, make_cfg, run_once
from sweeper.models.train import MAX_CHECKS
from sweeper.base.backend import Backend
from sweeper.job.metrics import TIMINGS


def test_xor_is_learned(tmp_path, store):
    result = run_once(
        tmp_path, "data=xor", "depth=1", "width=4", "lr=0.5", "epochs=2000", store=store
    )
    assert result["status"] == "FINISHED"
    assert result["metrics"]["test_accuracy"] == 1.0
    assert result["metrics"]["test_log_loss"] < 0.1


def test_same_config_and_seed_give_identical_metrics(tmp_path, store):
    args = ("data=breast_cancer", "depth=2", "width=8", "epochs=300", "activation=relu")
    first = run_once(tmp_path / "a", *args, store=store)
    second = run_once(tmp_path / "b", *args, store=store)
    timing = set(TIMINGS)
    assert {k: v for k, v in first["metrics"].items() if k not in timing} == {
        k: v for k, v in second["metrics"].items() if k not in timing
    }
    assert first["fingerprint"] == second["fingerprint"] and first["run_id"] != second["run_id"]
    other_seed = run_once(tmp_path / "c", *args, "seed=1", store=store)
    assert other_seed["metrics"]["test_log_loss"] != first["metrics"]["test_log_loss"]


def test_float32_and_float64_agree(tmp_path, store):
    r64 = run_once(tmp_path / "a", "depth=1", "epochs=500", "dtype=float64", store=store)
    r32 = run_once(tmp_path / "b", "depth=1", "epochs=500", "dtype=float32", store=store)
    assert r32["metrics"]["test_mse"] == pytest.approx(r64["metrics"]["test_mse"], rel=1e-4)


def test_divergence_stops_the_run_and_is_recorded(tmp_path, store):
    result = run_once(tmp_path, "depth=0", "lr=5", "epochs=100000", "log_every=10", store=store)
    assert result["status"] == "FAILED"
    assert result["reason"].startswith("diverged at epoch ")
    epoch = int(result["reason"].split()[-1])
    # stopped within the first segment, not after 100k epochs
    assert 0 < epoch < 100000 // MAX_CHECKS
    assert result["metrics"]["epochs_run"] == epoch
    assert "test_mse" not in result["metrics"]
    run = client_for(store).get_run(result["run_id"])  # the store says so too, not FINISHED
    assert run.info.status == "FAILED" and run.data.tags["failure_reason"] == result["reason"]


def _cut_short() -> None:
    """Ctrl-C, and a library's cleanup that fails as the KeyboardInterrupt goes through it (OmegaConf's, Hydra's)."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
    finally:
        raise AttributeError("'NoneType' object has no attribute 'pop'")


@pytest.mark.parametrize(
    "event,status,reason",
    [
        (
            lambda: os.kill(os.getpid(), signal.SIGINT),
            "KILLED",
            "interrupted (Ctrl-C)",
        ),  # Ctrl-C in the middle
        (
            lambda: 1 / 0,
            "FAILED",
            "ZeroDivisionError: division by zero",
        ),  # a bug in the compute half
        (
            lambda: _cut_short(),
            "KILLED",
            "interrupted (Ctrl-C)",
        ),  # Ctrl-C whose way through a library's cleanup raised another error: the job's boundary says KILLED
    ],
    ids=["ctrl-c", "error", "ctrl-c-masked"],
)
def test_a_run_interrupted_or_broken_while_training_is_recorded_killed_or_failed(
    tmp_path, store, monkeypatch, event, status, reason
):
    """The single run's path (record ∘ compute): the run in the store ends KILLED or FAILED with the reason, its
    result.json says the same; the interruption reaches the caller, an error is the run's (FAILED, one line, the
    caller goes on: a sweep's next job runs)."""
    import json

    real = models.train

    def train_then(backend, model, *args, **kwargs):
        fit = real(backend, model, *args, **kwargs)
        event()
        return fit

    monkeypatch.setattr(models, "train", train_then)
    args = ("depth=1", "epochs=50", "log_every=10", "tracking.log_model=false")
    if status == "KILLED":
        with pytest.raises(KeyboardInterrupt):
            run_once(tmp_path, *args, store=store)
    else:
        assert run_once(tmp_path, *args, store=store)["status"] == "FAILED"
    (run,) = all_runs(store)
    # an error's reason names the line that raised it (here this file's lambda: code outside sweeper)
    assert run.info.status == status and run.data.tags["failure_reason"].startswith(reason)
    assert run.data.params["epochs"] == "50" and not any(
        k.startswith("test_") for k in run.data.metrics
    )
    kept = json.loads((tmp_path / "job" / "result.json").read_text())
    assert kept["status"] == status and kept["reason"] == run.data.tags["failure_reason"]


class CountingBackend(Backend):
    """NumPy backend that counts device→host copies, as the GPU backend's would be."""

    copies = 0

    def to_numpy(self, a):
        type(self).copies += 1
        return super().to_numpy(a)


def _fit(epochs, log_every, patience=0, lr=0.05):
    cfg = make_cfg("data=diabetes", "depth=1", "width=8", f"lr={lr}")
    from sweeper import data

    ds = data.load(cfg.data, 0)
    backend = CountingBackend("cpu", np)
    model = models.build(cfg, ds.n_features, ds.task, backend)
    CountingBackend.copies = 0
    fit = models.train(
        backend,
        model,
        ds.X_train,
        ds.y_train,
        ds.X_val,
        ds.y_val,
        lr=lr,
        epochs=epochs,
        log_every=log_every,
        patience=patience,
    )
    return fit, model, ds


def test_loss_leaves_the_device_a_bounded_number_of_times():
    fit, _, _ = _fit(epochs=5000, log_every=10)
    assert len(fit.steps) == len(fit.train_loss) == len(fit.val_loss) == 501
    # ends at the end
    assert fit.steps[1] - fit.steps[0] == 10 and fit.steps[-2] == 4990 and fit.steps[-1] == 5000
    assert CountingBackend.copies <= MAX_CHECKS  # not per epoch, not per log point
    assert fit.train_loss[-1] < fit.train_loss[0]


def test_early_stopping_keeps_the_best_weights():
    fit, model, ds = _fit(epochs=20000, log_every=20, patience=400, lr=0.05)
    assert fit.epochs_run < 20000
    assert fit.epochs_run - fit.best_epoch >= 400
    best = float(np.min(fit.val_loss))
    assert fit.val_loss[fit.best_epoch // 20] == best
    assert float(model.loss(ds.X_val, ds.y_val)) == pytest.approx(best, rel=1e-12)  # restored
    assert math.isfinite(fit.train_time_s)


def test_training_in_column_blocks_on_threads_matches_one_block(monkeypatch):
    """The CPU backend splits a large epoch into column blocks on threads (SWEEPER_THREADS=2 here):
    the same curves and weights as the one-block epoch, to rounding."""
    import importlib

    from sweeper.models.mlp import MLP, init_params
    from sweeper.base.backend import resolve

    # MLP.full_batch builds its FullBatch there
    mlp_module = importlib.import_module("sweeper.models.mlp")

    used = []

    class Recording(mlp_module.FullBatch):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            used.append(self.parts)

    monkeypatch.setattr(mlp_module, "FullBatch", Recording)
    monkeypatch.setenv("SWEEPER_THREADS", "2")
    rng = np.random.default_rng(0)
    X, Xv = rng.standard_normal((2000, 20)), rng.standard_normal((600, 20))
    y, yv = np.sin(X[:, :1]) + X[:, 1:2], np.sin(Xv[:, :1]) + Xv[:, 1:2]
    fits, models_ = [], []
    for backend in (resolve("cpu"), Backend("cpu", np)):
        model = MLP(np, init_params([20, 64, 64, 1], "tanh", 0, "float64"), "tanh", "regression")
        fits.append(models.train(backend, model, X, y, Xv, yv, lr=0.05, epochs=200, log_every=10))
        models_.append(model)
    assert used == [
        2,
        2,
        1,
        1,
    ]  # train and validation batches: blocks with the CPU backend's policy only
    np.testing.assert_allclose(fits[0].train_loss, fits[1].train_loss, rtol=1e-10)
    np.testing.assert_allclose(fits[0].val_loss, fits[1].val_loss, rtol=1e-10)
    assert fits[0].train_loss[-1] < 0.5 * fits[0].train_loss[0]
    for a, b in zip(models_[0].packed, models_[1].packed):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def _diabetes_fit(depth, lr, epochs, log_every, patience=0, backend=None):
    from sweeper import data

    cfg = make_cfg("data=diabetes", f"depth={depth}", "width=16", f"lr={lr}")
    ds = data.load(cfg.data, 0)
    backend = backend or Backend("cpu", np)
    model = models.build(cfg, ds.n_features, ds.task, backend)
    fit = models.train(
        backend,
        model,
        ds.X_train,
        ds.y_train,
        ds.X_val,
        ds.y_val,
        lr=lr,
        epochs=epochs,
        log_every=log_every,
        patience=patience,
    )
    return fit, model, ds


def test_a_loss_that_explodes_is_divergence_before_it_overflows():
    """lr=0.5 on diabetes: the loss grows ~1e75-fold by epoch 50 and the predictions reach ±1e163 by 200
    without a NaN; the run used to end FINISHED with its MSE overflowed (left out of the metrics)."""
    from sweeper.models.train import EXPLODED

    fit, _, _ = _diabetes_fit(depth=1, lr=0.5, epochs=200, log_every=50)
    assert fit.diverged_at == 50 and fit.epochs_run == 50
    assert fit.steps.tolist() == [0, 50] and np.isfinite(fit.train_loss).all()
    assert fit.train_loss[-1] > EXPLODED * fit.train_loss[0]


def test_a_loss_that_explodes_after_the_last_sample_is_divergence_too(tmp_path, store):
    """depth=0 lr=0.3 epochs=40 log_every=39: the training samples (epochs 0, 39 and the last, 40) are below the
    bound, the final weights' validation loss is not; the run used to end FINISHED with val_mse ~2e8."""
    from sweeper.models.train import EXPLODED

    fit, model, ds = _diabetes_fit(depth=0, lr=0.3, epochs=40, log_every=39)
    assert fit.diverged_at is None and fit.steps.tolist() == [0, 39, 40]
    assert (
        fit.train_loss.max() < EXPLODED * fit.train_loss[0] < float(model.loss(ds.X_val, ds.y_val))
    )
    result = run_once(tmp_path, "depth=0", "lr=0.3", "epochs=40", "log_every=39", store=store)
    assert (result["status"], result["reason"]) == ("FAILED", "diverged at epoch 40")
    assert not any(k.startswith(("val_", "test_")) for k in result["metrics"])


def test_a_learning_run_is_not_taken_for_divergence():
    fit, _, _ = _diabetes_fit(depth=1, lr=0.05, epochs=2000, log_every=50)
    assert fit.diverged_at is None and fit.train_loss[-1] < fit.train_loss[0]


def test_overflowing_metrics_fail_the_run_as_divergence(tmp_path, store, monkeypatch):
    """Finite predictions whose squared errors overflow (±1e200): not FINISHED with val_mse missing."""
    real = models.train

    def train_then_blow_up(backend, model, *args, **kwargs):
        fit = real(backend, model, *args, **kwargs)
        for P in model.packed:
            P[...] = 1e200  # predictions ~1e201: finite, their squares are not
        return fit

    monkeypatch.setattr(models, "train", train_then_blow_up)
    result = run_once(tmp_path, "depth=1", "epochs=50", "log_every=10", store=store)
    assert result["status"] == "FAILED"
    assert result["reason"] == "diverged at epoch 50 (non-finite val_mse)"
    assert not any(k.startswith(("val_", "test_")) for k in result["metrics"])


def test_the_leaderboard_never_names_a_non_finite_or_failed_run_best():
    from types import SimpleNamespace

    from sweeper.insight.leaderboard import build

    def run(name, status, val):
        metrics = {"val_mse": val} if val is not None else {}
        return SimpleNamespace(
            info=SimpleNamespace(run_name=name, status=status, run_id=name, start_time=0),
            data=SimpleNamespace(metrics=metrics, params={"lr": name}, tags={}),
        )

    assert build([run("a", "FINISHED", math.inf), run("b", "FAILED", 1.0)]).best is None
    assert build([run("a", "FAILED", 1.0), run("b", "FINISHED", None)]).best is None
    assert build([run("a", "FINISHED", math.inf), run("b", "FINISHED", 2.0)]).best["run"] == "b"


class BoundedNumpy:
    """NumPy, but an array of more than 10**6 elements is a MemoryError (as 2 x 10**9 samples would be)."""

    def __getattr__(self, name):
        return getattr(np, name)

    def full(self, shape, *args, **kwargs):
        if np.prod(shape) > 10**6:
            raise MemoryError(f"an array of shape {shape}")
        return np.full(shape, *args, **kwargs)


def test_the_loss_history_is_bounded_whatever_epochs_is(caplog):
    """epochs=10**9 at log_every=1 asked for 2 x 10**9 samples (16 GB; epochs=10**12 at log_every=50 asked
    for 149 GiB): now at most MAX_SAMPLES, with the stride said in one warning. patience=1 checks every
    stride, so this diverging run stops at the second check (sample 1)."""
    from sweeper.models.train import MAX_SAMPLES, sample_stride

    fit, _, _ = _diabetes_fit(
        depth=0,
        lr=5,
        epochs=10**9,
        log_every=1,
        patience=10**8,
        backend=Backend("cpu", BoundedNumpy()),
    )
    stride = 10**9 // MAX_SAMPLES
    assert fit.diverged_at == stride and fit.steps.tolist() == [0, stride]
    notes = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert notes == [
        f"log_every=1 with epochs=1000000000 would keep 1000000000 loss samples: sampling every "
        f"10000 epochs instead (at most {MAX_SAMPLES})"
    ]
    assert sample_stride(10**12, 50) == 10**7 and -(-(10**12) // 10**7) <= MAX_SAMPLES
    assert sample_stride(5000, 50) == 50 and sample_stride(1, 50) == 50 and sample_stride(3, 3) == 2


def test_a_log_every_past_the_epochs_warns_and_still_draws_a_curve(tmp_path, store, caplog):
    """log_every=1000 epochs=50 recorded a one-point curve without a word: now two samples (every 25
    epochs) and one warning line; the run's params keep the user's log_every."""
    import logging

    with caplog.at_level(logging.WARNING):
        result = run_once(tmp_path, "epochs=50", "log_every=1000", store=store)
    assert result["status"] == "FINISHED" and result["config"]["log_every"] == 1000
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        "log_every=1000 is not below epochs=50, which would sample the loss once: "
        "sampling every 25 epochs instead (2 samples)"
    ]
    with np.load(tmp_path / "job" / "curves.npz") as z:
        assert z["train_loss_steps"].tolist() == [0, 25, 50] and z["val_loss_steps"].tolist() == [
            0,
            25,
            50,
        ]


def test_an_exploding_run_exits_1_with_one_line_and_no_predictions(tmp_path, store):
    """Before: FINISHED, exit 0, test_predictions.csv at ±8.7e163 and val/test MSE silently missing."""
    from conftest import cli

    proc = cli(tmp_path, "data=diabetes", "depth=1", "lr=0.5", "epochs=200", store=store)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and lines[0].startswith("sweeper: run ")
        and lines[0].endswith(" FAILED: diverged at epoch 50")
    ), proc.stderr
    assert not (tmp_path / "run" / "test_predictions.csv").exists()


@pytest.mark.slow
def test_a_sweep_of_exploding_runs_names_no_best(tmp_path, store):
    """Before: both runs FINISHED and the summary said "best: lr=0.6,cpu  val_mse=8.377e+303"."""
    from conftest import cli, client_for

    proc = cli(tmp_path, "-m", "lr=0.5,0.6", "depth=1", "epochs=200", store=store)
    assert "best:" not in proc.stdout, proc.stdout
    assert proc.returncode == 1  # nothing finished
    c = client_for(store)
    runs = [r for e in c.search_experiments() for r in c.search_runs([e.experiment_id])]
    kids = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert [(r.info.status, r.data.tags["failure_reason"]) for r in kids] == [
        ("FAILED", "diverged at epoch 50")
    ] * 2
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    assert "best_run_id" not in parent.data.tags and "best_val_mse" not in parent.data.metrics


def test_the_hosts_reading_of_segments_keeps_the_best_before_a_divergence_and_cuts_the_curve_there():
    """models.train._Reading, the host's side of the loop: the best validation sample among those before a
    divergence, the weights measured there with patience, the curve cut at the diverged sample, the last point."""
    from sweeper.models.train import _Reading

    curves = (
        np.zeros(6),
        np.zeros(6),
    )  # the device's samples: only their count is read here (take gets copies)
    r = _Reading(None, curves, log_every=10, patience=5)
    # samples at epochs 0, 10
    assert not r.take(np.array([[4.0, 3.0], [5.0, 2.0]]), 0, False, "w@10")
    assert (r.best_val, r.best_epoch, r.best_params) == (2.0, 10, "w@10")
    # epochs 20, 30 (NaN), 40
    assert r.take(np.array([[2.0, np.nan, 1.0], [1.5, 0.5, 0.1]]), 2, False, "w@40")
    assert r.diverged_at == 30 and r.seen[-1].shape == (
        2,
        2,
    )  # kept up to the diverged sample, not past it
    assert (r.best_val, r.best_epoch, r.best_params) == (
        1.5,
        20,
        "w@40",
    )  # not the 0.5 of the diverged sample
    assert list(r.finish(30, None)) == [
        0,
        10,
        20,
        30,
    ]  # a diverged run gets no last point: no pass samples it

    done = _Reading(None, curves, log_every=10, patience=0)
    # its last column: the end
    assert not done.take(np.array([[4.0, 3.0, 2.5], [5.0, 4.0, 1.0]]), 0, True, None)
    assert done.last.tolist() == [[2.5], [1.0]] and done.seen[-1].shape == (2, 2)
    assert list(done.finish(25, None)) == [0, 10, 25] and (done.best_val, done.best_epoch) == (
        1.0,
        25,
    )
