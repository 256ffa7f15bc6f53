"""K configurations of one network shape trained together: one batched epoch for the whole group.

Members share the shape (inputs ``d``, ``depth``, ``width``, outputs, activation, task, dtype), the
sampling stride ``log_every``, the update rule (:class:`models.optim.Optimizer`: gd, momentum with or
without Nesterov, Adam; weight decay) and the batch size; each has its own learning rate, initial weights
(its seed), epoch count and patience. Training is deterministic, so a member with fewer epochs is a
prefix of the group's run: it is *frozen* at its own epoch count (its rate set to 0 and its optimizer
state zeroed, so its update is 0), never removed.

A member is a *trajectory*: it may carry more epoch counts (``Member.reads``), configurations that differ from
it only in ``epochs``, each read off it at its own count ``c`` as :func:`models.train.train` gives it alone —
the losses sampled at the multiples of the stride below ``c`` and at ``c`` (every count is a sampled epoch of
the group, and so is its end), the best and divergence among those samples, and the weights at ``c``: a
device-side copy taken in the epoch loop, or with patience the best so far (the candidate or the kept best
weights, chosen by the host at that sample). A divergence after ``c`` leaves that configuration finished.
:class:`GroupFit` ``at`` holds every configuration's fit and weights. With mini-batches (``batch_size`` between 1 and n - 1)
the members also share the seed, so they share the data and each epoch's row order (drawn as
:class:`models.mlp.MiniBatches` draws it): a step gathers its rows once for the whole group.

Weights are kept transposed and stacked over members, ``Wt_l`` of shape ``(K, fan_out, fan_in)`` and
``b_l`` of shape ``(K, fan_out, 1)``; activations are feature-major, ``A_l`` of shape ``(K, width, n)``, and
so are the logits ``z`` ``(K, k, n)`` (k = 1, or the classes: softmax and cross-entropy as in
:mod:`models.losses`).
With ``X`` of shape ``(n, d)`` shared by every member, the first layer is one matrix product for the
whole group, and so is its weight gradient::

    Z_0 = [Wt_0^(1); …; Wt_0^(K)] @ X.T        (K·w, d) @ (d, n) → (K·w, n), viewed as (K, w, n)
    G_0 = D_0 @ X                              (K·w, n) @ (n, d)

Deeper layers are batched products (``(K, fo, fi) @ (K, fi, n)``, one cuBLAS strided-batched call on the
GPU) and every elementwise pass runs over all members at once. When members differ in their split (a
seed sweep), each has its own data, ``X`` of shape ``(K, n, d)``, and the first layer is batched too.

Sparse text features (a SciPy CSR ``X``, or ``cupyx.scipy.sparse`` on the GPU) stay sparse: the first
layer is the one-configuration trainer's sparse product (:func:`models.mlp._sparse_product` and
``_sparse_grad``), on the GPU over the whole group's ``P_0 = [W_0; b_0]`` of shape ``(d + 1, K·fo)``::

    Z_0.T = X @ P_0[:-1] + P_0[-1]             (n, d) sparse @ (d, K·fo) → (n, K·fo), one product
    G_0   = [X.T @ D_0.T; D_0 summed over n]   (d, n) sparse (CSR) @ (n, K·fo), one product

and on the CPU over each member's ``(d + 1, fo)`` block, one product per member: SciPy's product reads a
row of the dense operand per stored value, and a member's block stays in cache where the group's does not
(K = 16, fo = 64, d = 1k–34k on sms: the per-member products took 0.5–0.7× the time of one wide product).
``P_0`` is never a copy: on sparse data the stacked ``Q_0`` (K, fo, d + 1) keeps its memory in
``(d + 1, K, fo)`` order (the GPU) or ``(K, d + 1, fo)`` order (the CPU) (:func:`sparse_layout`), so the
products' operands are views of it and of its gradient (:func:`first_layer`), and the update stays one
add. Nothing builds ``[X.T; 1]``.

The loss gradient carries each member's :meth:`~models.optim.Optimizer.grad_scale` (``-lr``, or 1 for Adam)
and a 0/1 *active* mask, as in :class:`models.mlp.FullBatch`; the update is :class:`models.optim.State`'s
calls on the stacked arrays, with ``lr`` an array ``(K, 1, 1)`` (weight decay shrinks ``Q_0[..., :-1]`` and
every ``Wt_l``, never a bias).
The host looks at the sampled losses only at segment ends (at most ``MAX_CHECKS`` plus one per
distinct epoch count, or every ``log_every`` epochs when a member has patience), with one copy each.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from sweeper.base.backend import is_sparse
from sweeper.base.stop import STOP, Stopped
from sweeper.models import losses
from sweeper.models.activations import ACTIVATIONS
from sweeper.models.mlp import init_params
from sweeper.models.optim import Optimizer, State
from sweeper.models.train import MAX_CHECKS, TrainResult, diverged, sample_stride
from sweeper.models.batched_pass import _Pass, _mini_batch_calls, sparse_layout, weight_parts


@dataclass(frozen=True)
class Member:
    """One configuration's own hyperparameters inside a group."""

    lr: float
    epochs: int
    patience: int = 0
    seed: int = 0
    reads: tuple[int, ...] = ()  # more epoch counts read off this member's trajectory (each at most ``epochs``)

    @property
    def counts(self) -> tuple[int, ...]:
        """The epoch counts of the configurations read off this member, ascending; the last is ``epochs``."""
        return tuple(sorted({*self.reads, self.epochs}))


