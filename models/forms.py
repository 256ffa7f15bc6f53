"""Each activation's exact forms, and the short probe that picks the fastest on the
machine it runs on.

An activation can be computed more than one way to the same float64 value, give or take a
rounding, and which is fastest depends on the CPU: NumPy's SIMD ``tanh`` for float64
needs AVX-512 (``X86_V4``); without it ``np.tanh`` is an AVX2 or scalar loop while ``np.exp``
stays fast, and ``tanh`` costs as much as an epoch's matrix products (DESIGN.md, "NumPy's
elementwise speed on this machine"). The forms, each applied in place (``z ← f(z)``):

- ``tanh`` **library**: ``np.tanh``.
- ``tanh`` **exp**: ``1 - 2 / (exp(2z) + 1)`` where ``|z| >= 2⁻²⁶`` (float32: ``2⁻¹²``), and
  ``z`` itself below (there ``tanh(z)`` rounds to ``z``: ``z³/3`` is under half an ulp of ``z``).
  Error bound, with ``u = 2⁻⁵³`` and ``e = exp(2z)`` good to ``u_e`` relative: for ``z < 0``
  (``e < 1``) ``q = 2 / (e + 1)`` lies in ``[1, 2]`` and ``1 - q`` is exact, so the error is
  ``q``'s: ``2 (u + e u_e) / (1 + e)² + u <= 3u`` (the rounding of ``e + 1``, carried through the
  division, and the division's own); for ``z > 0`` it is smaller. So within ``3u = 3.3e-16`` of
  ``tanh`` (the dense sweep of ``tests/test_activation_forms.py`` finds 3.33e-16 at
  ``z ≈ -9.39``), and of ``np.tanh`` within that plus ``np.tanh``'s own rounding: under the 5e-16
  the forms are held to. The sign is ``z``'s (``e >= 1`` exactly when ``z >= 0``), ``±0``,
  ``±inf`` and NaN come out exact (``-0`` through the small ``|z|`` branch).
- ``sigmoid`` **library**: ``½ (1 + tanh(½ z))``, which never overflows.
- ``sigmoid`` **exp**: ``1 / (1 + exp(-z))`` (``exp`` overflows to ``inf``
  below ``z = -709``, giving 0, as the library form does there; the overflow warning is
  silenced): relative error ``u_e + 2u`` of a value at most 1.
- ``relu``: ``max(z, 0)`` (one form).

The derivatives keep one form each (from ``A = f(Z)``: ``1 - A²``, ``A (1 - A)``,
``[A > 0]``: two or three in-place passes, no transcendental).

:func:`chosen` gives the form of each activation for an array library and dtype: on CuPy
always the library's (one fused kernel); on NumPy the fastest of a short probe
(:func:`probe`, a few ms: each form on 2¹⁷ values, interleaved, the median of 7; a form other
than the library's must win by :data:`MARGIN`), made once per machine and dtype and kept in
the cache folder (``$SWEEPER_CACHE_DIR``, else ``~/.cache/sweeper``), so every process of a
machine (a sweep's workers) trains with the same forms. ``SWEEPER_ACTIVATION_FORMS``
overrides it: ``library`` (NumPy's own everywhere), ``probe`` (the default),
or ``tanh=exp,sigmoid=library``. A run records its form (tag ``activation_form``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from functools import partial
from types import MappingProxyType
from typing import Any, Callable

import numpy as np

from sweeper.base import state
from sweeper.base.environment import cache_root, read_cached, write_cached

__all__ = [
    "ENV",
    "FORMS",
    "TAG",
    "apply",
    "calls",
    "chosen",
    "machine_key",
    "probe",
    "scratch_for",
    "tag",
]

Call = Callable[[], Any]
ENV = "SWEEPER_ACTIVATION_FORMS"
TAG = "activation_form"
SMALL = MappingProxyType(
    {
        "float64": 2.0**-26,
        "float32": 2.0**-12,
    }
)  # below these |z|, tanh(z) rounds to z (z²/3 < half an ulp)
MARGIN = 0.9  # a form replaces the library's when it takes at most this share of its time
PROBE_SIZE = 1 << 17


def _tanh_library(xp: Any, z: Any, scratch: Any) -> list[Call]:
    return [partial(xp.tanh, z, z)]


def _tanh_exp(xp: Any, z: Any, scratch: Any) -> list[Call]:
    t, m = scratch
    small = SMALL.get(z.dtype.name, SMALL["float32"])
    return [
        partial(xp.abs, z, t),
        partial(xp.greater_equal, t, small, m),  # m: where the exp form is used
        partial(xp.multiply, z, 2.0, t),
        partial(xp.exp, t, t),
        partial(xp.add, t, 1.0, t),
        partial(xp.divide, 2.0, t, t),
        partial(xp.subtract, 1.0, t, out=z, where=m),
    ]


def _sigmoid_library(xp: Any, z: Any, scratch: Any) -> list[Call]:
    return [
        partial(xp.multiply, z, 0.5, z),
        partial(xp.tanh, z, z),
        partial(xp.add, z, 1.0, z),
        partial(xp.multiply, z, 0.5, z),
    ]


def _sigmoid_exp(xp: Any, z: Any, scratch: Any) -> list[Call]:
    return [
        partial(xp.negative, z, z),
        partial(xp.exp, z, z),
        partial(xp.add, z, 1.0, z),
        partial(xp.divide, 1.0, z, z),
    ]


def _relu(xp: Any, z: Any, scratch: Any) -> list[Call]:
    return [partial(xp.maximum, z, 0, out=z)]


# activation -> form -> (calls that set z ← f(z) in place, given scratch; whether it
# needs the scratch)
FORMS: MappingProxyType[str, dict[str, tuple[Callable[[Any, Any, Any], list[Call]], bool]]] = (
    MappingProxyType(
        {
            "tanh": {"library": (_tanh_library, False), "exp": (_tanh_exp, True)},
            "sigmoid": {"library": (_sigmoid_library, False), "exp": (_sigmoid_exp, False)},
            "relu": {"library": (_relu, False)},
        }
    )
)


def scratch_for(xp: Any, z: Any, buffer: Any = None) -> tuple[Any, Any]:
    """A scratch for a form that needs one: a buffer of ``z``'s shape and dtype (``buffer``:
    one the caller has free while ``f`` runs, e.g. the backward pass's) and a boolean mask."""
    return (xp.empty(z.shape, dtype=z.dtype) if buffer is None else buffer), xp.empty(
        z.shape, dtype=bool
    )


