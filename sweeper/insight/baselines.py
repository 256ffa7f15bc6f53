"""The references every sweep is measured against, fitted at its end
on the same split and rows as its runs.

``linear``: ridge regression (closed form on the standardised training rows, the intercept
unpenalised) or logistic regression (scikit-learn's ``LogisticRegression``), its ``alpha`` / ``C``
chosen on the validation rows from :data:`ALPHAS` / :data:`CS`; ``boosting``: scikit-learn's
``HistGradientBoostingRegressor`` / ``Classifier`` tuned on the validation rows as the network is
chosen on them: a stated grid (:data:`BOOSTING_GRID`: learning rate × leaf
count, ``random_state=0``), each fit stopped early on the validation rows' loss (:data:`PATIENCE`
iterations without a better one, at most :data:`MAX_ITER`), the best by the runs' primary
validation metric. ``baselines=auto`` (the default) fits both, boosting only on a table of at most
:data:`BOOSTING_CELLS` training cells (rows × features × trees an iteration: one, or one a class);
beyond it boosting is left out and said (``baselines=linear,boosting`` fits it anyway). Each is
scored with the runs' own metrics (:func:`sweeper.job.metrics.score`) and logged on the parent run
as ``baseline_<name>_<metric>`` (``baseline_linear_val_mse``, ``baseline_linear_test_mse``), its
fit time as ``baseline_<name>_fit_s`` and what it is as the tag ``baseline_<name>``. The
leaderboard shows them as marked rows; they are never ranked or promoted as configurations.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sys
import time
from types import MappingProxyType
from typing import Any

import numpy as np

from sweeper.base import stop
from sweeper.base.tested import optional
from sweeper.job.metrics import score

__all__ = [
    "ALPHAS",
    "BOOSTING_CELLS",
    "boosting",
    "cells",
    "ensure",
    "fit",
    "is_auto",
    "linear",
    "parse",
    "read",
    "request",
    "rows",
    "serve",
    "too_big",
]

NAMES = ("linear", "boosting")
DEFAULT = "auto"  # linear, and boosting where the table allows (BOOSTING_CELLS)
BOOSTING_GRID = MappingProxyType(
    {
        "learning_rate": (0.1, 0.3),
        "max_leaf_nodes": (7, 31),
    }
)  # tried on the validation rows
MAX_ITER, PATIENCE = 200, 10  # each fit stops once PATIENCE iterations improve no validation loss
# The largest table boosting is fitted on by default: training rows × features × trees
# an iteration (classes, for more than two). The tuned grid took 0.29 s on diabetes
# (266 × 10), 0.46 s on iris (90 × 4 × 3) and 20 s on digits (1079 × 64 × 10 = 690,560)
# on one thread of a loaded 2-core machine (bench/advice_eval.py --baselines): about 3
# µs a cell-iteration, so 100,000 cells bound a fit at about a second.
BOOSTING_CELLS = 100_000
# ridge penalties tried, chosen on the validation rows
ALPHAS = tuple(10.0**k for k in range(-4, 5))
CS = tuple(10.0**k for k in range(-3, 4))  # logistic regression's inverse penalties, likewise
PREFIX = "baseline_"


def parse(value: Any) -> list[str]:
    """``baselines`` (``auto``, ``linear``, ``linear,boosting``,
    ``none``) as a list of names (``auto``: both, boosting where the
    table allows: :func:`too_big`); raises ValueError naming it."""
    if isinstance(value, (list, tuple)):
        names = [str(v).strip() for v in value]
    else:
        names = [v.strip() for v in str(value).split(",") if v.strip()]
    if names == ["none"]:
        return []
    if names == ["auto"]:
        return list(NAMES)
    bad = [n for n in names if n not in NAMES]
    if bad or not names:
        raise ValueError(
            f"baselines={value} is not allowed: expected auto, a comma list of {', '.join(NAMES)}"
            ", or none"
        )
    return list(dict.fromkeys(names))


def is_auto(value: Any) -> bool:
    return (
        [str(v).strip() for v in value] == ["auto"]
        if isinstance(value, (list, tuple))
        else str(value).strip() == "auto"
    )


def cells(ds: Any) -> int:
    """What a boosting fit's cost grows with: training rows × features
    × trees an iteration (one a class past two)."""
    trees = len(ds.classes) if ds.task == "multiclass" and ds.classes is not None else 1
    return int(ds.X_train.shape[0]) * int(ds.X_train.shape[1]) * trees


def too_big(ds: Any) -> str | None:
    """Why ``baselines=auto`` leaves boosting out on this table, in words (None: it fits it)."""
    n = cells(ds)
    if n <= BOOSTING_CELLS:
        return None
    rows, cols = ds.X_train.shape
    trees = n // (rows * cols)
    return (
        f"{rows} training rows × {cols} features"
        + (f" × {trees} classes" if trees > 1 else "")
        + f" = {n:,} cells, beyond the {BOOSTING_CELLS:,} its tuned fit stays about a second under"
    )


def _ridge(X: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
    """Ridge regression ``min ||y - Xw - b||² + alpha ||w||²`` in
    closed form: X (n, d) and y (n,) are centred, so that the intercept
    b is not penalised; w = (XcᵀXc + αI)⁻¹ Xcᵀyc, b = ȳ - x̄ᵀw."""
    x_mean, y_mean = X.mean(axis=0), y.mean()
    Xc, yc = X - x_mean, y - y_mean
    w = np.linalg.solve(Xc.T @ Xc + alpha * np.eye(X.shape[1]), Xc.T @ yc)
    return w, float(y_mean - x_mean @ w)


def _dense(X: Any) -> bool:
    return isinstance(X, np.ndarray)


def linear(ds: Any) -> tuple[dict[str, float], str]:
    """The linear reference of a data set
    (:class:`sweeper.data.Dataset`): its metrics and what it is."""

    if not len(ds.y_val):
        raise ValueError(
            f"data={ds.name} has no validation rows to choose the penalty on (data.val_fraction=0)"
        )
    if ds.task == "regression":
        y = ds.y_train.ravel()
        fits = []
        for alpha in ALPHAS:
            if _dense(ds.X_train):
                w, b = _ridge(ds.X_train, y, alpha)
                predict = lambda X, w=w, b=b: (X @ w + b).reshape(-1, 1)
            else:  # sparse text features: scikit-learn's solver keeps them sparse
                # lazy: saves ~1245 ms at this module's import (measured)
                from sklearn.linear_model import Ridge

                model = Ridge(alpha=alpha).fit(ds.X_train, y)
                predict = lambda X, m=model: m.predict(X).reshape(-1, 1)
            val = score(
                "regression", ds.to_original(ds.y_val), ds.to_original(predict(ds.X_val)), "val"
            )
            fits.append((val["val_mse"], alpha, predict))
        _, alpha, predict = min(fits, key=lambda f: f[0])
        what = f"ridge regression, alpha={alpha:g} (of {len(ALPHAS)} chosen on the validation rows)"
        return _scores(ds, lambda X: ds.to_original(predict(X))), what
    # lazy: saves ~1235 ms at this module's import (measured)
    from sklearn.linear_model import LogisticRegression

    y = ds.y_train.ravel().astype(int)
    fits = []
    for C in CS:
        model = LogisticRegression(C=C, max_iter=2000).fit(ds.X_train, y)
        val = score(ds.task, ds.y_val, _proba(ds.task, model, ds.X_val), "val")
        fits.append((-val["val_accuracy"], val.get("val_log_loss", 0.0), C, model))
    _, _, C, model = min(fits, key=lambda f: f[:2])
    what = (
        f"logistic regression, C={C:g} (of {len(CS)} chosen on the validation rows: "
        "accuracy, then log loss)"
    )
    return _scores(ds, lambda X: _proba(ds.task, model, X)), what


def boosting(ds: Any) -> tuple[dict[str, float], str]:
    """scikit-learn's histogram gradient boosting on the same rows, tuned on the
    validation rows: each of :data:`BOOSTING_GRID` stopped early on their loss, the
    best by the primary validation metric (accuracy, then log loss, for classes)."""

    # lazy: saves ~1352 ms at this module's import (measured)
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    if not len(ds.y_val):
        raise ValueError(
            f"data={ds.name} has no validation rows to tune boosting on (data.val_fraction=0)"
        )
    dense = (lambda A: A) if _dense(ds.X_train) else (lambda A: A.toarray())
    regression = ds.task == "regression"
    y, y_val = (
        (ds.y_train.ravel(), ds.y_val.ravel())
        if regression
        else (ds.y_train.ravel().astype(int), ds.y_val.ravel().astype(int))
    )
    kind = HistGradientBoostingRegressor if regression else HistGradientBoostingClassifier
    fits = []
    for lr, leaves in itertools.product(*BOOSTING_GRID.values()):
        model = kind(
            learning_rate=lr,
            max_leaf_nodes=leaves,
            max_iter=MAX_ITER,
            early_stopping=True,
            n_iter_no_change=PATIENCE,
            scoring="loss",
            random_state=0,
        )
        # one OpenMP thread: its runtime is loaded by the import above, so
        # the limit reaches it (on a loaded machine its default threads
        # made a fit 10x slower: 2.4 s against 0.25 s on diabetes)
        with _one_thread():
            model.fit(dense(ds.X_train), y, X_val=dense(ds.X_val), y_val=y_val)
        predict = (
            (lambda A, m=model: ds.to_original(m.predict(dense(A)).reshape(-1, 1)))
            if regression
            else (lambda A, m=model: _proba(ds.task, m, dense(A)))
        )
        val = score(ds.task, ds.to_original(ds.y_val), predict(ds.X_val), "val")
        rank = (
            (val["val_mse"], 0.0)
            if regression
            else (-val["val_accuracy"], val.get("val_log_loss", 0.0))
        )
        fits.append((rank, lr, leaves, model.n_iter_, predict))
    _, lr, leaves, n_iter, predict = min(fits, key=lambda f: f[0])
    grid = " × ".join(f"{k} {'/'.join(f'{v:g}' for v in vs)}" for k, vs in BOOSTING_GRID.items())
    return (
        _scores(ds, predict),
        f"{kind.__name__}, learning_rate={lr:g} max_leaf_nodes={leaves} stopped at {n_iter} "
        "iterations (of "
        f"{grid}, each stopped early on the validation loss, chosen on the validation rows)",
    )


def _proba(task: str, model: Any, X: Any) -> np.ndarray:
    """Predicted probabilities as the runs' metrics take them: the
    positive class's (n, 1) when binary, else (n, K)."""
    p = model.predict_proba(X)
    return p[:, 1:2] if task == "binary" else p


