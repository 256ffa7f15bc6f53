"""Where the batched launcher's groups compute: ``hydra.launcher.engine``.

The launcher plans the groups (:func:`sweeper.sweep.launch.plan`) and records every member
itself, in the launching process (one MLflow run and one Hydra job folder per configuration);
an engine only runs each group's compute half (:func:`sweeper.sweep.launch.compute_group`,
wrapped here, never changed) and hands back what it computed, as NumPy arrays (weights,
curves, predictions, scores): no model objects, no store, no shared folder.

- ``local`` (the default): in this process. With several GPUs
  (``hydra.launcher.gpus``, default: all visible), GPU groups compute at once, one
  per device (CuPy's ``Device`` context, chosen per group), and CPU groups beside
  them on one thread; with one, groups compute one after another as they always did.
- ``ray``: each group a Ray task (``num_gpus=1`` for a GPU group, 0 for a
  CPU group) on the cluster at ``hydra.launcher.ray.address`` (default: a
  new local one); Ray retries a task whose worker died (``max_retries``).
- ``submitit_local`` / ``submitit_slurm``: each group a submitit job (an
  array per device kind), options under ``hydra.launcher.submitit``.

A group lost with its worker is retried once more after the engine's own retries;
then its members run alone in the launching process (the one-job path), as a
group that fails as a whole always has. Either way each member is recorded once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from hydra_plugins.sweeper_batched_launcher.config import first_problem

from sweeper.base.backend import current_gpu, gpu_count, on_gpu
from sweeper.base.tags import (
    ENGINE,
    GPU_DEVICE,
    GROUP_SIZE,
    LAUNCHER,
    WORKER,
    WORKER_HOST,
    WORKER_PID,
)
from sweeper.base.output import first_line
from sweeper.base.process import oom_kills
from sweeper.contract.config import ConfigError
from sweeper.job.compute import Computed, Outcome
from sweeper.models.interface import offer
from sweeper.models.usercode import UserCodeError

__all__ = [
    "check",
    "compute_remote",
    "computed_groups",
    "elsewhere",
    "group_failed",
    "lost",
    "on_gpus",
    "ray_exposure",
    "safe",
]

log = logging.getLogger("sweeper")

Groups = Iterator[tuple[list[Any], dict[int, Any]]]


def check(launcher_conf: Any) -> None:
    """A key of ``hydra.launcher`` outside what it allows, in one line (:class:`ConfigError`),
    before the sweep touches the store: the same check as the command line's
    (:func:`hydra_plugins.sweeper_batched_launcher.config.problem`, beside each key)."""
    line = first_problem(launcher_conf)
    if line:
        raise ConfigError(line)


def elsewhere(launcher: Any, groups: list[list[Any]]) -> bool:
    """Whether the groups compute on an engine (not ``local``) or on several GPUs of
    this node at once; else the launcher computes them one after another itself."""
    if launcher.engine != "local":
        return True

    on_gpus = sum(g[0].plain["device"] == "gpu" for g in groups)
    return on_gpus > 1 and min(launcher.gpus or gpu_count(), on_gpus) > 1


def computed_groups(
    launcher: Any, groups: list[list[Any]], compute: Callable[[list[Any]], dict[int, Any]]
) -> Groups:
    """Each group with what its compute gave, ``{job idx: Computed}``
    (empty: its members run alone), in the order the groups finish."""
    engine = launcher.engine
    if not groups:
        return
    if engine == "local":
        yield from _local(groups, compute, launcher.gpus)
    elif engine == "ray":
        yield from _ray(groups, compute, dict(launcher.ray))
    else:
        yield from _submitit(
            groups,
            compute,
            engine.split("_", 1)[1],
            dict(launcher.submitit),
            Path(str(launcher.config.hydra.sweep.dir)),
        )


def group_failed(
    members: list[Any], e: BaseException, tags: dict[int, dict[str, str]] | None = None
) -> dict[int, Any]:
    """A group that failed as a whole (out of memory, a bug): said once; nothing is lost, each
    job runs alone. A group whose user code ended its process
    (:class:`~sweeper.models.usercode.UserCodeError`: ``sys.exit``, ``os._exit``, its own
    KeyboardInterrupt) is not run again in the launching process: each member FAILED with why."""

    if isinstance(e, UserCodeError):
        return failed_members(members, str(e), tags, e.detail)
    log.warning(
        "group of %d failed as a whole (%s); retrying its configurations one at a time",
        len(members),
        first_line(e),
    )
    return {}


def failed_members(
    members: list[Any],
    reason: str,
    tags: dict[int, dict[str, str]] | None = None,
    detail: str | None = None,
) -> dict[int, Any]:
    """``{job idx: Computed}``: each member FAILED with ``reason`` (``detail``:
    the traceback, for its error file), recorded by its job without training it
    again. ``tags``: the members' group tags (None: a group's size only)."""

    out = {}
    for m in members:
        t = dict((tags or {}).get(m.idx) or {LAUNCHER: "batched", GROUP_SIZE: str(len(members))})
        if not offer(m.plain.get("model"), quiet=True).fast_path:
            t["model_batched"] = "false: its group failed as a whole"
        out[m.idx] = Computed(Outcome({}, {}, reason, error=detail), t)
    return out


def lost(
    members: list[Any], attempt: int, tags: Any, worker: int, code: int | None, ooms: int | None
) -> dict[int, Any] | None:
    """What becomes of a group whose CPU worker (``worker``: its index) died with exit
    ``code`` (``ooms``: the host's out-of-memory kills when it was sent,
    :func:`sweeper.base.process.oom_kills`): None, given to a new worker once more; or
    what its members get. Killed for memory (SIGKILL while the host's out-of-memory
    kills rose): never again at the same size (one trajectory FAILED with
    why; several: one at a time here, each first held to its memory estimate). Lost
    twice (a crash, an exit of the model's that sweeper's guard did not see): FAILED
    with why, not run in the launching process, where the same would end the sweep."""
    # lazy: saves ~174 ms at this module's import (measured)
    from sweeper.sweep.groups import trajectories

    if code == -9 and ooms is not None and (oom_kills() or 0) > ooms:
        if len(trajectories(members)) > 1:
            log.warning(
                "group of %d killed for memory (the kernel's out-of-memory killer ended worker "
                "cpu%d): its "
                "configurations run one at a time here, not again as one group",
                len(members),
                worker,
            )
            return {}
        why = (
            "killed for memory: the kernel's out-of-memory killer ended its worker process (cpu"
            f"{worker}) as it "
            "trained; not retried at the same size: expected smaller hyperparameters, "
            "dtype=float32 or fewer "
            "hydra.launcher.cpu_workers"
        )
        log.warning("group of %d %s", len(members), why)
        return failed_members(members, why, tags)
    if attempt == 1:
        log.warning(
            "group of %d lost with its worker (cpu%d: exit code %s); given to a new worker once "
            "more",
            len(members),
            worker,
            code,
        )
        return None
    why = (
        f"its worker process ended twice as it trained (exit code {code}: a crash, or an exit in "
        "the model's "
        "code): not run again in the launching process, which it would end too"
    )
    log.warning("group of %d lost twice: %s", len(members), why)
    return failed_members(members, why, tags)


def safe(
    compute: Callable[[list[Any]], dict[int, Any]],
    members: list[Any],
    tags: dict[int, dict[str, str]] | None = None,
) -> dict[int, Any]:
    """``compute(members)``, a group computed in this process; its own error (out of memory, a
    bug) is :func:`group_failed`'s to decide. Ctrl-C and SIGTERM go on to the caller."""
    try:
        return compute(members)
    except Exception as e:  # noqa: BLE001  (the one place a group's own error is decided here)
        return group_failed(members, e, tags)