def stacked_params(sizes: list[int], activation: str, seeds: Sequence[int], dtype: str) -> list[np.ndarray]:
    """``[Q_0, Wt_1, b_1, ..., Wt_L, b_L]`` stacked over members, each member drawn by :func:`init_params`
    with its own seed (so member k starts exactly where a one-configuration run of seed k starts).

    ``Q_0 = [W_0; b_0].T`` of shape ``(K, fan_out, d + 1)`` carries the first layer's bias in its last
    column (the data get a row of ones); deeper layers keep ``Wt_l = W_l.T`` ``(K, fan_out, fan_in)``
    and ``b_l.T`` ``(K, fan_out, 1)`` apart."""
    per = [init_params(sizes, activation, s, dtype) for s in seeds]
    out = [np.ascontiguousarray(np.stack([np.concatenate([p[0], p[1]]).T for p in per]))]
    for l in range(1, len(sizes) - 1):
        out.append(np.ascontiguousarray(np.stack([p[2 * l].T for p in per])))  # (K, fo, fi)
        out.append(np.ascontiguousarray(np.stack([p[2 * l + 1].T for p in per])))  # (K, fo, 1)
    return out


def member_params(stacked: list[np.ndarray], m: int) -> list[np.ndarray]:
    """Member ``m``'s ``[W_0, b_0, W_1, b_1, ...]`` in :class:`models.mlp.MLP`'s layout, from host arrays."""
    Q = stacked[0][m]
    return [Q[:, :-1].T.copy(), Q[:, -1:].T.copy(), *(a[m].T.copy() for a in stacked[1:])]


def group_bytes(k: int, n: int, n_val: int, sizes: list[int], itemsize: int, shared: bool, copies: int = 0,
                nnz: tuple[int, int] | None = None) -> int:
    """Device memory one group of ``k`` members holds while it trains (buffers, weights, data); ``copies``
    more arrays of the weights' size per member (an optimizer's state, a trajectory's snapshots).

    ``nnz`` (the stored values of the training and the validation matrix) for sparse data: the data are
    then the CSR matrices (the training one twice, as ``X`` and ``X.T``; int32 indices) instead of a dense
    ``[X.T; 1]``, and every member adds its columns of the sparse products' results (``X @ W`` on both
    sets, the copy of ``D_0.T``, ``X.T @ D_0.T``)."""
    hidden, out = sum(sizes[1:-1]), sizes[-1]
    per_member = (n * (3 * hidden + 3 * out) + n_val * (hidden + out)  # activations, D, scratch; output, g
                  + (4 + copies) * sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:])))  # weights, grads, copies
    if nnz is None:
        data = (n + n_val) * (sizes[0] + 1) * (1 if shared else k) * itemsize
    else:
        index = 4
        data = (2 * nnz[0] + nnz[1]) * (itemsize + index) + (2 * n + n_val + sizes[0] + 3) * index
        per_member += sizes[1] * (2 * n + n_val + sizes[0])
    return k * per_member * itemsize + data


