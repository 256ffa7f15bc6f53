"""The batched launcher's work: compose every job once, train
compatible jobs as one group, record each.

A job is *compute* (data → model → train → score) and *record* (MLflow child run, artifacts,
``result.json``; :func:`sweeper.job.record.run`). Here the compute half of a whole group runs
at once, on the device, with :func:`sweeper.models.batched.train_group`; then every member gets
its own Hydra job (``run_job``: output folder, ``.hydra/``, callbacks, ``JobReturn``) whose
task records the outcome computed for it (:func:`sweeper.job.context.handing`). The plan
(:mod:`sweeper.sweep.groups`) makes the configurations that differ only in ``epochs`` one
member, a trajectory read at each count. Each member's run is created RUNNING before or while
its group trains (:func:`open_runs`) and handed to its job with the outcome. Groups train any
optimizer (``gd``, ``momentum``, ``adam``), weight decay, mini-batches (members then share
``seed`` and the split too: the seed draws the rows' order) and multi-class targets, and sparse
text features. A job that cannot join a group (``sync_every_epoch``, an already
finished ``resume=true`` configuration, a device that is not there) and every member of a group
that failed as a whole run through the one-job path, exactly as under ``hydra/launcher=basic``.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from omegaconf import OmegaConf, open_dict, read_write

from hydra.core.utils import configure_log, run_job, setup_globals
from sweeper import data, tracking
from sweeper.base import hydra_internals
from sweeper.base.backend import BackendUnavailable, resolved
from sweeper.base.fmt import number
from sweeper.base.tags import GROUP, GROUP_SIZE, LAUNCHER, TRAJECTORY, WORKER
from sweeper.base.process import trim_heap
from sweeper.contract.compose import compose_once
from sweeper.job import compute, crossval, record
from sweeper.job.context import JobContext, handing
from sweeper.models.group import form_tags, train_members
from sweeper.models.usercode import guarded
from sweeper.sweep import engines, hydra_run_job, packing
from sweeper.sweep.groups import Job, runs_own_loop, plan, shares, split_features, trajectories
from sweeper.sweep.plan import is_sweeper_config
from sweeper.tracking import bulk, grouped

__all__ = ["Job", "compute_group", "launch", "member_tags", "plan", "split_features"]

log = logging.getLogger("sweeper")


def launch(
    launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
) -> list[Any]:
    """The batched launcher's ``launch``: the jobs planned into groups and lone
    jobs, each group computed (with successive halving, on CPU worker
    processes, on another engine, or here) and its members recorded as jobs."""

    # lazy: saves ~79 ms at this module's import (measured)
    from sweeper.sweep import cores, engines, pruning

    setup_globals()
    config = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    Path(str(config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    loader = launcher.hydra_context.config_loader
    # Only sweeper's configurations are inspected, and only as far as batching needs: each shape of
    # overrides composed once, each job's resolved values set from it (no job composed here; each is
    # composed when it runs, and dropped after). Another app's config (or one resolved only inside
    # its job) goes to run_job as the basic launcher hands it over: composed by Hydra, unresolved.
    ours = is_sweeper_config(config)
    if ours:
        compose_once(loader)
    # sweeper's copy of Hydra's run_job only inside the Hydra and OmegaConf versions the tests ran
    run = _Launch(launcher, ours, ours and hydra_internals.fast())
    jobs = [
        Job(initial_job_idx + i, list(o), None, run.load.plain(config, list(o)) if ours else None)
        for i, o in enumerate(job_overrides)
    ]
    # hydra.launcher.cpu_workers: CPU groups on that many worker
    # processes, each holding one (sweeper.sweep.cores)
    cpu = [j.plain for j in jobs if j.plain is not None and j.plain.get("device") != "gpu"]
    n = cores.workers(launcher, cpu) if ours else 1
    # the strategy of stopping runs early at rungs (successive halving), or None (off)
    stopping = pruning.strategy(launcher)
    groups, alone = plan(
        jobs,
        cores.budget(launcher.max_group_bytes, n) if n > 1 else launcher.max_group_bytes,
        launcher.max_group_size,
        pruning.resume_rule(launcher),
        packing.enabled(launcher),
    )
    packed = packing.summary(groups)  # groups of several shapes (hydra.launcher.pack)
    if n > 1:
        groups = cores.chunked(groups, n)
        n = min(n, sum(g[0].plain["device"] != "gpu" for g in groups))
    log.info(
        "Launching %d jobs: %d in %d batched group(s)%s, %d one at a time%s",
        len(jobs),
        sum(map(len, groups)),
        len(groups),
        packed,
        len(alone),
        cores.declined(launcher, cpu, n) if ours and groups else "",
    )
    own = [
        j for j in alone if stopping is not None and j.plain is not None and runs_own_loop(j.plain)
    ]
    try:
        # trainers: through report
        if stopping is not None and (groups or own) and not engines.elsewhere(launcher, groups):
            run.pruned(groups + [[j] for j in own], stopping, n)
            alone = [j for j in alone if j not in own]
        elif n > 1 and groups:  # the CPU groups on worker processes, recorded here as each ends
            run.on_workers(groups, n)
        # hydra.launcher.engine, or several GPUs: groups compute there
        elif engines.elsewhere(launcher, groups):
            for members, computed in engines.computed_groups(launcher, groups, compute_group):
                for job in members:
                    with handing(computed.pop(job.idx, None)):
                        run.record(job)
        else:
            for members in groups:
                run.here(members)
    finally:
        # Ctrl-C, SIGTERM: the system metrics of the groups still training stop with the
        # launch; their runs end KILLED with the sweep (sweeper.sweep.life.interrupted)
        for runs in run.training.values():
            _system(runs)
    for job in alone:
        run.record(job)
    return [run.returns[j.idx] for j in jobs]


class _Launch:
    """One ``launch``'s jobs recorded: each through Hydra's ``run_job``
    (or sweeper's copy of it), with the outcome its group computed handed
    over; the groups computed with halving, on workers, or here."""

    def __init__(self, launcher: Any, ours: bool, fast: bool) -> None:
        self.launcher, self.ours, self.fast = launcher, ours, fast
        self.config = launcher.config
        self.load = launcher.hydra_context.config_loader.load_sweep_config
        self.sweep_dir = Path(str(self.config.hydra.sweep.dir)).absolute()
        self.returns: dict[int, Any] = {}
        # the runs of each group (by its members' id) opened before or while it trains, their
        # system metrics sampled, until the group has ended (launch stops what it leaves)
        self.training: dict[int, dict[int, Any]] = {}

    def record(self, job: Job) -> None:
        """The job through ``run_job``; its return kept until the
        sweep ends (its config as plain data)."""

        config, load, ours = self.config, self.load, self.ours
        # composed now; one of ours is its shape's config with the
        # job's values set (run_job copies what it keeps)
        cfg = job.config or (load.lend if ours else load)(config, job.overrides)
        with read_write(cfg.hydra), open_dict(cfg):
            cfg.hydra.job.id = cfg.hydra.job.num = job.idx
        # sweeper's own jobs: Hydra's run_job step for step, without
        # its copies of the config (sweep.hydra_run_job)
        common = dict(
            hydra_context=self.launcher.hydra_context,
            task_function=self.launcher.task_function,
            config=cfg,
            job_dir_key="hydra.sweep.dir",
            job_subdir_key="hydra.sweep.subdir",
        )
        ret = (
            hydra_run_job.run_job(**common, memo=load.memo(cfg)) if self.fast else run_job(**common)
        )
        # its Hydra config (~1 MB of nodes) is in the job's .hydra/hydra.yaml:
        if ours and ret.hydra_cfg is not None:
            # not kept for the sweep's end; only where the job ran (a
            # search sweeper reads its result.json there)
            out = str(ret.hydra_cfg.hydra.runtime.output_dir)
            ret.hydra_cfg = OmegaConf.create({"hydra": {"runtime": {"output_dir": out}}})
        self.returns[job.idx] = hydra_run_job.lean(ret) if ours else ret
        configure_log(config.hydra.hydra_logging, config.hydra.verbose)

    def record_group(
        self,
        members: list[Job],
        computed: dict[int, Any],
        runs: dict[int, Any],
        tags: Any,
        began: int,
        bulk: bool,
    ) -> None:
        """A computed group's members recorded, each with its run
        (opened ahead, or now a chunk at a time)."""
        hand_runs(computed, runs)
        # the runs a large group did not open while it trained: a chunk at a time, before their jobs
        later = bulk and any(c.run is None for c in computed.values())
        # their runs end together, when the group's last one is recorded
        with grouped.together(bulk and len(members) > 1):
            for i, job in enumerate(members):
                if later and job.idx in computed and computed[job.idx].run is None:
                    later = _open_next(
                        members[i : i + AHEAD_ALWAYS], computed, tags, self.sweep_dir, began
                    )
                with handing(computed.pop(job.idx, None)):
                    self.record(job)

    def pruned(self, groups: list[list[Job]], stopping: Any, n: int) -> None:
        """Runs stopped early at rungs (``stopping``: :func:`sweeper.sweep.pruning.strategy`)
        inside the groups, each rung's groups on ``n`` CPU worker processes (1: here,
        one after another), then every job recorded."""
        # lazy: saves ~14 ms at this module's import (measured)
        from sweeper.sweep import cores, pruning

        launcher = self.launcher
        on_workers = n > 1 and all(g[0].plain["device"] != "gpu" for g in groups)

        def regroup(capped: list[Job]) -> list[list[Job]]:
            budget = (
                cores.budget(launcher.max_group_bytes, n)
                if on_workers
                else launcher.max_group_bytes
            )
            together, alone_ = plan(
                capped, budget, launcher.max_group_size, pack=packing.enabled(launcher)
            )
            return together + [[j] for j in alone_]  # a lone survivor is ranked too: a group of one

        def compute_all(rung: list[list[Job]]) -> dict[int, Any]:
            """A rung's groups computed: on the workers (chunked as a
            sweep's groups are), or here."""
            got: dict[int, Any] = {}
            if not on_workers:
                for members in rung:
                    got |= compute_group(
                        members, {i: t | {WORKER: "main"} for i, t in member_tags(members).items()}
                    )
                return got
            chunks = cores.chunked(rung, n)
            taking = lambda members, where: {i: t | where for i, t in member_tags(members).items()}
            for _, computed in cores.computed_groups(
                launcher, chunks, compute_group, min(n, len(chunks)), taking
            ):
                got |= computed
            return got

        began = int(time.time() * 1000)
        finals = pruning.run(groups, stopping, compute_all, regroup, self.sweep_dir)
        # the runs of the computed jobs opened together (one
        # transaction a chunk on the embedded store), as a group's
        ahead, opened = [j for g in groups for j in g if j.idx in finals], {}
        if ahead:
            open_runs(ahead, {i: c.tags for i, c in finals.items()}, self.sweep_dir, opened, began)
        hand_runs(finals, opened)
        for job in [j for g in groups for j in g]:
            with handing(finals.pop(job.idx, None)):
                self.record(job)

    def on_workers(self, groups: list[list[Job]], n: int) -> None:
        """The CPU groups on ``n`` worker processes
        (:mod:`sweeper.sweep.cores`), each recorded here as it ends."""
        # lazy: saves ~72 ms at this module's import (measured)
        from sweeper.sweep import cores

        taken: dict[int, tuple] = {}

        def taking(members: list[Job], where: dict[str, str]) -> dict[int, dict[str, str]]:
            """As a worker takes the group (``where``: its tags): the
            members' tags; their runs open the first time."""
            if id(members) in taken:  # a retry on a new worker: its runs say so
                tags, runs = taken[id(members)][:2]
                _each_run(
                    runs, lambda t: [t.client.set_tag(t.run_id, k, v) for k, v in where.items()]
                )
            else:
                tags, runs = member_tags(members), {}
                self.training[id(members)] = runs
                began, bulk = int(time.time() * 1000), _in_bulk(members[0].plain)
                taken[id(members)] = (tags, runs, began, bulk)
                for t in tags.values():
                    t |= where
                if len(members) <= AHEAD_ALWAYS or (
                    bulk and len(members) <= _knob("SWEEPER_AHEAD_BULK", AHEAD_BULK)
                ):
                    open_runs(members, tags, self.sweep_dir, runs, began)
            for t in tags.values():
                t |= where
            return tags

        for members, computed in cores.computed_groups(
            self.launcher, groups, compute_group, n, taking
        ):
            tags, runs, began, bulk = taken.pop(id(members), (None, {}, 0, False))
            self.training.pop(id(members), None)
            self.record_group(members, computed, runs, tags, began, bulk)
            trim_heap()

    def here(self, members: list[Job]) -> None:
        """One group computed in this process (its runs shown while it trains), then
        recorded; a group that fails as a whole runs its jobs one at a time."""

        tags = member_tags(members)
        for t in tags.values():
            t[WORKER] = "main"
        runs = self.training[id(members)] = {}
        began, bulk = int(time.time() * 1000), _in_bulk(members[0].plain)
        # (out of memory, a bug): nothing is lost, each job runs alone
        shown = {"sweep_dir": self.sweep_dir, "runs": runs, "began": began, "bulk": bulk}
        computed = engines.safe(partial(train_showing_runs, tags=tags, **shown), members, tags)
        del self.training[id(members)]
        self.record_group(members, computed, runs, tags, began, bulk)
        del computed, runs
        # the group's arrays and records, freed: back to the system, not kept for the next group
        trim_heap()