# --- local: this process, every GPU of the node ---------------------------------------------------


def _local(groups: list[list[Any]], compute: Callable, gpus: int | None) -> Groups:
    on_gpu_groups = [g for g in groups if g[0].plain["device"] == "gpu"]
    devices = min(gpus or gpu_count(), len(on_gpu_groups)) if on_gpu_groups else 0
    if devices <= 1:
        for members in groups:
            yield members, safe(compute, members)
        return
    log.info(
        "%d GPU group(s) on %d devices at once, %d CPU group(s) beside them",
        len(on_gpu_groups),
        devices,
        len(groups) - len(on_gpu_groups),
    )
    todo: queue.Queue = queue.Queue()
    for g in on_gpu_groups:
        todo.put(g)
    done: queue.Queue = queue.Queue()
    threads = [
        threading.Thread(
            target=_gpu_worker, args=(i, todo, done, compute), name=f"sweeper-gpu{i}", daemon=True
        )
        for i in range(devices)
    ]
    threads.append(
        threading.Thread(
            target=_cpu_worker, args=(groups, done, compute), name="sweeper-cpu-groups", daemon=True
        )
    )
    for t in threads:
        t.start()
    for _ in groups:  # recorded here, in the launching thread (Hydra's run_job), as each group ends
        members, computed = done.get()
        if members is None:
            raise computed
        yield members, computed
    for t in threads:
        t.join()


