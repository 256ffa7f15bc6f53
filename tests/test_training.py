"""Training behaviour: XOR is learned, runs are deterministic, divergence and early stopping are handled."""
import math

import numpy as np
import pytest

from sweeper import models
from conftest import make_cfg, run_once
from sweeper.models.train import MAX_CHECKS
from sweeper.backend import Backend
from sweeper.metrics import TIMINGS


def test_xor_is_learned(tmp_path, store):
    result = run_once(tmp_path, "data=xor", "depth=1", "width=4", "lr=0.5", "epochs=2000", store=store)
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
    assert 0 < epoch < 100000 // MAX_CHECKS  # stopped within the first segment, not after 100k epochs
    assert result["metrics"]["epochs_run"] == epoch
    assert "test_mse" not in result["metrics"]


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
        backend, model, ds.X_train, ds.y_train, ds.X_val, ds.y_val,
        lr=lr, epochs=epochs, log_every=log_every, patience=patience,
    )
    return fit, model, ds


def test_loss_leaves_the_device_a_bounded_number_of_times():
    fit, _, _ = _fit(epochs=5000, log_every=10)
    assert len(fit.steps) == len(fit.train_loss) == len(fit.val_loss) == 500
    assert fit.steps[1] - fit.steps[0] == 10
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
    from sweeper.backend import resolve

    train_module = importlib.import_module("sweeper.models.train")  # the module: sweeper.models.train is also the function

    used = []

    class Recording(train_module.FullBatch):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            used.append(self.parts)

    monkeypatch.setattr(train_module, "FullBatch", Recording)
    monkeypatch.setenv("SWEEPER_THREADS", "2")
    rng = np.random.default_rng(0)
    X, Xv = rng.standard_normal((2000, 20)), rng.standard_normal((600, 20))
    y, yv = np.sin(X[:, :1]) + X[:, 1:2], np.sin(Xv[:, :1]) + Xv[:, 1:2]
    fits, models_ = [], []
    for backend in (resolve("cpu"), Backend("cpu", np)):
        model = MLP(np, init_params([20, 64, 64, 1], "tanh", 0, "float64"), "tanh", "regression")
        fits.append(models.train(backend, model, X, y, Xv, yv, lr=0.05, epochs=200, log_every=10))
        models_.append(model)
    assert used == [2, 2, 1, 1]  # train and validation batches: blocks with the CPU backend's policy only
    np.testing.assert_allclose(fits[0].train_loss, fits[1].train_loss, rtol=1e-10)
    np.testing.assert_allclose(fits[0].val_loss, fits[1].val_loss, rtol=1e-10)
    assert fits[0].train_loss[-1] < 0.5 * fits[0].train_loss[0]
    for a, b in zip(models_[0].packed, models_[1].packed):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
