"""Every core of the machine: the local engine's CPU groups compute in
worker processes, side by side.

``hydra.launcher.cpu_workers`` (default: the cores this process may use,
``os.sched_getaffinity``; 1: one group after another in the launching process, as before)
worker processes, started once per sweep while its store opens (:func:`warm`: spawned,
each imports the compute half and loads the sweep's data sets), compute the CPU groups,
one group a worker at a time, each with one BLAS thread (``OMP_NUM_THREADS=1``,
threadpoolctl; ``SWEEPER_THREADS=1``: an epoch in one block). The launching process opens
each group's runs RUNNING when a worker takes it and records every member as it always
does, as the groups finish. A worker runs :func:`sweeper.sweep.launch.compute_group` as it
is, through :func:`sweeper.sweep.engines.compute_remote`: job lists in, NumPy arrays out.

- A CPU group that is more than its share of the workers' work splits into chunks of whole
  trajectories (:func:`chunked`), so a one-group sweep of 64 learning rates uses every
  core. The memory budget a group is sized with is shared by the workers (:func:`budget`).
- A worker that dies loses its group only: the group goes to a new
  worker once more, then its members run alone in the launching process
  (the one-job path), as a group that fails as a whole always has.
- GPU groups keep one a device (:func:`sweeper.sweep.engines._local`),
  on a thread of the launching process.
- Ctrl-C (SIGINT/SIGTERM reach the launching process; the workers ignore
  SIGINT): the groups that finished are recorded, the workers are
  stopped, the runs of the groups they held end KILLED with the sweep.

Each member's run says where its group ran: tag ``sweeper.batch_worker`` (``cpu<i>``:
worker i; ``main``: the launching process), with ``sweeper.worker_pid``.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import functools
import json
import logging
import math
import os
import queue
import socket
import sys
import threading
import time
import types
from typing import Any, Callable, Iterator

from sweeper import data
from sweeper.base import state
from sweeper.base.output import first_line
from sweeper.base.tags import ENGINE, WORKER, WORKER_HOST, WORKER_PID
from sweeper.base.process import exit_with_parent, oom_kills, sent, usable_cpus
from sweeper.base.stop import shielded
from sweeper.models.usercode import UserCodeError

__all__ = [
    "WORKERS_PAY_S",
    "budget",
    "chunked",
    "computed_groups",
    "cores",
    "declined",
    "estimated_s",
    "stop",
    "warm",
    "workers",
]

log = logging.getLogger("sweeper")

# What a worker's native libraries and sweeper's epoch blocks get: one
# thread each (the workers are the threads).
ONE_THREAD = types.MappingProxyType(
    {
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "SWEEPER_THREADS": "1",
    }
)
LAUNCHER = "sweeper_batched_launcher"


def cores() -> int:
    """The CPUs this process may use."""
    return usable_cpus()


def workers(launcher: Any, cpu: list[dict[str, Any]]) -> int:
    """How many worker processes compute this sweep's CPU groups (``cpu``: their
    configurations, plain): ``hydra.launcher.cpu_workers``, never more than its CPU
    configurations; 1 under another engine (which places groups itself). Unset (null),
    every core when workers pay (:func:`pays`), else 1: this process trains. ``launcher``:
    the launcher or its composed config, each holding every key (defaults: the plugin's)."""
    get = launcher.get if hasattr(launcher, "get") else functools.partial(getattr, launcher)
    if get("engine") != "local":
        return 1
    asked = get("cpu_workers")
    n = max(1, min(int(asked or cores()), len(cpu)))
    return n if asked or n == 1 or pays(cpu, n) else 1


# What a CPU configuration's training costs, roughly: each member-epoch's fixed part
# (a step's dozens of NumPy calls on small arrays) and its multiply-adds at one core's
# rate for small products. Fitted on this 2-core machine: the quick start (diabetes, 2
# x 5000 epochs, width 16: 0.48 s), a digits grid (6.7e10 multiply-adds in 11 s).
MEMBER_EPOCH_S = 3e-5
MULTIPLY_ADDS_PER_S = 6e9
# Starting a worker (a fresh interpreter, its imports and data sets) takes
# ~1 s of a core, beside the store's opening; a sweep whose training would
# end less than this much sooner on n workers than here trains here.
WORKERS_PAY_S = 1.5


def declined(launcher: Any, cpu: list[dict[str, Any]], n: int) -> str:
    """The plan line's words when this process trains the CPU groups
    because workers would not pay ('' else)."""
    get = launcher.get if hasattr(launcher, "get") else functools.partial(getattr, launcher)
    if n > 1 or get("cpu_workers") or get("engine") != "local":
        return ""
    m = min(cores(), len(cpu))
    if m < 2:
        return ""
    return (
        f"; trained here (~{estimated_s(cpu):.1f} s of training: {m} worker processes would cost "
        "more than they "
        f"save; hydra.launcher.cpu_workers={m} uses them)"
    )


def estimated_s(cpu: list[dict[str, Any]]) -> float:
    """The training of these CPU configurations on one core, in seconds
    (a trajectory trains once, to its longest epochs): a rough estimate,
    enough to tell a sweep of a second from one of a minute."""
    # lazy: saves ~226 ms at this module's import (measured)
    from sweeper.sweep.groups import Job, trajectories

    total = 0.0
    for t in trajectories([Job(i, [], None, p) for i, p in enumerate(cpu)]):
        total += _cost(t) / MULTIPLY_ADDS_PER_S + t[-1].plain["epochs"] * MEMBER_EPOCH_S
    return total


def pays(cpu: list[dict[str, Any]], n: int) -> bool:
    """Whether ``n`` worker processes shorten the training of these
    CPU configurations by more than they cost."""
    return estimated_s(cpu) * (1 - 1 / n) > WORKERS_PAY_S


def budget(max_group_bytes: int, n: int) -> int:
    """A group's memory budget when ``n`` workers each hold one: the sweep's
    budget (0: a quarter of the machine's memory) shared among them."""
    # lazy: saves ~221 ms at this module's import (measured)
    from sweeper.sweep.groups import default_budget

    return (max_group_bytes or default_budget()) // max(1, n)


def chunked(groups: list[list[Any]], n: int) -> list[list[Any]]:
    """The groups, a CPU group split into chunks of whole trajectories when it is more than its
    share of the ``n`` workers' work (:func:`_cost`): into
    ``ceil(n x its cost / all the CPU groups' cost)`` chunks (no more than its trajectories),
    its trajectories by their longest epochs (a chunk trains to its longest member) cut into
    that many contiguous runs. So a sweep with fewer CPU groups than workers uses every worker,
    and one group that dwarfs the others does not keep one worker busy while the rest wait."""

    # lazy: saves ~255 ms at this module's import (measured)
    from sweeper.sweep.groups import trajectories

    cpu = [g for g in groups if g[0].plain["device"] != "gpu"]
    if not cpu or n < 2:
        return groups
    # a CPU/GPU sweep: the speedup pairs a CPU group with a GPU group of its size
    if len(cpu) < len(groups):
        log.info(
            "CPU groups left whole (a sweep with GPU groups: speedups compare groups of one size)"
        )
        return groups
    trajs = {id(g): sorted(trajectories(g), key=lambda t: t[-1].plain["epochs"]) for g in cpu}
    costs = {id(g): _cost(g) for g in cpu}
    total = sum(costs.values()) or 1.0
    out = []
    for g in groups:
        if id(g) not in trajs:
            out.append(g)
            continue
        t = trajs[id(g)]
        k = max(1, min(len(t), math.ceil(n * costs[id(g)] / total - 1e-9)))
        if k == 1:
            out.append(g)
            continue
        edges = [round(i * len(t) / k) for i in range(k + 1)]
        out += [[j for traj in t[a:b] for j in traj] for a, b in zip(edges, edges[1:])]
    out = _even_tail(out, n)
    if len(out) > len(groups):
        log.info(
            "%d CPU group(s) split into %d chunks of whole trajectories for %d workers",
            len(cpu),
            len(out) - (len(groups) - len(cpu)),
            n,
        )
    return out


# What a chunk costs besides its training, in :func:`_cost`'s units
# (multiply-adds): its start, its results sent back and scored, ~80 ms of one
# core here (a digits chunk of 2 x 1200 epochs at width 128, depth 2: 6.7e10 in
# 11 s). A split that saves less than that is not made: small groups stay whole.
TASK_COST = 5e8
# ... nor one that ends the whole less than 2% sooner (the cost model is a rough one)
MIN_GAIN = 0.02


def _even_tail(chunks: list[list[Any]], n: int) -> list[list[Any]]:
    """The chunks, the one that would end last on ``n`` workers (handed out costliest
    first, each to the first free worker, as :func:`computed_groups` does) split in
    two, again while that ends the whole sooner: with groups of unequal work the last
    one to train is a tail on one worker while the others wait (a 32-configuration
    digits grid: 3.2 s of its 23 s of training on one of two workers)."""
    # lazy: saves ~255 ms at this module's import (measured)
    from sweeper.sweep.groups import trajectories

    def makespan(costs: list[float]) -> tuple[float, int]:
        loads, last = [0.0] * n, [0] * n
        for i in sorted(range(len(costs)), key=lambda i: -costs[i]):
            w = loads.index(min(loads))
            loads[w] += costs[i] + TASK_COST
            last[w] = i
        w = loads.index(max(loads))
        return loads[w], last[w]

    costs = [_cost(c) for c in chunks]
    for _ in range(2 * n):
        end, i = makespan(costs)
        t = sorted(trajectories(chunks[i]), key=lambda t: t[-1].plain["epochs"])
        if len(t) < 2:
            break
        half = len(t) // 2
        parts = [[j for traj in t[:half] for j in traj], [j for traj in t[half:] for j in traj]]
        split = chunks[:i] + parts + chunks[i + 1 :]
        split_costs = costs[:i] + [_cost(p) for p in parts] + costs[i + 1 :]
        if makespan(split_costs)[0] > end * (1 - MIN_GAIN):
            break
        chunks, costs = split, split_costs
    return chunks


def _cost(members: list[Any]) -> float:
    """A group's work, roughly: each trajectory's longest epochs x an epoch's multiply-adds (rows
    x (features x width + (depth - 1) x width^2 + width x outputs), its own depth and width: a
    packed group's trajectories differ in them). The costliest groups go to the workers first."""
    # lazy: saves ~255 ms at this module's import (measured)
    from sweeper.sweep.groups import trajectories

    rows, features, outputs = _shape(members[0].plain)
    total = 0.0
    for t in trajectories(members):
        depth, width = t[-1].plain["depth"], t[-1].plain["width"]
        epoch = rows * (
            (features * width + max(0, depth - 1) * width * width + width * outputs)
            if depth
            else features * outputs
        )
        total += t[-1].plain["epochs"] * max(epoch, 1)
    return total


def _shape(plain: dict[str, Any]) -> tuple[int, int, int]:
    """The training rows, features and outputs of a configuration's
    data (the launcher's cached copy)."""

    ds = _loaded(plain.get("data"))
    return (ds.X_train.shape[0], ds.n_features, ds.n_outputs) if ds is not None else (1, 1, 1)


def _loaded(node: Any, seed: int | None = None) -> Any:
    """The launcher's cached copy of a data set (:func:`sweeper.data.load_plain`), or None: no
    data node, a file gone, bad data: the group fails in its own words later."""
    if node is None:
        return None
    try:
        return data.load_plain(node, seed)
    # a file gone or unreadable (OSError), bad data (data.DataError, a ValueError)
    except (OSError, ValueError):
        return None


# --- the workers ----------------------------------------------------------------------------------


def _serve(conn: Any, index: int, warm: list[tuple[dict, int]]) -> None:
    """A worker: one BLAS thread, the compute half imported and the data sets loaded,
    then groups until told to stop (``None``) or the launching process goes (EOF)."""
    # lazy: saves ~4.5 ms at this module's import (measured)
    from sweeper.base import stop

    stop.ignore()  # Ctrl-C, SIGTERM, SIGHUP are the launching process's to handle: it stops us

    # a kill -9 of the launching process: this worker ends at once, quietly (not after its group)
    exit_with_parent()
    os.environ.update(ONE_THREAD)
    # lazy: saves ~7.3 ms at this module's import (measured)
    from threadpoolctl import threadpool_limits

    # BLAS loaded before this function ran (the parent's __main__ was imported)
    threadpool_limits(1)
    # lazy: saves ~227 ms at this module's import (measured)
    import sweeper.job.compute  # noqa: F401  (compute_group's imports, before the first group)

    # lazy: saves ~139 ms at this module's import (measured)
    from sweeper.models import batched  # noqa: F401
    from sweeper.sweep import engines

    for node, seed in warm:
        _loaded(node, seed)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        compute, job, spec = msg
        try:
            out: tuple = (True, engines.compute_remote(compute, job, spec))
        # the group's own error: its members run alone (its line: any error's pickles); the
        # user's code that would have ended this worker: its members FAILED with why
        except Exception as e:  # noqa: BLE001  (the worker's one boundary)
            out = (False, e if isinstance(e, UserCodeError) else first_line(e))
        if not sent(conn, out):  # the launching process is gone: nobody records it
            return


class Worker:
    def __init__(self, ctx: Any, index: int, warm: list[tuple[dict, int]]) -> None:
        self.index, self.pid = index, None
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=_serve, args=(child, index, warm), name=f"sweeper-cpu{index}", daemon=True
        )
        # lazy: saves ~11 ms at this module's import (measured)
        from multiprocessing import resource_tracker

        # first: starting it unblocks SIGINT and SIGTERM in this thread again
        resource_tracker.ensure_running()
        with _main_hidden(), shielded():  # a terminal's Ctrl-C as it starts: not its to take
            self.proc.start()
        child.close()

    def receive(self) -> Any:
        """The next message that is not the worker's "ready" (raises EOFError once it died)."""
        while True:
            msg = self.conn.recv()
            if isinstance(msg, tuple) and msg[:1] == ("ready",):
                self.pid = msg[1]
                if not self.conn.poll():
                    return None
                continue
            return msg

    def stop(self, wait: float = 1.0) -> None:
        sent(self.conn, None)  # a worker gone: joined at once
        self.proc.join(wait)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(1.0)
        self.conn.close()


