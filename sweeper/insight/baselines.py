"""The references every sweep is measured against, fitted at its end on the same split and rows as its runs.

``linear``: ridge regression (closed form on the standardised training rows, the intercept unpenalised) or
logistic regression (scikit-learn's ``LogisticRegression``), its ``alpha`` / ``C`` chosen on the validation rows
from :data:`ALPHAS` / :data:`CS`; ``boosting`` (``baselines=linear,boosting``): scikit-learn's
``HistGradientBoostingRegressor`` / ``Classifier`` at its defaults (``random_state=0``). Each is scored with the
runs' own metrics (:func:`sweeper.job.metrics.score`) and logged on the parent run as
``baseline_<name>_<metric>`` (``baseline_linear_val_mse``, ``baseline_linear_test_mse``), its fit time as
``baseline_<name>_fit_s`` and what it is as the tag ``baseline_<name>``. The leaderboard shows them as marked rows;
they are never ranked or promoted as configurations.
"""
from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np

NAMES = ("linear", "boosting")
DEFAULT = "linear"
ALPHAS = tuple(10.0 ** k for k in range(-4, 5))  # ridge penalties tried, chosen on the validation rows
CS = tuple(10.0 ** k for k in range(-3, 4))  # logistic regression's inverse penalties, likewise
PREFIX = "baseline_"


def parse(value: Any) -> list[str]:
    """``baselines`` (``linear``, ``linear,boosting``, ``none``) as a list of names; raises ValueError naming it."""
    if isinstance(value, (list, tuple)):
        names = [str(v).strip() for v in value]
    else:
        names = [v.strip() for v in str(value).split(",") if v.strip()]
    if names == ["none"]:
        return []
    bad = [n for n in names if n not in NAMES]
    if bad or not names:
        raise ValueError(f"baselines={value} is not allowed: expected a comma list of {', '.join(NAMES)}, or none")
    return list(dict.fromkeys(names))


