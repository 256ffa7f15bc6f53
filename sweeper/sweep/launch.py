"""The batched launcher's work: compose every job once, train compatible jobs as one group, record each.

A job is *compute* (data → model → train → score) and *record* (MLflow child run, artifacts,
``result.json``; :func:`sweeper.job.record.run`). Here the compute half of a whole group runs at once, on the
device, with :func:`sweeper.models.batched.train_group`; then every member gets its own Hydra job
(``run_job``: output folder, ``.hydra/``, callbacks, ``JobReturn``) whose task records the outcome
computed for it (:func:`sweeper.job.context.handing`). Groups train any optimizer (``gd``, ``momentum``, ``adam``),
weight decay, mini-batches (members then share ``seed`` too: it draws the rows' order) and multi-class
targets, and sparse text features. A job that cannot join a group (``sync_every_epoch``, a loss stride of its
own, an already finished ``resume=true`` configuration, a device that is not there) and every member of a
group that failed as a whole run through the one-job path, exactly as under ``hydra/launcher=basic``.
"""
from __future__ import annotations

import json
import logging
import math
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from omegaconf import DictConfig, open_dict

from sweeper import data
from sweeper.job import compute
from sweeper.job.context import handing
from sweeper.sweep.plan import _plain
from sweeper.base.backend import BackendUnavailable, resolve
from sweeper.contract.config import ConfigError, fingerprint, validate
from sweeper.models.batched import Member, group_bytes, stacked_params, train_group
from sweeper.models import layer_sizes
from sweeper.models.mlp import MLP
from sweeper.models.optim import Optimizer
from sweeper.models.train import MAX_SAMPLES

log = logging.getLogger("sweeper")

# What members of one group must share: the data and everything that shapes the computation. They may
# differ in lr, seed (weights, and the split: then each has its own data; not for text, see split_features),
# epochs and patience; with mini-batches (batch_size > 0) they share the seed too (MINI_BATCH_SHARED), which
# draws the rows' order.
SHARED = ("data", "dtype", "device", "depth", "width", "activation", "log_every",
          "optimizer", "momentum", "nesterov", "beta1", "beta2", "eps", "batch_size", "weight_decay")
MINI_BATCH_SHARED = ("seed",)


