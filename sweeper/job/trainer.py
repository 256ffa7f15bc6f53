"""A function trainer: a whole training loop of the user's own, swept
and recorded like sweeper's runs.

``model._target_=my_loop.fit`` names a function (a class with
``init``/``forward``/``backward`` is a model; a function is a trainer)::

    def fit(data, report, *, lr, epochs, seed, **hyperparameters) -> predict

It receives ``lr``, ``epochs``, ``seed``, its ``model.NAME`` hyperparameters and,
of sweeper's training-loop keys (:data:`sweeper.contract.model.TRAINER_KEYS`:
``patience``, ``batch_size``, ``optimizer``, ...), only those its signature names;
one it does not name, set on the command line, is refused before anything runs.

``data`` holds the run's arrays on its device (``data.xp``, ``data.X_train``, ``data.y_train``,
``data.X_val``, ``data.y_val``, ``data.task``, ``data.n_outputs``): features standardised on the
training rows, a regression target standardised; the test rows are never passed.
``report(epoch, train_loss=…, val_loss=…)`` may be called at any epochs (losses on the data
as given: sweeper scales a regression loss to the target's units², as its own curves are); it
returns whether to go on, as Optuna's ``trial.should_prune()`` answers the other way round: False
where a run of sweeper's would stop (``patience``, a halving rung, a non-finite loss), recorded
as the run's ``stopped_at_epoch`` and ``stopped_by`` tags. ``predict(X) -> (n, n_outputs)``
answers in ``y_train``'s units; for a classification it returns logits, unless the callable
says ``predict.outputs = "probabilities"``. A function that raises is a FAILED run with its
message; a non-finite reported loss is a divergence. Not batched: each configuration is its own
call. A CPU run's ``predict`` is the logged MLflow model (pickled by cloudpickle, the user's
module in the model's code); a GPU run's holds device arrays and is not logged.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from omegaconf import OmegaConf
from sweeper import data
from sweeper.base.backend import resolved
from sweeper.base.tags import GROUP, GROUP_SIZE, LAUNCHER, TRAJECTORY
from sweeper.base.portable import link
from sweeper.base.stop import STOP
from sweeper.contract.model import trainer_keys
from sweeper.job import crossval, metrics
from sweeper.job.compute import Computed, DEFINED, Outcome, loss_unit
from sweeper.models.interface import load_target, split
from sweeper.models.usercode import user_line, user_traceback

__all__ = ["Stop", "computed", "train_and_score"]

log = logging.getLogger("sweeper")


@dataclass
class TrainerData:
    """What a function trainer gets: the run's arrays on its device, and what they are."""

    xp: Any
    X_train: Any  # (n, d)
    y_train: Any  # (n, 1): standardised target, 0/1, or the class index
    X_val: Any
    y_val: Any
    task: str  # regression | binary | multiclass
    n_outputs: int


class Stop:
    """When a function trainer's run of ours would stop, as ``report`` answers it
    (False: stop): early stopping (``patience``: ``epoch - best_epoch >= patience`` at a
    reported ``val_loss``, as :func:`sweeper.models.train.train` checks at its samples),
    a halving rung (``rung``: its epochs and why it stops there, as the launcher's strategy says
    it, :func:`sweeper.sweep.pruning.rung`; at the first report at or past it), a non-finite loss
    (a divergence), Ctrl-C. Where and why it said so are the run's tags (:meth:`tags`)."""

    def __init__(self, patience: int = 0, rung: tuple[int, str] | None = None) -> None:
        self.patience, self.rung = patience, rung
        self.best, self.best_epoch = math.inf, 0
        self.at: int | None = None  # the epoch it answered stop
        self.why = ""
        self.after = 0  # reports after that answer: the loop went on

    def go_on(self, epoch: int, losses: tuple[float | None, float | None]) -> bool:
        if self.at is not None:
            self.after += 1
            return False
        val = losses[1]
        if val is not None and val < self.best:
            self.best, self.best_epoch = val, epoch
        if any(v is not None and not math.isfinite(v) for v in losses):
            self.at, self.why = epoch, "a non-finite reported loss"
        elif self.patience and val is not None and epoch - self.best_epoch >= self.patience:
            self.at, self.why = (
                epoch,
                f"early stopping: patience={self.patience} (best val_loss at epoch "
                f"{self.best_epoch})",
            )
        elif self.rung is not None and epoch >= self.rung[0]:
            self.at, self.why = epoch, self.rung[1]
        elif STOP.is_set():
            self.at, self.why = epoch, "interrupted"
        return self.at is None

    def tags(self) -> dict[str, str]:
        if self.at is None:
            return {}
        out = {"stopped_at_epoch": str(self.at), "stopped_by": self.why}
        if self.after:
            out["stop_ignored"] = (
                f"{self.after} report(s) came after report() answered False at epoch {self.at}"
            )
        return out


