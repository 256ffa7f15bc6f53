"""One model family: a multilayer perceptron whose depth-0 case is linear or logistic regression.

Layers ``l = 0..L`` (L = depth): ``Z_l = A_{l-1} @ W_l + b_l`` with ``A_{-1} = X`` of shape ``(n, d)``,
``A_l = f(Z_l)`` for hidden layers and the output ``z = Z_L`` of shape ``(n, 1)`` read through the
task's loss (identity + MSE, or sigmoid + binary cross-entropy).

Backward, from ``dZ_L = dL/dz``:  ``dW_l = A_{l-1}.T @ dZ_l``, ``db_l = sum(dZ_l, axis=0)``,
``dA_{l-1} = dZ_l @ W_l.T``, ``dZ_{l-1} = dA_{l-1} * f'(Z_{l-1})``.

The arrays live wherever ``xp`` puts them; nothing here copies to the host or waits for the device.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from models import losses
from models.activations import ACTIVATIONS


def init_params(sizes: list[int], activation: str, seed: int, dtype: str) -> list[np.ndarray]:
    """Weights drawn on the host from NumPy's seeded generator, so every device starts identical.

    He-normal scale for relu, Glorot-normal otherwise; biases start at zero. Returns
    ``[W_0, b_0, W_1, b_1, ...]`` with ``W_l`` of shape ``(sizes[l], sizes[l+1])`` and ``b_l`` of
    shape ``(1, sizes[l+1])``.
    """
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        scale = np.sqrt(2.0 / fan_in) if activation == "relu" else np.sqrt(2.0 / (fan_in + fan_out))
        params.append((rng.standard_normal((fan_in, fan_out)) * scale).astype(dtype))
        params.append(np.zeros((1, fan_out), dtype=dtype))
    return params


class MLP:
    """Parameters on a device plus the forward and backward passes written against ``xp``."""

    def __init__(self, xp: Any, params: list[Any], activation: str, task: str):
        self.xp = xp
        self.params = params
        self.activation = activation
        self.task = task
        self.act = ACTIVATIONS[activation]

    @property
    def depth(self) -> int:
        return len(self.params) // 2 - 1

    def logits(self, X: Any) -> tuple[Any, list[tuple[Any, Any]]]:
        """Forward pass. Returns the output ``z`` (n, 1) and the cache ``[(A_in, Z), ...]`` of hidden layers."""
        xp, A, cache = self.xp, X, []
        for l in range(self.depth):
            W, b = self.params[2 * l], self.params[2 * l + 1]
            Z = A @ W + b  # (n, width)
            cache.append((A, Z))
            A = self.act.f(xp, Z)
        W, b = self.params[-2], self.params[-1]
        cache.append((A, None))
        return A @ W + b, cache  # (n, 1)

    def predict(self, X: Any) -> Any:
        """Predictions (n, 1): the regression output, or P(y = 1) for a binary task."""
        z, _ = self.logits(X)
        return losses.output(self.xp, self.task, z)

    def loss(self, X: Any, y: Any) -> Any:
        z, _ = self.logits(X)
        return losses.loss(self.xp, self.task, z, y)

    def gradients(self, X: Any, y: Any, with_loss: bool = False) -> tuple[Any, list[Any]]:
        """Loss (a 0-d device array, or None unless ``with_loss``) and ``[dW_0, db_0, ...]``."""
        xp = self.xp
        z, cache = self.logits(X)
        loss = losses.loss(xp, self.task, z, y) if with_loss else None
        dZ = losses.grad(xp, self.task, z, y)  # (n, 1)
        grads: list[Any] = [None] * len(self.params)
        for l in range(self.depth, -1, -1):
            A_in, _ = cache[l]
            grads[2 * l] = A_in.T @ dZ
            grads[2 * l + 1] = dZ.sum(axis=0, keepdims=True)
            if l > 0:
                _, Z_prev = cache[l - 1]
                dA = dZ @ self.params[2 * l].T
                dZ = dA * self.act.grad(xp, Z_prev, A_in)  # A_in of layer l is f(Z_{l-1})
        return loss, grads

    def step(self, grads: list[Any], lr: float) -> None:
        """One gradient-descent update in place: θ ← θ - lr · ∇θ."""
        for p, g in zip(self.params, grads):
            p -= lr * g