@contextlib.contextmanager
def _main_hidden() -> Iterator[None]:
    """A spawned worker runs the launching process's ``__main__`` again (multiprocessing's
    rule): sweeper's own (``python -m sweeper``) is guarded, but a user's script that
    calls ``sweeper.multirun()`` at its top level is not, and every worker would start
    that sweep again. Any other main is hidden while a worker starts."""
    main = sys.modules.get("__main__")
    if main is None or getattr(getattr(main, "__spec__", None), "name", None) == "sweeper.__main__":
        yield
        return
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


class Pool:
    """``n`` warm workers (spawned: a fresh interpreter each, nothing
    of the launching process's threads or store connections)."""

    def __init__(self, n: int, warm: list[tuple[dict, int]]) -> None:
        # lazy: saves ~7.1 ms at this module's import (measured)
        import multiprocessing

        self.ctx, self.warm = multiprocessing.get_context("spawn"), warm
        self.workers = [Worker(self.ctx, i, warm) for i in range(n)]

    def grow(self, n: int) -> None:
        self.workers += [Worker(self.ctx, i, self.warm) for i in range(len(self.workers), n)]

    def replace(self, w: Worker) -> Worker:
        w.stop(0.0)
        self.workers[w.index] = Worker(self.ctx, w.index, self.warm)
        return self.workers[w.index]

    def stop(self) -> None:
        for w in self.workers:
            w.stop(0.0 if w.proc.exitcode is not None else 1.0)
        self.workers = []


