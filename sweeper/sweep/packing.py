"""Packing: a sweep's groups of one shape that differ only in ``depth``, ``width`` and ``activation`` train as one
*packed* group (:mod:`sweeper.models.packed`: one first-layer product for every member, each shape's deeper layers
its own batched products) when that is estimated to end sooner on this device.

The estimate (:func:`group_s`) is a group's epochs (its longest trajectory's: a member that ends sooner is frozen,
not removed, so a packed group computes every member to the longest) times an epoch's time: the first layers'
two products (forward and weight gradient) as measured here on the data's shape (:class:`Costs`, a short probe a
sweep: the products of the rows each grouping would multiply, one BLAS thread as a group trains), the elementwise
passes over the first hidden layer's array of the whole group at the speed measured for an array of its size, the
deeper layers' FLOPs, passes and calls, and a fixed cost a group (its start and warm-up). Packing pays through the
one wider first-layer product and fewer calls and groups (small groups, short data: a call costs more than its
arithmetic). It does not where the shapes' epochs differ (the shorter ones would run to the longest), nor on the
CPU where the packed first layer outgrows the caches (160 digits members: a 34 MB array each pass reads from memory,
where a group a shape keeps its ≤ 9 MB nearer the core; measured 0.85x here), nor where every product is already at
the machine's rate: there the groups stay apart. Shape groups are packed greedily, longest epochs first, then the
smallest first.

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
GAIN = 0.95  # a shape joins a packed group when the two together are estimated to take at most this share of apart
PASSES = 4  # in-place passes over a hidden layer's values an epoch beside its activation: a bias, its derivative
PROBE_COLUMNS = 2048  # the probe's products take at least this many of the data's rows (or all), at most 2²³ values
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
    order = sorted(sets, key=lambda s: (-max(t[-1].plain["epochs"] for t in s), len(s) * s[0][-1].plain["width"]))
    packs: list[list[list[list[Any]]]] = [[order[0]]]
    for s in order[1:]:
        now = packs[-1]
        if group_s(costs, now + [s], shape) < GAIN * (group_s(costs, now, shape) + group_s(costs, [s], shape)):
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
        _say(p, f"{len(p)} shapes (estimated {apart / together:.2f}x faster than {len(p)} groups apart)")
        out.append([j for s in p for j in _jobs(s)])
    costs.save()
    return out


def group_s(costs: "Costs", sets: list[list[list[Any]]], shape: tuple[int, int, int, int]) -> float:
    """A group's estimated training seconds: ``sets`` are its shapes' trajectories (lists of jobs), ``shape`` the
    data's training rows, features, outputs and folds (each configuration that many members). An epoch: the first
    layers' two products over all the group's rows ``R`` and their elementwise passes over the ``R × n`` array they
    share (at that array's measured speed: a pass over more than the caches hold runs at memory's speed), then each
    shape's deeper products, passes and calls, and the calls made once a group; times the longest trajectory's
    epochs, plus a start."""
    n, d, k, folds = shape
    epochs, rows, first, rest, calls = 0, 0, 0.0, 0.0, SHARED_CALLS
    for trajs in sets:
        p, K = trajs[0][-1].plain, len(trajs) * folds
        epochs = max(epochs, *(t[-1].plain["epochs"] for t in trajs))
        L, w, act = p["depth"], p["width"], costs.activation(p["activation"])
        if L:
            rows += K * w
            first += K * w * n * (PASSES + act)  # the first hidden layer: its share of the group's R × n passes
            size = K * w * n  # a deeper layer's array
            flops = 2 * n * K * (3 * (L - 1) * w * w + 3 * w * k)  # forward, weight gradients, backward
            rest += flops * costs.flop_s(K * w) + size * (L - 1) * (PASSES + 1 + act) * costs.pass_s(size)
        else:
            rest += 4 * n * K * k * (d + 1) * costs.flop_s(K * k)
        rest += 8 * K * k * n * costs.pass_s(K * k * n)  # the outputs, the loss and its gradient
        calls += 10 * L + 4
    epoch = 2 * costs.gemm(rows) + first * costs.pass_s(rows * n) + rest + calls * costs.call_s
    return epochs * epoch + GROUP_S


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
    """What an epoch's parts cost on one device, dtype and data shape (``d`` features, ``n`` rows), measured as asked
    and kept once a machine (the cache folder, as the activations' forms are), one BLAS thread as a group trains, the
    best of a few runs: a small in-place
    call, an element of an in-place pass over an array of a given size (:meth:`pass_s`), an activation's pass over a
    multiply's (:meth:`activation`), and each first-layer product ``(R, d + 1) @ (d + 1, n)`` (:meth:`gemm`)."""

    backend: Any
    dtype: str
    d: int
    n: int
    call_s: float = 0.0
    gemms: dict[int, float] = field(default_factory=dict)
    passes: dict[int, float] = field(default_factory=dict)
    acts: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, device: str, dtype: str, d: int, n: int) -> "Costs":
        from sweeper.base.backend import resolve

        key = (device, dtype, d, n)
        if key not in _CACHE:
            costs = cls(resolve(device), dtype, d, n)
            if not costs._load():
                xp = costs.backend.xp
                tiny = xp.ones((4, 4), dtype=dtype)
                with costs._one_thread():
                    costs.call_s = costs._time([lambda: xp.multiply(tiny, 1.0, tiny)] * 200) / 200
            _CACHE[key] = costs
        return _CACHE[key]

    def _key(self) -> str:
        from sweeper.models.forms import machine_key

        return f"{machine_key(self.dtype)} {self.backend.device}{' fake' if self.backend.fake else ''} d={self.d} n={self.n}"

    def _load(self) -> bool:
        """This machine's measurements of an earlier sweep (the cache folder's ``packing-costs.json``), if any."""
        try:
            known = json.loads(_path().read_text())[self._key()]
            self.call_s = float(known["call_s"])
            for name, into in (("gemms", self.gemms), ("passes", self.passes)):
                into.update({int(k): float(v) for k, v in known[name].items()})
            self.acts.update({k: float(v) for k, v in known["acts"].items()})
            return True
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return False

    def save(self) -> None:
        """Keep the measurements for the machine's later sweeps (atomically; a folder that cannot be written: not)."""
        import os

        path = _path()
        try:
            try:
                known = json.loads(path.read_text())
            except (OSError, ValueError):
                known = {}
            known[self._key()] = {"call_s": self.call_s, "gemms": self.gemms, "passes": self.passes, "acts": self.acts}
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_text(json.dumps(known, indent=1, sort_keys=True))
            os.replace(tmp, path)
        except (OSError, TypeError):
            pass

    def _time(self, calls: list[Any], repeats: int = 5) -> float:
        """The least seconds of running ``calls`` once (after one run to warm up), device work included."""
        backend = self.backend
        for c in calls:
            c()
        runs = []
        for _ in range(repeats):
            t0 = backend.clock()
            for c in calls:
                c()
            runs.append(backend.clock() - t0)
        return float(min(runs))

    def pass_s(self, elements: int) -> float:
        """Seconds an element of one in-place pass over an array of about ``elements`` values (measured at the power
        of 2 above, at most 2²³)."""
        size = 1 << min(23, max(12, int(elements - 1).bit_length()))
        if size not in self.passes:
            xp = self.backend.xp
            a = xp.ones(size, dtype=self.dtype)
            with self._one_thread():
                self.passes[size] = max(0.0, self._time([lambda: xp.multiply(a, 1.0, a)] * 4) / 4 - self.call_s) / size
        return self.passes[size]

    def activation(self, name: str) -> float:
        """The activation's pass (the form :mod:`sweeper.models.forms` chose) in multiply passes."""
        if name not in self.acts:
            from sweeper.models import forms

            xp = self.backend.xp
            z = xp.ones(1 << 17, dtype=self.dtype)
            calls = forms.calls(xp, name, z)
            with self._one_thread():
                self.acts[name] = self._time(calls) / max(1e-12, (self.pass_s(z.size) * z.size + self.call_s))
        return self.acts[name]

    def flop_s(self, rows: int) -> float:
        """Seconds a FLOP of a product with about ``rows`` rows (the first layer's rate at that width)."""
        r = max(16, min(rows, PROBE_ROWS))
        return self.gemm(r) / (2.0 * r * (self.d + 1) * self.n)

    def gemm(self, rows: int) -> float:
        """Seconds of one first-layer product of ``rows`` rows on the data (0 for none)."""
        if rows <= 0:
            return 0.0
        r = min(rows, PROBE_ROWS)
        if r not in self.gemms:
            xp, cols = self.backend.xp, min(self.n, max(PROBE_COLUMNS, (1 << 23) // r))
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


def _path() -> Any:
    from sweeper.base.environment import cache_root

    return cache_root() / "packing-costs.json"