def _into(done: queue.Queue, work: Groups) -> None:
    """A thread's groups into ``done`` as each ends; an exception (Ctrl-C, SIGTERM:
    :class:`sweeper.base.stop.Stopped`) as ``(None, e)``: raised again in the launching thread."""
    try:
        for got in work:
            done.put(got)
    except BaseException as e:  # noqa: BLE001  (the launching thread decides)
        done.put((None, e))


def _gpu_worker(index: int, todo: queue.Queue, done: queue.Queue, compute: Callable) -> None:
    """A thread on GPU ``index``: computes the groups it takes from
    ``todo`` (each run tagged with its device) into ``done``, until
    none is left; an exception goes to ``done`` as ``(None, e)``."""
    _into(done, _on_device(index, todo, compute))


def _on_device(index: int, todo: queue.Queue, compute: Callable) -> Groups:
    with on_gpu(index):
        while True:
            try:
                members = todo.get_nowait()
            except queue.Empty:
                return
            computed = safe(compute, members)
            for c in computed.values():
                c.tags[GPU_DEVICE] = str(current_gpu())
            yield members, computed


def _cpu_worker(groups: list[list[Any]], done: queue.Queue, compute: Callable) -> None:
    """A thread beside the GPU ones: computes the CPU groups of
    ``groups`` into ``done`` (an exception: ``(None, e)``)."""
    _into(done, ((m, safe(compute, m)) for m in groups if m[0].plain["device"] != "gpu"))


def on_gpus(groups: list[list[Any]], compute: Callable, gpus: Any, done: queue.Queue) -> None:
    """The batched launcher's GPU groups on this node's devices (:func:`_local`), on a thread of
    the launching process beside the CPU workers (:func:`sweeper.sweep.cores.computed_groups`):
    each into ``done``, its runs tagged ``main``; an exception as ``(None, e)``."""
    _into(done, _tagged_main(_local(groups, compute, gpus)))


def _tagged_main(groups: Groups) -> Groups:
    for members, computed in groups:
        for c in computed.values():
            c.tags.setdefault(WORKER, "main")
        yield members, computed


# --- what a remote worker runs and sends back -----------------------------------------------------


def _spec(members: list[Any]) -> list[tuple[int, list[str], dict[str, Any], str]]:
    """What a worker needs of a group: each member's number, overrides, resolved
    config (plain data) and the planner's packing decision (its tag)."""
    return [(m.idx, list(m.overrides), m.plain, m.pack) for m in members]