def train_and_score(
    cfg: Any, dataset: data.Dataset, backend: Any, rung: tuple[int, str] | None = None
) -> Any:
    """Call the user's function on the device arrays, time it, score its
    ``predict`` on the host. ``report`` answers whether to go on (:class:`Stop`:
    ``patience``, the halving ``rung`` it is trained to, a divergence)."""
    path, kwargs = split(cfg.model)
    fn = load_target(path)
    dtype, xp = cfg.dtype, backend.xp
    t_h2d = backend.clock()
    arrays = [
        backend.to_device(getattr(dataset, a).astype(dtype))
        for a in ("X_train", "y_train", "X_val", "y_val")
    ]
    h2d = backend.clock() - t_h2d
    d = TrainerData(xp, *arrays, dataset.task, dataset.n_outputs)
    reports: list[tuple[int, float | None, float | None]] = []
    stop = Stop(int(cfg.get("patience") or 0), rung)

    def report(epoch: int, train_loss: Any = None, val_loss: Any = None) -> bool:
        """Keep the losses of ``epoch``; whether to go on (False: a run of ours would stop here)."""
        e, losses = int(epoch), (_float(train_loss), _float(val_loss))
        reports.append((e, *losses))
        return stop.go_on(e, losses)

    # sweeper's loop keys its signature names
    own = {k: cfg[k] for k in trainer_keys(fn) if k not in kwargs}
    t0 = backend.clock()
    try:
        predict = fn(d, report, lr=cfg.lr, epochs=cfg.epochs, seed=cfg.seed, **own, **kwargs)
    # the user's loop raised: a FAILED run that says what, and where
    except Exception as e:  # noqa: BLE001
        return Outcome(
            {"train_time_s": backend.clock() - t0, "h2d_time_s": h2d},
            {},
            f"{path} raised {user_line(e)}",
            error=user_traceback(e),
        )
    train_time = backend.clock() - t0
    out = _scored(cfg, dataset, backend, path, predict, reports, train_time, h2d)
    out.tags |= stop.tags()
    return out


def _scored(
    cfg: Any,
    dataset: data.Dataset,
    backend: Any,
    path: str,
    predict: Any,
    reports: list,
    train_time: float,
    h2d: float,
) -> Any:
    """The outcome of a trainer's call that returned: its curves,
    times, and its ``predict`` scored."""
    unit = loss_unit(dataset)
    curves = {}
    for i, name in ((1, "train_loss"), (2, "val_loss")):
        points = [(r[0], r[i]) for r in reports if r[i] is not None]
        if points:
            curves[name] = (
                np.array([p[0] for p in points]),
                np.array([p[1] for p in points]) * unit,
            )
    last = reports[-1][0] if reports else cfg.epochs
    scores = {
        "train_time_s": train_time,
        "h2d_time_s": h2d,
        "warmup_time_s": 0.0,
        "epochs_run": last,
        "epochs_per_s": last / train_time if train_time > 0 else 0.0,
    }
    if not curves:
        log.info(
            "%s reported no losses: no curve (call report(epoch, train_loss=..., val_loss=...) "
            "to have one)",
            path,
        )
    bad = [(e, v) for name in curves for e, v in zip(*curves[name]) if not np.isfinite(v)]
    if bad:
        return Outcome(
            scores,
            curves,
            f"diverged at epoch {min(e for e, _ in bad)} (a non-finite reported loss)",
        )
    if not callable(predict):
        return Outcome(
            scores,
            curves,
            f"{path} returned {type(predict).__name__}: expected predict(X) -> (n, n_outputs)",
        )
    val = [c for c in curves.get("val_loss", ((), ()))[1]]
    if val:
        scores["best_epoch"] = int(curves["val_loss"][0][int(np.argmin(val))])
    return _score(dataset, backend, predict, cfg.dtype, scores, curves, path)


