"""Momentum, Adam, weight decay and mini-batches against scikit-learn's MLP trajectories, in float64.

Both start from the same weights. scikit-learn's losses differ from ours by constants, matched here:
MLPRegressor minimises ½·mean squared error (ours: the mean squared error, so its gradient is twice
theirs: ``lr`` is halved and Adam's ``eps`` doubled) and both penalise ``alpha / (2 n_batch) Σ ||W||²``
(ours: ``(λ/2) Σ ||W||²``, so ``alpha = λ n`` for cross-entropy and ``λ n / 2`` for squared error).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from sweeper.base.backend import resolve
from sweeper.models.mlp import MLP, init_params
from sweeper.models.optim import Optimizer
from sweeper.models.train import train

sk = pytest.importorskip("sklearn.neural_network")

CHECKPOINTS = (1, 20, 200)  # epochs (= steps with the full batch)


def _data(task: str, n: int = 80, d: int = 4, seed: int = 3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    s = X @ rng.standard_normal(d) + np.sin(X[:, 0] * 2)
    if task == "regression":
        return X, s
    if task == "binary":
        return X, (s > 0).astype(float)
    return X, np.digitize(s, np.quantile(s, [1 / 3, 2 / 3])).astype(float)  # 3 classes


def _ours(X, y, task, params, activation, lr, epochs, opt, batch_size=0):
    model = MLP(np, [p.copy() for p in params], activation, task, opt.weight_decay)
    yc = y.reshape(-1, 1)
    train(
        resolve("cpu"),
        model,
        X,
        yc,
        X,
        yc,
        lr=lr,
        epochs=epochs,
        log_every=epochs + 1,
        opt=opt,
        batch_size=batch_size,
        shuffle=False,
    )
    return [p.copy() for p in model.params]


def _sklearn(est, X, y, params, epochs):
    """scikit-learn's weights after ``epochs`` passes from ``params`` (one partial_fit per pass)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.set_params(max_iter=1)
        est.fit(X, y)  # builds the layers; the weights are replaced below
        est.coefs_ = [p.copy() for p in params[::2]]
        est.intercepts_ = [p.ravel().copy() for p in params[1::2]]
        if hasattr(est, "_optimizer"):
            del est._optimizer  # a fresh optimizer state, created by the first partial_fit
        out = {}
        for e in range(1, epochs + 1):
            est.partial_fit(X, y)
            if e in CHECKPOINTS:
                out[e] = [
                    q.copy()
                    for W, b in zip(est.coefs_, est.intercepts_)
                    for q in (W, b.reshape(1, -1))
                ]
    return out


def _close(ours, theirs):
    for a, b in zip(ours, theirs):
        assert np.max(np.abs(a - b)) <= 1e-6 * np.max(np.abs(b)), np.max(np.abs(a - b)) / np.max(
            np.abs(b)
        )


CASES = [  # task, optimizer keys, batch size, weight decay λ, activation, depth
    ("multiclass", dict(name="adam"), 0, 1e-3, "tanh", 1),
    ("multiclass", dict(name="momentum", momentum=0.9), 0, 1e-3, "relu", 2),
    ("regression", dict(name="momentum", momentum=0.8, nesterov=True), 0, 1e-2, "tanh", 1),
    ("regression", dict(name="adam", beta1=0.8, beta2=0.99), 0, 0.0, "relu", 1),
    ("binary", dict(name="adam"), 0, 1e-2, "tanh", 0),
    ("regression", dict(name="gd"), 32, 0.0, "tanh", 1),
    ("multiclass", dict(name="gd"), 32, 0.0, "relu", 1),
]