@dataclass
class Job:
    idx: int
    overrides: list[str]
    config: DictConfig  # the composed job config, hydra node included
    plain: dict[str, Any] = field(default_factory=dict)  # resolved, without hydra


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Any]:
    from hydra.core.utils import configure_log, run_job, setup_globals

    setup_globals()
    config = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    Path(str(config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    jobs = []
    for i, overrides in enumerate(job_overrides):
        load = launcher.hydra_context.config_loader.load_sweep_config
        cfg = (getattr(load, "take", None) or load)(config, list(overrides))  # the composed config, not a copy
        with open_dict(cfg):
            cfg.hydra.job.id = cfg.hydra.job.num = initial_job_idx + i
        jobs.append(Job(initial_job_idx + i, list(overrides), cfg, _plain(cfg)))
    groups, alone = plan(jobs, launcher.max_group_bytes, launcher.max_group_size)
    log.info("Launching %d jobs: %d in %d batched group(s), %d one at a time", len(jobs),
             sum(map(len, groups)), len(groups), len(alone))

    returns: dict[int, Any] = {}

    def record(job: Job) -> None:
        returns[job.idx] = run_job(hydra_context=launcher.hydra_context, task_function=launcher.task_function,
                                   config=job.config, job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
        configure_log(config.hydra.hydra_logging, config.hydra.verbose)

    for members in groups:
        try:
            computed = compute_group(members)
        except Exception as e:  # noqa: BLE001  (out of memory, a bug): nothing is lost, each job runs alone
            log.warning("group of %d failed as a whole (%s: %s); retrying its configurations one at a time",
                        len(members), type(e).__name__, str(e).splitlines()[0] if str(e) else "")
            computed = {}
        for job in members:
            with handing(computed.pop(job.idx, None)):
                record(job)
    for job in alone:
        record(job)
    return [returns[j.idx] for j in jobs]


def default_budget() -> int:
    """A quarter of the machine's memory."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
    except (ValueError, OSError, AttributeError):
        return 2 << 30


def plan(jobs: list[Job], max_bytes: int = 0, max_size: int = 0) -> tuple[list[list[Job]], list[Job]]:
    """Split the jobs into groups that train together (each within the memory budget) and the jobs
    that run alone (invalid configs, ``sync_every_epoch``, ``resume`` hits, data that cannot load)."""
    budget = max_bytes or default_budget()
    keyed: dict[str, list[Job]] = {}
    alone = []
    for job in jobs:
        cfg = job.plain
        try:
            validate(cfg)
        except ConfigError:
            alone.append(job)  # the one-job path reports it
            continue
        # a member's loss is sampled at the group's stride: a run whose own stride is not log_every (huge
        # epochs, or log_every >= epochs: models.train.sample_stride) keeps it by running alone
        own_stride = cfg["log_every"] < cfg["epochs"] and -(-cfg["epochs"] // MAX_SAMPLES) <= cfg["log_every"]
        if cfg["sync_every_epoch"] or not own_stride or (cfg["resume"] and _finished(cfg)):
            alone.append(job)
            continue
        shared = {k: cfg[k] for k in SHARED + (MINI_BATCH_SHARED if cfg["batch_size"] else ())}
        if split_features(cfg):
            shared["seed"] = cfg["seed"]
        key = json.dumps(shared, sort_keys=True, default=str)
        keyed.setdefault(key, []).append(job)
    groups = []
    for members in (part for same in keyed.values() for part in by_epochs(same)):
        if len(members) == 1 or wasteful(members):
            alone += members
            continue
        size = _fits(members, budget)
        if max_size:
            size = min(size, max_size)
        if size < 2:
            alone += members
            continue
        groups += [members[i:i + size] for i in range(0, len(members), size)]
    alone.sort(key=lambda j: j.idx)
    return groups, alone


# Members of one epoch count that make a group of their own (below this, a small group trains slower per
# configuration than the one-configuration trainer: docs/benchmarks.md, K=1..8).
MIN_EPOCH_PART = 4


def by_epochs(members: list[Job]) -> list[list[Job]]:
    """A group runs to its largest epoch count, and a member frozen earlier still costs its share of every
    epoch: split the members by epoch count when every part keeps ``MIN_EPOCH_PART`` of them."""
    parts: dict[int, list[Job]] = {}
    for job in members:
        parts.setdefault(job.plain["epochs"], []).append(job)
    if len(parts) > 1 and all(len(p) >= MIN_EPOCH_PART for p in parts.values()):
        return list(parts.values())
    return [members]


def wasteful(members: list[Job]) -> bool:
    """A small group whose members stop at very different epochs computes more than they would alone
    (K·max(epochs) against their sum) without enough members to win it back."""
    epochs = [j.plain["epochs"] for j in members]
    return len(members) < 2 * MIN_EPOCH_PART and len(members) * max(epochs) > 1.5 * sum(epochs)


def split_features(cfg: dict[str, Any]) -> bool:
    """Text data (data=sms|text): the vocabulary is fitted on each seed's training rows, so the features (their
    number, and the one sparse matrix a group shares) are the seed's own; such members group only with their
    seed. The group's first layer then reads the shared matrix as the one-job path does: sparse (see
    :mod:`sweeper.models.batched`), or dense with ``data.sparse=false``."""
    return cfg["data"]["name"] in data.TEXT


def _fits(members: list[Job], budget: int) -> int:
    """How many of these members fit the memory budget together (estimated from the data's shape)."""
    cfg = members[0].plain
    try:
        ds = data.load_plain(cfg["data"], cfg["seed"])
    except data.DataError:  # the one-job path reports it in one line
        return 0
    except Exception as e:  # noqa: BLE001  (a bug: nothing is lost, but say so)
        log.warning("cannot batch %d jobs (%s: %s); they run one at a time", len(members), type(e).__name__, e)
        return 0
    sizes = layer_sizes(ds.n_features, cfg["depth"], cfg["width"], ds.n_outputs)
    shared = len({m.plain["seed"] for m in members}) == 1
    n, n_val = ds.X_train.shape[0], ds.X_val.shape[0]
    if 0 < cfg["batch_size"] < n:
        n_val += n  # the training loss's own forward pass over every row
    nnz = (ds.X_train.nnz, ds.X_val.nnz) if data.is_sparse(ds.X_train) else None  # text: the stored values
    one = group_bytes(1, n, n_val, sizes, np.dtype(cfg["dtype"]).itemsize, shared, Optimizer.from_config(cfg).copies,
                      nnz)
    return max(1, budget // max(one, 1))


def _finished(cfg: dict[str, Any]) -> bool:
    """Whether ``resume=true`` will skip this configuration (it already FINISHED in the experiment)."""
    from sweeper import tracking

    try:
        client = tracking.client(cfg["tracking"]["uri"])
        exp = client.get_experiment_by_name(cfg["tracking"]["experiment"])
        return exp is not None and tracking.finished_run(client, exp.experiment_id, fingerprint(cfg), cfg["device"]) is not None
    except tracking.UNREACHABLE:
        return False


def compute_group(members: list[Job]) -> dict[int, compute.Computed]:
    """Train the group on its device and score every member: ``{job idx: Computed}``.

    Raises on a failure of the whole group (the caller retries its jobs one at a time)."""
    t_start = time.perf_counter()
    cfg0 = members[0].plain
    try:
        backend = resolve(cfg0["device"])
    except BackendUnavailable:
        return {}  # each job records SKIPPED through the one-job path
    seeds = [m.plain["seed"] for m in members]
    if len(set(seeds)) > 1 and split_features(cfg0):  # plan() never makes such a group
        raise ValueError("text features are fitted on each split: a group's members need one seed")
    datasets = {s: data.load_plain(cfg0["data"], s) for s in dict.fromkeys(seeds)}
    ds0 = datasets[seeds[0]]
    dtype, task = cfg0["dtype"], ds0.task
    sizes = layer_sizes(ds0.n_features, cfg0["depth"], cfg0["width"], ds0.n_outputs)
    opt = Optimizer.from_config(cfg0)
    group = [Member(m.plain["lr"], m.plain["epochs"], m.plain["patience"], m.plain["seed"]) for m in members]
    names = ("X_train", "y_train", "X_val", "y_val")
    t_h2d = backend.clock()
    if len(datasets) == 1:
        arrays = [backend.to_device(getattr(ds0, a).astype(dtype)) for a in names]
    else:
        arrays = [backend.to_device(np.stack([getattr(datasets[s], a) for s in seeds]).astype(dtype)) for a in names]
    params = stacked_params(sizes, cfg0["activation"], seeds, dtype)
    h2d = backend.clock() - t_h2d
    epochs = sum(g.epochs for g in group)
    with compute.progress_bar(epochs, unit="member-epoch") as progress:
        fit = train_group(backend, params, cfg0["activation"], task, *arrays, group, log_every=cfg0["log_every"],
                          progress=(lambda done, total: progress(done, math.nan, math.nan)) if progress else None,
                          opt=opt, batch_size=cfg0["batch_size"])
    K = len(members)
    group_id = uuid.uuid4().hex[:12]
    out = {}
    for job, member_fit, member_params, seed in zip(members, fit.fits, fit.params, seeds):
        ds = datasets[seed]
        model = MLP(backend.xp, [backend.to_device(p) for p in member_params], cfg0["activation"], task,
                    opt.weight_decay)
        member_fit.train_time_s = fit.train_time_s / K  # the amortised cost of one configuration
        member_fit.warmup_time_s = fit.warmup_time_s / K
        outcome = compute.evaluate(dataset=ds, backend=backend, model=model, fit=member_fit, dtype=dtype,
                               h2d_time_s=h2d / K)
        outcome.scores["group_train_time_s"] = fit.train_time_s
        out[job.idx] = compute.Computed(outcome, ds, {"launcher": "batched", "batch_group": group_id, "group_size": str(K)})
    wall = (time.perf_counter() - t_start) / K
    for c in out.values():
        c.wall_time_s = wall
    return out

