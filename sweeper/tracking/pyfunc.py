"""The trained network as an MLflow pyfunc model: weights and scalers
in an ``.npz``, NumPy at load time.

model = mlflow.pyfunc.load_model(f"runs:/{run_id}/model")
model.predict(df) # df: the data set's columns by name → predictions in the target's
units, P(y = 1), or
                   #    for k classes a DataFrame of probabilities p_<class>
model.predict(pd.DataFrame({"text": ["WIN a prize now", "see you at 6"]}))   # text data: P(spam)
model.predict(pd.DataFrame({"sex": ["M", "F"], "length": [0.5, 0.4]})) # a table with a
text column: raw columns
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import shutil
import sys
import tempfile
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

# imported by sweeper's tracking once it has set MLflow's environment (tracking.mlflow_defaults)
import mlflow.pyfunc

import cloudpickle
import pandas as pd
import yaml
from mlflow.models import ModelSignature, infer_signature
from mlflow.types import ColSpec, Schema
from mlflow.types.schema import AnyType
from sweeper.base import state
from sweeper.base.output import first_line
from sweeper.base.environment import cache_root
from sweeper.base.tested import installed, shortcut

__all__ = ["NotSaved", "cache_dir", "save"]

# The model class lives in pyfunc_entry.py, which MLflow runs when a model is loaded ("models from
# code"): defining it here would make MLflow warn, on every run, that predict() has no type hints.
ENTRY = Path(__file__).with_name("pyfunc_entry.py")
# at load: the model's code/portable.py
PORTABLE = Path(__file__).parents[1] / "base" / "portable.py"


def requirements_for(text: bool) -> list[str]:
    """What a model needs at load, pinned to this process's versions
    (explicit: inferring them costs seconds)."""

    names = ["mlflow", "numpy", "pandas"] + (["scipy"] if text else [])
    # (one not installed under its name, mlflow-skinny say: unpinned)
    return [f"{n}=={v}" if (v := installed(n)) else n for n in names]


def class_frame(prob: np.ndarray, classes: list[str]) -> Any:
    """(n, k) class probabilities as a DataFrame with one column per class, ``p_<class>``."""

    return pd.DataFrame(np.asarray(prob, dtype=np.float64), columns=[f"p_{c}" for c in classes])


def user_code(target: str) -> list[str]:
    """What a model of the interface needs at load beside ``portable.py``: the user's
    module file, or the folder of its top-level package (MLflow puts the model's
    ``code/`` on the path, so ``my_nets.TwoLayerNet`` imports there as it did here)."""

    module_name = target.partition(":")[0] if ":" in target else target.rpartition(".")[0]
    top = importlib.import_module(module_name.split(".")[0])
    where = Path(top.__file__)
    return [str(where.parent if where.name == "__init__.py" else where)]


class NotSaved(Exception):
    """A function trainer's ``predict`` that cannot be pickled: its
    run fails with this line, its metrics kept."""


def _pickled(predict: Any, path: Path) -> Path:
    """``predict`` pickled by cloudpickle into ``path``;
    :class:`NotSaved` (one line: what of it cannot be) if not."""

    try:
        with open(path, "wb") as f:
            cloudpickle.dump(predict, f)
    # a lock, a file, a connection it holds: its run says what
    except Exception as e:  # noqa: BLE001
        shutil.rmtree(path.parent, ignore_errors=True)
        raise NotSaved(
            f"its predict cannot be saved as the logged model: {_unpicklable(predict) or 'it'} "
            "cannot "
            f"be pickled ({first_line(e)}); keep arrays and plain values in what "
            "predict "
            "uses (or tracking.log_model=false)"
        ) from None
    return path


def _unpicklable(fn: Any) -> str | None:
    """What of ``fn`` cannot be pickled: a variable it closes over, a global it reads, an
    attribute, its object (``"the variable 'lock' it closes over (a _thread.lock)"``);
    None when no single part says it."""

    code = getattr(fn, "__code__", None)
    parts: list[tuple[str, Any]] = []
    for name, cell in zip(getattr(code, "co_freevars", ()), getattr(fn, "__closure__", None) or ()):
        try:
            parts.append((f"the variable {name!r} it closes over", cell.cell_contents))
        except ValueError:  # an empty cell
            continue
    names = getattr(fn, "__globals__", {})
    parts += [
        (f"the global {n!r} it reads", names[n])
        for n in getattr(code, "co_names", ())
        if n in names
    ]
    parts += [(f"its attribute {n!r}", v) for n, v in (getattr(fn, "__dict__", None) or {}).items()]
    if getattr(fn, "__self__", None) is not None:
        parts.append(("the object it is a method of", fn.__self__))
    for what, value in parts:
        try:
            cloudpickle.dumps(value)
        except Exception:  # noqa: BLE001
            kind = type(value)
            return f"{what} (a {kind.__module__}.{kind.__qualname__})".replace("a builtins.", "a ")
    return None


def save(
    path: Path,
    params: list[np.ndarray],
    dataset: Any,
    activation: str,
    X_example: Any,
    y_example: np.ndarray,
    data_cfg: Any = None,
    model: dict[str, Any] | None = None,
    names: list[str] | None = None,
    predict: Any = None,
) -> Path:
    """Write the pyfunc model folder at ``path`` (weights as host arrays) and return it.

    The model takes a DataFrame of the data set's columns (:attr:`Dataset.input_columns`;
    MLflow refuses one that lacks a column, and the model reads them by name, in any
    order); a table's raw columns, categories as text. Text data (a dataset with a
    ``vectorizer``): the ``text`` column (``X_example`` holds documents), and the fitted
    vectorizer's terms and IDF weights travel in the ``.npz``. A multi-class model
    returns a DataFrame of one probability column per class, ``p_<class>``.

    The model needs only MLflow, NumPy, pandas (and SciPy for text) at load: its code
    is ``pyfunc_entry.py`` and ``sweeper/base/portable.py`` (the forward pass, the
    encoder, the vectorizer), which travel with it. A model of the interface
    (``model``: its ``_target_`` and hyperparameters; ``names``: its parameters'
    names) carries the user's module too (:func:`user_code`) and runs its ``forward``
    at load; a function trainer's ``predict`` (a callable on NumPy arrays) travels
    pickled by cloudpickle (an MLflow dependency) beside the user's module."""

    if path.parent.exists():  # a job re-run into the same output folder
        shutil.rmtree(path.parent)
    path.parent.mkdir(parents=True)
    weights, meta = path.parent / "weights.npz", path.parent / "meta.json"
    info = {
        "n_params": len(params),
        "activation": activation,
        "task": dataset.task,
        "y_mean": dataset.y_mean,
        "y_scale": dataset.y_scale,
        "classes": [str(c) for c in dataset.classes or []],
    }
    arrays = {f"p{i}": p for i, p in enumerate(params)}
    code = [str(PORTABLE)]
    files = {"weights": weights, "meta": meta}
    if model is not None and predict is not None:  # a function trainer: its predict, pickled
        files["predict"] = _pickled(predict, path.parent / "predict.pkl")
        info["trainer"] = {
            "target": str(model["_target_"]),
            "outputs": getattr(predict, "outputs", "logits"),
        }
        code += user_code(str(model["_target_"]))
    # a model of the interface: rebuilt at load from its class and hyperparameters
    elif model is not None:
        target = str(model["_target_"])
        info["model"] = {
            "target": target,
            "kwargs": {k: v for k, v in model.items() if k != "_target_"},
            "names": list(names or []),
        }
        code += user_code(target)
    requirements = requirements_for(text=dataset.vectorizer is not None)
    if dataset.vectorizer is not None:
        # lazy: saves ~255 ms at this module's import (measured)
        from sweeper.data import vectorizer_state

        info["text"], state = vectorizer_state(dataset.vectorizer, data_cfg)
        arrays |= {f"vec_{k}": v for k, v in state.items()}
        X_example = pd_text(X_example)
    else:
        arrays |= {"x_mean": dataset.x_mean, "x_scale": dataset.x_scale}
        names = dataset.input_columns
        info["columns"] = (
            dataset.encoder["columns"]
            if dataset.encoder is not None
            else [{"name": n} for n in names]
        )
        if not hasattr(X_example, "columns"):  # raw features: the data set's columns, by name
            X_example = pd.DataFrame(np.asarray(X_example, dtype=np.float64), columns=names)
    if dataset.task == "multiclass":
        y_example = class_frame(y_example, info["classes"])
    np.savez(weights, **arrays)
    meta.write_text(json.dumps(info))
    signature, example = _optional(infer_signature(X_example, y_example), dataset), X_example[:5]

    def save_model(where: Path) -> None:
        mlflow.pyfunc.save_model(
            where,
            python_model=str(ENTRY),  # models from code, not a pickle
            artifacts={k: str(v) for k, v in files.items()},
            # the module the entry imports (NumPy, and SciPy, only), and a user model's module
            code_paths=code,
            signature=signature,
            input_example=example,
            pip_requirements=requirements,
        )

    # its own code travels (no shared template), or the
    if model is not None or not shortcut("pyfunc_cache"):
        # template cache is off (SWEEPER_PUBLIC_ONLY=pyfunc_cache): MLflow saves the model
        save_model(path)
        return path
    template = _template(_template_key(signature, example, requirements), save_model)
    if not _instantiate(template, path, {"weights": weights, "meta": meta}):
        # an MLmodel layout _instantiate does not know: MLflow saves this model itself
        shutil.rmtree(path)
        save_model(path)
    return path