def calls(xp: Any, activation: str, z: Any, scratch: Any = None) -> list[Call]:
    """In-place calls that set ``z ← f(z)`` with the activation's chosen form. A form
    that needs a scratch gets :func:`scratch_for` ``(xp, z, scratch)``: ``scratch`` is a
    buffer of ``z``'s shape that is free while ``f`` runs, or None (one is made)."""
    build, needs = FORMS[activation][chosen(xp, z.dtype)[activation]]
    return build(xp, z, scratch_for(xp, z, scratch) if needs else None)


@np.errstate(over="ignore")  # the exp forms overflow to inf where the value is ±1 or 0: exact
def apply(xp: Any, activation: str, z: Any) -> Any:
    """``f(z)`` in a new array, with the same form (and so the same rounding) as :func:`calls`."""
    out = xp.array(z, copy=True)
    for call in calls(xp, activation, out):
        call()
    return out


# --- the
# choice
# -------------------------------------------------------------------------------------------------

_LOCK = threading.Lock()


def chosen(xp: Any, dtype: Any) -> dict[str, str]:
    """Activation → the name of its form for arrays of ``xp`` and ``dtype`` (see the
    module's docstring)."""
    dtype = np.dtype(dtype).name
    if xp is not np:
        return {a: "library" for a in FORMS}
    env = os.environ.get(ENV, "").strip()
    key = f"{env}|{dtype}"
    done = state.process().forms
    if key not in done:
        with _LOCK:
            if key not in done:
                done[key] = _choose(env, dtype)
    return done[key]