def member_tags(members: list[Job]) -> dict[int, dict[str, str]]:
    """Each job's tags as a member of this group: the group's id and
    size, its trajectory's id, its packing's."""
    group_id = uuid.uuid4().hex[:12]
    out = {}
    for traj in trajectories(members):
        tags = {
            LAUNCHER: "batched",
            GROUP: group_id,
            GROUP_SIZE: str(len(members)),
            TRAJECTORY: uuid.uuid4().hex[:12],
        }
        for job in traj:
            out[job.idx] = tags | ({packing.TAG: job.pack} if job.pack else {})
    return out


# A group of at most this many members opens its runs before it trains, on
# any store: a Ctrl-C or SIGTERM then never lands in the middle of a run's
# creation (see train_showing_runs). On a SQL store (the embedded SQLite one)
# runs are created a chunk of this many in one transaction (~1.5 ms a run).
AHEAD_ALWAYS = 64
# On a SQL store a group of at most this many members opens its runs before it trains
# (~1.5 s for 1,000); a larger one opens them while it trains (below), and those it
# has not reached when it ends are created a chunk at a time, in one transaction
# each, just before their jobs record (10,000 ahead took ~15 s before training).
AHEAD_BULK = 1024
# On a server (~30 ms a run, one request after another: 30 s before the first job line for 1,000
# members) a group larger than AHEAD_ALWAYS, or on a SQL store one larger than AHEAD_BULK, still
# training after this many seconds shows its members' runs RUNNING while it trains (created from the
# launching thread, started when the group began, as many as its training lasts for); a shorter
# group does not pay for creating them ahead: on a server its jobs create their runs as they record.
AHEAD_AFTER_S = 1.0