def compute_remote(
    compute: Callable, job: type, spec: list[tuple[int, list[str], dict[str, Any], str]]
) -> dict[int, Any]:
    """A group's compute half on a worker (``compute``: the launcher's ``compute_group``, ``job``:
    its ``Job``, both sent by reference): ``{idx: (Outcome, tags, wall_time_s)}``, NumPy arrays
    only (the data set stays behind: the launcher reads its own copy)."""
    # test-only: the first worker to see this file's absence dies
    die = os.environ.get("SWEEPER_TEST_DIE_ONCE")
    if die and not Path(die).exists():
        Path(die).write_text(str(os.getpid()))
        os.kill(os.getpid(), 9)
    # what the compute says (a model that does not batch...) is said where the user looks
    with _said() as said:
        computed = compute(
            [job(idx, overrides, None, plain, pack) for idx, overrides, plain, pack in spec]
        )
    where = {WORKER_HOST: socket.gethostname(), WORKER_PID: str(os.getpid())}
    # what the proof found for a user's model: the record half tags runs by it
    # lazy: saves ~137 ms at this module's import (measured)
    from sweeper.models import (
        stacked,
    )

    out: dict[Any, Any] = {
        idx: (c.outcome, {**c.tags, **where}, c.wall_time_s) for idx, c in computed.items()
    }
    return {SAID: said, VERDICTS: dict(stacked.verdicts()), **out}


# compute_remote's key for the log lines of its compute: [(logger name, level, message)]
SAID = "said"
VERDICTS = "verdicts"  # and for sweeper.models.stacked.verdicts() as the worker found them


