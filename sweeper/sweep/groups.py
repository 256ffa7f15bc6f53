"""The batched launcher's plan: which jobs are one *trajectory*, which
trajectories train together as one group.

Training is deterministic, so configurations that agree on everything but ``epochs`` are one run
read at several epoch counts: a *trajectory*, trained once to its largest count
(:class:`sweeper.models.batched.Member` ``reads``), each configuration read off it at its own count
(its weights, curve, metrics: what it gives alone). Trajectories of one shape (``SHARED``) train
side by side as one group, as many as the memory budget holds (each counts its weights' snapshots);
a loss stride other than ``log_every`` (``log_every >= epochs``, huge ``epochs``) is part of the
shape. A job that cannot join a group (an invalid config, ``sync_every_epoch``, an already
finished ``resume=true`` configuration, data that cannot load) runs through the one-job path.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from omegaconf import DictConfig

from sweeper import data, tracking
from sweeper.contract.config import ConfigError, validate
from sweeper.base.process import physical_memory
from sweeper.contract.fingerprint import fingerprint
from sweeper.job.compute import model_bytes
from sweeper.models import layer_sizes
from sweeper.models.batched import group_bytes
from sweeper.models.group import MEMBER_KEYS, per_member
from sweeper.models.interface import kind, offer
from sweeper.models.optim import Optimizer
from sweeper.models.train import stride_of
from sweeper.sweep import packing

__all__ = [
    "CPU_MAX_GROUP",
    "Job",
    "default_budget",
    "plan",
    "runs_own_loop",
    "shares",
    "split_features",
    "trajectories",
]

log = logging.getLogger("sweeper")

# What members of one group must share: the data and everything that shapes the computation.
# They may differ in epochs and in the keys the model's group path trains per member
# (models.group.per_member: the MLP's lr, seed, patience and data.split_seed — the split: then
# each has its own data; not for text, see split_features — a stacked model of yours lr and
# seed only: it shares the rest of models.group.MEMBER_KEYS); with mini-batches (batch_size
# > 0) they share the seed too (MINI_BATCH_SHARED), which draws the rows' order, and the split.
# With data.folds=k (shared by the group) each configuration is k members, its folds, each with
# its own rows, exactly as members of other split seeds (sweeper.sweep.launch.compute_group).
SHARED = (
    "model",
    "data",
    "dtype",
    "device",
    "depth",
    "width",
    "activation",
    "log_every",
    "optimizer",
    "momentum",
    "nesterov",
    "beta1",
    "beta2",
    "eps",
    "batch_size",
    "weight_decay",
)
MINI_BATCH_SHARED = ("seed",)


@dataclass
class Job:
    idx: int
    overrides: list[str]
    # the composed job config, hydra node included; None: composed when it runs
    config: DictConfig | None
    # resolved, without hydra; None: resolved in its job
    plain: dict[str, Any] | None = field(default_factory=dict)
    # the planner's packing decision for its group (sweeper.sweep.packing: tag batch_packed)
    pack: str = ""


def default_budget() -> int:
    """A quarter of the machine's memory (2 GiB where the system does not say)."""
    machine = physical_memory()
    return machine // 4 if machine else 2 << 30


def trajectories(jobs: list[Job]) -> list[list[Job]]:
    """The jobs that agree on everything but ``epochs``, together, each
    list by ascending ``epochs`` (in the order their first job comes)."""
    out: dict[str, list[Job]] = {}
    for job in jobs:
        key = json.dumps(
            {k: v for k, v in job.plain.items() if k != "epochs"}, sort_keys=True, default=str
        )
        out.setdefault(key, []).append(job)
    return [sorted(t, key=lambda j: (j.plain["epochs"], j.idx)) for t in out.values()]


def shares(epochs: list[int], total: float) -> list[float]:
    """Each configuration's share of its trajectory's time ``total`` (trained to
    ``max(epochs)``): every epoch's cost is split evenly among the configurations that need
    it (those whose count is past it), so a configuration of 20k epochs off a trajectory of
    20k/40k/80k pays a third of the first 20k epochs, and the shares add up to ``total``."""
    E, acc, prev, at = max(epochs), 0.0, 0, {}
    for c in sorted(set(epochs)):
        acc += (c - prev) / E * total / sum(e >= c for e in epochs)
        at[c], prev = acc, c
    return [at[e] for e in epochs]


# On the CPU a group's rate per member stops growing after a few dozen members
# (NumPy's per-call cost is shared, the arithmetic is not: docs/benchmarks.md,
# "Training alone"), while its memory and the wait for its first job line grow with
# it (10,000 members of one shape: 1.5 GB and ~45 s before the first line): without
# hydra.launcher.max_group_size a CPU group holds at most this many trajectories.
CPU_MAX_GROUP = 1024


