"""Raw loaders: each returns host arrays ``X`` (n, d) float64 and ``y`` (n,) float64, and the task."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np


class DataError(ValueError):
    """A data set that cannot be read; the message is one line naming the file and what is wrong."""


def xor(cfg: Any, seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.float64)
    return X, np.array([0, 1, 1, 0], dtype=np.float64), "binary"


def diabetes(cfg: Any, seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    return X, y.astype(np.float64), "regression"


def breast_cancer(cfg: Any, seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    return X, y.astype(np.float64), "binary"


def spambase(cfg: Any, seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    """UCI Spambase: 57 comma-separated features, then the label (1 = spam); no header."""
    _, table = _read_delimited(Path(cfg.path), header=False, sep=",")
    if table.shape[1] != 58:
        raise DataError(f"data.path={cfg.path}: expected 58 columns (57 features + label), found {table.shape[1]}")
    return table[:, :-1], table[:, -1], "binary"


def synthetic(cfg: Any, seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    """Gaussian features; the target is a linear term plus a smooth non-linear one plus noise.

    Regression: ``y = X w + sin(X v) + noise``; binary: ``y = [X w + sin(X v) + noise > 0]``.
    """
    rng = np.random.default_rng(seed)
    n, d = cfg.n_samples, cfg.n_features
    X = rng.standard_normal((n, d))
    w, v = rng.standard_normal((2, d)) / np.sqrt(d)
    signal = X @ w + np.sin(X @ v) + cfg.noise * rng.standard_normal(n)
    if cfg.task == "binary":
        return X, (signal > 0).astype(np.float64), "binary"
    return X, signal, "regression"


def csv_file(cfg: Any, seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    """A user file: delimited text, JSON (records or columns) or NPZ (arrays ``X`` and ``y``)."""
    path = Path(cfg.path)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        with np.load(path) as z:
            if "X" not in z or "y" not in z:
                raise DataError(f"data.path={path}: an .npz file needs arrays named X and y, found {sorted(z.files)}")
            X, y = np.asarray(z["X"], dtype=np.float64), np.asarray(z["y"], dtype=np.float64).ravel()
        if X.ndim != 2 or len(X) != len(y):
            raise DataError(f"data.path={path}: X must be (n, d) and y (n,), got {X.shape} and {y.shape}")
    else:
        names, table = _read_json(path) if suffix == ".json" else _read_delimited(path, cfg.header, cfg.sep)
        col = _target_index(cfg.target, names, table.shape[1], path)
        y = table[:, col]
        X = np.delete(table, col, axis=1)
    return X, y, _task(cfg.task, y, path)


def _task(task: str, y: np.ndarray, path: Path) -> str:
    values = np.unique(y)
    if task == "auto":
        return "binary" if len(values) == 2 else "regression"
    if task == "binary" and not np.isin(values, [0.0, 1.0]).all():
        raise DataError(f"data.task=binary needs a 0/1 target, {path} has values {values[:5].tolist()}")
    return task


def _target_index(target: Any, names: list[str] | None, n_cols: int, path: Path) -> int:
    if isinstance(target, str):
        if names is None or target not in names:
            raise DataError(f"data.target={target} is not a column of {path}: columns are {names}")
        return names.index(target)
    if not -n_cols <= target < n_cols:
        raise DataError(f"data.target={target} is out of range for {path}, which has {n_cols} columns")
    return target % n_cols


def _to_float(rows: list[list[Any]], names: list[str] | None, path: Path) -> np.ndarray:
    if not rows:
        raise DataError(f"data.path={path} holds no rows")
    widths = {len(r) for r in rows}
    if len(widths) != 1:
        raise DataError(f"data.path={path}: rows have different numbers of fields {sorted(widths)}; check data.sep")
    try:
        return np.asarray(rows, dtype=np.float64)
    except ValueError:
        for j in range(len(rows[0])):
            for i, r in enumerate(rows):
                try:
                    float(r[j])
                except (TypeError, ValueError):
                    col = names[j] if names else j
                    raise DataError(
                        f"data.path={path}: column {col} holds a non-numeric value {r[j]!r} (row {i + 1}); "
                        "every column must be numeric"
                    ) from None
        raise


SEP_ALIASES = {"\\t": "\t", "tab": "\t", "space": " "}  # Hydra strips a literal tab from an override


def _read_delimited(path: Path, header: bool, sep: str) -> tuple[list[str] | None, np.ndarray]:
    sep = SEP_ALIASES.get(sep, sep)
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f, delimiter=sep) if r]
    names = [c.strip() for c in rows.pop(0)] if header and rows else None
    return names, _to_float(rows, names, path)


def _read_json(path: Path) -> tuple[list[str], np.ndarray]:
    try:
        obj = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise DataError(f"data.path={path} is not valid JSON: {e}") from None
    if isinstance(obj, list) and obj and all(isinstance(r, dict) for r in obj):  # records
        names = list(obj[0])
        return names, _to_float([[r.get(k) for k in names] for r in obj], names, path)
    cols = obj.values() if isinstance(obj, dict) else []
    if cols and all(isinstance(c, list) for c in cols) and len({len(c) for c in cols}) == 1:  # columns
        names = list(obj)
        return names, _to_float([list(r) for r in zip(*obj.values())], names, path)
    raise DataError(f"data.path={path}: JSON must be a list of records or an object of equal-length columns")


LOADERS = {
    "xor": xor,
    "diabetes": diabetes,
    "breast_cancer": breast_cancer,
    "spambase": spambase,
    "synthetic": synthetic,
    "csv": csv_file,
}