def _knob(name: str, default: float) -> float:
    """SWEEPER_AHEAD_BULK, SWEEPER_AHEAD_AFTER_S: other values than the defaults
    above (the tests take the large-group paths with a few members)."""
    value = number(os.environ.get(name, default))
    return default if value is None else value


def train_showing_runs(
    members: list[Job],
    tags: dict[int, dict[str, str]],
    sweep_dir: Path,
    runs: dict[int, Any],
    began: int | None = None,
    bulk: bool = False,
) -> dict[int, compute.Computed]:
    """:func:`compute_group`, the members' runs opened into ``runs`` (:func:`open_runs`, starting
    at ``began``, ms) before it trains when that is cheap (:data:`AHEAD_ALWAYS`; :data:`AHEAD_BULK`
    when ``bulk``: the store creates them a chunk a transaction, :func:`_in_bulk`); else it trains
    on a thread of its own and, once it has trained :data:`AHEAD_AFTER_S`, the runs are opened
    while it goes on, until it ends. Raises what the group raised; on Ctrl-C or SIGTERM (which stop
    the group at its next epoch: sweeper.base.stop) once the group has ended."""
    began = began or int(time.time() * 1000)
    if len(members) <= AHEAD_ALWAYS or (
        bulk and len(members) <= _knob("SWEEPER_AHEAD_BULK", AHEAD_BULK)
    ):
        open_runs(members, tags, sweep_dir, runs, began)
        return compute_group(members, tags)
    # Known gap (a server store only): a signal that lands while a run is being
    # created here can leave that request's connection open until the process ends
    out: dict[str, Any] = {}

    def train() -> None:
        try:
            out["computed"] = compute_group(members, tags)
        except BaseException as e:  # noqa: BLE001  (raised again in the launching thread)
            out["error"] = e

    worker = threading.Thread(target=train, name="sweeper-group-train", daemon=True)
    worker.start()
    try:
        worker.join(_knob("SWEEPER_AHEAD_AFTER_S", AHEAD_AFTER_S))
        if worker.is_alive():
            open_runs(members, tags, sweep_dir, runs, began, until=lambda: not worker.is_alive())
        while worker.is_alive():
            worker.join(0.1)  # in short waits: Ctrl-C reaches this thread
    finally:  # after an exception (Ctrl-C too); a no-op once the group has ended
        worker.join(5.0)  # the group stops at its next epoch (STOP is set before the exception)
    if "error" in out:
        raise out["error"]
    return out["computed"]


