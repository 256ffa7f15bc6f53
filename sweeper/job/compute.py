"""A job's compute half: data on the device → model → train → score on
the host. Knows nothing of MLflow; what it returns (:class:`Outcome`)
is what the record half (:mod:`sweeper.job.record`) logs."""

from __future__ import annotations

import json
import math
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Iterator

import numpy as np
from omegaconf import DictConfig

from sweeper import data, models
from sweeper.base import state
from sweeper.job import metrics
from sweeper.models.interface import instantiate, offer
from sweeper.models.optim import Optimizer
from sweeper.models.train import diverged
from sweeper.models.usercode import call_user

__all__ = [
    "Computed",
    "DEFINED",
    "Outcome",
    "config_bytes",
    "evaluate",
    "loss_unit",
    "memory_problem",
    "model_bytes",
    "progress_bar",
    "scored_on",
    "train_and_score",
]

# Per task, metrics that are finite for any finite predictions, unless their squares overflow.
DEFINED = MappingProxyType(
    {"regression": ("mse", "mae"), "binary": ("mse", "mae"), "multiclass": ("log_loss",)}
)


@contextmanager
def progress_bar(
    epochs: int, unit: str = "epoch", scale: float = 1.0
) -> Iterator[Callable[[int, float, float], None] | None]:
    """A tqdm bar over epochs (a batched group's: member-epochs) on a terminal
    (stderr), advanced where training already syncs; else nothing. Its losses
    are multiplied by ``scale``: the curves' units (:func:`loss_unit`)."""
    if not sys.stderr.isatty():
        yield None
        return
    # lazy: saves ~25 ms at this module's import (measured)
    from tqdm import tqdm

    with tqdm(total=epochs, unit=unit, leave=False, dynamic_ncols=True) as bar:

        def update(epoch: int, train_loss: float, val_loss: float) -> None:
            bar.update(epoch - bar.n)
            if math.isfinite(train_loss):
                bar.set_postfix(
                    loss=f"{train_loss * scale:.4g}",
                    val_loss=f"{val_loss * scale:.4g}",
                    refresh=False,
                )

        yield update


@dataclass
class Outcome:
    """What a trained configuration leaves on the host."""

    scores: dict[str, float]
    curves: dict[str, tuple[np.ndarray, np.ndarray]]
    reason: str | None  # why it failed (diverged), or None
    params: list[np.ndarray] = field(default_factory=list)  # the trained weights
    # (n_test,) in target units, or P(y = 1); (n_test, k) class probabilities
    test_pred: np.ndarray | None = None
    # a model of the interface: its parameters' names (None: the MLP's list)
    param_names: list[str] | None = None
    # a function trainer's predict (on host arrays: a CPU run), saved as the logged model
    predict: Any = None
    # data.folds=k (sweeper.job.crossval): each fold's curves
    # (name_fold<i>), kept in curves.npz, not sent to MLflow
    fold_curves: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    # what the run's tags add (a function trainer's stop)
    tags: dict[str, str] = field(default_factory=dict)
    # a failure's whole traceback (the run's error file), when an exception was its reason
    error: str | None = None


@dataclass
class Computed:
    """A job's compute half done ahead (by a batched group): what its record
    half needs. Not the data set: the record half reads the one the job was
    scored on itself (:func:`scored_on`), whichever process computed it."""

    outcome: Outcome
    tags: dict[str, str]  # launcher, batch_group, group_size, trajectory
    wall_time_s: float = 0.0  # the group's wall time (data, training, scoring) per member
    # the job's run (sweeper.tracking.run.TrackedRun), created RUNNING when its group started
    run: Any = None
    # the group's system metrics, for the run's last batch
    system: list[Any] = field(default_factory=list)


def scored_on(node: dict[str, Any]) -> data.Dataset:
    """The data set a run with this (plain, resolved) ``data`` node was scored on, and so the one
    its files and logged model are built from (test targets, scaler, encoder, vocabulary): the
    split of its ``data.split_seed`` (never the run's weight ``seed``), and with ``data.folds=k``
    fold 0, whose weights the run keeps (:func:`sweeper.job.crossval.combine`). Every path that
    records a run reads it here: one at a time, a batched group in the launching process or in a
    worker (joblib, Ray, submitit), resume and upload. Cached per (node, split, fold): a group's
    record half reads what its compute half loaded."""
    return data.load_plain(node, None, data.fold_indexes(node)[0])


