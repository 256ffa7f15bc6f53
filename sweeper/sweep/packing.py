"""Packing: a sweep's groups of one shape that differ only in ``depth``, ``width`` and ``activation`` train as one
*packed* group (:mod:`sweeper.models.packed`: one first-layer product for every member, each shape's deeper layers
its own batched products) when that is estimated to end sooner on this device.

The estimate (:func:`group_s`) is a group's epochs (its longest trajectory's: a member that ends sooner is frozen,
not removed, so a packed group computes every member to the longest) times an epoch's time: the first layers'
two products (forward and weight gradient) as measured here on the data's shape (:class:`Costs`, a short probe a
sweep: a few products of the rows each grouping would multiply, one BLAS thread as a group trains), the deeper
layers' FLOPs at the largest product's rate, the elementwise passes and the calls at their measured cost, and a
fixed cost a group (its start and warm-up). Packing pays through the one wider first-layer product (a wider
product runs nearer the machine's peak) and fewer calls and groups; it does not where the shapes' epochs differ
(the shorter ones would run to the longest) or where every product is already at the peak and the calls are few
(large widths, long data): there the groups stay apart. Shape groups are packed greedily, longest epochs first.

Only sweeper's MLP packs, on dense data (text features are sparse: one shape a group). ``hydra.launcher.pack=false``
keeps every shape apart. Each run of a packed group, or of a group kept apart beside others it could have joined,
says so (tag ``batch_packed``), and the plan line counts them (:func:`summary`).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

log = logging.getLogger("sweeper")

FREE = ("depth", "width", "activation")  # what a packed group's members may differ in, beside a group's own keys
TAG = "batch_packed"
GROUP_S = 0.05  # a group's start: its passes built, its warm-up, a worker's hand-off (a few tens of ms here)
SHARED_CALLS = 30  # calls an epoch makes once a group: the loss, its gradient, the first layer, the update
PROBE_COLUMNS = 2048  # the probe's products take at most this many rows of the data (the time scales with them)
PROBE_ROWS = 4096  # ... and at most this many of a product's rows (wider ones run at its rate)


def enabled(launcher: Any) -> bool:
    """``hydra.launcher.pack``: groups of several shapes where they pay (the default), or one shape a group."""
    return bool(getattr(launcher, "pack", True))


def pack(shape_groups: list[list[list[Any]]], keys: list[dict[str, Any] | None], enabled: bool) -> list[list[Any]]:
    """The groups to train (lists of jobs): ``shape_groups`` (each the trajectories of one shape, lists of jobs;
    ``keys[i]`` what group i's jobs share, None for a group that may not pack: not sweeper's MLP on dense data) with
    those that differ only in :data:`FREE` packed where :func:`group_s` says it pays (``enabled``; else each apart).
    Each job of a group that could pack gets its decision in ``job.pack`` (the tag :data:`TAG`)."""
    by: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        free = json.dumps({k: v for k, v in key.items() if k not in FREE}, sort_keys=True, default=str) if key else ""
        by.setdefault(free or f"#{i}", []).append(i)
    out = []
    for idx in by.values():
        sets = [shape_groups[i] for i in idx]
        if len(sets) == 1:
            out.append(_jobs(sets[0]))
            continue
        if not enabled:
            _say(sets, "off (hydra.launcher.pack=false)")
            out += map(_jobs, sets)
            continue
        try:
            out += _decide(sets)
        except Exception as e:  # noqa: BLE001  (data that cannot load, a device gone: each group says so itself)
            log.debug("packing not estimated (%s: %s): groups of one shape", type(e).__name__, e)
            out += map(_jobs, sets)
    return out


def _jobs(trajs: list[list[Any]]) -> list[Any]:
    return [j for t in trajs for j in t]


def _say(sets: list[list[list[Any]]], what: str) -> None:
    for trajs in sets:
        for job in _jobs(trajs):
            job.pack = what


def _decide(sets: list[list[list[Any]]]) -> list[list[Any]]:
    """Greedily, longest epochs first: a shape group joins the packed group being formed when the two together are
    estimated sooner done than apart."""
    from sweeper import data

    plain = sets[0][0][0].plain
    ds = data.load_plain(plain["data"])
    shape = (ds.X_train.shape[0], ds.n_features, ds.n_outputs, max(1, data.folds_of(plain["data"])))
    costs = Costs.of(plain["device"], plain["dtype"], shape[1], shape[0])
    order = sorted(sets, key=lambda s: -max(t[-1].plain["epochs"] for t in s))
    packs: list[list[list[list[Any]]]] = [[order[0]]]
    for s in order[1:]:
        now = packs[-1]
        if group_s(costs, now + [s], shape) < group_s(costs, now, shape) + group_s(costs, [s], shape):
            now.append(s)
        else:
            packs.append([s])
    out = []
    for p in packs:
        if len(p) == 1:
            _say(p, "apart (estimated sooner done apart: other epochs, or products already at the machine's rate)")
            out.append(_jobs(p[0]))
            continue
        apart, together = sum(group_s(costs, [s], shape) for s in p), group_s(costs, p, shape)
        _say(p, f"{len(p)} shapes (estimated {apart / together:.1f}x faster than {len(p)} groups apart)")
        out.append([j for s in p for j in _jobs(s)])
    return out


def group_s(costs: "Costs", sets: list[list[list[Any]]], shape: tuple[int, int, int, int]) -> float:
    """A group's estimated training seconds: ``sets`` are its shapes' trajectories (lists of jobs), ``shape`` the
    data's training rows, features, outputs and folds (each configuration that many members)."""
    n, d, k, folds = shape
    epochs, rows, rest, calls = 0, 0, 0.0, SHARED_CALLS
    for trajs in sets:
        p, K = trajs[0][-1].plain, len(trajs) * folds
        epochs = max(epochs, *(t[-1].plain["epochs"] for t in trajs))
        L, w = p["depth"], p["width"]
        if L:
            rows += K * w
            flops = 2 * n * K * (3 * (L - 1) * w * w + 3 * w * k)  # deeper layers: forward, gradients, backward
            elems = n * K * (12 * w * L + 8 * k)  # activations, their derivatives, biases, the loss
        else:
            flops, elems = 4 * n * K * k * (d + 1), 8 * n * K * k
        rest += flops * costs.flop_s + elems * costs.elem_s
        calls += 10 * L + 4
    return epochs * (2 * costs.gemm(rows) + rest + calls * costs.call_s) + GROUP_S


