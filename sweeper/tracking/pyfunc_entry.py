"""Models-from-code entry point: MLflow copies this file into each logged model and runs it on load.

Building the model from code (instead of pickling an object) is what MLflow recommends: loading a
model then executes this short, readable file rather than deserialising bytes.
"""
import json
from pathlib import Path

import mlflow.pyfunc
import numpy as np


class SweeperModel(mlflow.pyfunc.PythonModel):
    """Standardise with the training scaler, run the MLP forward on NumPy, map back to target units."""

    def load_context(self, context) -> None:
        with np.load(context.artifacts["weights"]) as z:
            self.arrays = {k: z[k] for k in z.files}
        self.meta = json.loads(Path(context.artifacts["meta"]).read_text())
        self.vectorizer = None
        if "text" in self.meta:  # text data: rebuild the fitted vectorizer from its terms and IDF weights
            from sweeper.data import vectorizer_from_state

            state = {k[4:]: v for k, v in self.arrays.items() if k.startswith("vec_")}
            self.vectorizer = vectorizer_from_state(self.meta["text"], state)

    def predict(self, context, model_input: np.ndarray, params: dict | None = None) -> np.ndarray:
        from sweeper.models.mlp import MLP

        a = self.arrays
        if self.vectorizer is not None:  # a string column (or a list of strings) → sparse features
            docs = model_input.iloc[:, 0] if hasattr(model_input, "iloc") and model_input.ndim == 2 else model_input
            X = self.vectorizer.transform([str(d) for d in np.asarray(docs, dtype=object).ravel()])
        elif "columns" in self.meta:  # a table with a text column: its raw columns, one-hot encoded as in training
            from sweeper.data.columns import encode_rows

            state = {"columns": self.meta["columns"], "x_mean": a["x_mean"], "x_scale": a["x_scale"]}
            X = encode_rows(state, model_input)
        else:
            X = (np.asarray(model_input, dtype=np.float64) - a["x_mean"]) / a["x_scale"]
        n = self.meta["n_params"]
        mlp = MLP(np, [a[f"p{i}"].astype(np.float64) for i in range(n)], self.meta["activation"], self.meta["task"])
        pred = mlp.predict(X)
        if self.meta["task"] == "multiclass":
            return pred  # (n, k): the probability of each class, in the order of meta["classes"]
        pred = pred.ravel()
        return pred * self.meta["y_scale"] + self.meta["y_mean"] if self.meta["task"] == "regression" else pred


mlflow.models.set_model(SweeperModel())