@pytest.mark.parametrize("task, keys, batch_size, decay, activation, depth", CASES)
def test_trajectory_matches_scikit_learn(task, keys, batch_size, decay, activation, depth):
    X, y = _data(task)
    n, k = len(X), 3 if task == "multiclass" else 1
    params = init_params([X.shape[1]] + [6] * depth + [k], activation, seed=1, dtype="float64")
    lr_sk = 0.05 if keys["name"] != "adam" else 0.01
    regression = task == "regression"
    opt = Optimizer(**keys, weight_decay=decay)
    if regression and opt.name == "adam":
        opt = Optimizer(**{**keys, "eps": 2e-8}, weight_decay=decay)  # our gradient is twice theirs
    lr = lr_sk / 2 if regression and opt.name != "adam" else lr_sk
    alpha = decay * n / (2 if regression else 1)
    Est = sk.MLPRegressor if regression else sk.MLPClassifier
    est = Est(
        hidden_layer_sizes=(6,) * depth,
        activation={"sigmoid": "logistic"}.get(activation, activation),
        solver="adam" if opt.name == "adam" else "sgd",
        learning_rate="constant",
        learning_rate_init=lr_sk,
        momentum=opt.momentum if opt.name == "momentum" else 0.0,
        nesterovs_momentum=opt.nesterov,
        beta_1=opt.beta1,
        beta_2=opt.beta2,
        epsilon=1e-8,
        alpha=alpha,
        batch_size=batch_size or n,
        shuffle=False,
        tol=0.0,
        n_iter_no_change=10**6,
        random_state=0,
    )
    theirs = _sklearn(est, X, y, params, max(CHECKPOINTS))
    for epochs in CHECKPOINTS:
        ours = _ours(X, y, task, params, activation, lr, epochs, opt, batch_size)
        assert not all(np.array_equal(a, b) for a, b in zip(ours, params))  # the weights moved
        _close(ours, theirs[epochs])


def _splitmix64(z: int) -> int:
    """SplitMix64's finaliser (Steele, Lea and Flood 2014), on Python integers mod 2⁶⁴."""
    z ^= z >> 30
    z = z * 0xBF58476D1CE4E5B9 % 2**64
    z ^= z >> 27
    z = z * 0x94D049BB133111EB % 2**64
    return z ^ (z >> 31)


@pytest.mark.parametrize("n, seed", [(7, 0), (50, 3), (33, 2**40 + 5)])
def test_each_epochs_row_order_sorts_the_rows_by_splitmix64_of_row_plus_seed_phi_plus_epoch_n(
    n, seed
):
    """Epoch t's order: the rows sorted by SplitMix64(i + seed·⌊2⁶⁴/φ⌋ + t·n mod 2⁶⁴), computed here in plain
    Python integers; the calls build it in place, the same on every backend."""
    from sweeper.models.optim import row_orders

    phi = 0x9E3779B97F4A7C15
    epochs = 4
    want = [
        sorted(range(n), key=lambda i: _splitmix64((i + seed * phi + t * n) % 2**64))
        for t in range(epochs)
    ]
    got = row_orders(n, seed, epochs)
    assert got.shape == (epochs, n) and got.dtype == np.arange(1).dtype
    assert got.tolist() == want


def test_an_optimizer_reads_its_keys_from_a_mapping_or_attributes_and_keeps_the_defaults_it_lacks():
    from types import SimpleNamespace as NS

    from omegaconf import OmegaConf

    default = Optimizer()
    assert (default.name, default.momentum, default.nesterov) == ("gd", 0.9, False)
    assert (default.beta1, default.beta2, default.eps, default.weight_decay) == (
        0.9,
        0.999,
        1e-8,
        0.0,
    )
    cfg = {"optimizer": "adam", "beta1": 0.8, "eps": 1e-6, "lr": 0.1}
    got = Optimizer.from_config(cfg)
    assert got == Optimizer("adam", 0.9, False, 0.8, 0.999, 1e-6, 0.0)
    assert Optimizer.from_config(OmegaConf.create(cfg)) == got
    ns = Optimizer.from_config(
        NS(optimizer="momentum", momentum=0.5, nesterov=True, weight_decay=0.01)
    )
    assert ns == Optimizer("momentum", 0.5, True, 0.9, 0.999, 1e-8, 0.01)
    assert Optimizer.from_config({}) == default and Optimizer.from_config(NS()) == default
