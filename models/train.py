"""Full-batch gradient descent that keeps the device busy: no host copy or sync inside the epoch loop.

The training and validation losses are sampled every ``log_every`` epochs into preallocated device
arrays. The host looks at them only between *segments* of epochs, with one copy of the segment's
samples each time:

- ``patience == 0``: at most :data:`MAX_CHECKS` segments per run. The host checks for divergence
  and finds the best validation epoch. A sampled loss that is NaN/inf, or above
  :data:`DIVERGENCE_FACTOR` × max(first sampled loss, 1) (an overflow on its way), stops the run:
  "diverged at epoch N". The last segment also checks the final weights the same way (the loss
  can explode after the last sample): their validation loss comes with that segment's copy.
- ``patience > 0``: one segment per ``log_every`` epochs, because early stopping is a host decision;
  the weights at the best validation point are kept (a device-side copy) and restored at the end.

Memory is bounded whatever ``epochs`` is: at most :data:`MAX_SAMPLES` samples per curve, so the
stride between samples is ``max(log_every, ceil(epochs / MAX_SAMPLES))``; a ``log_every`` that
would sample the loss once (``log_every >= epochs``) becomes ``ceil(epochs / 2)`` (two samples).
Either change is logged as a one-line warning and the curves' steps use the stride (see :func:`sampling`).

``sync_every_epoch=True`` reproduces the naive loop (the loss read on the host after every epoch) so
its cost can be measured; it changes nothing else.

Each epoch is :meth:`models.mlp.FullBatch.epoch`: a flat list of in-place calls on buffers allocated
once per run (feature-major activations, the bias folded into the matrix products, the gradients
scaled by ``-lr`` so the update is one add per layer). A sampled epoch splits it into forward, loss
and backward + update, and runs the validation forward in between, on the same weights.

Before the clock starts, the buffers are allocated (the data transposed once into them) and one
forward/backward pass without an update warms the device up (CuPy compiles its kernels on first use);
that time is reported as ``warmup_time_s``, not in ``train_time_s``.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from sweeper.models.mlp import MIN_BLOCK, MLP, FullBatch, product_flops

MAX_CHECKS = 10
# Loss samples kept per curve (train and validation): 2 × 100,000 float64 = 1.6 MB on the device and the
# host, whatever epochs is (epochs=10**12 at log_every=50 asked for 149 GiB).
MAX_SAMPLES = 100_000
# A sampled loss above DIVERGENCE_FACTOR × max(first sampled loss, 1) means the run diverged: gradient
# descent that works lowers the loss, and one that grows a millionfold is on its way to inf (its
# predictions reached ±1e163 and its MSE overflowed while the loss had not yet become NaN).
DIVERGENCE_FACTOR = 1e6

log = logging.getLogger(__name__)


def sampling(epochs: int, log_every: int) -> tuple[int, str | None]:
    """The stride (epochs between loss samples) that :func:`train` uses, and why it is not ``log_every``
    (one line, None when it is)."""
    if epochs > 1 and log_every >= epochs:  # a one-point curve
        stride = -(-epochs // 2)
        return stride, (f"log_every={log_every} is not below epochs={epochs}, which would sample the loss once: "
                        f"sampling every {stride} epochs instead (2 samples)")
    stride = max(log_every, -(-epochs // MAX_SAMPLES))
    if stride == log_every:
        return stride, None
    return stride, (f"log_every={log_every} with epochs={epochs} would keep {-(-epochs // log_every)} loss samples: "
                    f"sampling every {stride} epochs instead (at most {MAX_SAMPLES})")


@dataclass
class TrainResult:
    """What training leaves on the host: loss curves (step = epoch), the stopping point and the time."""

    steps: np.ndarray  # (k,) epochs at which the losses were sampled (every ``log_every``)
    train_loss: np.ndarray  # (k,) loss on the training set before the update of that epoch
    val_loss: np.ndarray  # (k,)
    epochs_run: int
    best_epoch: int
    diverged_at: int | None
    train_time_s: float
    warmup_time_s: float
    log_every: int  # the stride between samples actually used (see :func:`sampling`)


@np.errstate(over="ignore", invalid="ignore")  # divergence is detected and reported, not warned about
def train(
    backend: Any,
    model: MLP,
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
) -> TrainResult:
    """Train ``model`` in place on device arrays ``X`` (n, d), ``y`` (n, 1); validate on ``X_val``, ``y_val``.

    ``progress(epoch, train_loss, val_loss)`` is called at each segment end, where the host already
    has the losses: a progress bar costs no extra synchronisation.
    """
    xp = backend.xp
    log_every, note = sampling(epochs, log_every)
    if note:
        log.warning(note)
    n_samples = math.ceil(epochs / log_every)
    hist = xp.full(n_samples, xp.nan, dtype=X.dtype)
    vhist = xp.full(n_samples, xp.nan, dtype=X.dtype)
    if patience:
        segment = log_every
    else:
        segment = log_every * math.ceil(n_samples / MAX_CHECKS)

    best_val, best_epoch, best_params, candidate = math.inf, 0, None, None
    diverged_at, bound = None, math.inf  # bound: the loss above which the run diverged
    epoch = 0
    seen: list[np.ndarray] = []  # (2, k) host copies of each segment's samples: train, val
    t_warm = backend.clock()
    n = X.shape[0]
    with backend.host_threads(product_flops(model, n), max(1, n // MIN_BLOCK)) as (parts, pool):  # the backend's policy
        batch = FullBatch(model, X, y, lr, parts, pool)
        val_batch = FullBatch(model, X_val, y_val, parts=parts, pool=pool)
        batch.warm_up()
        val_batch.forward()
        t0 = backend.clock()
        while epoch < epochs:
            stop = min(epoch + segment, epochs)
            for e in range(epoch, stop):  # the epoch loop: device work only
                if e % log_every and not sync_every_epoch:
                    batch.epoch()
                    continue
                batch.forward()
                loss = batch.loss()
                if e % log_every == 0:  # a sampled epoch: both losses on the weights before this update
                    k = e // log_every
                    hist[k] = loss
                    val_batch.forward()
                    vhist[k] = val_batch.loss()
                    if patience:
                        candidate = [P.copy() for P in model.packed]  # weights the val loss was measured on
                batch.backward_and_update()
                if sync_every_epoch:  # the seed's naive loop: a host read of the loss every epoch
                    float(backend.to_numpy(loss))

            k0, k1 = epoch // log_every, math.ceil(stop / log_every)
            rows = [hist[k0:k1], vhist[k0:k1]]
            if stop == epochs and not patience:  # the final weights are kept: their val loss comes along
                val_batch.forward()
                rows.append(xp.reshape(val_batch.loss(), (1,)))
            flat = backend.to_numpy(xp.concatenate(rows))  # each sample leaves once, in one copy
            seen.append(flat[: 2 * (k1 - k0)].reshape(2, k1 - k0))
            h, v = seen[-1]
            if k0 == 0:
                bound = DIVERGENCE_FACTOR * max(float(h[0]), float(v[0]), 1.0)
            bad = np.flatnonzero(~np.isfinite(h) | ~np.isfinite(v) | (h > bound) | (v > bound))
            if bad.size:
                diverged_at = (k0 + int(bad[0])) * log_every
                epoch = diverged_at
                seen[-1] = seen[-1][:, : int(bad[0]) + 1]
                break
            if flat.size > 2 * (k1 - k0) and not flat[-1] <= bound:  # exploded after the last sample (or NaN)
                diverged_at = epoch = stop
                break
            for i, val in enumerate(v):
                if val < best_val:
                    best_val, best_epoch = float(val), (k0 + i) * log_every
                    if patience:
                        best_params = candidate
            epoch = stop
            if progress is not None:
                progress(epoch, float(h[-1]), float(v[-1]))
            if patience and epoch - best_epoch >= patience:
                break
        t1 = backend.clock()

    if best_params is not None and diverged_at is None:
        for P, best in zip(model.packed, best_params):
            P[...] = best
    curve = np.concatenate(seen, axis=1)
    return TrainResult(
        steps=np.arange(curve.shape[1]) * log_every,
        train_loss=curve[0],
        val_loss=curve[1],
        epochs_run=epoch,
        best_epoch=best_epoch,
        diverged_at=diverged_at,
        train_time_s=t1 - t0,
        warmup_time_s=t0 - t_warm,
        log_every=log_every,
    )