def warm(config: Any, jobs: list[tuple[list[str], dict[str, Any]]]) -> None:
    """With the batched launcher's local engine and more than one worker, start the workers
    now, so that their imports and data sets load while this process opens the store."""
    launcher = config.hydra.launcher
    # this sweep's pool (one), from warm() or the first launch
    if LAUNCHER not in str(launcher.get("_target_", "")) or state.process().pool is not None:
        return
    cpu = [cfg for _, cfg in jobs if cfg and cfg.get("device") != "gpu"]
    n = workers(launcher, cpu)
    if n > 1:
        _start(n, cpu)


def _start(n: int, plains: list[dict[str, Any]]) -> Pool:

    nodes = {json.dumps(c["data"], sort_keys=True, default=str): c["data"] for c in plains if c}
    warm_data = [(node, data.split_seed(node)) for node in nodes.values()][:8]
    pool = Pool(n, warm_data)
    state.process().pool = pool
    # at exit, before multiprocessing's own handler (atexit runs last-registered first;
    # multiprocessing registered its handler as the pool started): that one SIGTERMs
    # daemonic children, which the workers ignore (a SIGTERM to the whole sweep is the
    # launching process's), then joins them for ever — a refused sweep never exited
    atexit.unregister(stop)
    atexit.register(stop)
    log.info(
        "%d CPU worker processes started (hydra.launcher.cpu_workers), one BLAS thread each", n
    )
    return pool