def _in_bulk(plain: dict[str, Any]) -> bool:
    """Whether the store creates a group's runs in one transaction a
    chunk (a SQL store: the embedded SQLite one)."""

    try:
        return bulk.creates_in_bulk(tracking.client(plain["tracking"]["uri"]))
    # a store that fails: open_runs says so, the jobs create their runs
    except tracking.failures():
        return False


def _open_next(
    chunk: list[Job],
    computed: dict[int, compute.Computed],
    tags: dict[int, dict[str, str]],
    sweep_dir: Path,
    began: int,
) -> bool:
    """Create in one transaction the runs of the jobs of ``chunk`` that were computed
    without one (a large group's members its training did not reach) and hand each to
    its job. False when the store failed (said once): the jobs then create theirs."""
    wanting = [job for job in chunk if job.idx in computed and computed[job.idx].run is None]
    made: dict[int, Any] = {}
    open_runs(wanting, tags, sweep_dir, made, began, sample=False)
    for idx, run in made.items():
        computed[idx].run = run
    return bool(made) or not wanting


def open_runs(
    members: list[Job],
    tags: dict[int, dict[str, str]],
    sweep_dir: Path,
    runs: dict[int, Any],
    start_time: int | None = None,
    until: Any = None,
    sample: bool = True,
) -> None:
    """Create the members' runs RUNNING (name, tags, params) while the group trains, so the UI
    lists them, a chunk of :data:`AHEAD_ALWAYS` after another (one transaction each on the
    embedded store: all or none) until ``until()`` says stop (the group has ended: the other
    jobs create theirs as they record); they start at ``start_time`` (ms: when the group began);
    the group's system metrics are sampled on them. A store that fails leaves the jobs to create
    theirs. Each chunk's runs go into ``runs`` as they are made, so the caller holds every one
    a Ctrl-C in the middle leaves (to end them KILLED and stop their system metrics)."""

    try:
        # a chunk a transaction (the embedded store), until told
        for i in range(0, len(members), AHEAD_ALWAYS):
            if until is not None and until():
                break
            chunk = members[i : i + AHEAD_ALWAYS]
            items = []
            for job in chunk:
                overrides = (
                    list(job.config.hydra.overrides.task)
                    if job.config is not None
                    else job.overrides
                )
                items.append(
                    (
                        job.plain,
                        JobContext(sweep_dir / str(job.idx), overrides, sweep_dir, job.idx),
                        tags[job.idx],
                    )
                )
            runs.update(zip((job.idx for job in chunk), record.start_many(items, start_time)))
    except (BackendUnavailable, *tracking.UNREACHABLE) as e:
        log.warning("the group's runs could not be created ahead (%s); each job creates its own", e)
        _drop(runs)
        runs.clear()
        return
    if sample and runs and members[0].plain["tracking"]["system_metrics"]:
        first, *rest = runs.values()
        first.sample_system(also=rest, min_s=members[0].plain["tracking"]["system_metrics_min_s"])


