"""Backpropagation against central finite differences, for every activation × task × depth, in float64."""

import numpy as np
import pytest

from sweeper.models import losses
from sweeper.models.activations import ACTIVATIONS, sigmoid
from sweeper.models.mlp import MLP, init_params


def finite_difference(model: MLP, X, y, eps: float = 1e-6) -> list[np.ndarray]:
    """Central differences of the objective (the loss plus the model's weight decay)."""
    grads = []
    for p in model.params:
        g = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            old = p[idx]
            p[idx] = old + eps
            up = float(model.objective(X, y))
            p[idx] = old - eps
            down = float(model.objective(X, y))
            p[idx] = old
            g[idx] = (up - down) / (2 * eps)
        grads.append(g)
    return grads


@pytest.mark.parametrize("depth", [0, 1, 2])
@pytest.mark.parametrize("task", ["regression", "binary"])
@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_gradients_match_finite_differences(activation, task, depth):
    rng = np.random.default_rng(depth + 10 * len(task) + len(activation))
    X = rng.standard_normal((9, 3))
    y = (
        rng.standard_normal((9, 1))
        if task == "regression"
        else (rng.random((9, 1)) > 0.5).astype(float)
    )
    params = init_params([3] + [5] * depth + [1], activation, seed=1, dtype="float64")
    params = [p + 0.1 * rng.standard_normal(p.shape) for p in params]  # non-zero biases too
    model = MLP(np, params, activation, task)

    loss, analytic = model.gradients(X, y, with_loss=True)
    numeric = finite_difference(model, X, y)

    assert float(loss) == pytest.approx(float(model.loss(X, y)), rel=1e-12)
    for a, n in zip(analytic, numeric):
        assert a.shape == n.shape
        np.testing.assert_allclose(a, n, rtol=1e-5, atol=1e-8)


def test_sigmoid_and_cross_entropy_are_stable_at_extreme_logits():
    z = np.array([[-1000.0], [-40.0], [0.0], [40.0], [1000.0]])
    y = np.array([[0.0], [0.0], [1.0], [1.0], [1.0]])
    p = sigmoid(np, z)
    assert np.isfinite(p).all() and p[0, 0] == 0.0 and p[-1, 0] == 1.0 and p[2, 0] == 0.5
    # log(1 + e^z) - y z: exactly 0 where the logit is confidently right, ln 2 at z = 0
    per_row = np.logaddexp(0.0, z) - y * z
    np.testing.assert_allclose(
        per_row.ravel(), [0.0, 4.248e-18, np.log(2), 4.248e-18, 0.0], atol=1e-15
    )
    assert np.isfinite(losses.loss(np, "binary", z, 1 - y))  # confidently wrong: large but finite
    assert float(
        losses.loss(np, "binary", np.array([[1000.0]]), np.array([[0.0]]))
    ) == pytest.approx(1000.0)


@pytest.mark.parametrize("depth", [0, 1, 2])
@pytest.mark.parametrize("k", [3, 5])
@pytest.mark.parametrize("decay", [0.0, 0.3])
def test_softmax_cross_entropy_and_weight_decay_gradients_match_finite_differences(depth, k, decay):
    rng = np.random.default_rng(depth + 7 * k)
    X = rng.standard_normal((11, 3))
    y = rng.integers(0, k, (11, 1)).astype(float)
    params = init_params([3] + [4] * depth + [k], "tanh", seed=2, dtype="float64")
    params = [p + 0.1 * rng.standard_normal(p.shape) for p in params]
    model = MLP(np, params, "tanh", "multiclass", weight_decay=decay)

    objective, analytic = model.gradients(X, y, with_loss=True)
    numeric = finite_difference(model, X, y)

    assert float(objective) == pytest.approx(float(model.objective(X, y)), rel=1e-12)
    # the penalty is in the objective
    assert (float(objective) > float(model.loss(X, y))) == (decay > 0)
    for a, n in zip(analytic, numeric):
        np.testing.assert_allclose(a, n, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("task", ["regression", "binary"])
def test_weight_decay_gradients_match_finite_differences(task):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((9, 3))
    y = (
        rng.standard_normal((9, 1))
        if task == "regression"
        else (rng.random((9, 1)) > 0.5).astype(float)
    )
    params = [
        p + 0.1 * rng.standard_normal(p.shape)
        for p in init_params([3, 5, 5, 1], "relu", 1, "float64")
    ]
    model = MLP(np, params, "relu", task, weight_decay=0.5)
    _, analytic = model.gradients(X, y)
    _, plain = MLP(np, params, "relu", task).gradients(X, y)
    for i, (a, n) in enumerate(zip(analytic, finite_difference(model, X, y))):
        np.testing.assert_allclose(a, n, rtol=1e-5, atol=1e-8)
        assert np.array_equal(a, plain[i]) == (i % 2 == 1)  # biases are not decayed, weights are


def test_softmax_cross_entropy_is_stable_at_extreme_logits():
    z = np.array([[1000.0, -1000.0, 0.0], [-800.0, 800.0, 799.0]])
    y = np.array([[0.0], [2.0]])
    assert float(losses.loss(np, "multiclass", z, y)) == pytest.approx(
        0.5 * (0.0 + 1.0 + np.log1p(np.exp(-1.0)))
    )
    p = losses.output(np, "multiclass", z)
    assert np.isfinite(p).all() and np.allclose(p.sum(axis=1), 1.0)
