"""K configurations trained together: one batched epoch for the whole group.

Members of one shape (inputs ``d``, ``depth``, ``width``, outputs, activation) are a *block*; a
group is one block, or several (a *packed* group: :mod:`models.packed`, one first-layer product
for every block, each block's deeper layers its own batched products). All members share the
task, dtype, the sampling stride ``log_every``, the update rule (:class:`models.optim.Optimizer`:
gd, momentum with or without Nesterov, Adam; weight decay) and the batch size; each has its own
learning rate, initial weights (its seed), epoch count and patience. Training is deterministic,
so a member with fewer epochs is a prefix of the group's run: it is *frozen* at its own epoch
count (its rate set to 0 and its optimizer state zeroed, so its update is 0), never removed.

A member is a *trajectory*: it may carry more epoch counts (``Member.reads``), configurations that
differ from it only in ``epochs``, each read off it at its own count ``c`` as
:func:`models.train.train` gives it alone — the losses sampled at the multiples of the stride below
``c`` and at ``c`` (every count is a sampled epoch of the group, and so is its end), the best and
divergence among those samples, and the weights at ``c``: a device-side copy taken in the epoch
loop, or with patience the best so far (the candidate or the kept best weights, chosen by the host
at that sample). A divergence after ``c`` leaves that configuration finished. :class:`GroupFit`
``at`` holds every configuration's fit and weights. With mini-batches (``batch_size`` between 1 and
n - 1) the members also share the seed, so they share the data and each epoch's row order (drawn as
:class:`models.mlp.MiniBatches` draws it): a step gathers its rows once for the whole group.

Weights are kept transposed and stacked over a block's members, ``Wt_l`` of shape
``(K, fan_out, fan_in)`` and ``b_l`` of shape ``(K, fan_out, 1)``, each a view of the group's one
flat array (:class:`models.packed.Layout`); activations are feature-major, ``A_l`` of shape
``(K, width, n)``, and so are the logits ``z`` ``(K, k, n)`` (k = 1, or the classes: softmax
and cross-entropy as in :mod:`models.losses`). With ``X`` of shape ``(n, d)`` shared by every
member, the first layer is one matrix product for the whole group, and so is its weight gradient::

    Z_0 = [Wt_0^(1); …; Wt_0^(K)] @ X.T        (K·w, d) @ (d, n) → (K·w, n), viewed as (K, w, n)
    G_0 = D_0 @ X                              (K·w, n) @ (n, d)

Deeper layers are batched products (``(K, fo, fi) @ (K, fi, n)``, one
cuBLAS strided-batched call on the GPU) and every elementwise pass runs over all members
at once. When members differ in their split (a seed sweep), each has its own data, ``X``
of shape ``(K, n, d)``, and the first layer is batched too.

Sparse text features (a SciPy CSR ``X``, or ``cupyx.scipy.sparse`` on the GPU)
stay sparse: the first layer is the one-configuration trainer's sparse product
(:func:`models.mlp._sparse_product` and ``_sparse_grad``), on the GPU over the whole
group's ``P_0 = [W_0; b_0]`` of shape ``(d + 1, K·fo)``::

    Z_0.T = X @ P_0[:-1] + P_0[-1]             (n, d) sparse @ (d, K·fo) → (n, K·fo), one product
    G_0   = [X.T @ D_0.T; D_0 summed over n]   (d, n) sparse (CSR) @ (n, K·fo), one product

and on the CPU over each member's ``(d + 1, fo)`` block, one product per member: SciPy's product
reads a row of the dense operand per stored value, and a member's block stays in cache where the
group's does not (K = 16, fo = 64, d = 1k–34k on sms: the per-member products took 0.5–0.7× the
time of one wide product). ``P_0`` is never a copy: on sparse data the stacked ``Q_0`` (K, fo,
d + 1) keeps its memory in ``(d + 1, K, fo)`` order (the GPU) or ``(K, d + 1, fo)`` order (the
CPU) (:func:`sparse_layout`), so the products' operands are views of it and of its gradient
(:func:`first_layer`), and the update stays one add. Nothing builds ``[X.T; 1]``.

The loss gradient carries each member's :meth:`~models.optim.Optimizer.grad_scale` (``-lr``,
or 1 for Adam) and a 0/1 *active* mask, as in :class:`models.mlp.FullBatch`; the update is
:class:`models.optim.State`'s calls on the stacked arrays, with ``lr`` an array ``(K, 1, 1)``
(weight decay shrinks ``Q_0[..., :-1]`` and every ``Wt_l``, never a bias). The host looks at
the sampled losses only at segment ends (at most ``MAX_CHECKS`` plus one per distinct epoch
count, or every ``log_every`` epochs when a member has patience), with one copy each.
"""