def _scores(ds: Any, predict: Any) -> dict[str, float]:
    truth = {"val": ds.to_original(ds.y_val), "test": ds.to_original(ds.y_test)}
    return {
        **score(ds.task, truth["val"], predict(ds.X_val), "val"),
        **score(ds.task, truth["test"], predict(ds.X_test), "test"),
    }


FIT = MappingProxyType({"linear": linear, "boosting": boosting})


def _one_thread() -> Any:
    """A context in which BLAS and OpenMP use one thread (threadpoolctl comes with scikit-learn)."""
    # imported on first use (~6.2 ms at this module's import, measured)
    threadpoolctl = optional("threadpoolctl")
    return contextlib.nullcontext() if threadpoolctl is None else threadpoolctl.threadpool_limits(1)


def fit(
    nodes: list[dict[str, Any]], names: list[str], auto: bool = False
) -> dict[str, dict[str, Any]]:
    """Each baseline of ``names`` on every distinct ``data`` node of a sweep (one
    split each; with ``data.folds=k`` each of its k folds, as the configurations are
    scored): its metrics averaged over the splits (``n_splits``), what it is and its
    fit time in seconds (the scikit-learn import included). ``auto``: boosting is
    left out of a table :func:`too_big` names (``{"skipped": why}``)."""
    # lazy: saves ~138 ms at this module's import (measured)
    from sweeper import data

    splits = [(node, fold) for node in nodes for fold in data.fold_indexes(node)]
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        big = next(
            (why for node, fold in splits if (why := too_big(data.load_plain(node, None, fold)))),
            None,
        )
        if auto and name == "boosting" and big:
            out[name] = {"skipped": big}
            continue
        t = time.perf_counter()
        scores, what = [], ""
        for node, fold in splits:
            # OpenMP threads on a busy machine made boosting 10x slower (2.9 s against 0.25 s)
            with _one_thread():
                metrics, what = FIT[name](data.load_plain(node, None, fold))
            scores.append(metrics)
        keys = [k for k in scores[0] if all(k in s for s in scores)]
        out[name] = {
            "metrics": {k: float(np.mean([s[k] for s in scores])) for k in keys},
            "what": what,
            "fit_s": time.perf_counter() - t,
            "n_splits": len(splits),
        }
    return out