def summary(groups: list[list[Any]]) -> str:
    """What packing did, for the plan line: ``" (8 groups of one shape packed into 2: …)"``, or ``""``."""
    packed = [g for g in groups if len({_shape_of(j.plain) for j in g}) > 1]
    if not packed:
        return ""
    shapes = sum(len({_shape_of(j.plain) for j in g}) for g in packed)
    return f" ({shapes} groups of one shape packed into {len(packed)}: hydra.launcher.pack)"


def _shape_of(plain: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(plain.get(k) for k in FREE)


@dataclass
class Costs:
    """What an epoch's parts cost on one device, dtype and data shape (``d`` features, ``n`` rows), measured once a
    process (:meth:`of`): a small in-place call, an element of an in-place pass, a FLOP at the largest first-layer
    product's rate, and each first-layer product ``(R, d + 1) @ (d + 1, n)`` asked for (:meth:`gemm`)."""

    backend: Any
    dtype: str
    d: int
    n: int
    call_s: float = 0.0
    elem_s: float = 0.0
    flop_s: float = 0.0
    gemms: dict[int, float] = field(default_factory=dict)

    @classmethod
    def of(cls, device: str, dtype: str, d: int, n: int) -> "Costs":
        from sweeper.base.backend import resolve

        key = (device, dtype, d, n)
        if key not in _CACHE:
            costs = cls(resolve(device), dtype, d, n)
            costs._measure()
            _CACHE[key] = costs
        return _CACHE[key]

    def _time(self, calls: list[Any], repeats: int = 5) -> float:
        """The median seconds of running ``calls`` once (after one run to warm up), device work included."""
        backend = self.backend
        for c in calls:
            c()
        runs = []
        for _ in range(repeats):
            t0 = backend.clock()
            for c in calls:
                c()
            runs.append(backend.clock() - t0)
        return float(np.median(runs))

    def _measure(self) -> None:
        xp, dtype = self.backend.xp, self.dtype
        with self._one_thread():
            tiny = xp.ones((4, 4), dtype=dtype)
            self.call_s = self._time([lambda: xp.multiply(tiny, 1.0, tiny)] * 200) / 200
            big = xp.ones(1 << 18, dtype=dtype)
            self.elem_s = max(0.0, self._time([lambda: xp.multiply(big, 1.0, big)] * 4) / 4 - self.call_s) / big.size
        self.flop_s = self.gemm(min(PROBE_ROWS, 1024)) / (2.0 * min(PROBE_ROWS, 1024) * (self.d + 1) * self.n)

    def gemm(self, rows: int) -> float:
        """Seconds of one first-layer product of ``rows`` rows on the data (0 for none)."""
        if rows <= 0:
            return 0.0
        r = min(rows, PROBE_ROWS)
        if r not in self.gemms:
            xp, cols = self.backend.xp, min(self.n, PROBE_COLUMNS)
            rng = np.random.default_rng(0)
            a = self.backend.to_device(rng.standard_normal((r, self.d + 1)).astype(self.dtype))
            b = self.backend.to_device(rng.standard_normal((self.d + 1, cols)).astype(self.dtype))
            out = xp.empty((r, cols), dtype=self.dtype)
            with self._one_thread():
                self.gemms[r] = self._time([lambda: xp.matmul(a, b, out=out)], repeats=3) * self.n / cols
        return self.gemms[r] * rows / r

    def _one_thread(self) -> Any:
        import contextlib

        if self.backend.device != "cpu":
            return contextlib.nullcontext()
        from threadpoolctl import threadpool_limits

        return threadpool_limits(1)


_CACHE: dict[tuple, Costs] = {}
