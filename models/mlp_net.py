"""sweeper's MLP as a model of the interface (:mod:`sweeper.models.interface`): the
first model, written as a user would write theirs, and the reference the
MLP's hand-tuned kernels are checked against.

Layers ``l = 1..L+1`` (L = depth): ``Z_l = A_{l-1} @ W_l + b_l``, ``A_l = f(Z_l)`` for hidden
layers; the output ``out = Z_{L+1}``. Backward
from ``dZ = dout``: ``dW_l = A_{l-1}ᵀ @ dZ``, ``db_l = Σ_rows dZ``, ``dA_{l-1} = dZ @ W_lᵀ``,
``dZ_{l-1} = dA_{l-1} ∘ f'(Z_{l-1})``. Written with the broadcasting idioms
(``swapaxes(-1, -2)``, ``sum(axis=-2)``), so it also trains stacked over members.

Its fast path (an optional hook: ``fast_path = True``) is :class:`sweeper.models.mlp.MLP`
with its fused epoch (:class:`~sweeper.models.mlp.FullBatch`) and the batched group's
kernel (:mod:`sweeper.models.batched`): the same equations, feature-major, on
preallocated buffers; ``tests/test_interface.py`` holds the two equal.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sweeper.models.activations import ACTIVATIONS


__all__ = ["MLPNet"]


class MLPNet:
    """A multilayer perceptron: ``depth`` hidden layers of ``width`` units with ``activation``;
    depth 0 is linear, logistic or softmax regression (the task's link is sweeper's)."""

    # what it offers sweeper beyond the interface (models.interface.Offer), read off the
    # class like any model's:
    fast_path = True  # sweeper trains it with the MLP's own kernels (models.mlp, models.batched)
    top_level = (
        "depth",
        "width",
        "activation",
    )  # its hyperparameters are the config's top-level keys
    linear = {"depth": 0}  # no hidden layer: linear, logistic or softmax regression

    def __init__(self, depth: int = 1, width: int = 16, activation: str = "tanh"):
        self.depth, self.width, self.activation = depth, width, activation
        self.act = ACTIVATIONS[activation]

    def init(self, n_in: int, n_out: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """He-normal (relu) or Glorot-normal weights, zero biases: the draws of
        :func:`sweeper.models.mlp.init_params`."""
        sizes = [n_in] + [self.width] * self.depth + [n_out]
        params = {}
        for l, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:]), start=1):
            scale = (
                np.sqrt(2.0 / fan_in)
                if self.activation == "relu"
                else np.sqrt(2.0 / (fan_in + fan_out))
            )
            params[f"W{l}"] = rng.standard_normal((fan_in, fan_out)) * scale
            params[f"b{l}"] = np.zeros((1, fan_out))
        return params

    def forward(self, xp: Any, params: dict[str, Any], X: Any) -> tuple[Any, list[tuple[Any, Any]]]:
        A, cache = X, []
        for l in range(1, self.depth + 1):
            Z = A @ params[f"W{l}"] + params[f"b{l}"]  # (n, width), or (K, n, width) stacked
            cache.append((A, Z))
            A = self.act.f(xp, Z)
        cache.append((A, None))
        L = self.depth + 1
        return A @ params[f"W{L}"] + params[f"b{L}"], cache

    def backward(
        self, xp: Any, params: dict[str, Any], cache: list[tuple[Any, Any]], dout: Any
    ) -> dict[str, Any]:
        grads, dZ = {}, dout
        for l in range(self.depth + 1, 0, -1):
            A_in, _ = cache[l - 1]
            grads[f"W{l}"] = A_in.swapaxes(-1, -2) @ dZ
            grads[f"b{l}"] = dZ.sum(axis=-2, keepdims=True)
            if l > 1:
                _, Z_prev = cache[l - 2]
                dZ = (dZ @ params[f"W{l}"].swapaxes(-1, -2)) * self.act.grad(xp, Z_prev, A_in)
        return grads
