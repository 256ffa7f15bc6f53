"""A model's hand-written gradients held against central finite differences, in float64,
on a few random rows: what ``python -m sweeper.check`` shows in full and what a sweep
proves before a model of the interface trains.

With random rows ``X`` (n, d) and a random ``R`` (n, k), ``f(P) = Σ forward(X; P) · R`` has
``∂f/∂P`` = ``backward(dout = R)``; for up to :data:`FD_ENTRIES` entries of each parameter the
central difference ``(f(P + ε) − f(P − ε)) / 2ε`` is compared with it, and the worst relative error
``|num − ana| / (|num| + |ana|)`` (a floor of 1e-7 below) is the parameter's. A right gradient gives
~1e-8 or better; a parameter over :data:`FD_RTOL` is checked once more on other rows (a ReLU's kink
within ε of a pre-activation is bad luck, not a wrong gradient) and fails only when both draws fail.

:func:`verdict` is the sweep's: once per model class, hyperparameters and data shape, cached
in this process and, keyed by the model's source (every module its class and base classes come
from), in ``$SWEEPER_CACHE_DIR``: an edited model is checked again, an unchanged one is not.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sweeper.base import state
from sweeper.base.environment import cache_root, read_cached, write_cached
from sweeper.models.generic import init_host
from sweeper.models.interface import ModelError, instantiate, source_digest, split
from sweeper.models.usercode import UserCodeError, attempt, call_user

N_ROWS = 6
FD_EPS = 1e-6
FD_RTOL = 1e-5  # central differences in float64: a right gradient is ~1e-8 or better
FD_ENTRIES = 24  # per parameter, at most this many entries are perturbed (seeded)


@dataclass
class GradientCheck:
    """Per parameter, the worst relative error of its gradient (``errors``), or what stopped the
    check (``problem``: forward or backward raised, a gradient missing or of another shape)."""

    errors: dict[str, float] = field(default_factory=dict)
    problem: str | None = None
    n_in: int = 0
    n_out: int = 0

    @property
    def ok(self) -> bool:
        return self.problem is None and all(e <= FD_RTOL for e in self.errors.values())

    @property
    def worst(self) -> tuple[str, float] | None:
        """The parameter with the worst relative error, and that error."""
        return max(self.errors.items(), key=lambda kv: kv[1]) if self.errors else None

    def detail(self) -> str:
        """What failed, in a few words: ``b1: worst relative error 0.33`` (or the problem)."""
        if self.problem:
            return self.problem
        name, err = self.worst or ("", 0.0)
        return (
            f"{name}: worst relative error {err:.2g} against finite differences (allowed "
            f"{FD_RTOL:g})"
        )


def fd_error(
    net: Any,
    params: dict[str, np.ndarray],
    X: np.ndarray,
    R: np.ndarray,
    name: str,
    grad: np.ndarray,
) -> float:
    """The worst relative error of ``grad`` against central differences of
    ``sum(forward(X) · R)`` over up to :data:`FD_ENTRIES` entries of ``params[name]``."""
    p = params[name]
    flat = np.random.default_rng(1).permutation(p.size)[:FD_ENTRIES]
    worst = 0.0
    for i in flat:
        idx = np.unravel_index(i, p.shape)
        old = p[idx]
        p[idx] = old + FD_EPS
        up = float((net.forward(np, params, X)[0] * R).sum())
        p[idx] = old - FD_EPS
        down = float((net.forward(np, params, X)[0] * R).sum())
        p[idx] = old
        num, ana = (up - down) / (2 * FD_EPS), float(grad[idx])
        worst = max(worst, abs(num - ana) / max(abs(num) + abs(ana), 1e-7))
    return worst


def check_gradients(
    net: Any, n_in: int, n_out: int, path: str = "the model", seed: int = 0
) -> GradientCheck:
    """Every parameter's gradient of ``net`` (initialised from seed 7, float64) at
    ``n_in`` inputs and ``n_out`` outputs against finite differences on :data:`N_ROWS`
    random rows (``seed``); see the module's docstring."""
    out = GradientCheck(n_in=n_in, n_out=n_out)
    try:
        params = attempt(_Problem, "init", init_host, net, n_in, n_out, 7, "float64", path)
        draws = [_draw(seed, n_in, n_out), _draw(seed + 1, n_in, n_out)]
        for i, (X, R) in enumerate(draws):
            grads = _gradients(net, params, X, R)
            names = [k for k in params if i == 0 or out.errors[k] > FD_RTOL]
            # the second draw: only the parameters the first failed, each failing only if both do
            for k in names:
                err = fd_error(net, params, X, R, k, np.asarray(grads[k], dtype=np.float64))
                out.errors[k] = err if i == 0 else min(out.errors[k], err)
            if out.ok:
                break
    except _Problem as e:  # the model cannot be checked: what it did is the check's verdict
        out.problem = str(e)
    return out