def _choose(env: str, dtype: str) -> dict[str, str]:
    if env == "library":
        return {a: "library" for a in FORMS}
    if env in ("", "probe"):
        return _cached_probe(dtype)
    out = {a: "library" for a in FORMS}
    for item in env.split(","):
        name, _, form = item.partition("=")
        out[name.strip()] = form.strip()
    return out


def tag(xp: Any, activation: str, dtype: Any) -> str:
    """What a run records: its activation's form, e.g. ``tanh=exp`` (``library`` is
    NumPy's or CuPy's own)."""
    return f"{activation}={chosen(xp, dtype).get(activation, 'library')}"


def machine_key(dtype: str) -> str:
    """What a probe's result depends on: NumPy's version, the SIMD targets its tanh and exp
    run on here (they follow the CPU and ``NPY_DISABLE_CPU_FEATURES``), and the dtype."""
    try:
        # here: numpy.lib.introspect is absent before NumPy 2.0 (~0 ms with it, measured)
        from numpy.lib import introspect

        info = introspect.opt_func_info(
            func_name="^(tanh|exp)$", signature=f"^{np.dtype(dtype).char}"
        )
        targets = json.dumps(
            {k: sorted(v2["current"] for v2 in v.values()) for k, v in info.items()}, sort_keys=True
        )
    # a NumPy without introspect (before 2.0) or whose answer has another shape: the CPU's name
    except (ImportError, AttributeError, KeyError, TypeError, ValueError):
        # here: only the fallback needs it (~0 ms either way, measured)
        import platform

        targets = platform.processor() or platform.machine()
    return f"numpy {np.__version__} {targets} {dtype}"


def _cached_probe(dtype: str) -> dict[str, str]:
    path = cache_root() / "activation-forms.json"
    key = machine_key(dtype)
    known = read_cached(path, lambda d: d[key])
    if isinstance(known, dict) and all(f in FORMS.get(a, {}) for a, f in known.items()):
        return {a: known.get(a, "library") for a in FORMS}
    choice = probe(dtype)[0]
    # kept for the machine's other processes (a sweep's workers may probe at once)
    write_cached(path, choice, key)
    return choice


@np.errstate(over="ignore")
def probe(
    dtype: str, size: int = PROBE_SIZE, repeats: int = 7
) -> tuple[dict[str, str], dict[str, dict[str, float]]]:
    """Each form's time on ``size`` values of ``dtype`` (ns a value, the median of
    ``repeats`` interleaved runs) and the fastest form of each activation (the library's
    unless another takes at most :data:`MARGIN` of its time)."""

    rng = np.random.default_rng(0)
    x = (rng.standard_normal(size) * 2.0).astype(dtype)
    z = np.empty_like(x)
    scratch = scratch_for(np, z)
    runs: dict[str, dict[str, list[float]]] = {
        a: {f: [] for f in forms} for a, forms in FORMS.items()
    }
    for _ in range(repeats):
        for a, forms in FORMS.items():
            for f, (build, _) in forms.items():
                z[...] = x
                todo = build(np, z, scratch)
                t0 = time.perf_counter()
                for call in todo:
                    call()
                runs[a][f].append(time.perf_counter() - t0)
    rates = {
        a: {f: float(np.median(t)) / size * 1e9 for f, t in forms.items()}
        for a, forms in runs.items()
    }
    choice = {}
    for a, r in rates.items():
        best = min(r, key=r.__getitem__)
        choice[a] = best if r[best] <= MARGIN * r["library"] else "library"
    return choice, rates