def stop() -> None:
    """End the sweep's workers (at its end, on Ctrl-C, at exit)."""
    p = state.process()
    pool, p.pool = p.pool, None
    if pool is not None:
        pool.stop()


atexit.register(stop)


# --- computing the groups -------------------------------------------------------------------------


def computed_groups(
    launcher: Any,
    groups: list[list[Any]],
    compute: Callable,
    n: int,
    taking: Callable[[list[Any], dict[str, str]], dict[int, dict[str, str]]],
) -> Iterator[tuple[list[Any], dict[int, Any]]]:
    """Each group with what its compute gave (``{job idx: Computed}``; empty: its
    members run alone), in the order the groups finish: the CPU groups on ``n``
    workers, the GPU ones on this node's devices (a thread). ``taking(members, where)``
    runs in this thread as a worker takes a group (``where``: the worker's tags; the
    group's runs are opened there) and gives the members' tags, ``where`` included."""
    # lazy: saves ~139 ms at this module's import (measured)
    from sweeper.sweep import engines

    cpu = [g for g in groups if g[0].plain["device"] != "gpu"]
    gpu = [g for g in groups if g[0].plain["device"] == "gpu"]
    pool = state.process().pool or _start(n, [m.plain for g in cpu for m in g[:1]])
    pool.grow(n)
    done: queue.Queue = queue.Queue()
    if gpu:
        threading.Thread(
            target=engines.on_gpus,
            args=(gpu, compute, launcher.gpus, done),
            name="sweeper-gpu-groups",
            daemon=True,
        ).start()
    todo = collections.deque((g, 1, None) for g in sorted(cpu, key=_cost, reverse=True))
    # worker index: (members, attempt, the tags its runs have, the
    # host's out-of-memory kills when it was sent)
    busy: dict[int, tuple[list[Any], int, Any, int | None]] = {}
    left = len(gpu)
    t0, used = time.perf_counter(), set()
    try:
        while todo or busy or left:
            _hand_out(pool, n, todo, busy, compute, taking)
            yield from _collected(pool, n, todo, busy, used, 0.05 if left else 1.0)
            while left:
                try:
                    members, computed = done.get_nowait()
                except queue.Empty:
                    break
                if members is None:
                    raise computed
                left -= 1
                yield members, computed
    except KeyboardInterrupt:
        # finished as Ctrl-C came
        for w in [w for w in pool.workers[:n] if w.index in busy and w.conn.poll()]:
            members = busy.pop(w.index)[0]
            msg = w.receive()
            if msg is not None:
                yield members, _got(members, msg, w)
        stop()
        raise
    log.info(
        "CPU groups computed on %d worker process%s in %.1f s",
        len(used),
        "" if len(used) == 1 else "es",
        time.perf_counter() - t0,
    )