def _optional(signature: Any, dataset: Any) -> Any:
    """The signature with a table's columns that the model fills when
    missing (a number with missing cells in training, a category, a date)
    marked optional, whether or not the example rows lack a value there; and a table's
    columns of any type (the model reads each cell as training did: 3, 3.0 and "3"), so that
    the rows pandas reads from the training file pass MLflow's check (an int64 column is no
    double to it: "Can not safely convert int64 to float64")."""

    names = set(getattr(dataset, "optional_columns", ()))
    if signature.inputs is None or not signature.inputs.has_input_names():
        return signature
    table = dataset.vectorizer is None  # documents stay text
    cols = [
        ColSpec(AnyType() if table else c.type, c.name, required=c.required and c.name not in names)
        for c in signature.inputs.inputs
    ]
    return ModelSignature(inputs=Schema(cols), outputs=signature.outputs, params=signature.params)


# mlflow.pyfunc.save_model costs ~12 ms a model, and ~240 ms the first time in a
# process (it checks the requirements against every installed distribution). Everything
# it writes but the two artifacts and the MLmodel's uuid, time, sources and size is the
# same for every model of one signature and input example, so it runs once per such key
# — per process, and once per machine through a cache folder — and each model is a copy
# of that template with its own artifacts and MLmodel fields (_instantiate): the
# templates of this process are state.process().templates, by key.