@contextlib.contextmanager
def _said() -> Iterator[list[tuple[str, int, str]]]:
    """The INFO-and-above lines logged while the block runs (on a
    worker, where nobody reads its log)."""
    said: list[tuple[str, int, str]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append((record.name, record.levelno, record.getMessage()))

    root, keep = logging.getLogger(), Keep(logging.INFO)
    level = root.level
    root.addHandler(keep)
    root.setLevel(min(level, logging.INFO) if level else logging.INFO)
    try:
        yield said
    finally:
        root.removeHandler(keep)
        root.setLevel(level)


def _received(got: dict[int, tuple[Any, dict[str, str], float]], engine: str) -> dict[int, Any]:
    got = dict(got)
    for name, level, message in got.pop(SAID, ()):  # said on the worker: said here, once
        logging.getLogger(name).log(level, "%s", message)
    verdicts = got.pop(VERDICTS, None)
    if verdicts:  # the worker's proofs of a user's model: the record half tags runs by them
        # lazy: saves ~137 ms at this module's import (measured)
        from sweeper.models import stacked

        stacked.verdicts().update(verdicts)
    return {
        idx: Computed(outcome, {**tags, ENGINE: engine}, wall)
        for idx, (outcome, tags, wall) in got.items()
    }


def _alone(members: list[Any], e: BaseException) -> dict[int, Any]:
    log.warning(
        "group of %d lost twice (%s); its configurations run one at a time here",
        len(members),
        first_line(e),
    )
    return {}


# --- ray ------------------------------------------------------------------------------------------


def ray_exposure(joined: bool, env: Any) -> str | None:
    """What a local Ray cluster this sweep started exposes, said once (None when it joined a
    cluster of its own choosing). Ray 2.60's gRPC servers (GCS, raylet, workers) listen on
    every interface, and no option binds them to the loopback: ``_node_ip_address=127.0.0.1``
    changes the address Ray advertises, not where it listens (checked with ``ss -ltnp``). Its
    token authentication, on by default, is what keeps others out."""
    if joined:
        return None
    if str(env.get("RAY_AUTH_MODE", "")).lower() == "disabled":
        return (
            "ray: the local cluster this sweep started listens on every interface of this "
            "machine, and "
            "RAY_AUTH_MODE=disabled turned its token authentication off: anyone who reaches this "
            "machine can run "
            "code in it; unset RAY_AUTH_MODE, or firewall Ray's ports"
        )
    return (
        "ray: the local cluster this sweep started listens on every interface of this machine "
        "(Ray cannot bind "
        "it to 127.0.0.1); its token authentication (RAY_AUTH_MODE, on by default) keeps others "
        "out; on a shared "
        "machine, firewall Ray's ports too"
    )


def _ray(groups: list[list[Any]], compute: Callable, opts: dict[str, Any]) -> Groups:
    # here: ray is optional (the ray extra; measured: absent here)
    import ray

    if not ray.is_initialized():
        init = dict(opts.get("init") or {})
        address = opts.get("address")
        # with no address, a new local cluster (address="local": not
        # one that already runs on this machine)
        ray.init(
            address=address or "local", **({} if address else {"include_dashboard": False}), **init
        )
        exposure = ray_exposure(bool(address), os.environ)
        if exposure:
            log.warning(exposure)
    task = ray.remote(compute_remote)
    retries = int(opts.get("max_retries", 1))

    def submit(members: list[Any]) -> Any:
        gpu = members[0].plain["device"] == "gpu"
        return task.options(
            num_gpus=1 if gpu else 0, num_cpus=float(opts.get("num_cpus", 1)), max_retries=retries
        ).remote(compute, type(members[0]), _spec(members))

    lost = (
        ray.exceptions.WorkerCrashedError,
        ray.exceptions.NodeDiedError,
        ray.exceptions.OwnerDiedError,
        ray.exceptions.TaskUnschedulableError
        if hasattr(ray.exceptions, "TaskUnschedulableError")
        else (),
    )
    pending = {submit(g): (g, 1) for g in groups}
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        members, attempt = pending.pop(ready[0])
        try:
            yield members, _received(ray.get(ready[0]), "ray")
        except lost as e:
            if attempt == 1:
                log.warning(
                    "group of %d lost with its worker after Ray's retries (%s); submitted once "
                    "more",
                    len(members),
                    type(e).__name__,
                )
                pending[submit(members)] = (members, 2)
            else:
                yield members, _alone(members, e)
        except ray.exceptions.RayTaskError as e:  # the group's own error: as under the local engine
            yield members, _alone(members, e)


# --- submitit -------------------------------------------------------------------------------------


def _submitit(
    groups: list[list[Any]], compute: Callable, cluster: str, opts: dict[str, Any], sweep_dir: Path
) -> Groups:
    # lazy: saves ~44 ms at this module's import (measured)
    import submitit

    folder = Path(opts.get("folder") or sweep_dir / ".submitit" / "%j")
    executors = {}
    for gpu in (False, True):
        ex = submitit.AutoExecutor(folder=folder, cluster=cluster)
        params: dict[str, Any] = {
            "timeout_min": int(opts.get("timeout_min", 60)),
            "cpus_per_task": int(opts.get("cpus_per_task", 1)),
            "gpus_per_node": 1 if gpu else 0,
            "name": "sweeper-group",
        }
        if cluster == "slurm":
            params |= {
                k: v
                for k, v in (
                    ("slurm_partition", opts.get("partition")),
                    ("slurm_array_parallelism", opts.get("array_parallelism")),
                    ("slurm_additional_parameters", opts.get("additional_parameters")),
                )
                if v is not None
            }
        ex.update_parameters(**params)
        executors[gpu] = ex

    def submit(batch: Sequence[list[Any]]) -> dict[Any, list[Any]]:
        jobs = {}
        for gpu in (False, True):
            mine = [g for g in batch if (g[0].plain["device"] == "gpu") == gpu]
            if mine:
                with executors[gpu].batch():  # one array job per device kind
                    futures = [
                        executors[gpu].submit(compute_remote, compute, type(g[0]), _spec(g))
                        for g in mine
                    ]
                jobs |= dict(zip(futures, mine))
        return jobs

    pending = {job: (g, 1) for job, g in submit(groups).items()}
    while pending:
        finished = [j for j in pending if j.done()]
        if not finished:
            time.sleep(0.2)
            continue
        for job in finished:
            members, attempt = pending.pop(job)
            try:
                got = job.result()
            # the worker died (killed, out of time)
            except submitit.core.utils.UncompletedJobError as e:
                if attempt == 1:
                    log.warning(
                        "group of %d lost with its worker (job %s); submitted once more",
                        len(members),
                        job.job_id,
                    )
                    pending |= {j: (g, 2) for j, g in submit([members]).items()}
                else:
                    yield members, _alone(members, e)
                continue
            except Exception as e:  # noqa: BLE001  (FailedJobError: the group's own error)
                yield members, _alone(members, e)
                continue
            yield members, _received(got, f"submitit_{cluster}")
