"""Issue 37: successive halving against the full grid, and
against scikit-learn's HalvingGridSearchCV.

    python bench/halving_bench.py                       # 64-configuration grids on diabetes and
                                                        # digits (~10 min)
    python bench/halving_bench.py --sizes 64,256        # and the 256-configuration grids
    python bench/halving_bench.py --data diabetes --sizes 64 --repeats 1

Each grid is lr × width × depth × epochs (64: 4 × 4 × 2 × 2; 256: 4 × 4 × 4 × 4). sweeper runs
it as one CLI multirun into a fresh embedded store (``tracking.log_model=false``), with and
without ``hydra.launcher.halving.eta=3``: member-epochs trained (``halving.json``; the full
grid's own count), wall seconds (the whole command: start-up, the store, recording every run,
the report) and, with halving, the seconds its rungs trained (``halving.json`` ``compute_s``:
the rest of its wall is what the full grid pays too), the winner by validation and its test
metric (from the store). scikit-learn's ``HalvingGridSearchCV`` (factor 3, resource
``max_iter``) over the same lr × width × depth grid with ``MLPRegressor``/``MLPClassifier``
(solver sgd, full batch, tanh) on sweeper's split (``PredefinedSplit``: trained on the training
rows, scored on the validation rows, one fit a candidate as sweeper's one run a configuration;
before, 3-fold: three fits a candidate) with ``n_jobs`` the cores sweeper's CPU workers use:
its fit time (not a whole command: the row says so), chosen configuration and test metric.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

from _sweeps import timed_sweep

GRIDS = {
    64: dict(lr="0.001,0.003,0.01,0.03", width="4,8,16,32", depth="1,2", epochs="300,900"),
    256: dict(
        lr="0.001,0.003,0.01,0.03", width="4,8,16,32", depth="1,2,3,4", epochs="100,300,900,2700"
    ),
}
METRIC = {
    "diabetes": ("val_mse", "test_mse", True),
    "digits": ("val_accuracy", "test_accuracy", False),
}


def sweep(data: str, size: int, halving: bool) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="halving-bench-"))
    g = GRIDS[size]
    cmd = [
        sys.executable,
        "-m",
        "sweeper",
        "-m",
        f"data={data}",
        *(f"{k}={v}" for k, v in g.items()),
        "log_every=50",
        "tracking.log_model=false",
        f"tracking.uri=sqlite:///{tmp}/mlflow.db",
        f"hydra.sweep.dir={tmp}/sweep",
    ]
    if halving:
        cmd.append("hydra.launcher.halving.eta=3")
    wall, runs = timed_sweep(cmd, tmp)
    runs = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    val, test, lower = METRIC[data]
    full = [r for r in runs if "pruned_at_epoch" not in r.data.tags and val in r.data.metrics]
    best = (min if lower else max)(full, key=lambda r: r.data.metrics[val])
    info = json.loads((tmp / "sweep" / "halving.json").read_text()) if halving else None
    # without trajectories' sharing: the grid as asked
    epochs = sum(int(r.data.params["epochs"]) for r in runs)
    out = {
        "wall": wall,
        "member_epochs": info["member_epochs"] if info else None,
        "compute": info.get("compute_s") if info else None,
        "full_member_epochs": info["full_grid_member_epochs"] if info else None,
        "asked_epochs": epochs,
        "winner": {k: best.data.params[k] for k in ("lr", "width", "depth", "epochs")},
        "val": best.data.metrics[val],
        "test": best.data.metrics[test],
    }
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def sklearn_halving(data: str, size: int) -> dict:
    import numpy as np
    from sklearn.experimental import enable_halving_search_cv  # noqa: F401
    from sklearn.model_selection import HalvingGridSearchCV, PredefinedSplit
    from sklearn.neural_network import MLPClassifier, MLPRegressor

    from sweeper import data as sweeper_data

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import make_cfg

    ds = sweeper_data.load(make_cfg(f"data={data}").data, 0)
    X = np.vstack([ds.X_train, ds.X_val])
    y = np.vstack([ds.y_train, ds.y_val]).ravel()
    g = GRIDS[size]
    layers = [
        tuple([int(w)] * int(d)) for w in g["width"].split(",") for d in g["depth"].split(",")
    ]
    grid = {
        "learning_rate_init": [float(v) for v in g["lr"].split(",")],
        "hidden_layer_sizes": layers,
    }
    est = (MLPRegressor if ds.task == "regression" else MLPClassifier)(
        solver="sgd",
        batch_size=len(ds.X_train),
        momentum=0.0,
        activation="tanh",
        alpha=0.0,
        shuffle=False,
        tol=0,
        n_iter_no_change=10**9,
        random_state=0,
    )
    max_iter = max(int(e) for e in g["epochs"].split(","))
    search = HalvingGridSearchCV(
        est,
        grid,
        factor=3,
        resource="max_iter",
        max_resources=max_iter,
        min_resources=max_iter // 27,
        cv=PredefinedSplit([-1] * len(ds.X_train) + [0] * len(ds.X_val)),
        n_jobs=cores(),
    )
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(X, y)
    fit = time.perf_counter() - t0
    pred = search.best_estimator_.predict(ds.X_test)
    if ds.task == "regression":
        test = float(
            np.mean((ds.to_original(pred.reshape(-1, 1)) - ds.to_original(ds.y_test)) ** 2)
        )
    else:
        test = float(np.mean(pred == ds.y_test.ravel()))
    return {"fit": fit, "chosen": search.best_params_, "test": test}


def main() -> None:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--data", default="diabetes,digits")
    p.add_argument("--sizes", default="64")
    p.add_argument("--repeats", type=int, default=1)
    a = p.parse_args()
    print(
        "| data | grid | mode | member-epochs | wall s | rungs' training s | winner (lr, width, "
        "depth, epochs) | val | test |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for data in a.data.split(","):
        for size in map(int, a.sizes.split(",")):
            rows = {}
            for mode in ("full", "halving"):
                runs = [sweep(data, size, mode == "halving") for _ in range(a.repeats)]
                r = runs[-1] | {"wall": statistics.median(x["wall"] for x in runs)}
                rows[mode] = r
                me = r["member_epochs"] if mode == "halving" else r["asked_epochs"]
                w = r["winner"]
                train = f"{r['compute']:.1f}" if r["compute"] is not None else ""
                print(
                    f"| {data} | {size} | {mode} | {me:,} | {r['wall']:.1f} | {train} | {w['lr']}"
                    f", {w['width']}, {w['depth']}, "
                    f"{w['epochs']} | {r['val']:.4g} | {r['test']:.4g} |"
                )
            h, f = rows["halving"], rows["full"]
            print(
                f"| {data} | {size} | halving / full | "
                f"{h['member_epochs'] / f['asked_epochs']:.2f} (vs the grid's "
                f"trajectories: {h['member_epochs'] / h['full_member_epochs']:.2f}) | "
                f"{h['wall'] / f['wall']:.2f} | | "
                f"{'same winner' if h['winner'] == f['winner'] else 'another winner'} | | |"
            )
            s = sklearn_halving(data, size)
            print(
                f"| {data} | {size} | HalvingGridSearchCV (n_jobs={cores()}, sweeper's split) | "
                f"| {s['fit']:.1f} (its fit "
                f"only) | | {s['chosen']} | | {s['test']:.4g} |"
            )
    print(
        f"\n(load average {os.getloadavg()[0]:.2f}; sweeper's rows: the whole command on "
        f"{cores()} CPU workers where "
        f"they pay; HalvingGridSearchCV's: its fit on {cores()} processes)"
    )


if __name__ == "__main__":
    main()
