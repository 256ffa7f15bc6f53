"""Full-batch gradient descent that keeps the device busy: no host copy or sync inside
the epoch loop.

The training and validation losses are sampled every ``log_every`` epochs into preallocated device
arrays. The host looks at them only between *segments* of epochs, with one copy of the segment's
samples each time:

- ``patience == 0``: at most :data:`MAX_CHECKS` segments per run. The host checks for divergence
  (a NaN/inf loss, or a training loss past :data:`EXPLODED` times the first one, stops the run:
  "diverged at epoch N", see :func:`diverged`) and finds the best validation epoch.
- ``patience > 0``: one segment per ``log_every`` epochs, because early stopping is a host decision;
  the weights at the best validation point are kept (a device-side copy) and restored at the end.

A curve ends where training ended: after the last epoch (or the early stop) one more
sample is taken on the last weights, so its last step is ``epochs_run`` whatever
``log_every`` (it counts for ``best_epoch`` and the divergence check too). A run
of ``epochs=E`` is thus exactly the first ``E`` epochs of a longer run with the same other
values, sampled at the multiples of the stride below ``E`` and at ``E`` (the batched
launcher's trajectories read configurations off one run this way: :mod:`models.batched`).

Memory is bounded whatever ``epochs`` is: the losses are sampled every :func:`sample_stride` epochs,
``log_every`` unless that would keep more than :data:`MAX_SAMPLES` samples (``epochs=10**12``) or a
single one (``log_every >= epochs``); the curves' steps say the stride used, and
a one-line warning too.

``sync_every_epoch=True`` reproduces the naive loop (the loss read on the host after every epoch) so
its cost can be measured; it changes nothing else.

Each epoch is :meth:`models.mlp.FullBatch.epoch`: a flat list of in-place calls on buffers allocated
once per run (feature-major activations, the bias folded into the matrix products, the gradients
scaled by ``-lr`` so the update is one add per layer). A sampled epoch splits it into forward, loss
and backward + update, and runs the validation forward in between, on the same weights.

Before the clock starts, the buffers are allocated (the data transposed once into them) and one
forward/backward pass without an update warms the device up (CuPy compiles its kernels
on first use); that time is reported as ``warmup_time_s``, not in ``train_time_s``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from sweeper.models.mlp import MIN_BLOCK, MLP
from sweeper.models.optim import Optimizer

__all__ = [
    "EXPLODED",
    "MAX_CHECKS",
    "MAX_SAMPLES",
    "TrainResult",
    "diverged",
    "sample_stride",
    "stride_of",
    "train",
]

MAX_CHECKS = 10
# Loss samples kept per curve (train and validation): 2 × 100,000 float64 = 1.6 MB on the device and
# the host, whatever epochs is (epochs=10**12 at log_every=50 asked for 149 GiB).
MAX_SAMPLES = 100_000

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """What training leaves on the host: loss curves (step = epoch), the stopping point
    and the time."""

    steps: np.ndarray  # (k,) epochs at which the losses were sampled
    train_loss: np.ndarray  # (k,) loss on the training set before the update of that epoch
    val_loss: np.ndarray  # (k,)
    epochs_run: int
    best_epoch: int
    diverged_at: int | None
    train_time_s: float
    warmup_time_s: float


# divergence is detected and reported, not warned about
@np.errstate(over="ignore", invalid="ignore")
def train(
    backend: Any,
    model: MLP | Any,
    X: Any,
    y: Any,
    X_val: Any,
    y_val: Any,
    *,
    lr: float,
    epochs: int,
    log_every: int,
    patience: int = 0,
    sync_every_epoch: bool = False,
    progress: Callable[[int, float, float], None] | None = None,
    opt: Optimizer | None = None,
    batch_size: int = 0,
    seed: int = 0,
    shuffle: bool = True,
) -> TrainResult:
    """Train ``model`` in place on device arrays ``X`` (n, d), ``y`` (n, 1); validate on
    ``X_val``, ``y_val``.

    ``opt`` is the update rule (:mod:`models.optim`; gradient descent by default).
    ``batch_size`` between 1 and n - 1 makes an epoch a pass of mini-batch steps over the
    rows in an order drawn each epoch from ``seed``
    (:class:`models.mlp.MiniBatches`; ``shuffle=False`` keeps the rows' order); the sampled
    training loss is then the whole training set's, measured before the epoch's first step.

    ``progress(epoch, train_loss, val_loss)`` is called at each segment end, where the host already
    has the losses: a progress bar costs no extra synchronisation.
    """
    xp = backend.xp
    log_every = sample_stride(epochs, log_every)
    n_samples = math.ceil(epochs / log_every)
    hist = xp.full(n_samples + 1, xp.nan, dtype=X.dtype)  # and the last epoch's sample
    vhist = xp.full(n_samples + 1, xp.nan, dtype=X.dtype)
    segment = log_every if patience else log_every * math.ceil(n_samples / MAX_CHECKS)
    reading = _Reading(backend, (hist, vhist), log_every, patience)
    candidate = None
    epoch = 0
    # the phases, for the strict device stand-in's accounts (a no-op elsewhere)
    mark = backend.mark_fn
    mark("warm-up", 0)
    t_warm = backend.clock()
    n = X.shape[0]
    with backend.host_threads(model.flops(n), max(1, n // MIN_BLOCK)) as (
        parts,
        pool,
    ):  # the backend's policy
        batch, measured, rest, val_batch = _passes(
            model, (X, y, X_val, y_val), lr, opt, (batch_size, seed, shuffle), parts, pool
        )
        t0 = backend.clock()
        while epoch < epochs:
            stop = min(epoch + segment, epochs)
            for e in range(epoch, stop):  # the epoch loop: device work only
                mark("epoch", e)
                if e % log_every and not sync_every_epoch:
                    batch.epoch()
                    continue
                measured.forward()
                loss = measured.loss()
                # a sampled epoch: both losses on the weights before this update
                if e % log_every == 0:
                    k = e // log_every
                    hist[k] = loss
                    val_batch.forward()
                    vhist[k] = val_batch.loss()
                    if patience:
                        # weights the val loss was measured on
                        candidate = [P.copy() for P in model.packed]
                rest()
                if sync_every_epoch:  # the seed's naive loop: a host read of the loss every epoch
                    float(backend.to_numpy(loss))

            mark("segment end", stop)
            # the curve's last point (see _Reading.finish) leaves with the last segment
            last = (measured, val_batch) if stop == epochs and not patience else None
            if reading.segment(epoch, stop, last, candidate):
                epoch = reading.diverged_at
                break
            epoch = stop
            if progress is not None:
                h, v = reading.seen[-1][:, -1]
                progress(epoch, float(h), float(v))
            if patience and epoch - reading.best_epoch >= patience:
                break
        mark("end", epoch)
        steps = reading.finish(epoch, (measured, val_batch))
        t1 = backend.clock()

    return reading.result(model, steps, epoch, t1 - t0, t0 - t_warm)


def _passes(
    model: Any,
    arrays: tuple[Any, Any, Any, Any],
    lr: float,
    opt: Optimizer | None,
    batching: tuple[int, int, bool],
    parts: int,
    pool: Any,
) -> tuple[Any, Any, Callable[[], None], Any]:
    """The model's step objects (the MLP's fused epoch, :mod:`models.mlp`, or a model of the
    interface's, :mod:`models.generic`), warmed up: the one that trains, the one that measures the
    training loss, what a sampled epoch runs after its measurement, and the validation pass."""
    X, y, X_val, y_val = arrays
    batch_size, seed, shuffle = batching
    if 0 < batch_size < X.shape[0]:
        batch = model.mini_batches(X, y, lr, batch_size, seed, opt, shuffle, parts, pool)
        measured = model.full_batch(X, y, parts=parts, pool=pool)  # the training loss, forward only
        rest = batch.epoch  # after a sampled epoch's measurement: all its steps
        measured.forward()
    else:
        batch = measured = model.full_batch(X, y, lr, parts, pool, opt)
        rest = batch.backward_and_update
    val_batch = model.full_batch(X_val, y_val, parts=parts, pool=pool)
    batch.warm_up()
    val_batch.forward()
    return batch, measured, rest, val_batch


def _sample_last(measured: Any, val_batch: Any, hist: Any, vhist: Any) -> None:
    """Both losses on the last weights, into the curves' last slot."""
    measured.forward()
    hist[-1] = measured.loss()
    val_batch.forward()
    vhist[-1] = val_batch.loss()


class _Reading:
    """The host's side of :func:`train`: each segment's samples (one copy each), the
    best sample before a divergence (with patience, the weights it was measured on), the
    divergence, and the curve's last point.

    ``curves``: the device's (n_samples + 1,) train and validation loss samples, the
    last slot for the last weights."""

    def __init__(
        self, backend: Any, curves: tuple[Any, Any], log_every: int, patience: int
    ) -> None:
        self.backend, self.curves = backend, curves
        self.n_samples = curves[0].shape[0] - 1
        self.log_every, self.patience = log_every, patience
        self.seen: list[np.ndarray] = []  # (2, k) host copies of each segment's samples: train, val
        self.last: np.ndarray | None = None  # (2, 1): the sample on the last weights
        self.best_val, self.best_epoch, self.best_params = math.inf, 0, None
        self.diverged_at: int | None = None

    def segment(self, epoch: int, stop: int, last: tuple[Any, Any] | None, candidate: Any) -> bool:
        """The samples of epochs ``epoch`` to ``stop`` copied to the host at once (each
        sample leaves once), and taken; ``last``: the passes (training, validation) that
        first sample the last weights into the curves' last slot, which leaves with
        them. Whether the run diverged in the segment."""
        k0, k1 = epoch // self.log_every, math.ceil(stop / self.log_every)
        if last is not None:
            _sample_last(*last, *self.curves)
            k1 = self.n_samples + 1
        return self.take(self._copy(k0, k1), k0, k1 > self.n_samples, candidate)

    def _copy(self, k0: int, k1: int) -> np.ndarray:
        """Samples ``k0`` to ``k1`` of both curves on the host: (2, k1 - k0), train then
        validation."""
        hist, vhist = self.curves
        return self.backend.to_numpy(self.backend.xp.stack([hist[k0:k1], vhist[k0:k1]]))

    def take(self, block: np.ndarray, k0: int, ends: bool, candidate: Any) -> bool:
        """A segment's samples from index ``k0`` (``ends``: its last column is the
        curve's last point); whether the run diverged in it."""
        self.seen.append(block[:, :-1] if ends else block)
        if ends:
            self.last = block[:, -1:]
        h, v = self.seen[-1]
        bad = diverged(h, v, self.seen[0][0, 0])
        # the best sample before a divergence, whatever the segments
        for i, val in enumerate(v[:bad]):
            if val < self.best_val:
                self.best_val, self.best_epoch = float(val), (k0 + i) * self.log_every
                if self.patience:
                    self.best_params = candidate
        if bad is None:
            return False
        self.diverged_at = (k0 + bad) * self.log_every
        self.seen[-1] = self.seen[-1][:, : bad + 1]
        return True

    def finish(self, epoch: int, passes: tuple[Any, Any]) -> np.ndarray:
        """The curve's steps, ending where training ended (``epoch``): one more sample,
        on the last weights, unless the run diverged (it counts for the best epoch and
        the divergence check too). A run stopped early (or by patience) samples its last
        weights now with ``passes`` (training, validation), a copy of its own."""
        if self.diverged_at is None and self.last is None:
            _sample_last(*passes, *self.curves)
            self.last = self._copy(self.n_samples, self.n_samples + 1)
        steps = np.arange(sum(part.shape[1] for part in self.seen)) * self.log_every
        if self.diverged_at is None:
            self.seen.append(self.last)
            steps = np.append(steps, epoch)
            if diverged(self.last[0], self.last[1], self.seen[0][0, 0]) is not None:
                self.diverged_at = epoch
            elif self.last[1, 0] < self.best_val:  # the last weights are the best
                self.best_val, self.best_epoch, self.best_params = (
                    float(self.last[1, 0]),
                    epoch,
                    None,
                )
        return steps

    def result(
        self, model: Any, steps: np.ndarray, epoch: int, train_time_s: float, warmup_time_s: float
    ) -> TrainResult:
        """The run's :class:`TrainResult`; with patience, the best sample's weights put
        back into ``model`` first (unless it diverged)."""
        if self.best_params is not None and self.diverged_at is None:
            for P, best in zip(model.packed, self.best_params):
                P[...] = best
        curve = np.concatenate(self.seen, axis=1)
        return TrainResult(
            steps=steps,
            train_loss=curve[0],
            val_loss=curve[1],
            epochs_run=epoch,
            best_epoch=self.best_epoch,
            diverged_at=self.diverged_at,
            train_time_s=train_time_s,
            warmup_time_s=warmup_time_s,
        )


# A loss that grows past this many times its first sample has exploded (it would
# overflow soon after).
EXPLODED = 1e6


def diverged(train_loss: np.ndarray, val_loss: np.ndarray, first: float) -> int | None:
    """The index of the first sample at which a run diverged (a non-finite loss, or a
    training loss past :data:`EXPLODED` times the first one ``first``), else None."""
    bad = ~np.isfinite(train_loss) | ~np.isfinite(val_loss) | (train_loss > EXPLODED * abs(first))
    hits = np.flatnonzero(bad)
    return int(hits[0]) if hits.size else None


def stride_of(epochs: int, log_every: int) -> int:
    """The stride :func:`sample_stride` samples at, without its warning (what planning
    groups by)."""
    if epochs > 1 and log_every >= epochs:
        return -(-epochs // 2)
    return max(log_every, -(-epochs // MAX_SAMPLES))


def sample_stride(epochs: int, log_every: int) -> int:
    """Epochs between two loss samples: ``log_every``, but at least
    ``ceil(epochs / MAX_SAMPLES)`` (memory stays bounded) and ``ceil(epochs / 2)`` when
    ``log_every >= epochs`` (two samples, not one). A change is logged as a one-line
    warning; the run's params keep the user's ``log_every``."""
    stride = stride_of(epochs, log_every)
    if epochs > 1 and log_every >= epochs:
        log.warning(
            "log_every=%d is not below epochs=%d, which would sample the loss once: "
            "sampling every %d epochs instead (2 samples)",
            log_every,
            epochs,
            stride,
        )
    elif stride > log_every:
        log.warning(
            "log_every=%d with epochs=%d would keep %d loss samples: sampling every %d epochs "
            "instead (at most %d)",
            log_every,
            epochs,
            -(-epochs // log_every),
            stride,
            MAX_SAMPLES,
        )
    return stride