def _ridge(X: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
    """Ridge regression ``min ||y - Xw - b||² + alpha ||w||²`` in closed form: X (n, d) and y (n,) are centred, so
    that the intercept b is not penalised; w = (XcᵀXc + αI)⁻¹ Xcᵀyc, b = ȳ - x̄ᵀw."""
    x_mean, y_mean = X.mean(axis=0), y.mean()
    Xc, yc = X - x_mean, y - y_mean
    w = np.linalg.solve(Xc.T @ Xc + alpha * np.eye(X.shape[1]), Xc.T @ yc)
    return w, float(y_mean - x_mean @ w)


def _dense(X: Any) -> bool:
    return isinstance(X, np.ndarray)


def linear(ds: Any) -> tuple[dict[str, float], str]:
    """The linear reference of a data set (:class:`sweeper.data.Dataset`): its metrics and what it is."""
    from sweeper.job.metrics import score

    if not len(ds.y_val):
        raise ValueError(f"data={ds.name} has no validation rows to choose the penalty on (data.val_fraction=0)")
    if ds.task == "regression":
        y = ds.y_train.ravel()
        fits = []
        for alpha in ALPHAS:
            if _dense(ds.X_train):
                w, b = _ridge(ds.X_train, y, alpha)
                predict = (lambda X, w=w, b=b: (X @ w + b).reshape(-1, 1))
            else:  # sparse text features: scikit-learn's solver keeps them sparse
                from sklearn.linear_model import Ridge

                model = Ridge(alpha=alpha).fit(ds.X_train, y)
                predict = (lambda X, m=model: m.predict(X).reshape(-1, 1))
            val = score("regression", ds.to_original(ds.y_val), ds.to_original(predict(ds.X_val)), "val")
            fits.append((val["val_mse"], alpha, predict))
        _, alpha, predict = min(fits, key=lambda f: f[0])
        what = f"ridge regression, alpha={alpha:g} (of {len(ALPHAS)} chosen on the validation rows)"
        return _scores(ds, lambda X: ds.to_original(predict(X))), what
    from sklearn.linear_model import LogisticRegression

    y = ds.y_train.ravel().astype(int)
    fits = []
    for C in CS:
        model = LogisticRegression(C=C, max_iter=2000).fit(ds.X_train, y)
        val = score(ds.task, ds.y_val, _proba(ds.task, model, ds.X_val), "val")
        fits.append((-val["val_accuracy"], val.get("val_log_loss", 0.0), C, model))
    _, _, C, model = min(fits, key=lambda f: f[:2])
    what = f"logistic regression, C={C:g} (of {len(CS)} chosen on the validation rows: accuracy, then log loss)"
    return _scores(ds, lambda X: _proba(ds.task, model, X)), what


def boosting(ds: Any) -> tuple[dict[str, float], str]:
    """scikit-learn's histogram gradient boosting at its defaults on the same rows."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    X = ds.X_train if _dense(ds.X_train) else ds.X_train.toarray()
    dense = (lambda A: A) if _dense(ds.X_train) else (lambda A: A.toarray())
    if ds.task == "regression":
        model = HistGradientBoostingRegressor(random_state=0).fit(X, ds.y_train.ravel())
        return (_scores(ds, lambda A: ds.to_original(model.predict(dense(A)).reshape(-1, 1))),
                "HistGradientBoostingRegressor (defaults, random_state=0)")
    model = HistGradientBoostingClassifier(random_state=0).fit(X, ds.y_train.ravel().astype(int))
    return (_scores(ds, lambda A: _proba(ds.task, model, dense(A))),
            "HistGradientBoostingClassifier (defaults, random_state=0)")


def _proba(task: str, model: Any, X: Any) -> np.ndarray:
    """Predicted probabilities as the runs' metrics take them: the positive class's (n, 1) when binary, else (n, K)."""
    p = model.predict_proba(X)
    return p[:, 1:2] if task == "binary" else p


def _scores(ds: Any, predict: Any) -> dict[str, float]:
    from sweeper.job.metrics import score

    truth = {"val": ds.to_original(ds.y_val), "test": ds.to_original(ds.y_test)}
    return {**score(ds.task, truth["val"], predict(ds.X_val), "val"),
            **score(ds.task, truth["test"], predict(ds.X_test), "test")}


FIT = {"linear": linear, "boosting": boosting}


def _one_thread() -> Any:
    """A context in which BLAS and OpenMP use one thread (threadpoolctl comes with scikit-learn)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn needs it
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(1)


def fit(nodes: list[dict[str, Any]], names: list[str]) -> dict[str, dict[str, Any]]:
    """Each baseline of ``names`` on every distinct ``data`` node of a sweep (one split each; with ``data.folds=k``
    each of its k folds, as the configurations are scored): its metrics averaged over the splits (``n_splits``), what
    it is and its fit time in seconds (the scikit-learn import included)."""
    from sweeper import data

    splits = [(node, fold) for node in nodes for fold in (range(data.folds_of(node)) or (None,))]
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        t = time.perf_counter()
        scores, what = [], ""
        for node, fold in splits:
            with _one_thread():  # OpenMP threads on a busy machine made boosting 10x slower (2.9 s against 0.25 s)
                metrics, what = FIT[name](data.load_plain(node, None, fold))
            scores.append(metrics)
        keys = [k for k in scores[0] if all(k in s for s in scores)]
        out[name] = {"metrics": {k: float(np.mean([s[k] for s in scores])) for k in keys}, "what": what,
                     "fit_s": time.perf_counter() - t, "n_splits": len(splits)}
    return out


def ensure(c: Any, parent: Any, results: list[dict[str, Any]] | None, out: Any = None) -> dict[str, dict[str, float]]:
    """The baselines of a parent run (name → {metric: value}): fitted now and logged on it when ``results`` (the
    jobs' result.json) are at hand and the parent has none yet, else read from its metrics. A baseline that cannot
    be fitted is said on ``out`` and left out: the sweep still ends."""
    from sweeper import tracking

    out = out or sys.stdout
    have = read(parent.data.metrics)
    if have or not results:
        return have
    configs = [r["config"] for r in results if isinstance(r.get("config"), dict) and "data" in r["config"]]
    if not configs:
        return have
    try:
        names = parse(configs[0].get("baselines", DEFAULT))
    except ValueError as e:
        print(f"sweeper: warning: no baselines: {e}", file=out)
        return have
    nodes = list({json.dumps(cfg["data"], sort_keys=True, default=str): cfg["data"] for cfg in configs}.values())
    try:
        fitted = fit(nodes, names)
    except Exception as e:  # a reference, not the sweep: whatever goes wrong, the sweep still ends
        print(f"sweeper: warning: no baselines: {tracking.first_line(e)}", file=out)
        return have
    metrics, tags = {}, {"baselines": ",".join(names) or "none"}  # what was asked: the parent's, never a run's param
    for name, b in fitted.items():
        metrics |= {f"{PREFIX}{name}_{k}": v for k, v in b["metrics"].items()}
        metrics[f"{PREFIX}{name}_fit_s"] = b["fit_s"]
        tags[f"{PREFIX}{name}"] = b["what"] + (f"; mean over {b['n_splits']} splits" if b["n_splits"] > 1 else "")
        print(f"baseline {name}: {tags[f'{PREFIX}{name}']} ({b['fit_s']:.2f} s)", file=out)
    from mlflow.entities import RunTag

    tracking.log_metrics(c, parent.info.run_id, metrics)
    c.log_batch(parent.info.run_id, tags=[RunTag(k, v) for k, v in tags.items()])
    return {name: b["metrics"] for name, b in fitted.items()}


def read(metrics: dict[str, float]) -> dict[str, dict[str, float]]:
    """The baselines a parent run's metrics hold: name → {``val_mse``: …, ``test_mse``: …}."""
    out: dict[str, dict[str, float]] = {}
    for k, v in metrics.items():
        if k.startswith(PREFIX) and not k.endswith("_fit_s"):
            name, _, metric = k[len(PREFIX):].partition("_")
            if name in NAMES and metric.startswith(("val_", "test_")):
                out.setdefault(name, {})[metric] = v
    return out


def rows(baselines: dict[str, dict[str, float]], metric: str) -> list[dict[str, Any]]:
    """The leaderboard's marked rows of the baselines (``metric``: e.g. ``mse``)."""
    return [{"run": f"[baseline] {name}", f"val_{metric}": m.get(f"val_{metric}"),
             f"test_{metric}": m.get(f"test_{metric}"), "status": "BASELINE"} for name, m in baselines.items()]