def _system(runs: dict[int, Any]) -> list[Any]:
    """Stop the group's system metrics; the samples not logged yet."""
    return next(iter(runs.values())).system_samples() if runs else []


def _drop(runs: dict[int, Any]) -> None:
    """Delete runs created ahead that no outcome comes with (the
    group failed: its jobs run alone, and make theirs)."""
    _each_run(runs, lambda t: t.client.delete_run(t.run_id))


def _each_run(runs: dict[int, Any], call: Callable[[Any], Any]) -> None:
    """``call(tracked)``, a store's call, for each of a group's runs (opened ahead), best effort:
    a store gone (tracking.UNREACHABLE) is one warning per run, and the report marks such a run
    an orphan later (a retried group's run keeps its first worker's tags); a bug is raised."""
    for tracked in runs.values():
        try:
            call(tracked)
        except tracking.UNREACHABLE as e:
            log.warning(
                "run %s: %s", tracked.run_id, str(e).splitlines()[0] if str(e) else type(e).__name__
            )


def hand_runs(computed: dict[int, compute.Computed], runs: dict[int, Any]) -> None:
    """Give each computed job its run and the group's system metrics;
    delete the runs of the others."""
    system = _system(runs)
    for idx, c in computed.items():
        c.run, c.system = runs.pop(idx, None), system
    _drop(runs)


