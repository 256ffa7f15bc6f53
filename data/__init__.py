"""data/: load a data set as host arrays, split it with the run's seed, and standardise on train only."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sweeper.data.loaders import LOADERS, DataError

__all__ = ["DataError", "Dataset", "load", "split"]


@dataclass
class Dataset:
    """Standardised host arrays ``X_*`` (n, d) and targets ``y_*`` (n, 1), float64.

    For regression the target is standardised with the training mean and scale; :meth:`to_original`
    maps predictions back so metrics are in the target's own units. Binary targets are 0/1;
    ``positive_class`` names the file's value read as 1 (user files only, e.g. ``spam``).
    """

    name: str
    task: str  # "regression" | "binary" | "multiclass" (y: the class index)
    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    y_mean: float = 0.0
    y_scale: float = 1.0
    x_mean: np.ndarray | None = None  # (d,) the training scaler, to map raw features in
    x_scale: np.ndarray | None = None
    positive_class: str | None = None
    classes: tuple[str, ...] | None = None  # a multi-class target's class names, in the order of its indices

    @property
    def n_features(self) -> int:
        return self.X_train.shape[1]

    @property
    def n_outputs(self) -> int:
        """The model's outputs: one per class for a multi-class task, else one."""
        return len(self.classes) if self.task == "multiclass" else 1

    def to_original(self, y: np.ndarray) -> np.ndarray:
        return y * self.y_scale + self.y_mean

    def raw(self, X: np.ndarray) -> np.ndarray:
        """Standardised rows back to the features as read from the file."""
        return X * self.x_scale + self.x_mean


def split(n: int, val_fraction: float, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seeded train/val/test row indices. A fraction of 0 reuses the training rows (e.g. XOR's 4 points)."""
    order = np.random.default_rng(seed).permutation(n)
    n_test = max(1, round(n * test_fraction)) if test_fraction else 0
    n_val = max(1, round(n * val_fraction)) if val_fraction else 0
    test, val, train = order[:n_test], order[n_test : n_test + n_val], order[n_test + n_val :]
    return train, (val if n_val else train), (test if n_test else train)


def _scale(a: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    mean, std = a.mean(axis=axis), a.std(axis=axis)
    return mean, np.where(std > 0, std, 1.0)


def load(cfg: Any, seed: int) -> Dataset:
    """Load ``cfg.name`` (a ``data`` config node), split it with ``seed`` and standardise it."""
    X, y, task, positive_class, classes = LOADERS[cfg.name](cfg, seed)
    path = getattr(cfg, "path", None)  # a DictConfig, or a plain namespace (the benchmarks)
    where = f"data.path={path}" if path is not None else f"data={cfg.name}"
    if not np.isfinite(X).all() or not np.isfinite(y).all():
        raise DataError(f"{where}: the data hold missing or non-finite values; clean them first")
    train, val, test = split(len(X), cfg.val_fraction, cfg.test_fraction, seed)
    if len(train) < 2:
        raise DataError(
            f"{where}: too few rows ({len(X)}) for data.val_fraction={cfg.val_fraction} and "
            f"data.test_fraction={cfg.test_fraction}: training needs at least 2 rows, validation and test 1 each; "
            "add rows, or set both fractions to 0 to score on the training rows"
        )
    mean, std = _scale(X[train])  # fitted on the training rows only
    y_mean, y_scale = _scale(y[train]) if task == "regression" else (0.0, 1.0)

    def rows(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (X[idx] - mean) / std, ((y[idx] - y_mean) / y_scale).reshape(-1, 1)

    return Dataset(cfg.name, task, *rows(train), *rows(val), *rows(test), float(y_mean), float(y_scale), mean, std,
                   positive_class, classes)