def cache_dir() -> Path:
    """Where model templates are kept between processes:
    ``$SWEEPER_CACHE_DIR``, else the user's cache."""

    return cache_root() / "model-templates"


def _template_key(signature: Any, example: Any, requirements: list[str]) -> str:
    """A digest of all that shapes a saved model folder but its artifacts:
    MLflow's and Python's versions and environment, the entry file, the
    requirements, the signature and the input example's values."""

    if hasattr(example, "to_json"):  # a text model's DataFrame
        values = example.to_json(orient="split").encode()
    else:
        values = (
            np.ascontiguousarray(example).tobytes()
            + str((example.shape, example.dtype.str)).encode()
        )
    h = hashlib.sha256()
    for part in (
        mlflow.__version__,
        sys.version,
        sys.executable,
        ENTRY.read_bytes(),
        PORTABLE.read_bytes(),
        json.dumps(requirements),
        json.dumps(signature.to_dict(), sort_keys=True),
        values,
    ):
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _template(key: str, save: Any) -> Path:
    """The template folder for ``key``: this process's, the cache's, or made
    now by ``save(folder)`` (into the cache when it is writable, atomically:
    a concurrent sweep finds a whole template or none)."""

    # gone when the cache was cleared meanwhile
    held = state.process().templates
    if key in held and (held[key] / "MLmodel").is_file():
        return held[key]
    cached = cache_dir() / key
    if not (cached / "MLmodel").is_file():
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=cached.parent))
        except OSError:  # no cache: a template of this process's own
            staging = Path(tempfile.mkdtemp(prefix="sweeper-model-"))
            cached = staging / "model"
            save(cached)
            held[key] = cached
            return cached
        save(staging / "model")
        for _ in range(2):
            try:
                os.rename(staging / "model", cached)
                break
            # another process was first (its template is the same), or a broken one is there
            except OSError:
                if (cached / "MLmodel").is_file():
                    break
                shutil.rmtree(cached, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)
        if not (cached / "MLmodel").is_file():  # renamed away meanwhile: keep none, save for real
            cached = Path(tempfile.mkdtemp(prefix="sweeper-model-")) / f"model-{uuid.uuid4().hex}"
            save(cached)
    held[key] = cached
    return cached


