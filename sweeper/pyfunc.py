"""The trained network as an MLflow pyfunc model: weights and scalers in an ``.npz``, NumPy at load time.

    model = mlflow.pyfunc.load_model(f"runs:/{run_id}/model")
    model.predict(X)   # X: raw features (n, d) → predictions in the target's units, P(y = 1), or (n, k)
                       #    class probabilities (the classes in meta.json's order)
    model.predict(pd.DataFrame({"text": ["WIN a prize now", "see you at 6"]}))   # text data: P(spam)
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



def save(path: Path, params: list[np.ndarray], dataset: Any, activation: str, X_example: Any,
         y_example: np.ndarray, data_cfg: Any = None) -> Path:
    """Write the pyfunc model folder at ``path`` (weights as host arrays) and return it.

    Text data (a dataset with a ``vectorizer``): the model takes a string column (``X_example`` holds
    documents) and carries the fitted vectorizer as its terms and IDF weights in the ``.npz``."""
    from mlflow.models import infer_signature

    if path.parent.exists():  # a job re-run into the same output folder
        shutil.rmtree(path.parent)
    path.parent.mkdir(parents=True)
    weights, meta = path.parent / "weights.npz", path.parent / "meta.json"
    info = {"n_params": len(params), "activation": activation, "task": dataset.task,
            "y_mean": dataset.y_mean, "y_scale": dataset.y_scale, "classes": list(dataset.classes or [])}
    arrays = {f"p{i}": p for i, p in enumerate(params)}
    requirements = ["numpy", "mlflow"]  # explicit: inferring them costs seconds per run
    if dataset.vectorizer is not None:
        from sweeper.data import vectorizer_state

        info["text"], state = vectorizer_state(dataset.vectorizer, data_cfg)
        arrays |= {f"vec_{k}": v for k, v in state.items()}
        X_example = pd_text(X_example)
        requirements.append("scikit-learn")
    else:
        arrays |= {"x_mean": dataset.x_mean, "x_scale": dataset.x_scale}
    np.savez(weights, **arrays)
    meta.write_text(json.dumps(info))
    mlflow.pyfunc.save_model(
        path,
        python_model=str(ENTRY),  # models from code, not a pickle
        artifacts={"weights": str(weights), "meta": str(meta)},
        signature=infer_signature(X_example, y_example),
        input_example=X_example[:5],
        pip_requirements=requirements,
    )
    return path


def pd_text(docs: Any) -> Any:
    """Documents as the one-column DataFrame (``text``, a string column) a text model's signature names."""
    import pandas as pd

    return pd.DataFrame({TEXT_COLUMN: [str(d) for d in docs]})


TEXT_COLUMN = "text"