# user code that would end the process raises UserCodeError: its members fail (engines.group_failed)
@guarded
def compute_group(
    members: list[Job], tags: dict[int, dict[str, str]] | None = None
) -> dict[int, compute.Computed]:
    """Train the group on its device and score every member: ``{job idx: Computed}``.
    The jobs' trajectories (:func:`sweeper.sweep.groups.trajectories`) are the
    group's members; each job is read off its own at its ``epochs``. Raises on a
    failure of the whole group (the caller retries its jobs one at a time)."""
    t_start = time.perf_counter()
    trajs = trajectories(members)
    heads = [t[-1].plain for t in trajs]  # each trajectory's longest configuration
    cfg0 = heads[0]
    if (backend := resolved(cfg0["device"])) is None:
        return {}  # each job records SKIPPED through the one-job path
    splits = [data.split_seed(h["data"]) for h in heads]
    if len(set(splits)) > 1 and split_features(cfg0):  # plan() never makes such a group
        raise ValueError(
            "text features are fitted on each split: a group's members need one data.split_seed"
        )
    # the group's units: each trajectory on its one split, or on each of its k folds (other
    # rows, as other split seeds: sweeper.job.crossval makes a configuration's one outcome of them)
    fold_ids = data.fold_indexes(cfg0["data"])
    units = [(t, s, f) for t, s in enumerate(splits) for f in fold_ids]
    datasets = {(s, f): data.load_plain(cfg0["data"], s, f) for _, s, f in units}
    counts = [tuple(sorted({j.plain["epochs"] for j in t})) for t in trajs]
    trained = _train_units(backend, cfg0, heads, counts, units, datasets)
    if trained is None:
        return {}  # the model does not batch (said once): each job runs through the one-job path
    out = _outcomes(
        backend,
        cfg0["dtype"],
        trajs,
        len(fold_ids),
        units,
        datasets,
        trained,
        tags or member_tags(members),
    )
    wall = (time.perf_counter() - t_start) / len(members)
    for c in out.values():
        c.wall_time_s = wall
    return out


@dataclass
class _Trained:
    """What a group's batches left, per unit (a trajectory on one split or fold)."""

    # each configuration read off the unit: epochs → (fit, weights)
    at: dict[int, Any] = field(default_factory=dict)
    # the unit's share of its batch's training time
    share: dict[int, float] = field(default_factory=dict)
    model_of: dict[int, Any] = field(default_factory=dict)  # the unit's weights → a model to score
    group_time: float = 0.0
    warmup: float = 0.0
    h2d: float = 0.0


