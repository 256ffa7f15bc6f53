"""Models-from-code entry point: MLflow copies this file into each logged model and runs it on load.

Building the model from code (instead of pickling an object) is what MLflow recommends: loading a
model then executes this short, readable file rather than deserialising bytes. It imports MLflow,
NumPy, pandas and ``portable`` — sweeper/base/portable.py, which travels in the model's ``code/``
folder — and nothing of sweeper, so the model loads wherever its requirements.txt is installed.
"""

import json
from pathlib import Path

import mlflow.pyfunc
import numpy as np


__all__: list[str] = []


class SweeperModel(mlflow.pyfunc.PythonModel):
    """Encode the input as in training, run the MLP forward on NumPy, map back to target units."""

    def load_context(self, context) -> None:
        # here: MLflow runs this file; portable is only in the model's code/ (measured: absent here)
        import portable  # the model's code/portable.py (on the path once the model loads)

        self.portable = portable
        with np.load(context.artifacts["weights"]) as z:
            self.arrays = {k: z[k] for k in z.files}
        self.meta = json.loads(Path(context.artifacts["meta"]).read_text())
        # a function trainer's predict (its module is in the model's code/)
        if "predict" in context.artifacts:
            # here: MLflow runs this file without sweeper; mlflow.pyfunc loads it (~0 ms, measured)
            import cloudpickle

            with open(context.artifacts["predict"], "rb") as f:
                self.trainer_predict = cloudpickle.load(f)

    def predict(self, context, model_input: np.ndarray, params: dict | None = None) -> np.ndarray:
        a, meta = self.arrays, self.meta
        if "text" in meta:  # a string column (or a list of strings) → sparse features
            docs = (
                model_input.iloc[:, 0]
                if hasattr(model_input, "iloc") and model_input.ndim == 2
                else model_input
            )
            state = {k[4:]: v for k, v in a.items() if k.startswith("vec_")}
            X = self.portable.vectorize(
                meta["text"], state, [str(d) for d in np.asarray(docs, dtype=object).ravel()]
            )
        elif isinstance(model_input, np.ndarray):  # raw features in the columns' order
            X = (np.asarray(model_input, dtype=np.float64) - a["x_mean"]) / a["x_scale"]
        # a DataFrame (or records): the columns by name, categories one-hot encoded as in training
        else:
            X = self.portable.encode_rows(
                {"columns": meta["columns"], "x_mean": a["x_mean"], "x_scale": a["x_scale"]},
                model_input,
            )
        far = (
            None if "text" in meta else self.portable.far_from_training(meta.get("columns", []), X)
        )
        # rows in another scale than the training rows (unscaled ones
        # where it learned scaled ones): said
        if far:
            # here: MLflow runs this file without sweeper; warnings is loaded (~0 ms, measured)
            import warnings

            warnings.warn(f"sweeper model: {far}", UserWarning, stacklevel=2)
        params_ = [a[f"p{i}"].astype(np.float64) for i in range(meta["n_params"])]
        if "trainer" in meta:  # a function trainer's own predict, on the standardised features
            pred = np.asarray(self.trainer_predict(X), dtype=np.float64).reshape(X.shape[0], -1)
            if meta["trainer"]["outputs"] != "probabilities":
                pred = self.portable.link(meta["task"], pred)
        # a model of the interface: the user's class (its module is in the model's code/)
        elif "model" in meta:
            pred = self.portable.user_forward(meta["model"], params_, meta["task"], X)
        else:
            pred = self.portable.forward(params_, meta["activation"], meta["task"], X)
        if meta["task"] == "multiclass":  # (n, k): a column p_<class> per class
            # here: MLflow runs this file without sweeper; mlflow.pyfunc loads it (~0 ms, measured)
            import pandas as pd

            return pd.DataFrame(pred, columns=[f"p_{c}" for c in meta["classes"]])
        pred = pred.ravel()
        return pred * meta["y_scale"] + meta["y_mean"] if meta["task"] == "regression" else pred


mlflow.models.set_model(SweeperModel())
