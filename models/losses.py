"""Output losses on the pre-activation output ``z`` (shape ``(n, 1)``), with their gradients ``dL/dz``.

- regression (identity output): L = mean((z - y)²),  dL/dz = 2 (z - y) / n
- binary (sigmoid output):      L = mean(log(1 + e^z) - y z)  (binary cross-entropy on logits),
                                 dL/dz = (σ(z) - y) / n
Both are written on logits, so the sigmoid never saturates into log(0).
"""
from __future__ import annotations

from functools import partial
from typing import Any

from sweeper.models.activations import Call, sigmoid, sigmoid_calls


def loss(xp: Any, task: str, z: Any, y: Any, axis: Any = None) -> Any:
    """Mean loss over the rows, a 0-d array on the device (no host sync); over ``axis`` only, when given
    (a batched group's ``(K, 1, n)`` logits give one loss per member with ``axis=(1, 2)``)."""
    if task == "regression":
        d = z - y
        return xp.mean(d * d, axis=axis)
    return xp.mean(xp.logaddexp(0.0, z) - y * z, axis=axis)


def grad(xp: Any, task: str, z: Any, y: Any) -> Any:
    """dL/dz, shape ``(n, 1)``."""
    n = z.shape[0]
    if task == "regression":
        return (2.0 / n) * (z - y)
    return (sigmoid(xp, z) - y) / n


def grad_constant(task: str, n: int) -> float:
    """The constant of dL/dz over its residual: 2/n for the mean squared error, 1/n for cross-entropy."""
    return 2.0 / n if task == "regression" else 1.0 / n


def residual_calls(xp: Any, task: str, z: Any, y: Any, g: Any) -> list[Call]:
    """In-place calls that set ``g ← z - y`` (regression) or ``g ← σ(z) - y`` (binary): dL/dz up to
    :func:`grad_constant`."""
    if task == "regression":
        return [partial(xp.subtract, z, y, g)]
    return [*sigmoid_calls(xp, z, g), partial(xp.subtract, g, y, g)]


def grad_calls(xp: Any, task: str, z: Any, y: Any, g: Any, scale: float, n: int | None = None) -> list[Call]:
    """In-place calls that set ``g ← scale · dL/dz`` for preallocated ``z``, ``y``, ``g`` of one shape.

    The fused epoch passes ``scale = -lr``: backpropagation is linear in ``dL/dz``, so every weight
    gradient then comes out as the update ``-lr ∇θ`` itself and the step is one add per layer.
    ``n`` is the number of rows the loss averages over (``z.size`` unless ``z`` is a block of them).
    """
    n = z.size if n is None else n
    # the factor as a 0-d array of g's dtype: NumPy takes it ~0.1-0.2 µs faster a call than a Python float
    factor = xp.asarray(scale * grad_constant(task, n), dtype=g.dtype)
    return [*residual_calls(xp, task, z, y, g), partial(xp.multiply, g, factor, g)]


def output(xp: Any, task: str, z: Any) -> Any:
    """The model's prediction from the logits: z itself (regression) or the probability σ(z) (binary)."""
    return z if task == "regression" else sigmoid(xp, z)