def request(configs: list[Any]) -> dict[str, Any] | None:
    """What the baselines of a sweep's jobs (their resolved configs) are fitted on:
    ``{"nodes": [distinct data nodes], "asked": baselines}``; None without a job. The same
    whether read at the sweep's start (its jobs) or at its end (their result.json), so
    that a painter that fitted them early (:mod:`sweeper.insight.plots`) is answered."""
    configs = [
        cfg for cfg in configs if isinstance(cfg, dict) and isinstance(cfg.get("data"), dict)
    ]
    if not configs:
        return None
    nodes = {
        json.dumps(
            {k: v for k, v in cfg["data"].items() if k != "positive_class"},
            sort_keys=True,
            default=str,
        ): cfg["data"]
        for cfg in configs
    }  # positive_class: what a job's record writes back into its data node
    asked = configs[0].get("baselines", DEFAULT)
    return {
        "nodes": [nodes[k] for k in sorted(nodes)],
        "asked": list(asked) if isinstance(asked, (list, tuple)) else asked,
    }


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two requests fit the same baselines (a node's positive_class aside:
    a job's record writes the one the data chose back into its data node)."""

    def key(r: dict[str, Any]) -> str:
        nodes = sorted(
            json.dumps(
                {k: v for k, v in n.items() if k != "positive_class"}, sort_keys=True, default=str
            )
            for n in r["nodes"]
        )
        return json.dumps([nodes, parse(r["asked"]), is_auto(r["asked"])])

    return key(a) == key(b)


def serve(req: dict[str, Any]) -> dict[str, Any]:
    """The painter's answer to a baselines ``req``: ``{"baselines": fit(...), "request": req}``.
    What fails here is the painter's to answer (:func:`sweeper.insight.plots.serve`: an error
    line); the launching process then fits them itself, and says what fails."""
    return {
        "baselines": fit(req["nodes"], parse(req["asked"]), is_auto(req["asked"])),
        "request": req,
    }


def ensure(
    c: Any,
    parent: Any,
    results: list[dict[str, Any]] | None,
    out: Any = None,
    prefitted: tuple[dict[str, Any], dict[str, Any]] | None = None,
) -> dict[str, dict[str, float]]:
    """The baselines of a parent run (name → {metric: value}): fitted now and logged on it
    when ``results`` (the jobs' result.json) are at hand and the parent has none yet, else
    read from its metrics; ``prefitted``: (the request, its baselines) as the sweep's
    painter fitted them while the jobs ran, used when it is this sweep's. A baseline that
    cannot be fitted is said on ``out`` and left out: the sweep still ends."""
    # lazy: saves ~32 ms at this module's import (measured)
    from sweeper import tracking

    out = out or sys.stdout
    have = read(parent.data.metrics)
    if have or not results:
        return have
    req = request([r.get("config") for r in results])
    if req is None:
        return have
    asked = req["asked"]
    try:
        names = parse(asked)
    except ValueError as e:
        print(f"sweeper: warning: no baselines: {e}", file=out)
        return have
    if prefitted is not None and _same(prefitted[0], req):
        fitted = prefitted[1]
    # a reference, not the sweep: whatever goes wrong, the sweep still ends
    elif (fitted := stop.extra("baselines", out, fit, req["nodes"], names, is_auto(asked))) is None:
        return have
    # what was asked: the parent's tag, never a run's param
    metrics, tags = {}, {"baselines": "auto" if is_auto(asked) else ",".join(names) or "none"}
    for name, b in list(fitted.items()):
        # baselines=auto on a table past the bound: said, and recorded on the parent
        if "skipped" in b:
            tags[f"{PREFIX}{name}_skipped"] = b["skipped"]
            print(
                f"baseline {name}: left out ({b['skipped']}; baselines=linear,boosting fits it "
                "anyway)",
                file=out,
            )
            del fitted[name]
            continue
        metrics |= {f"{PREFIX}{name}_{k}": v for k, v in b["metrics"].items()}
        metrics[f"{PREFIX}{name}_fit_s"] = b["fit_s"]
        tags[f"{PREFIX}{name}"] = b["what"] + (
            f"; mean over {b['n_splits']} splits" if b["n_splits"] > 1 else ""
        )
        print(f"baseline {name}: {tags[f'{PREFIX}{name}']} ({b['fit_s']:.2f} s)", file=out)
    # lazy: saves ~1411 ms at this module's import (measured)
    from mlflow.entities import RunTag

    tracking.log_metrics(c, parent.info.run_id, metrics)
    c.log_batch(parent.info.run_id, tags=[RunTag(k, v) for k, v in tags.items()])
    return {name: b["metrics"] for name, b in fitted.items()}


def read(metrics: dict[str, float]) -> dict[str, dict[str, float]]:
    """The baselines a parent run's metrics hold: name → {``val_mse``: …, ``test_mse``: …}."""
    out: dict[str, dict[str, float]] = {}
    for k, v in metrics.items():
        if k.startswith(PREFIX) and not k.endswith("_fit_s"):
            name, _, metric = k[len(PREFIX) :].partition("_")
            if name in NAMES and metric.startswith(("val_", "test_")):
                out.setdefault(name, {})[metric] = v
    return out


def rows(baselines: dict[str, dict[str, float]], metric: str) -> list[dict[str, Any]]:
    """The leaderboard's marked rows of the baselines (``metric``: e.g. ``mse``)."""
    return [
        {
            "run": f"[baseline] {name}",
            f"val_{metric}": m.get(f"val_{metric}"),
            f"test_{metric}": m.get(f"test_{metric}"),
            "status": "BASELINE",
        }
        for name, m in baselines.items()
    ]