class _Problem(Exception):
    """Why the model cannot be checked (its code raised, or gave the wrong shape)."""


def _draw(seed: int, n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((N_ROWS, n_in)), rng.standard_normal((N_ROWS, n_out))


def _forward(net: Any, params: dict[str, np.ndarray], X: np.ndarray) -> tuple[Any, Any]:
    o, cache = net.forward(np, params, X)  # not a pair: the user's code's error too
    return o, cache


def _gradients(net: Any, params: dict[str, np.ndarray], X: np.ndarray, R: np.ndarray) -> Any:
    """``backward`` at ``dout = R`` after ``forward(X)``; :class:`_Problem` when it cannot be
    checked."""
    o, cache = attempt(_Problem, "forward", _forward, net, params, X)
    if tuple(np.shape(o)) != (X.shape[0], R.shape[1]):
        raise _Problem(
            f"forward gave out of shape {tuple(np.shape(o))}, expected {(X.shape[0], R.shape[1])}"
        )
    grads = attempt(_Problem, "backward", net.backward, np, params, cache, R)
    bad = [
        k
        for k in params
        if not isinstance(grads, dict)
        or k not in grads
        or tuple(np.shape(grads[k])) != params[k].shape
    ]
    if bad:
        raise _Problem(
            f"backward gave no gradient of its shape {params[bad[0]].shape} for {bad[0]}"
        )
    return grads


# --- the sweep's check: once per model, hyperparameters and
# shape ------------------------------------------------

CACHE_VERSION = 1


def key(model_cfg: Any, n_in: int, n_out: int, task: str) -> str:
    """What decides a verdict: the model's import path and hyperparameters, the data's
    shape and task."""
    path, kwargs = split(model_cfg)
    return json.dumps([path, kwargs, n_in, n_out, task], sort_keys=True, default=str)


def verdict(model_cfg: Any, n_in: int, n_out: int, task: str) -> GradientCheck:
    """The gradient check of the model of ``model_cfg`` at this shape: this process's,
    the cache's (the same model source), or run now (and cached). :class:`ModelError`
    when the model cannot be built."""
    k = key(model_cfg, n_in, n_out, task)
    checked = state.process().gradchecks  # this process's verdicts, by :func:`key`
    if k in checked:
        return checked[k]
    net = instantiate(model_cfg)
    digest = source_digest(type(net))
    file = _cache_file(digest, k) if digest else None
    got = _read(file) if file else None
    if got is None:
        # a model that would end the process (sys.exit, os._exit, its own
        # KeyboardInterrupt): its problem
        try:
            got = call_user(check_gradients, net, n_in, n_out, split(model_cfg)[0])
        except UserCodeError as e:
            got = GradientCheck(n_in=n_in, n_out=n_out, problem=str(e))
        if file:
            _write(file, got)
    checked[k] = got
    return got


def _cache_file(digest: str, k: str) -> Path:
    name = hashlib.sha256(f"{CACHE_VERSION}\0{digest}\0{k}".encode()).hexdigest()[:32]
    return cache_root() / "gradient-checks" / f"{name}.json"


def _read(file: Path) -> GradientCheck | None:
    return read_cached(
        file,
        lambda d: GradientCheck(
            {str(k): float(v) for k, v in d["errors"].items()},
            d["problem"],
            int(d["n_in"]),
            int(d["n_out"]),
        ),
    )


def _write(file: Path, got: GradientCheck) -> None:
    """A concurrent sweep reads a whole verdict or none (:func:`write_cached`)."""
    value = {"errors": got.errors, "problem": got.problem, "n_in": got.n_in, "n_out": got.n_out}
    write_cached(file, value)


__all__ = [
    "FD_RTOL",
    "GradientCheck",
    "ModelError",
    "N_ROWS",
    "check_gradients",
    "fd_error",
    "verdict",
]
