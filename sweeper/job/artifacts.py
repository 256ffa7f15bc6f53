"""The files a run leaves beside its model: test predictions, a confusion matrix, and its data sets as MLflow inputs."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig

from sweeper import data, tracking
from sweeper.job import metrics


def inputs(cfg: DictConfig, dataset: data.Dataset) -> list[Any]:
    """The run's three splits as MLflow dataset inputs, named as the data set's default experiment is, from
    its file (``data.path``) or the bundled data set's name."""
    from sweeper.contract.config import experiment_name

    path = cfg.data.get("path") or ""
    splits = {"training": (dataset.X_train, dataset.y_train), "validation": (dataset.X_val, dataset.y_val),
              "test": (dataset.X_test, dataset.y_test)}
    return tracking.dataset_inputs(experiment_name(cfg.data.name, path), path or cfg.data.name, splits)



def predictions_csv(folder: Path, dataset: data.Dataset, pred: np.ndarray) -> Path:
    """The test split's targets and predictions (target units, or P(y = 1); for k classes the predicted
    class index and the k probabilities ``p_<class>``), logged beside the model."""
    path = folder / "test_predictions.csv"
    y = dataset.to_original(dataset.y_test).ravel()
    if dataset.task == "multiclass":
        columns, header = [y, pred.argmax(axis=1), pred], ",".join(["y_true", "y_pred", *(f"p_{c}" for c in dataset.classes)])
    else:
        columns, header = [y, pred.ravel()], "y_true,y_pred"
    np.savetxt(path, np.column_stack(columns), delimiter=",", header=header, comments="", fmt="%.17g")
    return path



def confusion_csv(folder: Path, dataset: data.Dataset, prob: np.ndarray) -> Path:
    """The test split's confusion matrix: a row per true class, a column per predicted class, with names."""
    path = folder / "confusion_matrix.csv"
    counts = metrics.confusion(dataset.y_test, prob)
    lines = [",".join(["true\\predicted", *dataset.classes])]
    lines += [",".join([c, *map(str, row)]) for c, row in zip(dataset.classes, counts.tolist())]
    path.write_text("\n".join(lines) + "\n")
    return path
