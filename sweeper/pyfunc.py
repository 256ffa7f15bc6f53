"""The trained network as an MLflow pyfunc model: weights and scalers in an ``.npz``, NumPy at load time.

    model = mlflow.pyfunc.load_model(f"runs:/{run_id}/model")
    model.predict(X)   # X: raw features (n, d) → predictions in the target's units, P(y = 1), or (n, k)
                       #    class probabilities (the classes in meta.json's order)
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from sweeper import tracking  # noqa: F401  (first: it sets MLflow's environment before MLflow is imported)
import mlflow.pyfunc  # noqa: E402,I001

# The model class lives in pyfunc_entry.py, which MLflow runs when a model is loaded ("models from
# code"): defining it here would make MLflow warn, on every run, that predict() has no type hints.
ENTRY = Path(__file__).with_name("pyfunc_entry.py")



def save(path: Path, params: list[np.ndarray], dataset: Any, activation: str, X_example: np.ndarray,
         y_example: np.ndarray) -> Path:
    """Write the pyfunc model folder at ``path`` (weights as host arrays) and return it."""
    from mlflow.models import infer_signature

    if path.parent.exists():  # a job re-run into the same output folder
        shutil.rmtree(path.parent)
    path.parent.mkdir(parents=True)
    weights, meta = path.parent / "weights.npz", path.parent / "meta.json"
    np.savez(weights, x_mean=dataset.x_mean, x_scale=dataset.x_scale, **{f"p{i}": p for i, p in enumerate(params)})
    meta.write_text(json.dumps({"n_params": len(params), "activation": activation, "task": dataset.task,
                                "y_mean": dataset.y_mean, "y_scale": dataset.y_scale,
                                "classes": list(dataset.classes or [])}))
    mlflow.pyfunc.save_model(
        path,
        python_model=str(ENTRY),  # models from code, not a pickle
        artifacts={"weights": str(weights), "meta": str(meta)},
        signature=infer_signature(X_example, y_example),
        input_example=X_example[:5],
        pip_requirements=["numpy", "mlflow"],  # explicit: inferring them costs seconds per run
    )
    return path
