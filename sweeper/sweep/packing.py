"""Packing: a sweep's groups of one shape that differ only in ``depth``, ``width``
and ``activation`` train as one *packed* group (:mod:`sweeper.models.packed`:
one first-layer product for every member, each shape's deeper layers its own
batched products) when that is estimated to end sooner on this device.

The estimate (:func:`group_s`) is a group's epochs (its longest trajectory's: a member that ends
sooner is frozen, not removed, so a packed group computes every member to the longest) times the
epoch a short probe measured on this device (:class:`Costs`: the group's own forward, backward and
update calls on the data's training rows, one BLAS thread as a group trains, this thread's CPU
seconds; kept once a machine in the cache folder), plus the group's start the same probe measured
(:meth:`Costs.start`: its computation built and its first epoch's excess over a steady one; a warm
worker's hand-off, 0.2-0.45 ms here, is left out). A set of shapes packs when the packed group is
estimated to take at most :data:`GAIN` of the groups apart. An analytic model (products' FLOPs,
passes at an array's measured speed, calls) predicted gains packing did not give (main before this
change: 1.28x predicted, 0.87x measured for the digits grid's planned group): the packed group's
hidden values outgrow the caches where each shape's fit, every pass and product then reads memory,
and what a wider first-layer product or fewer calls save is small beside that. So the probe times
the packed computation itself. Packing then pays where the groups' starts and calls are a large
share (small data, short epochs: diabetes), not where the shapes' epochs differ (the shorter ones
would run to the longest) nor where the packed group's passes run slower than its shapes' apart
(digits: they stay apart). Shape groups are packed greedily, longest epochs first, then the
smallest first.

Only sweeper's MLP packs, on dense data (text features are sparse: one shape a
group). ``hydra.launcher.pack=false`` keeps every shape apart. Each run of a
packed group, or of a group kept apart beside others it could have joined, says
so (tag ``batch_packed``), and the plan line counts them (:func:`summary`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sweeper import data
from sweeper.base import state
from sweeper.base.backend import resolve
from sweeper.base.environment import cache_root, read_cached, write_cached
from sweeper.models.activations import ACTIVATIONS
from sweeper.models.batched_pass import _Pass
from sweeper.models.forms import machine_key
from sweeper.models.optim import Optimizer, State
from sweeper.models.packed import Layout, Shape, stacked_params

__all__ = ["Costs", "GAIN", "TAG", "enabled", "group_s", "pack", "resolve", "summary"]

log = logging.getLogger("sweeper")

FREE = (
    "depth",
    "width",
    "activation",
)  # what a packed group's members may differ in, beside a group's own keys
TAG = "batch_packed"
# a shape joins a packed group when the two together are estimated to
# take at most this share of apart
GAIN = 0.95
# the probe's rounds: in each, every group an epoch to warm up and one timed (the least counts)
REPEATS = 3
PROBE_ROWS = 4096  # ... on at most this many training rows


def enabled(launcher: Any) -> bool:
    """``hydra.launcher.pack``: groups of several shapes where they
    pay (the default), or one shape a group."""
    return bool(launcher.pack)


def pack(
    shape_groups: list[list[list[Any]]], keys: list[dict[str, Any] | None], enabled: bool
) -> list[list[Any]]:
    """The groups to train (lists of jobs): ``shape_groups`` (each the trajectories of one
    shape, lists of jobs; ``keys[i]`` what group i's jobs share, None for a group that may
    not pack: not sweeper's MLP on dense data) with those that differ only in :data:`FREE`
    packed where :func:`group_s` says it pays (``enabled``; else each apart). Each job of
    a group that could pack gets its decision in ``job.pack`` (the tag :data:`TAG`)."""
    by: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        by.setdefault(_shared(key, FREE) if key else f"#{i}", []).append(i)
    out = []
    # a sweep over devices groups each device's configurations as the first device's were (a
    # speedup pairs runs trained in groups of one size: sweeper.insight.speedup)
    decided: dict[str, tuple[str, list[list[tuple[Any, ...]]]]] = {}
    for idx in by.values():
        sets = [shape_groups[i] for i in idx]
        if len(sets) == 1:
            out.append(_jobs(sets[0]))
            continue
        if not enabled:
            _say(sets, "off (hydra.launcher.pack=false)")
            out += map(_jobs, sets)
            continue
        twin = _shared(keys[idx[0]], (*FREE, "device"))
        shapes = {_shape_of(s[0][-1].plain): s for s in sets}
        if twin in decided and {x for p in decided[twin][1] for x in p} == set(shapes):
            device, partition = decided[twin]
            for p in partition:
                _say([shapes[x] for x in p], f"as on {device} (a speedup pairs groups of one size)")
                out.append([j for x in p for j in _jobs(shapes[x])])
            continue
        try:
            groups, partition = _decide(sets)
        # data that cannot load, a device gone: each group says so itself
        except Exception as e:  # noqa: BLE001
            log.debug("packing not estimated (%s: %s): groups of one shape", type(e).__name__, e)
            groups, partition = list(map(_jobs, sets)), [[x] for x in shapes]
        out += groups
        decided.setdefault(twin, (str(keys[idx[0]].get("device")), partition))
    return out


def _shared(key: dict[str, Any], without: tuple[str, ...]) -> str:
    shared = {k: v for k, v in key.items() if k not in without}
    return json.dumps(shared, sort_keys=True, default=str)


def _jobs(trajs: list[list[Any]]) -> list[Any]:
    return [j for t in trajs for j in t]


def _say(sets: list[list[list[Any]]], what: str) -> None:
    for trajs in sets:
        for job in _jobs(trajs):
            job.pack = what


def _decide(
    sets: list[list[list[Any]]],
) -> tuple[list[list[Any]], list[list[tuple[Any, ...]]]]:
    """Greedily, longest epochs first: a shape group joins the packed group being formed when
    the two together are estimated sooner done than apart. The groups (lists of jobs) and
    the partition of the shapes (:func:`_shape_of`) they make."""

    plain = sets[0][0][0].plain
    ds = data.load_plain(plain["data"])
    shape = (
        ds.X_train.shape[0],
        ds.n_features,
        ds.n_outputs,
        len(data.fold_indexes(plain["data"])),
    )
    costs = Costs.of(plain["device"], plain["dtype"], ds)
    order = sorted(
        sets,
        key=lambda s: (-max(t[-1].plain["epochs"] for t in s), len(s) * s[0][-1].plain["width"]),
    )
    packs: list[list[list[list[Any]]]] = [[order[0]]]
    for s in order[1:]:
        now = packs[-1]
        # the two and their packing, side by side
        costs.measure(_blocks(now, shape[3]), _blocks([s], shape[3]))
        if group_s(costs, now + [s], shape) < GAIN * (
            group_s(costs, now, shape) + group_s(costs, [s], shape)
        ):
            now.append(s)
        else:
            packs.append([s])
    out = []
    for p in packs:
        if len(p) == 1:
            _say(
                p,
                "apart (estimated sooner done apart: other epochs, or its packed epoch measured "
                "no faster)",
            )
            out.append(_jobs(p[0]))
            continue
        apart, together = sum(group_s(costs, [s], shape) for s in p), group_s(costs, p, shape)
        _say(
            p,
            f"{len(p)} shapes (estimated {apart / together:.2f}x faster than {len(p)} groups "
            "apart)",
        )
        out.append([j for s in p for j in _jobs(s)])
    costs.save()
    return out, [[_shape_of(s[0][-1].plain) for s in p] for p in packs]


def group_s(costs: "Costs", sets: list[list[list[Any]]], shape: tuple[int, int, int, int]) -> float:
    """A group's estimated training seconds: ``sets`` are its shapes' trajectories (lists of jobs),
    ``shape`` the data's training rows, features, outputs and units a configuration (its folds
    with ``data.folds=k``, else 1: each configuration that many members): the longest
    trajectory's epochs (a packed group computes every member to them) times the epoch the probe
    measured for these blocks (:meth:`Costs.epoch`), plus the start it measured
    (:meth:`Costs.start`)."""
    epochs = max(t[-1].plain["epochs"] for trajs in sets for t in trajs)
    blocks = _blocks(sets, shape[3])
    return epochs * costs.epoch(blocks) + costs.start(blocks)


def _blocks(sets: list[list[list[Any]]], units: int) -> list[tuple[int, int, str, int]]:
    """The probe's blocks of a group of ``sets``:
    ``(depth, width, activation, members)`` a shape."""
    out = []
    for trajs in sets:
        p = trajs[0][-1].plain
        out.append((p["depth"], p["width"], p["activation"], len(trajs) * units))
    return out


def summary(groups: list[list[Any]]) -> str:
    """What packing did, for the plan line:
    ``" (8 groups of one shape packed into 2: …)"``, or ``""``."""
    packed = [g for g in groups if len({_shape_of(j.plain) for j in g}) > 1]
    if not packed:
        return ""
    shapes = sum(len({_shape_of(j.plain) for j in g}) for g in packed)
    return f" ({shapes} groups of one shape packed into {len(packed)}: hydra.launcher.pack)"


def _shape_of(plain: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(plain.get(k) for k in FREE)


@dataclass
class Costs:
    """The probe: what an epoch of a group costs on one device, dtype and data set (``d``
    features, ``n`` training rows, ``k`` outputs), measured as asked and kept once a machine
    (the cache folder, as the activations' forms are). :meth:`epoch` times the very
    computation a group trains (:class:`sweeper.models.batched_pass._Pass`: its forward,
    backward and update calls on the data's training rows, one BLAS thread as a group trains),
    so what no formula of this module foresaw is in the measurement: on the CPU, a packed
    group's hidden values outgrowing the caches where its shapes' groups apart fit them
    (digits, 160 members: each of its passes at memory's speed), products that a wider first
    layer does not make faster (64 features: every width already at the machine's rate)."""

    backend: Any
    dtype: str
    d: int
    n: int
    task: str = "regression"
    k: int = 1
    # the data set: the probe runs on its training rows
    data: Any = field(default=None, repr=False, compare=False)
    epochs: dict[str, float] = field(default_factory=dict)
    starts: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, device: str, dtype: str, ds: Any) -> "Costs":
        """The costs of ``ds``'s training rows (a
        :class:`sweeper.data.Dataset`) on ``device`` in ``dtype``."""

        key = (device, dtype, ds.n_features, ds.X_train.shape[0], ds.task, ds.n_outputs)
        held = state.process().costs
        if key not in held:
            costs = cls(resolve(device), dtype, *key[2:])
            costs._load()
            held[key] = costs
        held[key].data = ds
        return held[key]

    def _key(self) -> str:
        fake = " fake" if self.backend.fake else ""
        return (
            f"{machine_key(self.dtype)} {self.backend.device}{fake} d={self.d} n={self.n} "
            f"{self.task} k={self.k}"
        )

    def _load(self) -> bool:
        """This machine's measurements of an earlier sweep (the cache
        folder's ``packing-costs.json``), if any."""
        key = self._key()
        known = read_cached(
            _path(),
            lambda d: (
                {k: float(v) for k, v in d[key]["epochs"].items()},
                {k: float(v) for k, v in d[key].get("starts", {}).items()},
            ),
        )
        if known is None:
            return False
        self.epochs.update(known[0])
        self.starts.update(known[1])
        return True

    def save(self) -> None:
        """Keep the measurements for the machine's later sweeps (:func:`write_cached`)."""
        write_cached(_path(), {"epochs": self.epochs, "starts": self.starts}, self._key())

    def epoch(self, blocks: list[tuple[int, int, str, int]]) -> float:
        """Seconds of one full-batch epoch of a group of ``blocks``
        (``(depth, width, activation, members)`` each, one block: a group of one
        shape; several: a packed group), as last measured (:meth:`measure`)."""
        key = _key(blocks)
        if key not in self.epochs or key not in self.starts:
            self.measure(blocks)
        return self.epochs[key]

    def start(self, blocks: list[tuple[int, int, str, int]]) -> float:
        """Seconds a group of ``blocks`` pays once, beside its epochs, as last measured
        (:meth:`measure`): its computation built (its parameters packed and copied to the
        device, its calls made) and its first epoch's excess over a steady one (its
        buffers' first touch). A few ms on this machine's CPU (was a fixed 50 ms guess)."""
        key = _key(blocks)
        if key not in self.epochs or key not in self.starts:
            self.measure(blocks)
        return self.starts[key]

    def measure(self, *parts: list[tuple[int, int, str, int]]) -> None:
        """Time the groups ``parts`` (lists of blocks) and the packed group of them all side by
        side, unless this machine knows them all: a shared machine's other work then weighs on
        each alike, and the planner compares the one with the others from the same rounds."""
        groups = [*parts, [b for p in parts for b in p]] if len(parts) > 1 else list(parts)
        keys = [_key(g) for g in groups]
        if not all(k in self.epochs and k in self.starts for k in keys):
            timed = self._time(groups)
            self.epochs.update(zip(keys, (epoch for epoch, _ in timed)))
            self.starts.update(zip(keys, (start for _, start in timed)))

    def _time(self, groups: list[list[tuple[int, int, str, int]]]) -> list[tuple[float, float]]:
        """Each group's epoch and start. The epoch: the least of :data:`REPEATS` rounds, each
        group in each round an epoch to warm up and one timed (so the timed one finds its buffers
        where its training's epoch does: in the caches its last epoch left them, not in those
        another group's epoch did), on at most :data:`PROBE_ROWS` of the training rows (the time
        scaled to all of them: more rows than that outgrow the caches whatever the grouping).
        The start: its calls built, and its very first epoch's excess over the epoch (after a
        first group's calls built and run once untimed: what a process pays once, its imports and
        the activations' forms probed, is no group's start; 25 ms here, a group's 1-7 ms)."""
        clock = self._clock()
        best = [float("inf")] * len(groups)
        built, first = [0.0] * len(groups), [0.0] * len(groups)
        with self._one_thread():
            for c in self._calls(groups[0]):
                c()
            calls = []
            for i, g in enumerate(groups):
                t0 = clock()
                calls.append(self._calls(g))
                built[i] = clock() - t0
            for r in range(REPEATS):
                for i, cs in enumerate(calls):
                    t0 = clock()
                    for c in cs:
                        c()
                    if r == 0:
                        first[i] = clock() - t0
                    t0 = clock()
                    for c in cs:
                        c()
                    best[i] = min(best[i], clock() - t0)
        scale = self.n / min(self.n, PROBE_ROWS)
        return [(t * scale, b + max(0.0, f - t) * scale) for t, b, f in zip(best, built, first)]

    def _calls(self, blocks: list[tuple[int, int, str, int]]) -> list[Any]:
        """An epoch's calls of a group of ``blocks`` on the data,
        gradient descent (:meth:`epoch`)."""

        be, xp = self.backend, self.backend.xp
        shapes = [Shape((self.d, *[w] * L, self.k), a) for L, w, a, _ in blocks]
        layout = Layout(shapes, [K for *_, K in blocks])
        P = be.to_device(
            layout.pack(
                [
                    stacked_params(list(s.sizes), s.activation, range(K), self.dtype)
                    for s, (*_, K) in zip(shapes, blocks)
                ],
                self.dtype,
            )
        )
        rows = min(self.n, PROBE_ROWS)
        X = be.to_device(np.asarray(self.data.X_train[:rows], dtype=self.dtype))
        y = be.to_device(np.asarray(self.data.y_train[:rows], dtype=self.dtype))
        scale = xp.full((layout.K, 1, 1), -1e-3, dtype=self.dtype)
        run = _Pass(
            xp,
            layout,
            P,
            [ACTIVATIONS[s.activation] for s in shapes],
            self.task,
            X,
            y,
            scale,
            State(xp, [P], Optimizer(), 1e-3, [Ellipsis]),
        )
        return run.forward_calls + run.backward_calls + run.update_calls

    def _clock(self) -> Any:
        """The CPU's: this thread's CPU seconds (one BLAS thread computes
        in it; another process's work on a shared machine is not
        counted); a GPU's: the backend's clock, after synchronising."""

        return time.thread_time if self.backend.device == "cpu" else self.backend.clock

    def _one_thread(self) -> Any:
        if self.backend.device != "cpu":
            return contextlib.nullcontext()
        # lazy: saves ~3.8 ms at this module's import (measured)
        from threadpoolctl import threadpool_limits

        return threadpool_limits(1)


def _key(blocks: list[tuple[int, int, str, int]]) -> str:
    return " + ".join(f"{K}x{L}x{w}{a}" for L, w, a, K in blocks)


def _path() -> Any:
    return cache_root() / "packing-costs.json"