@dataclass
class GroupFit:
    """What a group's training leaves on the host."""

    fits: list[TrainResult]  # per member, as :func:`models.train.train` returns for one configuration
    params: list[list[np.ndarray]]  # per member ``[W_0, b_0, ...]`` in :class:`models.mlp.MLP`'s layout
    train_time_s: float  # the whole group's training, between two device synchronisations
    warmup_time_s: float
    host_reads: int  # device→host copies made while training (one per segment)
    # per member, each configuration read off its trajectory: epoch count → (its fit, its weights)
    at: list[dict[int, tuple[TrainResult, list[np.ndarray]]]] = field(default_factory=list)


# Members per thread below which a group is not split across CPU threads (Python's per-call cost and
# the GIL then outweigh a second core).
MIN_PART = 8


def train_group(
    backend: Any,
    params: list[np.ndarray],
    activation: str,
    task: str,
    X: Any,
    y: Any,
    X_val: Any,
    y_val: Any,
    members: Sequence[Member],
    *,
    log_every: int,
    progress: Callable[[int, int], None] | None = None,
    threads: int | None = None,
    opt: Optimizer | None = None,
    batch_size: int = 0,
) -> GroupFit:
    """Train the group's stacked ``params`` (see :func:`stacked_params`) on device arrays.

    ``X`` is (n, d) shared by all members or (K, n, d), ``y`` (n, 1) or (K, n, 1); likewise the
    validation arrays (``y`` holds class indices for a multi-class task). Each member's result is what
    :func:`models.train.train` would return for it alone with the same ``opt`` (gradient descent by default),
    ``batch_size`` and seed (to rounding). ``progress(done, total)`` counts member-epochs at segment ends.

    Mini-batches (``0 < batch_size < n``) need members that share their seed (it draws the rows' order) and
    so their data: a ValueError otherwise.

    On the CPU the members are split into ``threads`` parts (default: the CPUs this process may use, as
    the one-configuration trainer's column blocks) that train side by side, each on one BLAS thread:
    the members are independent, so the parts never meet until the end. ``train_time_s`` is then the
    longest part's.
    """
    from sweeper.base.backend import cpu_threads

    K = len(members)
    opt = opt or Optimizer()
    if 0 < batch_size < X.shape[-2] and (X.ndim == 3 or len({m.seed for m in members}) > 1):
        raise ValueError(f"batch_size={batch_size}: the members of a mini-batch group must share their seed "
                         f"and data, got seeds {sorted({m.seed for m in members})}")
    rule = (opt, batch_size)
    if threads is None:
        threads = cpu_threads() if backend.device == "cpu" else 1
    parts = min(threads, K // MIN_PART)
    if parts < 2:
        return _train_part(backend, params, activation, task, (X, y, X_val, y_val), members, log_every, progress, rule)
    from concurrent.futures import ThreadPoolExecutor
    import threading

    chunks = np.array_split(np.arange(K), parts)
    halt = threading.Event()  # set when this thread stops waiting for the parts (see below)
    done = [0] * parts
    lock = threading.Lock()

    def part(i: int, idx: np.ndarray) -> GroupFit:
        def report(d: int, total: int) -> None:
            with lock:
                done[i] = d
                if progress is not None:
                    progress(sum(done), int(sum(m.epochs for m in members)))

        own = [a[idx] if a.ndim == 3 else a for a in (X, y, X_val, y_val)]
        return _train_part(backend, [p[idx] for p in params], activation, task, own, [members[j] for j in idx],
                           log_every, report, rule, halt)

    with backend.host_threads(0.0, 1), ThreadPoolExecutor(parts, thread_name_prefix="sweeper-group") as pool:
        try:
            fits = list(pool.map(part, range(parts), chunks))
        except BaseException:  # Ctrl-C (or a part's error) in this thread: the other parts stop at their next
            halt.set()  # epoch, so the pool's exit does not wait for the whole group's training
            raise
    return GroupFit([f for g in fits for f in g.fits], [p for g in fits for p in g.params],
                    max(g.train_time_s for g in fits), max(g.warmup_time_s for g in fits),
                    sum(g.host_reads for g in fits), [a for g in fits for a in g.at])


@np.errstate(over="ignore", invalid="ignore")  # divergence is detected and reported, not warned about
def _train_part(backend: Any, params: list[np.ndarray], activation: str, task: str, arrays: Sequence[Any],
                members: Sequence[Member], log_every: int, progress: Callable[[int, int], None] | None,
                rule: tuple[Optimizer, int], halt: Any = None) -> GroupFit:
    """:func:`train_group` on one thread; ``arrays`` are its ``X, y, X_val, y_val``, ``rule`` its optimizer and
    batch size. It ends with :class:`sweeper.base.stop.Stopped` at the next epoch once Ctrl-C or SIGTERM set
    ``STOP``, or its caller set ``halt`` (an Event)."""
    part = _Part(backend, params, task, arrays, members, log_every, rule)
    return part.train(ACTIVATIONS[activation], progress, halt)


class _Part:
    """One thread's share of a group: its sampled epochs and per-member state (here), the device loop
    (:meth:`train`), the host's look at the sampled losses (:meth:`read`, :meth:`on_sample`: divergence, the best
    epoch, patience, each configuration read off a trajectory) and the results per count (:meth:`results`)."""

    def __init__(self, backend: Any, params: list[np.ndarray], task: str, arrays: Sequence[Any],
                 members: Sequence[Member], log_every: int, rule: tuple[Optimizer, int]) -> None:
        X = arrays[0]
        self.backend, self.xp, self.task, self.arrays, self.members = backend, backend.xp, task, arrays, members
        self.opt, batch_size = rule
        self.K = K = len(members)
        self.dtype = X.dtype
        self.lr = np.array([m.lr for m in members], dtype=np.float64)
        self.epochs = np.array([m.epochs for m in members])
        self.patience = np.array([m.patience for m in members])
        self.counts = [m.counts for m in members]
        self.E = E = int(self.epochs.max())
        self.stride = stride = sample_stride(E, log_every)
        # the sampled epochs: every stride's, every configuration's own count (its curve's last point), and E
        self.schedule = sorted({*range(0, E, stride), *(c for cs in self.counts for c in cs)})
        self.slot = {t: i for i, t in enumerate(self.schedule)}
        self.dev = [backend.to_device(p) for p in params]
        if is_sparse(X):  # the CPU: one sparse product per member; the GPU: one for the group (see the docstring)
            self.dev[0] = sparse_layout(self.xp, self.dev[0], per_member=backend.device == "cpu")
        self.active = np.ones(K)
        self.n = n = X.shape[-2]
        self.step_rows = batch_size if 0 < batch_size < n else n
        # grad_scale(lr) · active · dL/dz's constant per member, for each number of rows a step takes
        self.scales = {m: self.xp.empty((K, 1, 1), dtype=self.dtype)
                       for m in sorted({self.step_rows, n % self.step_rows} - {0})}
        self.state = State(self.xp, self.dev, self.opt, self.lr.reshape(K, 1, 1), weight_parts((len(self.dev) - 1) // 2))
        self.set_scale()
        self._plan_reads()
        self._start_records()

    def _plan_reads(self) -> None:
        """The segments' ends (where the host reads the samples) and, without patience, the device copies of the
        weights at a trajectory's shorter counts."""
        E, stride, xp = self.E, self.stride, self.xp
        self.hist = xp.full((len(self.schedule), self.K), xp.nan, dtype=self.dtype)
        self.vhist = xp.full((len(self.schedule), self.K), xp.nan, dtype=self.dtype)
        self.any_patience = bool(self.patience.any())
        if self.any_patience:  # one sample a segment: the host picks the best weights among the candidates
            self.ends = self.schedule[1:]
        else:
            step = stride * math.ceil(math.ceil(E / stride) / MAX_CHECKS)
            self.ends = sorted({*range(step, E, step), *map(int, self.epochs), E})
        # without patience a configuration's weights at a count below its trajectory's last are a device copy taken
        # in the loop (no host decision); with patience the host takes it from the candidate or the best so far
        self.copy_at: dict[int, list[int]] = {}
        if not self.any_patience:
            for m, cs in enumerate(self.counts):
                for c in cs[:-1]:
                    self.copy_at.setdefault(c, []).append(m)
        self.snaps: dict[tuple[int, int], list[Any]] = {}

    def _start_records(self) -> None:
        """What the host keeps per member while the group trains."""
        K = self.K
        self.best_val = np.full(K, math.inf)
        self.best_epoch = np.zeros(K, dtype=int)
        self.best = [p.copy() for p in self.dev] if self.any_patience else None
        self.kept = np.zeros(K, dtype=bool)  # best weights taken for this member
        self.candidate: list[Any] = []
        self.ended: list[int | None] = [None] * K  # the epoch a member stopped training at (its last count, or patience)
        self.done = np.zeros(K, dtype=bool)  # nothing more to read off this member
        self.ran = self.epochs.copy()  # epochs each member trains (progress)
        # per member, count → (diverged, run, best, weights)
        self.out: list[dict[int, tuple[int | None, int, int, Any]]] = [{} for _ in range(K)]
        self.curve = np.full((2, len(self.schedule), K), np.nan)
        self.first: np.ndarray | None = None
        self.reads = 0

    def set_scale(self) -> None:
        """The members' step factors and rates, from their rates and the active mask."""
        K = self.K
        for rows, scale in self.scales.items():
            factor = self.opt.grad_scale(self.lr) * self.active * losses.grad_constant(self.task, rows)
            scale[...] = self.backend.to_device(factor.reshape(K, 1, 1).astype(self.dtype))
        self.state.set_lr((self.lr * self.active).reshape(K, 1, 1))

    def freeze(self, m: int) -> None:
        """No further update of member ``m``: a rate of 0 (:meth:`set_scale`) and no state carried over."""
        self.active[m] = 0
        for buf in self.state.buffers:
            buf[m] = 0

    def on_sample(self, m: int, t: int, h: float, v: float) -> None:
        """Member ``m``'s sample at epoch ``t``: the configurations that end there, then its own trajectory."""
        ended, out, patience, kept = self.ended, self.out[m], self.patience, self.kept
        if ended[m] is None and t >= self.epochs[m]:  # the group's last epoch, sampled with the last segment's read
            ended[m] = int(self.epochs[m])
        regular = ended[m] is None and t % self.stride == 0 and t < self.epochs[m]
        here = [c for c in self.counts[m] if c not in out and (c == t or (ended[m] is not None and c >= t))]
        if not regular and not here:
            return
        bad = diverged(np.array([h]), np.array([v]), self.first[m]) is not None
        better = v < self.best_val[m]
        for c in here:
            if bad:
                out[c] = (t, t, int(self.best_epoch[m]), None)
                continue
            if ended[m] is not None:
                weights: Any = "final" if better or not (patience[m] and kept[m]) else "best"
            elif patience[m] and kept[m] and not better:
                weights = [b[m].copy() for b in self.best]
            elif self.any_patience:
                weights = [p[m].copy() for p in self.candidate]
            else:
                weights = self.snaps.pop((m, c))
            out[c] = (None, t, t if better else int(self.best_epoch[m]), weights)
        if ended[m] is not None and t >= ended[m]:
            self.done[m] = True
        if not regular:
            return
        if bad:  # frozen for good; every longer configuration diverged here too
            for c in self.counts[m]:
                out.setdefault(c, (t, t, int(self.best_epoch[m]), None))
            self.ran[m] = t
            self.done[m] = True
            self.freeze(m)
            for p in self.dev:  # finite arithmetic from here on; the member's weights are not used
                p[m] = 0
            return
        if better:
            self.best_val[m], self.best_epoch[m] = v, t
            if patience[m]:
                for b_, c_ in zip(self.best, self.candidate):
                    b_[m] = c_[m]
                kept[m] = True

    def sample(self, t: int) -> None:
        """Device work: both losses on the weights before epoch ``t``'s update (and the copies taken there)."""
        measured, val = self.measured, self.val
        measured.run(measured.forward_calls)
        k = self.slot[t]
        self.hist[k] = measured.loss()
        val.run(val.forward_calls)
        self.vhist[k] = val.loss()
        if self.any_patience:
            self.candidate[:] = [p.copy() for p in self.dev]
        for m in self.copy_at.get(t, ()):
            self.snaps[(m, t)] = [p[m].copy() for p in self.dev]

    def read(self, lo: int, hi: int) -> bool:
        """The host's look at the samples of epochs [lo, hi); whether a member changed."""
        schedule = self.schedule
        k0, k1 = bisect.bisect_left(schedule, lo), bisect.bisect_left(schedule, hi)
        if k1 <= k0:
            return False
        block = self.backend.to_numpy(self.xp.stack([self.hist[k0:k1], self.vhist[k0:k1]]))  # (2, k1 - k0, K)
        self.reads += 1
        self.curve[:, k0:k1] = block
        if self.first is None:
            self.first = block[0, 0].copy()
        was = self.active.copy()
        for i in range(k1 - k0):
            for m in np.flatnonzero(~self.done):
                self.on_sample(m, schedule[k0 + i], float(block[0, i, m]), float(block[1, i, m]))
        return bool((was != self.active).any())

    def _passes(self, act: Any) -> None:
        """The group's passes (a step per number of rows, the validation pass, the one that measures the training
        loss) and the calls an epoch makes; a warm-up of every call but the update (CuPy compiles its kernels)."""
        xp, dev, task, (X, y, X_val, y_val) = self.xp, self.dev, self.task, self.arrays
        # a step's targets are its own (a copy): mini-batches gather theirs into them
        steps = {rows: _Pass(xp, dev, act, task, X[..., :rows, :], y[..., :rows, :].copy(), scale, self.state)
                 for rows, scale in self.scales.items()}
        self.val = _Pass(xp, dev, act, task, X_val, y_val, None)
        for warm in steps.values():
            warm.run(warm.forward_calls)
            warm.loss()
            warm.run(warm.backward_calls)
        if self.step_rows == self.n:  # full batch: a sampled epoch measures the loss on the forward pass it trains with
            self.measured = measured = steps[self.n]
            self.epoch_calls = measured.forward_calls + measured.backward_calls + measured.update_calls
            self.rest = measured.backward_calls + measured.update_calls
        else:  # mini-batches: the training loss is the whole training set's, before the epoch's steps
            self.measured = measured = _Pass(xp, dev, act, task, X, y, None)
            self.epoch_calls = self.rest = _mini_batch_calls(xp, measured, steps, self.step_rows, self.members[0].seed)
            measured.run(measured.forward_calls)
            measured.loss()
        self.val.run(self.val.forward_calls)
        self.val.loss()

    def train(self, act: Any, progress: Callable[[int, int], None] | None, halt: Any) -> GroupFit:
        """The device loop, segment by segment, with the host's read at each segment's end."""
        mark = self.backend.mark_fn  # the phases, for the strict device stand-in's accounts (a no-op elsewhere)
        mark("warm-up", 0)
        t_warm = self.backend.clock()
        active, epochs, patience, slot, E = self.active, self.epochs, self.patience, self.slot, self.E
        # One BLAS thread on the CPU: on this 2-core machine with another process busy, K=64 float32 ran at
        # 181k configuration-epochs/s on one thread and 8.5k on two (OpenBLAS's threads spin and wait).
        with self.backend.host_threads(0.0, 1):
            self._passes(act)
            measured, epoch_calls, rest = self.measured, self.epoch_calls, self.rest
            t0 = self.backend.clock()
            epoch = 0
            for stop in self.ends:
                if not active.any():
                    break
                for e in range(epoch, stop):  # device work only
                    mark("epoch", e)
                    if STOP.is_set() or (halt is not None and halt.is_set()):  # Ctrl-C, SIGTERM: within an epoch
                        raise Stopped()
                    if e in slot:
                        self.sample(e)
                        measured.run(rest)
                    else:
                        measured.run(epoch_calls)
                mark("segment end", stop)
                last = stop == E and not self.any_patience  # (with patience a segment's one candidate is its one sample)
                if last:  # the last epoch's sample leaves with this segment's
                    self.sample(E)
                changed = self.read(epoch, stop + last)
                for m in np.flatnonzero(active):
                    if stop >= epochs[m] or (patience[m] and stop % self.stride == 0
                                             and stop - self.best_epoch[m] >= patience[m]):
                        self.ended[m] = self.ran[m] = stop
                        self.freeze(m)
                        changed = True
                if changed:
                    self.set_scale()
                epoch = stop
                if progress is not None:
                    progress(int(np.minimum(self.ran, epoch).sum()), int(epochs.sum()))
            mark("end", epoch)
            if not self.done.all():  # the last sample: the members that stopped at this epoch
                self.sample(epoch)
                self.read(epoch, epoch + 1)
            t1 = self.backend.clock()
        return self.results(t1 - t0, t0 - t_warm)

    def results(self, train_s: float, warmup_s: float) -> GroupFit:
        """Every configuration read off every member: its curve up to its count, and its weights on the host."""
        to_numpy, schedule, stride, curve = self.backend.to_numpy, self.schedule, self.stride, self.curve
        final = [to_numpy(p) for p in self.dev]
        kept_best = [to_numpy(p) for p in self.best] if self.best is not None else None
        at: list[dict[int, tuple[TrainResult, list[np.ndarray]]]] = []
        for m in range(self.K):
            mine: dict[int, tuple[TrainResult, list[np.ndarray]]] = {}
            for c, (div, run, best_at, weights) in self.out[m].items():
                idx = [self.slot[t] for t in schedule if t == run or (t < run and t % stride == 0)]
                fit = TrainResult(steps=np.array([schedule[i] for i in idx]), train_loss=curve[0, idx, m].astype(self.dtype),
                                  val_loss=curve[1, idx, m].astype(self.dtype), epochs_run=run, best_epoch=best_at,
                                  diverged_at=div, train_time_s=train_s, warmup_time_s=warmup_s)
                if weights is None or weights == "final":
                    host = member_params(final, m)
                elif weights == "best":
                    host = member_params(kept_best, m)
                else:
                    host = member_params([to_numpy(w)[None] for w in weights], 0)
                mine[c] = (fit, host)
            at.append(mine)
        return GroupFit([a[int(e)][0] for a, e in zip(at, self.epochs)], [a[int(e)][1] for a, e in zip(at, self.epochs)],
                        train_s, warmup_s, self.reads, at)
