"""Output losses on the pre-activation output ``z`` (shape ``(n, 1)``), with their
gradients ``dL/dz``.

- regression (identity output): L = mean((z - y)²),  dL/dz = 2 (z - y) / n
- binary (sigmoid output):      L = mean(log(1 + e^z) - y z)  (binary cross-entropy on logits),
                                 dL/dz = (σ(z) - y) / n
- multiclass (softmax over k outputs, ``z`` of shape ``(n, k)``, ``y`` the class index
  (n, 1) or one-hot ``Y`` (n, k)): L = mean(logsumexp(z) - z_y) (cross-entropy on logits),
  dL/dz = (softmax(z) - Y) / n All are written on logits, so the sigmoid never saturates
  into log(0); the log-sum-exp subtracts the row's largest logit first, so no exp overflows.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from sweeper.models.activations import Call, sigmoid, sigmoid_calls


__all__ = [
    "cross_entropy",
    "grad",
    "grad_calls",
    "grad_constant",
    "loss",
    "one_hot",
    "output",
    "residual_calls",
    "sigmoid",
    "softmax",
    "softmax_calls",
]


def loss(xp: Any, task: str, z: Any, y: Any, axis: Any = None) -> Any:
    """Mean loss over the rows, a 0-d array on the device (no host sync); over ``axis`` only, when
    given (a batched group's ``(K, 1, n)`` logits give one loss per member with ``axis=(1, 2)``)."""
    if task == "regression":
        d = z - y
        return xp.mean(d * d, axis=axis)
    if task == "multiclass":  # z (n, k)
        return cross_entropy(xp, z, one_hot(xp, y, z.shape[1]), classes=1)
    return xp.mean(xp.logaddexp(0.0, z) - y * z, axis=axis)


def grad(xp: Any, task: str, z: Any, y: Any) -> Any:
    """dL/dz, shape ``(n, 1)`` (``(n, k)`` for a multi-class task)."""
    n = z.shape[0]
    if task == "regression":
        return (2.0 / n) * (z - y)
    if task == "multiclass":
        return (softmax(xp, z, 1) - one_hot(xp, y, z.shape[1])) / n  # z (n, k)
    return (sigmoid(xp, z) - y) / n


def one_hot(xp: Any, y: Any, k: int, classes: int = -1) -> Any:
    """Class indices ``y`` ((n, 1), or (1, n) with ``classes=0``) as one-hot rows (n, k) (columns
    (k, n)); a ``y`` that already has ``k`` entries along ``classes`` is returned as it is."""
    if y.shape[classes] == k and k > 1:
        return y
    shape = (1, k) if classes == -1 else (k, 1)
    return (y == xp.arange(k).reshape(shape)).astype(y.dtype)


def softmax(xp: Any, z: Any, classes: int) -> Any:
    """exp(z - max) / sum exp(z - max) along the ``classes`` axis."""
    e = xp.exp(z - z.max(axis=classes, keepdims=True))
    return e / e.sum(axis=classes, keepdims=True)


def cross_entropy(xp: Any, z: Any, Y: Any, classes: int, axis: Any = None) -> Any:
    """mean over samples of ``logsumexp(z) - <Y, z>`` along ``classes`` (numerically stable),
    a 0-d array; the mean over ``axis`` (of the array without ``classes``) only, when given (a
    batched group's ``(K, k, n)`` logits give one loss per member with ``classes=1, axis=-1``)."""
    m = z.max(axis=classes, keepdims=True)
    lse = xp.log(xp.exp(z - m).sum(axis=classes)) + m.squeeze(classes)
    return xp.mean(lse - (Y * z).sum(axis=classes), axis=axis)


def softmax_calls(xp: Any, z: Any, out: Any, col: Any) -> list[Call]:
    """``out ← softmax(z)`` over the classes of feature-major logits (``(k, n)``, or a batched
    group's ``(K, k, n)``: axis -2) in place; ``col`` is a (1, n) (or (K, 1, n)) scratch."""
    return [
        partial(xp.max, z, axis=-2, keepdims=True, out=col),
        partial(xp.subtract, z, col, out),
        partial(xp.exp, out, out),
        partial(xp.sum, out, axis=-2, keepdims=True, out=col),
        partial(xp.divide, out, col, out),
    ]


def grad_constant(task: str, n: int) -> float:
    """The constant of dL/dz over its residual: 2/n for the mean squared error, 1/n
    for cross-entropy."""
    return 2.0 / n if task == "regression" else 1.0 / n


def residual_calls(xp: Any, task: str, z: Any, y: Any, g: Any, col: Any = None) -> list[Call]:
    """In-place calls that set ``g ← z - y`` (regression), ``g ← σ(z) - y`` (binary) or
    ``g ← softmax(z) - Y`` (multiclass, feature-major ``(k, n)`` or ``(K, k, n)`` with one-hot
    ``Y``; ``col`` a (1, n) or (K, 1, n) scratch): dL/dz up to :func:`grad_constant`."""
    if task == "regression":
        return [partial(xp.subtract, z, y, g)]
    if task == "multiclass":
        return [*softmax_calls(xp, z, g, col), partial(xp.subtract, g, y, g)]
    return [*sigmoid_calls(xp, z, g), partial(xp.subtract, g, y, g)]


def grad_calls(
    xp: Any, task: str, z: Any, y: Any, g: Any, scale: float, n: int | None = None, col: Any = None
) -> list[Call]:
    """In-place calls that set ``g ← scale · dL/dz`` for preallocated ``z``, ``y``,
    ``g`` of one shape.

    The fused epoch passes ``scale = -lr``: backpropagation is linear in ``dL/dz``, so every weight
    gradient then comes out as the update ``-lr ∇θ`` itself and the step is one add per layer.
    ``n`` is the number of rows the loss averages over (``z.size`` unless ``z`` is a block of them).
    """
    n = z.shape[-1] if n is None else n
    # the factor as a 0-d array of g's dtype: NumPy takes it ~0.1-0.2 µs faster a call
    # than a Python float
    factor = xp.asarray(scale * grad_constant(task, n), dtype=g.dtype)
    return [*residual_calls(xp, task, z, y, g, col), partial(xp.multiply, g, factor, g)]


def output(xp: Any, task: str, z: Any) -> Any:
    """The model's prediction from the logits: z itself (regression), the probability
    σ(z) (binary) or the class probabilities softmax(z) (multiclass, (n, k))."""
    if task == "multiclass":  # z (n, k)
        return softmax(xp, z, 1)
    return z if task == "regression" else sigmoid(xp, z)
