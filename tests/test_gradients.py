"""Backpropagation against central finite differences, for every activation × task × depth, in float64."""
import numpy as np
import pytest

from sweeper.models import losses
from sweeper.models.activations import ACTIVATIONS, sigmoid
from sweeper.models.mlp import MLP, init_params


def finite_difference(model: MLP, X, y, eps: float = 1e-6) -> list[np.ndarray]:
    grads = []
    for p in model.params:
        g = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            old = p[idx]
            p[idx] = old + eps
            up = float(model.loss(X, y))
            p[idx] = old - eps
            down = float(model.loss(X, y))
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
    y = rng.standard_normal((9, 1)) if task == "regression" else (rng.random((9, 1)) > 0.5).astype(float)
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
    np.testing.assert_allclose(per_row.ravel(), [0.0, 4.248e-18, np.log(2), 4.248e-18, 0.0], atol=1e-15)
    assert np.isfinite(losses.loss(np, "binary", z, 1 - y))  # confidently wrong: large but finite
    assert float(losses.loss(np, "binary", np.array([[1000.0]]), np.array([[0.0]]))) == pytest.approx(1000.0)