from __future__ import annotations

import bisect
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from sweeper.base.backend import cpu_threads, is_sparse
from sweeper.models import losses
from sweeper.models.activations import ACTIVATIONS
from sweeper.models.optim import Optimizer, State
from sweeper.models.train import MAX_CHECKS, TrainResult, diverged, sample_stride
from sweeper.models.batched_pass import _Pass, _mini_batch_calls

# their home was here
from sweeper.models.packed import Layout, Shape, group_bytes  # noqa: F401
from sweeper.models.packed import member_params, stacked_params  # noqa: F401


__all__ = [
    "MIN_PART",
    "Member",
    "group_bytes",
    "member_params",
    "stacked_params",
    "train_group",
    "train_packed",
]


@dataclass(frozen=True)
class Member:
    """One configuration's own hyperparameters inside a group."""

    lr: float
    epochs: int
    patience: int = 0
    seed: int = 0
    # more epoch counts read off this member's trajectory (each at most ``epochs``)
    reads: tuple[int, ...] = ()

    @property
    def counts(self) -> tuple[int, ...]:
        """The epoch counts of the configurations read off this member, ascending; the
        last is ``epochs``."""
        return tuple(sorted({*self.reads, self.epochs}))


@dataclass
class GroupFit:
    """What a group's training leaves on the host."""

    # per member, as :func:`models.train.train` returns for one configuration
    fits: list[TrainResult]
    # per member ``[W_0, b_0, ...]`` in :class:`models.mlp.MLP`'s layout
    params: list[list[np.ndarray]]
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
    **kw: Any,
) -> GroupFit:
    """:func:`train_packed` for members of one shape: their stacked ``params``
    (:func:`stacked_params`)."""
    return train_packed(
        backend,
        [(Shape(sizes_of(params), activation), params)],
        task,
        X,
        y,
        X_val,
        y_val,
        members,
        **kw,
    )


def sizes_of(params: Sequence[np.ndarray]) -> tuple[int, ...]:
    """The layer sizes ``[d, h_1, …, k]`` of stacked parameters ``[Q_0, Wt_1, b_1, …]``."""
    return (params[0].shape[2] - 1, params[0].shape[1], *(W.shape[1] for W in params[1::2]))