def plan(
    jobs: list[Job],
    max_bytes: int = 0,
    max_size: int = 0,
    pruned: Callable[[dict[str, str]], str | None] | None = None,
    pack: bool = True,
) -> tuple[list[list[Job]], list[Job]]:
    """Split the jobs into groups that train together (each within the memory budget; ``max_size``:
    at most that many trajectories a group, on the CPU :data:`CPU_MAX_GROUP` when not given) and
    the jobs that run alone. A group is a list of jobs whose trajectories (:func:`trajectories`)
    train as its members; it has at least two configurations. ``pruned``: how ``resume`` takes a
    run the sweep's strategy stopped early (:func:`sweeper.tracking.finished_run`). Groups of one
    shape that differ only in depth, width and activation are packed into one where that is
    estimated to end sooner (``pack``; :mod:`sweeper.sweep.packing`)."""

    budget = max_bytes or default_budget()
    keyed: dict[str, list[Job]] = {}
    alone = []
    for job in jobs:
        cfg = job.plain
        # another app's config, or one resolved only inside its job: as the basic launcher runs it
        if cfg is None:
            alone.append(job)
            continue
        try:
            validate(cfg)
        except ConfigError:
            alone.append(job)  # the one-job path reports it
            continue
        if cfg["sync_every_epoch"] or (cfg["resume"] and _finished(cfg, pruned)) or _own_loop(cfg):
            alone.append(job)
            continue
        # a key the group path cannot vary per member: shared, or apart
        varies = per_member(cfg.get("model"))
        own = tuple(k for k in MEMBER_KEYS if k not in varies and "." not in k)
        shared = {
            k: cfg.get(k) for k in SHARED + own + (MINI_BATCH_SHARED if cfg["batch_size"] else ())
        }
        # a member's loss is sampled at the group's stride: a run whose own stride is not
        # log_every (huge epochs, or log_every >= epochs: models.train.sample_stride) groups
        # only with runs of that same stride (their longest count then samples at it too)
        stride = stride_of(cfg["epochs"], cfg["log_every"])
        if stride != cfg["log_every"]:
            shared["stride"] = stride
        shared["data"] = {k: v for k, v in cfg["data"].items() if k != "split_seed"}
        if split_features(cfg) or cfg["batch_size"] or "data.split_seed" not in varies:
            shared["split_seed"] = data.split_seed(cfg["data"])
        key = json.dumps(shared, sort_keys=True, default=str)
        keyed.setdefault(key, []).append(job)
    own = [j for j in alone if j.plain is not None and runs_own_loop(j.plain)]
    if own:
        log.info(
            "%d configuration(s) of a function trainer (%s) run one at a time: it runs its own "
            "loop",
            len(own),
            own[0].plain["model"]["_target_"],
        )
    groups = []
    # groups of one shape that differ only in depth, width
    # and activation: one packed group where that pays
    packable = [json.loads(k) if _mlp_dense(m[0].plain) else None for k, m in keyed.items()]
    for members in packing.pack([trajectories(m) for m in keyed.values()], packable, pack):
        # data.folds=k: a configuration is k units (its folds: other
        # rows), so even one trains as a group
        units = len(data.fold_indexes(members[0].plain["data"]))
        if len(members) == 1 and units == 1:
            alone += members
            continue
        trajs = trajectories(members)
        size = _fits(trajs, budget)
        if max_size:
            size = min(size, max_size)
        elif members[0].plain["device"] == "cpu":
            size = min(size, max(1, CPU_MAX_GROUP // units))
        if size < 1:
            alone += members
            continue
        for i in range(0, len(trajs), size):
            part = [j for t in trajs[i : i + size] for j in t]
            # one trajectory: when reading it pays
            together = len(trajs[i : i + size]) > 1 or _worth(part) or units > 1
            (
                groups.append(part)
                if (len(part) > 1 or units > 1) and together
                else alone.extend(part)
            )
    alone.sort(key=lambda j: j.idx)
    return groups, alone


# A trajectory alone in its group trains on the batched trainer (K = 1), which ran at 0.65-1.2x the
# one-configuration trainer's epochs/s (diabetes, depth 1, width 16, float32 and
# float64, 2026-12-01): it is worth it when its configurations alone would train this
# many times its longest count.
ONE_TRAJECTORY_GAIN = 1.5


def _worth(jobs: list[Job]) -> bool:
    """Whether one trajectory's jobs train faster read off one run than one at a time."""
    epochs = [j.plain["epochs"] for j in jobs]
    return sum(epochs) >= ONE_TRAJECTORY_GAIN * max(epochs)


def _mlp_dense(cfg: dict[str, Any]) -> bool:
    """A model of sweeper's own kernels (the MLP) on dense data: its groups
    may pack with groups of other shapes (sweeper.sweep.packing)."""
    return offer(cfg.get("model")).fast_path and not split_features(cfg)


def _own_loop(cfg: dict[str, Any]) -> bool:
    """A function trainer (the user's own loop): its configurations
    run one at a time, through the one-job path."""

    return kind(cfg.get("model")) == "trainer"


def runs_own_loop(cfg: dict[str, Any]) -> bool:
    """:func:`_own_loop`, False for a model that cannot be loaded (its job says why)."""
    try:
        return _own_loop(cfg)
    except Exception:  # noqa: BLE001  (an invalid model: its job says so)
        return False


def split_features(cfg: dict[str, Any]) -> bool:
    """Text data (data=sms|text): the vocabulary is fitted on each split's training
    rows, so the features (their number, and the one sparse matrix a group shares)
    are the split's own; such members group only with their split seed. The group's
    first layer then reads the shared matrix as the one-job path does: sparse (see
    :mod:`sweeper.models.batched`), or dense with ``data.sparse=false``."""
    return cfg["data"]["name"] in data.TEXT


def _fits(trajs: list[list[Job]], budget: int) -> int:
    """How many of these trajectories fit the memory budget together
    (estimated from the data's shape; each trajectory counted as the
    largest of their shapes, with the most snapshots any of them keeps)."""
    cfg = trajs[0][0].plain
    try:
        ds = data.load_plain(cfg["data"])
    except data.DataError:  # the one-job path reports it in one line
        return 0
    except Exception as e:  # noqa: BLE001  (a bug: nothing is lost, but say so)
        log.warning(
            "cannot batch %d jobs (%s: %s); they run one at a time",
            sum(map(len, trajs)),
            type(e).__name__,
            e,
        )
        return 0
    # data.folds=k: a trajectory is k members (units), each with its own rows
    units = len(data.fold_indexes(cfg["data"]))
    # a model of the interface: its own init and forward measure it
    if not offer(cfg.get("model"), quiet=True).fast_path:
        return _fits_model(cfg, ds, units, budget)
    shared = len({data.split_seed(t[0].plain["data"]) for t in trajs}) == 1 and units == 1
    n, n_val = ds.X_train.shape[0], ds.X_val.shape[0]
    if 0 < cfg["batch_size"] < n:
        n_val += n  # the training loss's own forward pass over every row
    # text: the stored values
    nnz = (ds.X_train.nnz, ds.X_val.nnz) if data.is_sparse(ds.X_train) else None
    snapshots = max(len({j.plain["epochs"] for j in t}) - 1 for t in trajs)
    copies = Optimizer.from_config(cfg).copies + snapshots
    one = max(
        group_bytes(
            units,
            n,
            n_val,
            layer_sizes(ds.n_features, depth, width, ds.n_outputs),
            np.dtype(cfg["dtype"]).itemsize,
            shared,
            copies,
            nnz,
        )
        for depth, width in {(t[0].plain["depth"], t[0].plain["width"]) for t in trajs}
    )
    return max(1, budget // max(one, 1))


def _fits_model(cfg: dict[str, Any], ds: data.Dataset, units: int, budget: int) -> int:
    """How many trajectories of a model of the interface fit the budget together
    (each ``units`` members of :func:`sweeper.job.compute.model_bytes`); 0 when
    one alone needs more than this process may use: its jobs then run alone,
    where the one-job path refuses it in one line before it trains."""
    # lazy: saves ~3.5 ms at this module's import (measured)
    from sweeper.base.process import memory_limit

    need = model_bytes(cfg, ds)
    if need is None:
        # not measured (its code raised): the group's proof says why, in its words
        return max(1, budget)
    limit = memory_limit()
    one = need[0] * units
    if limit is not None and cfg["device"] != "gpu" and one > limit[0]:
        return 0
    return max(1, budget // max(one, 1))


def _finished(cfg: dict[str, Any], pruned: Any = None) -> bool:
    """Whether ``resume=true`` will skip this configuration (it already FINISHED
    in the experiment; a run stopped early only as ``pruned`` takes it)."""

    try:
        client = tracking.client(cfg["tracking"]["uri"])
        exp = client.get_experiment_by_name(cfg["tracking"]["experiment"])
        return (
            exp is not None
            and tracking.finished_run(
                client, exp.experiment_id, fingerprint(cfg), cfg["device"], pruned
            )
            is not None
        )
    except tracking.UNREACHABLE:
        return False