def _instantiate(template: Path, path: Path, artifacts: dict[str, Path]) -> bool:
    """``path`` ← a copy of ``template`` with these artifacts and its
    own MLmodel: a new uuid and time, the artifacts' sources, and the size MLflow
    would compute (the template's, less its artifacts, plus ours). False, with no
    MLmodel written, when the template's MLmodel lacks a line this rewrites."""

    text = (template / "MLmodel").read_text()
    flavor = _template_artifacts(template, text)
    shutil.copytree(
        template,
        path,
        ignore=lambda folder, names: (
            ["MLmodel"]
            if Path(folder) == template
            else [n for n in names if Path(folder, n) in {template / flavor[a] for a in artifacts}]
        ),
    )
    size = (
        int(re.search(r"^model_size_bytes: (\d+)$", text, re.M).group(1))
        if "model_size_bytes:" in text
        else 0
    )
    for name, source in artifacts.items():
        size += source.stat().st_size - (template / flavor[name]).stat().st_size
        shutil.copyfile(source, path / flavor[name])
    fields = {
        "model_uuid": uuid.uuid4().hex,
        "model_size_bytes": str(size),
        "utc_time_created": repr(str(datetime.now(timezone.utc).replace(tzinfo=None))),
    }
    out, n = re.subn(
        r"^(%s): .*$" % "|".join(fields),
        lambda m: f"{m.group(1)}: {fields[m.group(1)]}",
        text,
        flags=re.M,
    )
    for (
        name,
        source,
        # each artifact's source: "      <name>:\n        path: ...\n        uri: ..."
    ) in artifacts.items():
        out, k = re.subn(
            r"^(\s+%s:\n\s+path: [^\n]+\n\s+uri: ).*$" % re.escape(name),
            lambda m, src=str(source): m.group(1) + src,
            out,
            flags=re.M,
        )
        n += k
    if n != len(fields) + len(artifacts):
        return False
    (path / "MLmodel").write_text(out)
    return True


def _template_artifacts(template: Path, text: str) -> dict[str, str]:
    """The template's artifact paths by name (``artifacts/weights.npz``), read once per template."""
    held = state.process().template_artifacts
    if template not in held:
        doc = yaml.safe_load(text)
        held[template] = {
            k: v["path"] for k, v in doc["flavors"]["python_function"]["artifacts"].items()
        }
    return held[template]


def pd_text(docs: Any) -> Any:
    """Documents as the one-column DataFrame (``text``, a string
    column) a text model's signature names."""

    return pd.DataFrame({TEXT_COLUMN: [str(d) for d in docs]})


TEXT_COLUMN = "text"