def config_bytes(cfg: Any, dataset: data.Dataset) -> int:
    """Memory one configuration holds while it trains (weights, gradients,
    optimizer state, activations, data): :func:`sweeper.models.batched.group_bytes`
    of a group of one, plus the weights drawn on the host."""
    # lazy: saves ~16 ms at this module's import (measured)
    from sweeper.models.batched import group_bytes

    sizes = models.layer_sizes(dataset.n_features, cfg.depth, cfg.width, dataset.n_outputs)
    n, n_val = dataset.X_train.shape[0], dataset.X_val.shape[0] + dataset.X_test.shape[0]
    nnz = (dataset.X_train.nnz, dataset.X_val.nnz) if data.is_sparse(dataset.X_train) else None
    itemsize = np.dtype(cfg.dtype).itemsize
    weights = sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))
    return (
        group_bytes(1, n, n_val, sizes, itemsize, True, Optimizer.from_config(cfg).copies, nnz)
        + weights * itemsize
    )


PROBE_ROWS = 4  # the rows of the forward pass that measures a model of the interface's activations


def model_bytes(cfg: Any, dataset: data.Dataset) -> tuple[int, int, int] | None:
    """Memory a model of the interface holds while one configuration trains, from its own
    ``init`` and a forward pass on :data:`PROBE_ROWS` rows (once per model shape in this process,
    :func:`sweeper.models.generic.footprint`): ``(total, parameter part, activation part)`` in
    bytes. Parameters count four times and once more per optimizer copy (the host's draw, the
    device's, the gradients and their buffer); activations for the rows a step holds, twice (the
    backward pass's arrays), plus the validation and test rows scored at the end. None when it
    cannot be measured (its code raised: training then says so in its own words)."""

    # lazy: saves ~4.4 ms at this module's import (measured)
    from sweeper.models.generic import footprint

    model = dict(cfg["model"])
    key = json.dumps(
        [model, dataset.n_features, dataset.n_outputs, cfg["dtype"]], sort_keys=True, default=str
    )
    # a model shape's (parameter bytes, activation bytes a row), once per process
    footprints = state.process().footprints
    if key not in footprints:
        try:
            X = dataset.X_train[:PROBE_ROWS]
            footprints[key] = call_user(
                footprint,
                instantiate(model),
                dataset.n_features,
                dataset.n_outputs,
                X.toarray() if data.is_sparse(X) else X,
                cfg["seed"],
                cfg["dtype"],
                str(model["_target_"]),
            )
        # its init or forward raised: its run says so as it trains
        except Exception:  # noqa: BLE001
            footprints[key] = None
    found = footprints[key]
    if found is None:
        return None
    param, per_row = found
    n, scored = dataset.X_train.shape[0], dataset.X_val.shape[0] + dataset.X_test.shape[0]
    step = min(cfg["batch_size"], n) if cfg["batch_size"] else n
    params = param * (4 + Optimizer.from_config(cfg).copies)
    activations = per_row * (2 * step + max(n, scored))
    return params + activations, params, activations


def memory_problem(cfg: Any, dataset: data.Dataset, backend: Any) -> str | None:
    """Why ``cfg`` cannot train on this device's memory (one line naming the keys), or None: the
    estimate of :func:`config_bytes` (sweeper's MLP) or :func:`model_bytes` (a model of the
    interface) against the memory this process may use (:func:`sweeper.base.process.memory_limit`;
    the GPU's, on a GPU). A function trainer's loop is its own: not estimated."""
    # lazy: saves ~3.9 ms at this module's import (measured)
    from sweeper.base.process import memory_limit

    model = cfg.get("model") if hasattr(cfg, "get") else None
    offered = offer(model)
    mlp = offered.fast_path
    if offered.trainer:
        return None
    user = None if mlp else model_bytes(cfg, dataset)
    if not mlp and user is None:
        return None
    need = config_bytes(cfg, dataset) if mlp else user[0]
    # (memory_limit reads what it can and raises nothing; CuPy's mem_info raises its own
    # CUDARuntimeError, which a device that answered resolve does not give)
    if backend.device == "gpu" and not backend.fake:
        have, where = int(backend.xp.cuda.Device().mem_info[1]), "the GPU's memory"
    else:
        have, where = memory_limit() or (0, "")
    if not have or need <= have:
        return None
    gib = 1 << 30
    if mlp:
        return (
            f"depth={cfg.depth} width={cfg.width} dtype={cfg.dtype} needs about {need / gib:.1f} "
            "GiB to train "
            f"(weights, gradients, optimizer state, activations), more than {where} ("
            f"{have / gib:.1f} GiB): "
            "expected a smaller depth or width, or dtype=float32"
        )
    shown = " ".join(f"model.{k}={v}" for k, v in model.items() if k != "_target_")
    return (
        f"model._target_={model['_target_']}{' ' + shown if shown else ''} dtype={cfg.dtype} "
        "needs about "
        f"{need / gib:.1f} GiB to train (parameters with their gradients and optimizer state "
        f"{user[1] / gib:.1f} "
        f"GiB, activations {user[2] / gib:.1f} GiB: measured from its init and a forward pass on "
        f"{PROBE_ROWS} "
        f"rows), more than {where} ({have / gib:.1f} GiB): expected smaller hyperparameters, a "
        "batch_size, or "
        "dtype=float32"
    )


