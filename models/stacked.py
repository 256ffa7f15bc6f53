"""K configurations of a model of the interface trained together, its parameters stacked
over a leading member axis — when its ``forward``/``backward`` broadcast over that axis,
which :func:`batches` proves first.

Stacked parameters are ``(K, *shape)``; the data ``X`` (n, d) is shared, so
``forward(xp, params, X)`` gives ``out`` (K, n, k) wherever the code uses ``@``, elementwise ops
and ``sum(axis=-2)``. Members share the shape (the model's hyperparameters), the data, the
update rule and ``log_every``; each has its own learning rate (``lr`` of shape ``(K, 1, 1)``),
initial parameters (its seed) and epoch counts (a trajectory: each read off the group at its own
count, as :func:`sweeper.models.train.train` gives it alone). A member is frozen at its last
count (its rate 0 and optimizer buffers zeroed, so its update is 0), never removed; members
never mix (no reduction crosses the member axis), so one member's divergence stays its own.

Full batch, no early stopping (``patience = 0``), parameters of two axes (stacked
three): the conditions under which :func:`why_not` lets a group of them form; other
configurations train one at a time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from sweeper.base import state
from sweeper.models import losses
from sweeper.models.generic import init_host
from sweeper.models.interface import decays, split
from sweeper.models.optim import Optimizer, State
from sweeper.models.train import TrainResult, diverged, sample_stride
from sweeper.models.usercode import raised

__all__ = ["Member", "batches", "shape_key", "train_stacked", "verdicts", "why_not"]

PROOF_MEMBERS = 3
PROOF_ROWS = 7
# Stacked against alone, one step: equal to this relative tolerance (float64 sums in another order)
PROOF_RTOL = 1e-9


def member_loss(xp: Any, task: str, out: Any, Y: Any) -> Any:
    """Each member's mean loss, ``(K,)``, from ``out`` (K, n, k) and the targets ``Y``
    (n, k) (one-hot classes)."""
    if task == "regression":
        d = out - Y
        return xp.mean(d * d, axis=(-2, -1))
    if task == "multiclass":
        return losses.cross_entropy(xp, out, Y, classes=-1, axis=-1)
    return xp.mean(xp.logaddexp(0.0, out) - Y * out, axis=(-2, -1))


def member_grad(xp: Any, task: str, out: Any, Y: Any) -> Any:
    """``dL/d out`` of each member's mean loss (K, n, k): what
    :func:`sweeper.models.losses.grad` gives one member."""
    n = out.shape[-2]
    if task == "regression":
        return (2.0 / n) * (out - Y)
    if task == "multiclass":
        return (losses.softmax(xp, out, -1) - Y) / n
    return (losses.sigmoid(xp, out) - Y) / n


def targets(xp: Any, task: str, y: Any, k: int) -> Any:
    """``y`` (n, 1) as the stacked loss reads it: one-hot (n, k) for classes, else as it is."""
    return losses.one_hot(xp, y, k) if task == "multiclass" else y


def verdicts() -> dict[str, str | None]:
    """What the proof (:func:`batches`) found per model shape (:func:`shape_key`) in this
    process: None (it batches) or why not. The record half reads it for the run's
    model_batched tag. What a configuration's settings forbid (:func:`why_not`) is no part
    of it: it is asked of each group."""
    return state.process().verdicts


def shape_key(model_cfg: Any, n_in: int, n_out: int, task: str) -> str:
    """One proof per model class, hyperparameters, data shape and task: all that decides
    :func:`batches`."""

    return json.dumps([*split(model_cfg), n_in, n_out, task], sort_keys=True, default=str)


def why_not(cfg: dict[str, Any]) -> str | None:
    """Why a configuration of a model of the interface cannot join a stacked group
    (None: it can)."""
    if cfg.get("batch_size"):
        return (
            "mini-batches (batch_size > 0) train one configuration at a time for a model of "
            "the interface"
        )
    if cfg.get("patience"):
        return (
            "early stopping (patience > 0) trains one configuration at a time for a model of "
            "the interface"
        )
    return None


def batches(
    net: Any, n_in: int, n_out: int, task: str, dtype: str = "float64", xp: Any = np
) -> str | None:
    """Prove that ``net`` broadcasts over a leading member axis: one forward and backward of
    :data:`PROOF_MEMBERS` stacked members against each alone, on random rows, equal
    within :data:`PROOF_RTOL`. Returns None when proven, else why not (one line)."""
    rng = np.random.default_rng(12345)
    X = xp.asarray(rng.standard_normal((PROOF_ROWS, n_in)), dtype="float64")
    y = (
        rng.integers(0, max(n_out, 2), (PROOF_ROWS, 1))
        if task != "regression"
        else rng.standard_normal((PROOF_ROWS, 1))
    )
    Y = targets(xp, task, xp.asarray(y, dtype="float64"), n_out)
    try:
        alone = [init_host(net, n_in, n_out, s, "float64") for s in range(PROOF_MEMBERS)]
        if any(p.ndim != 2 for p in alone[0].values()):
            return (
                "its parameters are not all 2-D (a stacked group needs (K, rows, cols) parameters)"
            )
        want = []
        for params in alone:
            dev = {k: xp.asarray(v) for k, v in params.items()}
            out, cache = net.forward(xp, dev, X)
            dout = member_grad(xp, task, out[None], Y)[0]
            want.append((out, net.backward(xp, dev, cache, dout)))
        stacked = {k: xp.asarray(np.stack([p[k] for p in alone])) for k in alone[0]}
        out, cache = net.forward(xp, stacked, X)
        if tuple(out.shape) != (PROOF_MEMBERS, PROOF_ROWS, n_out):
            return f"stacked forward gave out of shape {tuple(out.shape)}, not (K, n, k)"
        grads = net.backward(xp, stacked, cache, member_grad(xp, task, out, Y))
        for i, (o, g) in enumerate(want):
            if not _close(out[i], o):
                return "stacked forward differs from one member alone"
            for k in alone[0]:
                if k not in grads or tuple(grads[k].shape) != tuple(stacked[k].shape):
                    return f"stacked backward gave no gradient of shape (K, ...) for {k}"
                if not _close(grads[k][i], g[k]):
                    return (
                        f"stacked backward differs from one member alone for {k} (e.g. a "
                        "sum over axis 0 or a .T "
                        "on a 3-D array: use sum(axis=-2, keepdims=True) and swapaxes(-1, -2))"
                    )
    # the user's code failed on stacked arrays: it does not batch
    except Exception as e:  # noqa: BLE001
        return raised("stacked parameters", e)
    return None


def _close(a: Any, b: Any) -> bool:
    a, b = np.asarray(_host(a), dtype=np.float64), np.asarray(_host(b), dtype=np.float64)
    return a.shape == b.shape and bool(
        np.allclose(a, b, rtol=PROOF_RTOL, atol=PROOF_RTOL * max(1.0, np.abs(b).max(initial=0)))
    )


def _host(a: Any) -> Any:
    return a.get() if hasattr(a, "get") else a


@dataclass(frozen=True)
class Member:
    lr: float
    seed: int
    # the epoch counts read off this member, ascending; the last is where it stops
    reads: tuple[int, ...]


@dataclass
class StackedFit:
    # per member: {epochs: (fit, host params)}
    at: list[dict[int, tuple[TrainResult, dict[str, np.ndarray]]]]
    train_time_s: float
    warmup_time_s: float


@np.errstate(over="ignore", invalid="ignore")
def train_stacked(
    backend: Any,
    net: Any,
    task: str,
    X: Any,
    y: Any,
    X_val: Any,
    y_val: Any,
    members: Sequence[Member],
    *,
    n_out: int,
    log_every: int,
    opt: Optimizer,
    dtype: str,
) -> StackedFit:
    """Train ``members`` as one stacked group on the device arrays ``X`` (n, d), ``y`` (n, 1);
    each member's result at each of its counts: its curve (sampled at the multiples of the
    stride below the count, and at the count), its best and divergence, its parameters there."""
    xp, K = backend.xp, len(members)
    E = max(m.reads[-1] for m in members)
    stride = sample_stride(E, log_every)
    host = [init_host(net, X.shape[1], n_out, m.seed, dtype) for m in members]
    names = list(host[0])
    params = {k: backend.to_device(np.stack([h[k] for h in host])) for k in names}
    packed = [params[k] for k in names]
    lr = np.array([m.lr for m in members], dtype=np.float64).reshape(K, 1, 1)
    state = State(
        xp, packed, opt, lr, [slice(None) if decays(k, host[0][k].shape) else None for k in names]
    )
    G = [xp.empty_like(p) for p in packed]
    calls = state.calls(G)
    Y, Yv = targets(xp, task, y, n_out), targets(xp, task, y_val, n_out)
    scale = xp.array(np.broadcast_to(np.asarray(opt.grad_scale(lr)), (K, 1, 1)), dtype=dtype)
    ends = sorted({c for m in members for c in m.reads})
    samples: dict[int, tuple[Any, Any]] = {}  # epoch -> (train (K,), val (K,)) on the device
    snaps: dict[int, list[Any]] = {}  # count -> every parameter's copy at that count (K, ...)

    def sample(e: int, out: Any) -> None:
        vout, _ = net.forward(xp, params, X_val)
        samples[e] = (member_loss(xp, task, out, Y), member_loss(xp, task, vout, Yv))

    # the phases, for the strict device stand-in's accounts (a no-op elsewhere)
    mark = backend.mark_fn
    t_warm = backend.clock()
    out, cache = net.forward(xp, params, X)
    # warm-up: CuPy compiles its kernels
    net.backward(xp, params, cache, member_grad(xp, task, out, Y) * scale)
    t0 = backend.clock()
    for e in range(E + 1):
        backend.epoch(e)  # Ctrl-C, SIGTERM: Stopped here
        out, cache = net.forward(xp, params, X)
        if e % stride == 0 or e in ends:
            sample(e, out)
        if e in ends:  # a count's end: the only host work between two epochs
            mark("segment end", e)
            snaps[e] = [p.copy() for p in packed]
            done = [i for i, m in enumerate(members) if m.reads[-1] == e]
            if done:
                _freeze(xp, state, lr, scale, done, opt, dtype)
            mark("epoch", e)
        if e == E:
            break
        grads = net.backward(xp, params, cache, member_grad(xp, task, out, Y) * scale)
        for name, g in zip(names, G):
            xp.copyto(g, grads[name])
        for call in calls:
            call()
    mark("end", E)  # every sample leaves in one copy: (epochs, 2, K)
    curves = dict(
        zip(
            sorted(samples),
            backend.to_numpy(xp.stack([xp.stack(samples[e]) for e in sorted(samples)])),
        )
    )
    t1 = backend.clock()
    return StackedFit(
        _member_fits(backend, members, curves, snaps, names, stride), t1 - t0, t0 - t_warm
    )


def _freeze(
    xp: Any, state: State, lr: np.ndarray, scale: Any, done: list[int], opt: Optimizer, dtype: str
) -> None:
    """The members ``done`` (their last count reached) frozen: rate 0, gradient scale renewed, the
    optimiser's buffers zeroed in their rows (a host→device copy between epochs, once a count)."""
    lr[done] = 0.0
    state.set_lr(lr)
    scale[...] = xp.asarray(
        np.broadcast_to(np.asarray(opt.grad_scale(lr)), scale.shape), dtype=dtype
    )
    rows = xp.asarray(done)  # one copy for every buffer (a list index is copied for each)
    for b in state.buffers:
        b[rows] = 0


