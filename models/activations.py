"""Hidden-layer activations ``A = f(Z)`` and their derivatives ``dA/dZ``, written once for any ``xp``.

Each derivative takes both ``Z`` and ``A = f(Z)`` so it can use whichever is cheaper:
relu' = [Z > 0], tanh' = 1 - A², sigmoid' = A (1 - A).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple


def sigmoid(xp: Any, z: Any) -> Any:
    """σ(z) = 1 / (1 + e^{-z}) computed as ½(1 + tanh(z/2)): no overflow for any z."""
    return 0.5 * (1.0 + xp.tanh(0.5 * z))


class Activation(NamedTuple):
    f: Callable[[Any, Any], Any]  # (xp, Z) -> A
    grad: Callable[[Any, Any, Any], Any]  # (xp, Z, A) -> dA/dZ


ACTIVATIONS: dict[str, Activation] = {
    "relu": Activation(lambda xp, z: xp.maximum(z, 0), lambda xp, z, a: (z > 0).astype(z.dtype)),
    "tanh": Activation(lambda xp, z: xp.tanh(z), lambda xp, z, a: 1.0 - a * a),
    "sigmoid": Activation(sigmoid, lambda xp, z, a: a * (1.0 - a)),
}