def train_and_score(cfg: DictConfig, dataset: data.Dataset, backend: Any) -> Outcome:
    """Train on the device and score on the host."""
    dtype = cfg.dtype
    host = [
        a.astype(dtype) for a in (dataset.X_train, dataset.y_train, dataset.X_val, dataset.y_val)
    ]
    t_h2d = backend.clock()
    X, y, Xv, yv = (backend.to_device(a) for a in host)
    model = models.build(cfg, dataset.n_features, dataset.task, backend, dataset.n_outputs)
    h2d_time_s = backend.clock() - t_h2d
    with progress_bar(cfg.epochs, scale=loss_unit(dataset)) as progress:
        fit = models.train(
            backend,
            model,
            X,
            y,
            Xv,
            yv,
            lr=cfg.lr,
            epochs=cfg.epochs,
            log_every=cfg.log_every,
            patience=cfg.patience,
            sync_every_epoch=cfg.sync_every_epoch,
            progress=progress,
            opt=Optimizer.from_config(cfg),
            batch_size=cfg.batch_size,
            seed=cfg.seed,
        )
    return evaluate(dataset, backend, model, fit, dtype, h2d_time_s)


def loss_unit(dataset: data.Dataset) -> float:
    """What turns a training loss into the metrics' units: a regression
    loss is an MSE of the standardised target, so y_scale² turns it into
    the target's units² (what val_mse is in); cross-entropy has no unit."""
    return float(dataset.y_scale) ** 2 if dataset.task == "regression" else 1.0


def evaluate(
    dataset: data.Dataset,
    backend: Any,
    model: Any,
    fit: models.TrainResult,
    dtype: str,
    h2d_time_s: float,
) -> Outcome:
    """Score a trained model on the host: the second half of :func:`train_and_score`,
    shared with the batched launcher (one call per member)."""
    unit = loss_unit(dataset)
    curves = {
        "train_loss": (fit.steps, fit.train_loss * unit),
        "val_loss": (fit.steps, fit.val_loss * unit),
    }
    scores = {
        "train_time_s": fit.train_time_s,
        "warmup_time_s": fit.warmup_time_s,
        "h2d_time_s": h2d_time_s,
        "epochs_per_s": fit.epochs_run / fit.train_time_s if fit.train_time_s > 0 else 0.0,
        "best_epoch": fit.best_epoch,
        "epochs_run": fit.epochs_run,
    }
    if fit.diverged_at is not None:
        return Outcome(scores, curves, f"diverged at epoch {fit.diverged_at}")

    # Validation and test rows go through the model together and leave the device in one copy.
    X_eval = backend.to_device(data.stack_rows(dataset.X_val, dataset.X_test).astype(dtype))
    pred = backend.to_numpy(model.predict(X_eval)).astype("float64")
    if not np.isfinite(pred).all():
        return Outcome(
            scores, curves, f"diverged at epoch {fit.epochs_run} (non-finite predictions)"
        )
    n_val = dataset.X_val.shape[0]
    if dataset.task == "regression":
        pred = dataset.to_original(pred)
    truth = {"val": dataset.to_original(dataset.y_val), "test": dataset.to_original(dataset.y_test)}
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported as a divergence
        quality = metrics.score(dataset.task, truth["val"], pred[:n_val], "val")
        quality |= metrics.score(dataset.task, truth["test"], pred[n_val:], "test")
    lost = [
        f"{split}_{m}"
        for split in ("val", "test")
        for m in DEFINED[dataset.task]
        if f"{split}_{m}" not in quality
    ]
    if lost:  # score() leaves out non-finite values: these overflowed
        return Outcome(scores, curves, f"diverged at epoch {fit.epochs_run} (non-finite {lost[0]})")
    final = backend.to_numpy(
        model.loss(X_eval[:n_val], backend.to_device(dataset.y_val.astype(dtype)))
    ).reshape(1)
    # the loss exploded after the last sample
    if diverged(final, final, fit.train_loss[0]) is not None:
        return Outcome(scores, curves, f"diverged at epoch {fit.epochs_run}")
    scores |= quality
    params = [backend.to_numpy(p) for p in model.params]
    test_pred = pred[n_val:] if dataset.task == "multiclass" else pred[n_val:].ravel()
    return Outcome(scores, curves, None, params, test_pred, getattr(model, "names", None))
