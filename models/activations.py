"""Hidden-layer activations ``A = f(Z)`` and their derivatives ``dA/dZ``, written once
for any ``xp``.

Each derivative takes both ``Z`` and ``A = f(Z)`` so it can use whichever is cheaper:
relu' = [Z > 0], tanh' = 1 - A², sigmoid' = A (1 - A).

Each activation also comes as *calls*: zero-argument functions with every array bound, that apply
``f`` in place and multiply a gradient by ``f'`` in place. The fused epoch (:mod:`models.mlp`)
strings them into one flat list, so an epoch allocates nothing and dispatches on nothing.
``f`` is computed in the form :mod:`models.forms` chose for this machine (NumPy's ``tanh``, or
an ``exp`` form within 5e-16 of it), the same in both paths, so they round identically.
"""

from __future__ import annotations

from functools import partial
from types import MappingProxyType
from typing import Any, Callable, NamedTuple

from sweeper.models import forms

__all__ = ["ACTIVATIONS", "Call", "sigmoid", "sigmoid_calls"]

Call = Callable[[], Any]


def sigmoid(xp: Any, z: Any) -> Any:
    """σ(z) = 1 / (1 + e^{-z}) computed as ½(1 + tanh(z/2)): no overflow for any z."""
    return 0.5 * (1.0 + xp.tanh(0.5 * z))


def sigmoid_calls(xp: Any, z: Any, out: Any) -> list[Call]:
    """``out ← σ(z)`` as four in-place ufunc calls (``out`` may be ``z``): ½ (1 + tanh(½ z))."""
    return [
        partial(xp.multiply, z, 0.5, out),
        partial(xp.tanh, out, out),
        partial(xp.add, out, 1.0, out),
        partial(xp.multiply, out, 0.5, out),
    ]


def _tanh_grad_calls(xp: Any, dA: Any, A: Any, tmp: Any) -> list[Call]:
    # dA ← dA (1 - A²); the 1 as a 0-d array of A's dtype (a cheaper call than a Python float)
    one = xp.asarray(1.0, dtype=A.dtype)
    return [
        partial(xp.multiply, A, A, tmp),
        partial(xp.subtract, one, tmp, tmp),
        partial(xp.multiply, dA, tmp, dA),
    ]


def _relu_grad_calls(xp: Any, dA: Any, A: Any, tmp: Any) -> list[Call]:
    # dA ← dA [Z > 0]; A = max(Z, 0) > 0 exactly where Z > 0, so Z need not be kept
    return [partial(xp.greater, A, 0, tmp), partial(xp.multiply, dA, tmp, dA)]


def _sigmoid_grad_calls(xp: Any, dA: Any, A: Any, tmp: Any) -> list[Call]:
    # dA ← dA A (1 - A)
    return [
        partial(xp.subtract, 1.0, A, tmp),
        partial(xp.multiply, A, tmp, tmp),
        partial(xp.multiply, dA, tmp, dA),
    ]


class Activation(NamedTuple):
    f: Callable[[Any, Any], Any]  # (xp, Z) -> A
    grad: Callable[[Any, Any, Any], Any]  # (xp, Z, A) -> dA/dZ
    # (xp, Z, scratch=None) -> calls that set Z ← f(Z) in place (forms.calls)
    f_calls: Callable[..., list[Call]]
    # (xp, dA, A, tmp) -> calls: dA ← dA f'(Z)
    grad_calls: Callable[[Any, Any, Any, Any], list[Call]]


ACTIVATIONS: MappingProxyType[str, Activation] = MappingProxyType(
    {
        "relu": Activation(
            lambda xp, z: xp.maximum(z, 0),
            lambda xp, z, a: (z > 0).astype(z.dtype),
            lambda xp, z, scratch=None: forms.calls(xp, "relu", z, scratch),
            _relu_grad_calls,
        ),
        "tanh": Activation(
            lambda xp, z: forms.apply(xp, "tanh", z),
            lambda xp, z, a: 1.0 - a * a,
            lambda xp, z, scratch=None: forms.calls(xp, "tanh", z, scratch),
            _tanh_grad_calls,
        ),
        "sigmoid": Activation(
            lambda xp, z: forms.apply(xp, "sigmoid", z),
            lambda xp, z, a: a * (1.0 - a),
            lambda xp, z, scratch=None: forms.calls(xp, "sigmoid", z, scratch),
            _sigmoid_grad_calls,
        ),
    }
)