def _train_units(
    backend: Any,
    cfg0: dict[str, Any],
    heads: list[dict[str, Any]],
    counts: list[tuple[int, ...]],
    units: list[tuple],
    datasets: dict[tuple, Any],
) -> _Trained | None:
    """The units trained, a batched group for each set whose arrays
    stack; None when the model does not batch."""
    dtype, task = cfg0["dtype"], datasets[units[0][1:]].task
    # members train together when their arrays stack: folds of unequal size (by
    # one row), a fold's own vocabulary (text) or a mini-batch group's one
    # order of rows make sub-groups, each trained as a batched group of its own
    batches: dict[Any, list[int]] = {}
    for u, (_, s, f) in enumerate(units):
        ds = datasets[(s, f)]
        key = (
            (s, f)
            if split_features(cfg0) or cfg0["batch_size"]
            else (ds.X_train.shape, ds.X_val.shape)
        )
        batches.setdefault(key, []).append(u)
    names = ("X_train", "y_train", "X_val", "y_val")
    out = _Trained()
    total = sum(counts[t][-1] for t, _, _ in units)
    done_before = 0
    with compute.progress_bar(total, unit="member-epoch") as progress:
        for idx in batches.values():
            t_h2d = backend.clock()
            own = list(dict.fromkeys(units[u][1:] for u in idx))
            if len(own) == 1:
                arrays = [
                    backend.to_device(getattr(datasets[own[0]], a).astype(dtype)) for a in names
                ]
            else:
                arrays = [
                    backend.to_device(
                        np.stack([getattr(datasets[units[u][1:]], a) for u in idx]).astype(dtype)
                    )
                    for a in names
                ]
            offset = done_before
            first = datasets[units[idx[0]][1:]]  # a text fold's features are its own vocabulary's
            trained = train_members(
                backend,
                cfg0,
                (first.n_features, first.n_outputs, task),
                [heads[units[u][0]] for u in idx],
                [counts[units[u][0]] for u in idx],
                arrays,
                t_h2d,
                progress=(lambda done, _, o=offset: progress(o + done, math.nan, math.nan))
                if progress
                else None,
            )
            if trained is None:
                return None
            fit, batch_h2d, models_of = trained
            out.group_time, out.warmup, out.h2d = (
                out.group_time + fit.train_time_s,
                out.warmup + fit.warmup_time_s,
                out.h2d + batch_h2d,
            )
            for u, at, model_of in zip(idx, fit.at, models_of):
                out.at[u], out.share[u], out.model_of[u] = at, fit.train_time_s / len(idx), model_of
            done_before += sum(counts[units[u][0]][-1] for u in idx)
    return out


def _outcomes(
    backend: Any,
    dtype: str,
    trajs: list[list[Job]],
    per_config: int,
    units: list[tuple],
    datasets: dict[tuple, Any],
    trained: _Trained,
    tags: dict[int, dict[str, str]],
) -> dict[int, compute.Computed]:
    """Every job scored on its unit's fit at its epochs (``per_config`` units each: its split,
    or its folds), made one outcome by :func:`sweeper.job.crossval.outcome`, with its share of the
    time."""
    count = sum(map(len, trajs))
    outcomes: dict[int, list[compute.Outcome]] = {}
    for u, (t, s, f) in enumerate(units):
        traj, ds = trajs[t], datasets[(s, f)]
        epochs = [j.plain["epochs"] for j in traj]
        # the member's share of its batch (1/K), then each
        # configuration's share of the epochs it needed
        for job, share in zip(traj, shares(epochs, trained.share[u])):
            member_fit, member_params = trained.at[u][job.plain["epochs"]]
            member_fit.train_time_s = share
            member_fit.warmup_time_s = trained.warmup / (count * per_config)
            outcome = compute.evaluate(
                dataset=ds,
                backend=backend,
                model=trained.model_of[u](member_params),
                fit=member_fit,
                dtype=dtype,
                h2d_time_s=trained.h2d / (count * per_config),
            )
            outcome.scores["group_train_time_s"] = trained.group_time
            outcomes.setdefault(job.idx, []).append(outcome)
    out = {}
    for traj in trajs:
        for job in traj:
            outcome = crossval.outcome(outcomes[job.idx])
            out[job.idx] = compute.Computed(outcome, tags[job.idx] | form_tags(backend, job.plain))
    return out