def _hand_out(
    pool: Pool,
    n: int,
    todo: collections.deque,
    busy: dict[int, Any],
    compute: Callable,
    taking: Callable,
) -> None:
    """Each idle worker of the first ``n`` sent the next group of
    ``todo`` (one that died idle, killed from outside, replaced first),
    its runs' tags from ``taking``; ``busy`` keeps what it holds."""
    # lazy: saves ~139 ms at this module's import (measured)
    from sweeper.sweep import engines

    for w in list(pool.workers[:n]):
        if w.index not in busy and todo:
            members, attempt, tags = todo.popleft()
            # died idle (killed from outside): a new one takes the group
            if w.proc.exitcode is not None:
                w = pool.replace(w)
            tags = taking(
                members,
                {
                    WORKER: f"cpu{w.index}",
                    WORKER_PID: str(w.proc.pid),
                    WORKER_HOST: socket.gethostname(),
                    ENGINE: "local",
                },
            )
            w.conn.send(
                (functools.partial(compute, tags=tags), type(members[0]), engines._spec(members))
            )
            busy[w.index] = (members, attempt, tags, oom_kills())


def _collected(
    pool: Pool,
    n: int,
    todo: collections.deque,
    busy: dict[int, Any],
    used: set[int],
    timeout: float,
) -> Iterator[tuple[list[Any], dict[int, Any]]]:
    """The groups the busy workers finish within ``timeout`` s (``used``: the
    workers that computed one). A worker that died is replaced; its group goes
    back to ``todo`` once, then its members run alone (:func:`engines.lost`)."""
    # lazy: saves ~11 ms at this module's import (measured)
    from multiprocessing.connection import wait

    # lazy: saves ~139 ms at this module's import (measured)
    from sweeper.sweep import engines

    watched = [w for w in pool.workers[:n] if w.index in busy]
    ready = set(wait([w.conn for w in watched] + [w.proc.sentinel for w in watched], timeout))
    for w in watched:
        if w.conn not in ready and w.proc.sentinel not in ready:
            continue
        members, attempt, tags, ooms = busy[w.index]
        try:
            msg = w.receive() if w.conn.poll() else None
            if msg is None and not w.proc.is_alive():
                raise EOFError(
                    f"worker cpu{w.index} (pid {w.proc.pid}) exited with code {w.proc.exitcode}"
                )
        except (EOFError, OSError):
            del busy[w.index]
            pool.replace(w)
            lost = engines.lost(members, attempt, tags, w.index, w.proc.exitcode, ooms)
            if lost is None:
                todo.appendleft((members, 2, tags))
            else:
                yield members, lost
            continue
        if msg is None:
            continue
        del busy[w.index]
        used.add(w.index)
        yield members, _got(members, msg, w, tags)


def _got(members: list[Any], msg: tuple, w: Worker, tags: Any = None) -> dict[int, Any]:
    # lazy: saves ~63 ms at this module's import (measured; engines does not import cores)
    from sweeper.sweep import engines

    ok, got = msg
    if not ok:
        return engines.group_failed(
            members, got if isinstance(got, BaseException) else RuntimeError(got), tags
        )
    computed = engines._received(got, "local")
    for c in computed.values():
        c.tags[WORKER] = f"cpu{w.index}"
    return computed
