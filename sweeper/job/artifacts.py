"""The files a run leaves beside its model: test predictions, a
confusion matrix, and its data sets as MLflow inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig

from sweeper import data, tracking
from sweeper.base.output import csv_field
from sweeper.contract.config import experiment_name
from sweeper.job import metrics


__all__ = ["binary_csvs", "columns_json", "confusion_csv", "inputs", "predictions_csv"]


def inputs(cfg: DictConfig, dataset: data.Dataset) -> list[Any]:
    """The run's three splits as MLflow dataset inputs, named as the data set's default
    experiment is, from its file (``data.path``) or the bundled data set's name."""

    path = cfg.data.get("path") or ""
    splits = {
        "training": (dataset.X_train, dataset.y_train),
        "validation": (dataset.X_val, dataset.y_val),
        "test": (dataset.X_test, dataset.y_test),
    }
    return tracking.dataset_inputs(
        experiment_name(cfg.data.name, path), path or cfg.data.name, splits
    )


def columns_json(folder: Path, dataset: data.Dataset) -> Path:
    """A table's column report: for each column of the file what was decided
    (number, category, date, id, text, dropped), its missing cells and how
    they were filled, a possible code or leak; and the summaries."""

    path = folder / "columns.json"
    summary = {
        k: dataset.decisions[k]
        for k in (*data.DECIDED, *data.DECIDED_COLUMNS)
        if k in dataset.decisions
    }
    path.write_text(
        json.dumps({"columns": dataset.report, "decided": summary}, indent=1, default=str) + "\n"
    )
    return path


def predictions_csv(folder: Path, dataset: data.Dataset, pred: np.ndarray) -> Path:
    """The test split's targets and predictions: target units, or P(y = 1); for k
    classes the true and predicted class labels and the k probabilities ``p_<class>``.
    Targets print as the data hold them (15 significant digits: ``72``, not
    ``71.99999999999999``), predictions in the fewest digits that read back exactly."""
    path = folder / "test_predictions.csv"
    y = dataset.to_original(dataset.y_test).ravel()
    if dataset.task == "multiclass":
        names = np.asarray([str(c) for c in dataset.classes], dtype=object)
        header = ["y_true", "y_pred", *(f"p_{c}" for c in dataset.classes)]
        rows = [
            [csv_field(names[int(t)]), csv_field(names[int(p.argmax())]), *map(repr, map(float, p))]
            for t, p in zip(y, pred)
        ]
    else:
        header = ["y_true", "y_pred"]
        rows = [[_target(t), repr(float(p))] for t, p in zip(y, pred.ravel())]
    path.write_text("\n".join(",".join(r) for r in [header, *rows]) + "\n")
    return path


def _target(v: float) -> str:
    """A target value as the data wrote it: 15 significant digits (the
    scaler's round trip adds noise past them)."""
    text = f"{float(v):.15g}"
    return text


def binary_csvs(folder: Path, dataset: data.Dataset, prob: np.ndarray) -> list[Path]:
    """A binary run's test-split confusion matrix at 0.5 (``confusion_matrix.csv``,
    the classes by name) and its ROC and precision-recall curves
    (``roc_curve.csv``: threshold, fpr, tpr; ``pr_curve.csv``: threshold,
    precision, recall), one point per distinct predicted probability."""
    y = dataset.y_test.ravel().astype(int)
    p = np.asarray(prob, dtype=np.float64).ravel()
    negative = "0" if dataset.positive_class is None else f"not {dataset.positive_class}"
    names = [negative, "1" if dataset.positive_class is None else str(dataset.positive_class)]
    counts = np.bincount(y * 2 + (p >= 0.5).astype(int), minlength=4).reshape(2, 2)
    confusion = folder / "confusion_matrix.csv"
    lines = [",".join(["true\\predicted", *map(csv_field, names)])]
    lines += [",".join([csv_field(c), *map(str, row)]) for c, row in zip(names, counts.tolist())]
    confusion.write_text("\n".join(lines) + "\n")
    order = np.argsort(-p, kind="stable")
    p_sorted, y_sorted = p[order], y[order]
    # the last row of each distinct threshold
    last = np.r_[np.flatnonzero(np.diff(p_sorted)), len(p) - 1]
    tp = np.cumsum(y_sorted)[last]
    fp = (last + 1) - tp
    positives, negatives = max(int(y.sum()), 1), max(int(len(y) - y.sum()), 1)
    thresholds, tp, fp = (
        p_sorted[last].tolist(),
        tp.tolist(),
        fp.tolist(),
    )  # Python floats: repr is the number
    roc, pr = folder / "roc_curve.csv", folder / "pr_curve.csv"
    roc.write_text(
        "threshold,fpr,tpr\ninf,0,0\n"
        + "".join(
            f"{t!r},{f / negatives!r},{q / positives!r}\n" for t, f, q in zip(thresholds, fp, tp)
        )
    )
    pr.write_text(
        "threshold,precision,recall\n"
        + "".join(
            f"{t!r},{q / (q + f)!r},{q / positives!r}\n" for t, f, q in zip(thresholds, fp, tp)
        )
    )
    return [confusion, roc, pr]


def confusion_csv(folder: Path, dataset: data.Dataset, prob: np.ndarray) -> Path:
    """The test split's confusion matrix: a row per true class, a
    column per predicted class, with names."""
    path = folder / "confusion_matrix.csv"
    counts = metrics.confusion(dataset.y_test, prob)
    lines = [",".join(["true\\predicted", *map(csv_field, dataset.classes)])]
    lines += [
        ",".join([csv_field(c), *map(str, row)]) for c, row in zip(dataset.classes, counts.tolist())
    ]
    path.write_text("\n".join(lines) + "\n")
    return path