def _member_fits(
    backend: Any,
    members: Sequence[Member],
    curves: dict[int, np.ndarray],
    snaps: dict[int, list[Any]],
    names: list[str],
    stride: int,
) -> list[dict[int, tuple[TrainResult, dict[str, np.ndarray]]]]:
    """Each member's result at each of its counts: its fit (:func:`_fit_at`) and its
    parameters there (the device's snapshots ``snaps``, count -> every parameter (K,
    ...), copied to the host once)."""
    host_snaps = {c: [backend.to_numpy(p) for p in ps] for c, ps in snaps.items()}
    at = []
    for i, m in enumerate(members):
        at.append(
            {
                c: (
                    _fit_at(curves, i, c, stride),
                    {k: host_snaps[c][j][i] for j, k in enumerate(names)},
                )
                for c in m.reads
            }
        )
    return at


def _fit_at(curves: dict[int, np.ndarray], i: int, c: int, stride: int) -> TrainResult:
    """Member ``i``'s result at its count ``c`` from the group's host samples ``curves``
    (epoch -> (2, K)): its curve sampled at the multiples of ``stride`` below ``c`` and
    at ``c``, cut at a divergence; its best sample before it."""
    steps = [e for e in sorted(curves) if e <= c and (e % stride == 0 or e == c)]
    steps = [e for e in steps if e % stride == 0 and e < c] + [c]
    h = np.array([curves[e][0, i] for e in steps])
    v = np.array([curves[e][1, i] for e in steps])
    bad = diverged(h, v, h[0])
    if bad is not None:
        steps, h, v = steps[: bad + 1], h[: bad + 1], v[: bad + 1]
    # the best sample before a divergence, as train() finds it
    valid = v[:bad] if bad is not None else v
    best = int(np.argmin(valid)) if len(valid) else 0
    return TrainResult(
        steps=np.array(steps),
        train_loss=h,
        val_loss=v,
        epochs_run=steps[-1] if bad is not None else c,
        best_epoch=steps[best] if len(steps) else 0,
        diverged_at=steps[bad] if bad is not None else None,
        train_time_s=0.0,
        warmup_time_s=0.0,
    )
