"""Issue 38: does choosing by 5-fold cross-validation pick better
configurations than choosing on one split?

    python bench/folds_quality.py  # diabetes and breast_cancer, split seeds 0-4
    python bench/folds_quality.py --data diabetes --seeds 0,1,2 --no-sklearn

For each data set and split seed (``data.split_seed``: other test rows, other folds) the same
grid (lr × width × depth, 8 configurations, ``epochs=1000``, full-batch gradient descent, tanh)
is chosen three ways, and the chosen model scored on the test split, which none of them sees:

- **one split**: sweeper without folds: the configuration best on the
  validation split, trained on the training split;
- **5-fold + refit**: sweeper with ``data.folds=5`` (the folds trained
  as one batched group, as the launcher does), the best fold mean,
  refit on every non-test row (``data.folds=0 data.val_fraction=0``);
- **GridSearchCV**: scikit-learn's ``GridSearchCV(MLPRegressor /
  MLPClassifier, cv=5, refit=True)`` over the same grid on the same non-test rows
  (solver sgd, full batch, no momentum, ``max_iter=1000``, standardised features).

Printed: per data set, the test metric's mean ± std over the split seeds for each way, and
how often 5-fold selection scored better / the same / worse than one split on the same seed.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import warnings
from pathlib import Path

GRID = dict(lr=("0.003", "0.03"), width=("8", "32"), depth=("1", "2"))
EPOCHS = 1000
TEST = {
    "regression": ("test_mse", True),
    "binary": ("test_accuracy", False),
    "multiclass": ("test_accuracy", False),
}


def _cfgs(data: str, seed: int, extra: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    return [
        (
            f"data={data}",
            f"data.split_seed={seed}",
            f"lr={lr}",
            f"width={w}",
            f"depth={d}",
            f"epochs={EPOCHS}",
            "log_every=50",
            *extra,
        )
        for lr, w, d in itertools.product(*GRID.values())
    ]


def _compose(overrides: tuple[str, ...]):
    from hydra import compose, initialize_config_dir

    import sweeper

    with initialize_config_dir(config_dir=str(sweeper.CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def _chosen(data: str, seed: int, folds: int) -> tuple[dict, float, str]:
    """The configuration chosen on validation (one split, or the fold
    mean), its test metric (the refit's with folds), the task."""
    from omegaconf import OmegaConf

    from sweeper.base.backend import resolve
    from sweeper.job.crossval import refit_config
    from sweeper.job.compute import train_and_score
    from sweeper.job.metrics import PRIMARY
    from sweeper.sweep import launch
    from sweeper.contract.compose import plain as _plain

    grid = _cfgs(data, seed, (f"data.folds={folds}",))
    jobs = [launch.Job(i, list(o), None, _plain(_compose(o))) for i, o in enumerate(grid)]
    groups, alone = launch.plan(jobs)
    computed = {}
    for g in groups:
        computed |= launch.compute_group(g)
    assert not alone and len(computed) == len(jobs)
    task = next(iter(computed.values())).dataset.task
    name, lower = PRIMARY[task]
    ok = [j for j in jobs if computed[j.idx].outcome.reason is None]
    best = (min if lower else max)(ok, key=lambda j: computed[j.idx].outcome.scores[f"val_{name}"])
    test = TEST[task][0]
    if not folds:
        return best.plain, computed[best.idx].outcome.scores[test], task
    cfg = OmegaConf.create(refit_config(best.plain))
    from sweeper import data as sweeper_data

    out = train_and_score(cfg, sweeper_data.load(cfg.data), resolve("cpu"))
    return best.plain, out.scores[test], task


def _gridsearch(data: str, seed: int, task: str) -> float:
    import numpy as np
    from sklearn.metrics import accuracy_score, mean_squared_error
    from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold
    from sklearn.neural_network import MLPClassifier, MLPRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from sweeper import data as sweeper_data

    cfg = _compose((f"data={data}", f"data.split_seed={seed}"))
    raw = sweeper_data.LOADERS[data](cfg.data, seed)
    test = sweeper_data.split(len(raw.y), cfg.data.val_fraction, cfg.data.test_fraction, seed)[2]
    rest = np.setdiff1d(np.arange(len(raw.y)), test)
    X, y = raw.X, raw.y
    regression = task == "regression"
    est = (MLPRegressor if regression else MLPClassifier)(
        solver="sgd",
        batch_size=len(rest),
        momentum=0.0,
        alpha=0.0,
        activation="tanh",
        max_iter=EPOCHS,
        tol=0.0,
        n_iter_no_change=EPOCHS + 1,
        random_state=seed,
    )
    prefix = "mlpregressor__" if regression else "mlpclassifier__"
    params = {
        f"{prefix}learning_rate_init": [float(v) for v in GRID["lr"]],
        f"{prefix}hidden_layer_sizes": [
            tuple([int(w)] * int(d)) for w in GRID["width"] for d in GRID["depth"]
        ],
    }
    cv = (
        KFold(5, shuffle=True, random_state=seed)
        if regression
        else StratifiedKFold(5, shuffle=True, random_state=seed)
    )
    search = GridSearchCV(
        make_pipeline(StandardScaler(), est),
        params,
        cv=cv,
        scoring="neg_mean_squared_error" if regression else "accuracy",
        refit=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(X[rest], y[rest])
    pred = search.predict(X[test])
    return float(mean_squared_error(y[test], pred) if regression else accuracy_score(y[test], pred))


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--data", default="diabetes,breast_cancer")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--no-sklearn", action="store_true")
    args = ap.parse_args()
    from tabulate import tabulate

    rows = []
    for data in args.data.split(","):
        got: dict[str, list[float]] = {"one split": [], "5-fold + refit": [], "GridSearchCV": []}
        for seed in (int(s) for s in args.seeds.split(",")):
            one, t1, task = _chosen(data, seed, 0)
            cv, t5, _ = _chosen(data, seed, 5)
            got["one split"].append(t1)
            got["5-fold + refit"].append(t5)
            if not args.no_sklearn:
                got["GridSearchCV"].append(_gridsearch(data, seed, task))
            print(
                f"{data} split_seed={seed}: one split chose lr={one['lr']},width={one['width']}"
                f",depth={one['depth']} "
                f"({t1:.4g}); 5-fold chose lr={cv['lr']},width={cv['width']},depth={cv['depth']} "
                f"({t5:.4g})",
                file=sys.stderr,
            )
        metric, lower = TEST[task]
        pairs = list(zip(got["5-fold + refit"], got["one split"]))
        better = sum((a < b) if lower else (a > b) for a, b in pairs)
        same = sum(a == b for a, b in pairs)
        for way, values in got.items():
            if values:
                spread = f" ± {statistics.stdev(values):.3g}" if len(values) > 1 else ""
                rows.append(
                    [
                        data,
                        metric,
                        way,
                        f"{statistics.fmean(values):.4g}{spread}",
                        f"{better}/{same}/{len(pairs) - better - same}"
                        if way == "5-fold + refit"
                        else "",
                    ]
                )
    print(
        f"test metric of the chosen configuration, mean ± std over split seeds {args.seeds}; "
        "grid lr × width × depth "
        f"({len(list(itertools.product(*GRID.values())))} configurations), epochs={EPOCHS}"
    )
    print(
        tabulate(
            rows,
            headers=[
                "data",
                "metric",
                "selection",
                "test (mean ± std)",
                "5-fold vs one split: better/same/worse",
            ],
            tablefmt="github",
            disable_numparse=True,
        )
    )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