def _score(
    dataset: data.Dataset,
    backend: Any,
    predict: Any,
    dtype: str,
    scores: dict[str, float],
    curves: dict[str, Any],
    path: str,
) -> Any:
    X_eval = backend.to_device(data.stack_rows(dataset.X_val, dataset.X_test).astype(dtype))
    try:
        pred = np.asarray(backend.to_numpy(predict(X_eval)), dtype=np.float64)
    except Exception as e:  # noqa: BLE001
        return Outcome(
            scores, curves, f"{path}'s predict raised {user_line(e)}", error=user_traceback(e)
        )
    want = (X_eval.shape[0], dataset.n_outputs)
    if pred.ndim == 1 and dataset.n_outputs == 1:
        pred = pred.reshape(-1, 1)
    if pred.shape != want:
        return Outcome(scores, curves, f"{path}'s predict gave shape {pred.shape}: expected {want}")
    if not np.isfinite(pred).all():
        return Outcome(
            scores, curves, f"diverged at epoch {scores['epochs_run']} (non-finite predictions)"
        )
    if dataset.task != "regression" and getattr(predict, "outputs", "logits") != "probabilities":
        pred = link(dataset.task, pred)
    elif dataset.task != "regression" and (wrong := _not_probabilities(pred, dataset.task)):
        return Outcome(
            scores,
            curves,
            f"{path}'s predict says outputs='probabilities', but {wrong}: return "
            "probabilities, or logits without predict.outputs",
        )
    n_val = dataset.X_val.shape[0]
    if dataset.task == "regression":
        pred = dataset.to_original(pred)
    truth = {"val": dataset.to_original(dataset.y_val), "test": dataset.to_original(dataset.y_test)}
    with np.errstate(over="ignore", invalid="ignore"):
        quality = metrics.score(dataset.task, truth["val"], pred[:n_val], "val")
        quality |= metrics.score(dataset.task, truth["test"], pred[n_val:], "test")
    lost = [
        f"{s}_{m}"
        for s in ("val", "test")
        for m in DEFINED[dataset.task]
        if f"{s}_{m}" not in quality
    ]
    if lost:
        return Outcome(
            scores, curves, f"diverged at epoch {scores['epochs_run']} (non-finite {lost[0]})"
        )
    test_pred = pred[n_val:] if dataset.task == "multiclass" else pred[n_val:].ravel()
    return Outcome(
        scores | quality,
        curves,
        None,
        [],
        test_pred,
        None,
        predict if backend.device == "cpu" else None,
    )


def _not_probabilities(pred: np.ndarray, task: str) -> str | None:
    """Why ``pred`` (n, k) are no probabilities of the task (None when they are):
    a value outside [0, 1], or a multi-class row whose values do not sum to 1."""
    if pred.min() < 0 or pred.max() > 1:
        return f"it returned values from {pred.min():.4g} to {pred.max():.4g}, outside [0, 1]"
    sums = pred.sum(axis=1)
    if task == "multiclass" and not np.allclose(sums, 1.0, atol=1e-6):
        return f"its rows sum to {sums.min():.4g}..{sums.max():.4g}, not 1"
    return None


def _float(v: Any) -> float | None:
    """A reported loss as a float (a device scalar read once); None when not reported."""
    if v is None:
        return None
    try:
        return float(v.get()) if hasattr(v, "get") else float(v)
    except (TypeError, ValueError):
        return math.nan


def computed(plain: dict[str, Any], rung: tuple[int, str] | None = None) -> Any:
    """A function trainer's job computed ahead of its record (the batched
    launcher's successive halving), trained by its own loop until ``report``
    answers stop at ``rung`` (:class:`Stop`; its ``epochs`` kept: a loop may read them); None when
    its device is not there (its job then says so through the one-job path)."""

    t0 = time.perf_counter()
    if (backend := resolved(plain["device"])) is None:
        return None
    cfg = OmegaConf.create(plain)
    dataset = data.load_plain(plain["data"])

    def one(c: Any, ds: data.Dataset, b: Any) -> Any:
        return train_and_score(c, ds, b, rung)

    out = crossval.train(
        cfg, backend, one, dataset, lambda i: data.load_plain(plain["data"], fold=i)
    )
    tags = {
        LAUNCHER: "batched",
        GROUP: uuid.uuid4().hex[:12],
        GROUP_SIZE: "1",
        TRAJECTORY: uuid.uuid4().hex[:12],
    }
    return Computed(out, tags, time.perf_counter() - t0)