def train_packed(
    backend: Any,
    blocks: Sequence[tuple[Shape, list[np.ndarray]]],
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
    """Train a group on device arrays: ``blocks`` are its members' shapes, each with
    their stacked parameters (see :func:`stacked_params`), ``members`` the members in
    that order (the first block's, then the next's…). One block is a group of one shape;
    several are a *packed* group (:mod:`sweeper.models.packed`: one first-layer product
    for all, each block's deeper layers its own batched products).

    ``X`` is (n, d) shared by all members or (K, n, d) (one block), ``y`` (n, 1) or (K,
    n, 1); likewise the validation arrays (``y`` holds class indices for a multi-class
    task). Each member's result is what :func:`models.train.train` would return for it
    alone with the same ``opt`` (gradient descent by default), ``batch_size`` and seed
    (to rounding). ``progress(done, total)`` counts member-epochs at segment ends.

    Mini-batches (``0 < batch_size < n``) need members that share their seed (it draws
    the rows' order) and so their data: a ValueError otherwise.

    On the CPU the members are split into ``threads`` parts (default: the CPUs this
    process may use, as the one-configuration trainer's column blocks) that train side
    by side, each on one BLAS thread: the members are independent, so the parts never
    meet until the end. ``train_time_s`` is then the longest part's.
    """

    K = len(members)
    if K != sum(p[0].shape[0] for _, p in blocks):
        raise ValueError(f"{K} members for blocks of {[p[0].shape[0] for _, p in blocks]}")
    opt = opt or Optimizer()
    if 0 < batch_size < X.shape[-2] and (X.ndim == 3 or len({m.seed for m in members}) > 1):
        raise ValueError(
            f"batch_size={batch_size}: the members of a mini-batch group must share their seed "
            f"and data, got seeds {sorted({m.seed for m in members})}"
        )
    sparse = ("member" if backend.device == "cpu" else "group") if is_sparse(X) else None
    layout = Layout([b[0] for b in blocks], [b[1][0].shape[0] for b in blocks], sparse)
    rule = (opt, batch_size)
    if threads is None:
        threads = cpu_threads() if backend.device == "cpu" else 1
    parts = min(threads, K // MIN_PART)
    if parts < 2:
        return _train_part(
            backend,
            layout,
            [p for _, p in blocks],
            task,
            (X, y, X_val, y_val),
            members,
            log_every,
            progress,
            rule,
        )

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
        sub, cuts = layout.subset(int(idx[0]), int(idx[-1]) + 1)
        return _train_part(
            backend,
            sub,
            [[p[c] for p in blocks[b][1]] for b, c in cuts],
            task,
            own,
            [members[j] for j in idx],
            log_every,
            report,
            rule,
            halt,
        )

    with (
        backend.host_threads(0.0, 1),
        ThreadPoolExecutor(parts, thread_name_prefix="sweeper-group") as pool,
    ):
        fits = None
        try:
            fits = list(pool.map(part, range(parts), chunks))
        finally:
            # Ctrl-C (or a part's error) in this thread, raised on: the other parts stop at their
            # next epoch, so the pool's exit does not wait for the whole group's training
            if fits is None:
                halt.set()
    return GroupFit(
        [f for g in fits for f in g.fits],
        [p for g in fits for p in g.params],
        max(g.train_time_s for g in fits),
        max(g.warmup_time_s for g in fits),
        sum(g.host_reads for g in fits),
        [a for g in fits for a in g.at],
    )


# divergence is detected and reported, not warned about
@np.errstate(over="ignore", invalid="ignore")
def _train_part(
    backend: Any,
    layout: Layout,
    params: list[list[np.ndarray]],
    task: str,
    arrays: Sequence[Any],
    members: Sequence[Member],
    log_every: int,
    progress: Callable[[int, int], None] | None,
    rule: tuple[Optimizer, int],
    halt: Any = None,
) -> GroupFit:
    """:func:`train_packed` on one thread; ``params`` are its blocks' stacked
    parameters, ``arrays`` its ``X, y, X_val, y_val``, ``rule`` its optimizer and batch
    size. It ends at the next epoch once Ctrl-C or SIGTERM came, or its caller set ``halt``
    (an Event): :meth:`sweeper.base.backend.Backend.epoch`."""
    part = _Part(backend, layout, params, task, arrays, members, log_every, rule)
    return part.train([ACTIVATIONS[b.shape.activation] for b in layout.blocks], progress, halt)


class _Part:
    """One thread's share of a group: its sampled epochs and per-member state (here),
    the device loop (:meth:`train`), the host's look at the sampled losses
    (:meth:`read`, :meth:`on_sample`: divergence, the best epoch, patience, each
    configuration read off a trajectory) and the results per count (:meth:`results`)."""

    def __init__(
        self,
        backend: Any,
        layout: Layout,
        params: list[list[np.ndarray]],
        task: str,
        arrays: Sequence[Any],
        members: Sequence[Member],
        log_every: int,
        rule: tuple[Optimizer, int],
    ) -> None:
        X = arrays[0]
        self.backend, self.xp, self.task, self.arrays, self.members = (
            backend,
            backend.xp,
            task,
            arrays,
            members,
        )
        self.opt, batch_size = rule
        self.K = K = len(members)
        self.dtype = X.dtype
        self.lr = np.array([m.lr for m in members], dtype=np.float64)
        self.epochs = np.array([m.epochs for m in members])
        self.patience = np.array([m.patience for m in members])
        self.counts = [m.counts for m in members]
        self.E = E = int(self.epochs.max())
        self.stride = stride = sample_stride(E, log_every)
        # the sampled epochs: every stride's, every configuration's own count (its
        # curve's last point), and E
        self.schedule = sorted({*range(0, E, stride), *(c for cs in self.counts for c in cs)})
        self.slot = {t: i for i, t in enumerate(self.schedule)}
        # every member's parameters in one flat array (on sparse data the first layer in
        # its products' memory order)
        self.layout = layout
        self.P = backend.to_device(layout.pack(params, self.dtype))
        self.active = np.ones(K)
        self.n = n = X.shape[-2]
        self.step_rows = batch_size if 0 < batch_size < n else n
        # grad_scale(lr) · active · dL/dz's constant per member, for each number of rows
        # a step takes
        self.scales = {
            m: self.xp.empty((K, 1, 1), dtype=self.dtype)
            for m in sorted({self.step_rows, n % self.step_rows} - {0})
        }
        self.state = State(
            self.xp,
            [self.P],
            self.opt,
            self._rates(self.lr),
            [Ellipsis],
            layout.weights() if self.opt.weight_decay else None,
        )
        self.set_scale()
        self._plan_reads()
        self._start_records()

    def _plan_reads(self) -> None:
        """The segments' ends (where the host reads the samples) and, without patience,
        the device copies of the weights at a trajectory's shorter counts."""
        E, stride, xp = self.E, self.stride, self.xp
        self.hist = xp.full((len(self.schedule), self.K), xp.nan, dtype=self.dtype)
        self.vhist = xp.full((len(self.schedule), self.K), xp.nan, dtype=self.dtype)
        self.any_patience = bool(self.patience.any())
        # one sample a segment: the host picks the best weights among the candidates
        if self.any_patience:
            self.ends = self.schedule[1:]
        else:
            step = stride * math.ceil(math.ceil(E / stride) / MAX_CHECKS)
            self.ends = sorted({*range(step, E, step), *map(int, self.epochs), E})
        # without patience a configuration's weights at a count below its trajectory's
        # last are a device copy taken in the loop (no host decision); with patience the
        # host takes it from the candidate or the best so far
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
        self.best = self.P.copy() if self.any_patience else None
        self.kept = np.zeros(K, dtype=bool)  # best weights taken for this member
        # the weights at the last sample
        self.candidate = self.P.copy() if self.any_patience else None
        # the epoch a member stopped training at (its last count, or patience)
        self.ended: list[int | None] = [None] * K
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
            factor = (
                self.opt.grad_scale(self.lr) * self.active * losses.grad_constant(self.task, rows)
            )
            scale[...] = self.backend.to_device(factor.reshape(K, 1, 1).astype(self.dtype))
        self.state.set_lr(self._rates(self.lr * self.active))

    def _rates(self, per_member: np.ndarray) -> Any:
        """The members' rates per element of the flat parameters, where the update reads
        them (else none)."""
        return self.layout.expand(per_member) if self.opt.uses_rates else 0.0

    def freeze(self, m: int) -> None:
        """No further update of member ``m``: a rate of 0 (:meth:`set_scale`) and no
        state carried over."""
        self.active[m] = 0
        for buf in self.state.buffers:
            for v in self.layout.member(buf, m):
                v[...] = 0

    def on_sample(self, m: int, t: int, h: float, v: float) -> None:
        """Member ``m``'s sample at epoch ``t``: the configurations that end there, then
        its own trajectory."""
        ended, out, patience, kept = self.ended, self.out[m], self.patience, self.kept
        # the group's last epoch, sampled with the last segment's read
        if ended[m] is None and t >= self.epochs[m]:
            ended[m] = int(self.epochs[m])
        regular = ended[m] is None and t % self.stride == 0 and t < self.epochs[m]
        here = [
            c
            for c in self.counts[m]
            if c not in out and (c == t or (ended[m] is not None and c >= t))
        ]
        if not regular and not here:
            return
        bad = diverged(np.array([h]), np.array([v]), self.first[m]) is not None
        better = v < self.best_val[m]
        for c in here:
            if bad:
                out[c] = (t, t, int(self.best_epoch[m]), None)
                continue
            out[c] = (
                None,
                t,
                t if better else int(self.best_epoch[m]),
                self._weights_at(m, c, better),
            )
        if ended[m] is not None and t >= ended[m]:
            self.done[m] = True
        if not regular:
            return
        if bad:
            self._diverged(m, t)
            return
        if better:
            self.best_val[m], self.best_epoch[m] = v, t
            if patience[m]:
                for b_, c_ in zip(
                    self.layout.member(self.best, m), self.layout.member(self.candidate, m)
                ):
                    b_[...] = c_
                kept[m] = True

    def _weights_at(self, m: int, c: int, better: bool) -> Any:
        """Member ``m``'s weights for its count ``c``, which ends at this sample
        (``better``: its best so far): once the member ended, which of its final and
        best weights; else a copy of its best (patience), of the sampled weights (a
        group with patience), or the device's copy taken at ``c`` in the loop."""
        patience, kept = self.patience, self.kept
        if self.ended[m] is not None:
            return "final" if better or not (patience[m] and kept[m]) else "best"
        if patience[m] and kept[m] and not better:
            return [v.copy() for v in self.layout.member(self.best, m)]
        if self.any_patience:
            return [v.copy() for v in self.layout.member(self.candidate, m)]
        return self.snaps.pop((m, c))

    def _diverged(self, m: int, t: int) -> None:
        """Member ``m`` diverged at its sample of epoch ``t``: every longer
        configuration diverged here too, and it is frozen for good."""
        for c in self.counts[m]:
            self.out[m].setdefault(c, (t, t, int(self.best_epoch[m]), None))
        self.ran[m] = t
        self.done[m] = True
        self.freeze(m)
        # finite arithmetic from here on; the member's weights are not used
        for v in self.layout.member(self.P, m):
            v[...] = 0

    def sample(self, t: int) -> None:
        """Device work: both losses on the weights before epoch ``t``'s update (and the
        copies taken there)."""
        measured, val = self.measured, self.val
        measured.run(measured.forward_calls)
        k = self.slot[t]
        self.hist[k] = measured.loss()
        val.run(val.forward_calls)
        self.vhist[k] = val.loss()
        if self.any_patience:
            self.xp.copyto(self.candidate, self.P)
        for m in self.copy_at.get(t, ()):
            self.snaps[(m, t)] = [v.copy() for v in self.layout.member(self.P, m)]

    def read(self, lo: int, hi: int) -> bool:
        """The host's look at the samples of epochs [lo, hi); whether a member changed."""
        schedule = self.schedule
        k0, k1 = bisect.bisect_left(schedule, lo), bisect.bisect_left(schedule, hi)
        if k1 <= k0:
            return False
        # (2, k1 - k0, K)
        block = self.backend.to_numpy(self.xp.stack([self.hist[k0:k1], self.vhist[k0:k1]]))
        self.reads += 1
        self.curve[:, k0:k1] = block
        if self.first is None:
            self.first = block[0, 0].copy()
        was = self.active.copy()
        for i in range(k1 - k0):
            for m in np.flatnonzero(~self.done):
                self.on_sample(m, schedule[k0 + i], float(block[0, i, m]), float(block[1, i, m]))
        return bool((was != self.active).any())

    def _passes(self, acts: list[Any]) -> None:
        """The group's passes (a step per number of rows, the validation pass, the one
        that measures the training loss) and the calls an epoch makes; a warm-up of
        every call but the update (CuPy compiles its kernels).
        ``acts``: each block's activation."""
        xp, task, (X, y, X_val, y_val) = self.xp, self.task, self.arrays
        on = (xp, self.layout, self.P, acts, task)
        # a step's targets are its own (a copy): mini-batches gather theirs into them
        steps = {
            rows: _Pass(*on, X[..., :rows, :], y[..., :rows, :].copy(), scale, self.state)
            for rows, scale in self.scales.items()
        }
        self.val = _Pass(*on, X_val, y_val, None)
        for warm in steps.values():
            warm.run(warm.forward_calls)
            warm.loss()
            warm.run(warm.backward_calls)
        # full batch: a sampled epoch measures the loss on the forward pass it trains with
        if self.step_rows == self.n:
            self.measured = measured = steps[self.n]
            self.epoch_calls = (
                measured.forward_calls + measured.backward_calls + measured.update_calls
            )
            self.rest = measured.backward_calls + measured.update_calls
        # mini-batches: the training loss is the whole training set's, before the epoch's steps
        else:
            self.measured = measured = _Pass(*on, X, y, None)
            self.epoch_calls = self.rest = _mini_batch_calls(
                xp, measured, steps, self.step_rows, self.members[0].seed
            )
            measured.run(measured.forward_calls)
            measured.loss()
        self.val.run(self.val.forward_calls)
        self.val.loss()

    def train(
        self, acts: list[Any], progress: Callable[[int, int], None] | None, halt: Any
    ) -> GroupFit:
        """The device loop, segment by segment, with the host's read at each segment's end."""
        # the phases, for the strict device stand-in's accounts (a no-op elsewhere)
        mark = self.backend.mark_fn
        mark("warm-up", 0)
        t_warm = self.backend.clock()
        active, epochs, patience, slot, E = (
            self.active,
            self.epochs,
            self.patience,
            self.slot,
            self.E,
        )
        # One BLAS thread on the CPU: on this 2-core machine with another process
        # busy, K=64 float32 ran at 181k configuration-epochs/s on one thread and 8.5k
        # on two (OpenBLAS's threads spin and wait).
        with self.backend.host_threads(0.0, 1):
            self._passes(acts)
            measured, epoch_calls, rest = self.measured, self.epoch_calls, self.rest
            t0 = self.backend.clock()
            epoch = 0
            for stop in self.ends:
                if not active.any():
                    break
                for e in range(epoch, stop):  # device work only
                    # Ctrl-C, SIGTERM, ``halt``: Stopped within an epoch
                    self.backend.epoch(e, halt)
                    if e in slot:
                        self.sample(e)
                        measured.run(rest)
                    else:
                        measured.run(epoch_calls)
                mark("segment end", stop)
                # (with patience a segment's one candidate is its one sample)
                last = stop == E and not self.any_patience
                if last:  # the last epoch's sample leaves with this segment's
                    self.sample(E)
                changed = self.read(epoch, stop + last)
                for m in np.flatnonzero(active):
                    if stop >= epochs[m] or (
                        patience[m]
                        and stop % self.stride == 0
                        and stop - self.best_epoch[m] >= patience[m]
                    ):
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
        """Every configuration read off every member: its curve up to its count, and its
        weights on the host."""
        to_numpy, schedule, stride, curve = (
            self.backend.to_numpy,
            self.schedule,
            self.stride,
            self.curve,
        )
        layout = self.layout
        final = layout.views(to_numpy(self.P))
        kept_best = layout.views(to_numpy(self.best)) if self.best is not None else None
        at: list[dict[int, tuple[TrainResult, list[np.ndarray]]]] = []
        for m in range(self.K):
            mine: dict[int, tuple[TrainResult, list[np.ndarray]]] = {}
            for c, (div, run, best_at, weights) in self.out[m].items():
                idx = [self.slot[t] for t in schedule if t == run or (t < run and t % stride == 0)]
                fit = TrainResult(
                    steps=np.array([schedule[i] for i in idx]),
                    train_loss=curve[0, idx, m].astype(self.dtype),
                    val_loss=curve[1, idx, m].astype(self.dtype),
                    epochs_run=run,
                    best_epoch=best_at,
                    diverged_at=div,
                    train_time_s=train_s,
                    warmup_time_s=warmup_s,
                )
                b, i = layout.block_of(m)
                if weights is None or weights == "final":
                    host = member_params(final[b], i)
                elif weights == "best":
                    host = member_params(kept_best[b], i)
                else:
                    host = member_params([to_numpy(w)[None] for w in weights], 0)
                mine[c] = (fit, host)
            at.append(mine)
        return GroupFit(
            [a[int(e)][0] for a, e in zip(at, self.epochs)],
            [a[int(e)][1] for a, e in zip(at, self.epochs)],
            train_s,
            warmup_s,
            self.reads,
            at,
        )
