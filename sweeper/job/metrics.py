"""Scores on the host, in the target's original units: the metric names are part of the contract."""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any

import numpy as np

__all__ = [
    "LOWER_IS_BETTER",
    "PRIMARY",
    "TIE_BREAK",
    "TIMINGS",
    "binary",
    "confusion",
    "multiclass",
    "rank_key",
    "score",
    "task_of",
]

# Measurements of speed, which vary from run to run; every other
# metric is deterministic on one machine.
TIMINGS = (
    "wall_time_s",
    "train_time_s",
    "group_train_time_s",
    "warmup_time_s",
    "h2d_time_s",
    "epochs_per_s",
    "speedup",
    "speedup_wall",
)

# Every quality metric (after its val_/test_ prefix) and whether lower is better: errors and losses
# are, scores (accuracy, F1, ROC AUC, R²) are not.
LOWER_IS_BETTER = MappingProxyType(
    {
        "mse": True,
        "mae": True,
        "rmse": True,
        "log_loss": True,
        "accuracy": False,
        "f1": False,
        "f1_macro": False,
        "roc_auc": False,
        "r2": False,
    }
)

# The metric a sweep is ranked by, per task (prefixed with val_ /
# test_), and whether lower is better.
PRIMARY = MappingProxyType(
    {
        "regression": ("mse", True),
        "binary": ("accuracy", False),
        "multiclass": ("accuracy", False),
    }
)


def task_of(names: Any) -> str:
    """The task of a run from its metric names: multiclass
    (``val_f1_macro``), binary (``val_accuracy``), or regression."""
    return (
        "multiclass"
        if "val_f1_macro" in names
        else "binary"
        if "val_accuracy" in names
        else "regression"
    )


def regression(y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    """MSE, MAE, RMSE and R² of predictions ``pred`` against ``y`` (both (n,) or (n, 1))."""
    y, pred = y.ravel(), pred.ravel()
    err = pred - y
    mse = float(np.mean(err**2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum(err**2)) / ss_tot if ss_tot > 0 else math.nan
    return {"mse": mse, "mae": float(np.mean(np.abs(err))), "rmse": math.sqrt(mse), "r2": r2}


def binary(y: np.ndarray, prob: np.ndarray) -> dict[str, float]:
    """Accuracy and F1 at threshold 0.5, log loss, ROC AUC, and
    MSE/MAE of the probabilities (Brier = MSE).

    Written with NumPy (scikit-learn's metrics cost ~1 s to import in every job process); the test
    suite checks them against scikit-learn's ``f1_score``, ``log_loss`` and ``roc_auc_score``.
    """
    y, prob = y.ravel().astype(int), prob.ravel()
    hit = prob >= 0.5
    tp = float(np.sum(hit & (y == 1)))
    predicted, actual = float(np.sum(hit)), float(np.sum(y == 1))
    p = np.clip(prob, 1e-15, 1 - 1e-15)
    return {
        "accuracy": float(np.mean(hit == y)),
        "f1": 2 * tp / (predicted + actual) if predicted + actual else 0.0,
        "log_loss": float(-np.mean(np.where(y == 1, np.log(p), np.log1p(-p)))),
        "roc_auc": roc_auc(y, prob),
        "mse": float(np.mean((prob - y) ** 2)),
        "mae": float(np.mean(np.abs(prob - y))),
    }


def roc_auc(y: np.ndarray, score: np.ndarray) -> float:
    """Area under the ROC curve: the probability that a positive outscores a negative (ties count
    ½), from the ranks of the scores (Mann-Whitney U). NaN when only one class is present."""
    pos, neg = int(np.sum(y == 1)), int(np.sum(y != 1))
    if pos == 0 or neg == 0:
        return math.nan
    order = np.argsort(score, kind="mergesort")
    s = score[order]
    ranks = np.empty(len(s))
    # runs of equal scores share their mean rank
    edges = np.flatnonzero(np.r_[True, s[1:] != s[:-1], True])
    for a, b in zip(edges[:-1], edges[1:]):
        ranks[order[a:b]] = (a + b + 1) / 2
    return float((ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


def confusion(y: np.ndarray, prob: np.ndarray) -> np.ndarray:
    """Counts ``C[i, j]`` of rows of class ``i`` predicted as ``j``
    (the most probable class), (k, k)."""
    k = prob.shape[1]
    return np.bincount(y.ravel().astype(int) * k + prob.argmax(axis=1), minlength=k * k).reshape(
        k, k
    )


def multiclass(y: np.ndarray, prob: np.ndarray) -> dict[str, float]:
    """Accuracy, macro-averaged F1 (a class never true nor predicted counts 0, as scikit-learn's
    ``zero_division=0``) and log loss (probabilities clipped to [1e-15, 1], renormalised) of class
    probabilities ``prob`` (n, k) against class indices ``y``."""
    c = confusion(y, prob).astype(float)
    tp, predicted, actual = np.diag(c), c.sum(axis=0), c.sum(axis=1)
    f1 = np.divide(2 * tp, predicted + actual, out=np.zeros_like(tp), where=predicted + actual > 0)
    p = np.clip(prob, 1e-15, 1.0)
    p = p / p.sum(axis=1, keepdims=True)
    return {
        "accuracy": float(tp.sum() / c.sum()),
        "f1_macro": float(f1.mean()),
        "log_loss": float(-np.mean(np.log(p[np.arange(len(p)), y.ravel().astype(int)]))),
    }


def score(task: str, y: np.ndarray, pred: np.ndarray, prefix: str) -> dict[str, float]:
    """The task's metrics named ``{prefix}_{metric}``; undefined ones (NaN) are left out."""
    values = {"regression": regression, "binary": binary, "multiclass": multiclass}[task](y, pred)
    return {f"{prefix}_{k}": v for k, v in values.items() if math.isfinite(v)}


# Ties of the ranking metric (common for accuracy on a small validation
# set) go to the lower validation loss, then to the earlier run: one
# rule for the leaderboard, the parent's best_run_id and promote.
TIE_BREAK = "val_log_loss"


def rank_key(
    value: float, lower: bool, tie_loss: float | None, start_time: int | None
) -> tuple[float, float, int]:
    """Sort key of a run with a finite ranking ``value``: the better value first, then the lower
    ``tie_loss`` (its TIE_BREAK metric; none ranks last), then the earlier ``start_time``."""
    loss = tie_loss if tie_loss is not None and math.isfinite(tie_loss) else math.inf
    return (value if lower else -value, loss, start_time or 0)
