"""sweeper against its peers on one grid: scikit-learn's GridSearchCV,
Optuna's GridSampler and Ray Tune.

    python bench/peers.py                  # the 32-configuration digits grid, median of 3 (README's
                                           # figures)
    python bench/peers.py --quick          # a 4-configuration grid, once: checks the script (a
                                           # minute or two)
    python bench/peers.py --grid diabetes  # the 32-configuration diabetes grid
    python bench/peers.py --tools sweeper,gridsearch --repeats 5

Every tool trains the same configurations (``lr × depth × width × epochs``: a grid of ``--grid``)
on the same rows (sweeper's split of the data set, scaled on its training rows as sweeper scales
them), full-batch gradient descent with a tanh network for exactly ``epochs`` passes, and logs the
same records into a fresh MLflow store (a copy of an empty SQLite store, as bench/sweep_bench.py's
rows): a parent run and one child run a configuration with its params (lr, depth, width, epochs)
and its validation and test metric. sweeper logs more (curves, the model, artifacts): its own
records, as a user gets them. The peers fit scikit-learn's ``MLPClassifier``/``MLPRegressor`` set
to the same algorithm (``solver="sgd"``, ``batch_size`` the training rows, no momentum, no
penalty, ``learning_rate_init`` = lr, 2·lr for the squared error, which scikit-learn halves).

- **sweeper**: ``python -m sweeper -m data=... lr=... ...`` (the
  batched launcher, its CPU workers: one a core).
- **GridSearchCV**: ``GridSearchCV(n_jobs=<cores>, cv=PredefinedSplit(train |
  validation), refit=False)``, each configuration's test metric by a scorer
  of the test rows; then the records.
- **Optuna**: ``GridSampler`` over the grid, one trial after another in
  the process (``n_jobs=1``), each trial logging its run as it ends.
- **Ray Tune**: ``tune.Tuner`` with ``tune.grid_search`` on a local Ray of <cores>
  CPUs; skipped with a line when Ray is not installed (``pip install 'ray[tune]'``).

Each tool is one process started by this script and timed from its start to its exit (imports, data,
training and records), its BLAS on one thread (``OMP_NUM_THREADS=1`` and its kin, inherited by its
workers): the table says how many processes each keeps busy (``procs × threads``) and the cores they
kept busy on average (CPU s of the process tree / wall s). Interleaved: repeat 1 of every tool, then
repeat 2, ... (the order rotated each repeat), so a change of the machine's load touches every tool;
the median of the repeats, and each tool's wall over sweeper's in the same repeat (median of those
ratios). The machine is shared: compare ratios, and run it on a quiet machine for figures.

The last line is the machine's bound: the grid's matrix-product FLOPs (sweeper's, with its shared
trajectories, and a peer's, every configuration from scratch) at one thread's float64 GEMM rate on
every core, at 1024² and at the grid's own shapes (the products timed alone); how far sweeper's
whole wall is from the second, and the most any tool doing sweeper's products could gain on each
peer's measured wall.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "bench"))

# name: (data set, {key: values}) — the digits grid is the weight README and issue 44 quote
GRIDS = {
    "digits": (
        "digits",
        {"lr": [0.05, 0.1, 0.2, 0.3], "depth": [1, 2], "width": [64, 128], "epochs": [600, 1200]},
    ),
    "diabetes": (
        "diabetes",
        {
            "lr": [0.002, 0.005, 0.01, 0.02],
            "depth": [1, 2],
            "width": [16, 32],
            "epochs": [4000, 8000],
        },
    ),
    "quick": ("digits", {"lr": [0.1, 0.3], "depth": [1], "width": [16], "epochs": [50, 100]}),
}
TOOLS = ("sweeper", "gridsearch", "optuna", "ray")
ONE_THREAD = {
    k: "1"
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
}


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def configurations(grid: dict[str, list]) -> list[dict[str, float | int]]:
    keys = list(grid)
    return [dict(zip(keys, values)) for values in itertools.product(*grid.values())]


def training_flops(
    grid: dict[str, list], n: int, features: int, outputs: int
) -> tuple[float, float]:
    """The grid's matrix-product FLOPs of training on ``n`` rows: (sweeper's, a peer's). sweeper
    trains one trajectory a configuration without its epochs, for the longest epochs (the shorter
    are its snapshots); a peer trains every configuration from scratch for its own epochs."""
    from trainer_bench import epoch_flops

    epochs = [int(e) for e in grid["epochs"]]
    shared = alone = 0.0
    for cfg in configurations({k: v for k, v in grid.items() if k != "epochs"}):
        sizes = [features] + [int(cfg["width"])] * int(cfg["depth"]) + [outputs]
        one = epoch_flops(sizes, n)
        shared += one * max(epochs)
        alone += one * sum(epochs)
    return shared, alone


def shape_seconds(grid: dict[str, list], n: int, features: int, outputs: int) -> float:
    """One thread's seconds for sweeper's matrix products at the grid's own shapes: the members
    of a (depth, width) (its other keys' values) stacked into one product a layer, as a batched
    group multiplies them (forward, the weights' gradient, the input's above the first layer),
    for the longest epochs; the median of 5 timings of an epoch's products."""
    import collections

    import numpy as np

    rng = np.random.default_rng(0)
    epochs = max(int(e) for e in grid["epochs"])
    rest = configurations({k: v for k, v in grid.items() if k != "epochs"})
    members = collections.Counter((int(c["depth"]), int(c["width"])) for c in rest)
    total = 0.0
    for (depth, width), k in members.items():
        sizes = [features] + [width] * depth + [outputs]
        layers = [
            (
                rng.standard_normal((k, n, a)),
                rng.standard_normal((k, a, b)),
                rng.standard_normal((k, n, b)),
                i,
            )
            for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))
        ]
        reps = []
        for _ in range(5):
            t0 = time.thread_time()
            for A, W, dZ, i in layers:
                np.matmul(A, W)
                np.matmul(A.transpose(0, 2, 1), dZ)
                if i:
                    np.matmul(dZ, W.transpose(0, 2, 1))
            reps.append(time.thread_time() - t0)
        total += statistics.median(reps) * epochs
    return total


def bound(grid_name: str, walls: dict[str, list[float]]) -> str:
    """What the machine allows: the grid's products at one thread's float64 GEMM rate on every
    core, at 1024² (the rate's best shape) and at the grid's own shapes, against the tools' median
    walls."""
    from threadpoolctl import threadpool_limits

    from trainer_bench import gemm_peak

    name, grid = GRIDS[grid_name]
    ds = _dataset(name)
    n, features = ds.X_train.shape
    outputs = len(set(ds.y_train.ravel().tolist())) if ds.task == "multiclass" else 1
    shared, alone = training_flops(grid, n, features, outputs)
    with threadpool_limits(1):
        peak = gemm_peak()
        least = shape_seconds(grid, n, features, outputs) / cores()
    rate = peak * 1e9 * cores()
    line = (
        f"# bound: sweeper's training is {shared / 1e12:.3f} TFLOP of matrix products, a peer's "
        f"{alone / 1e12:.3f} (every configuration from scratch); on {cores()} cores, one thread "
        f"each, sweeper's takes at least {shared / rate:.1f} s at the 1024² GEMM rate "
        f"({peak:.1f} GFLOP/s) and {least:.1f} s at its own shapes' "
        f"({shared / least / cores() / 1e9:.1f} GFLOP/s)"
    )
    if walls.get("sweeper"):
        ran = statistics.median(walls["sweeper"])
        line += f"; sweeper's whole wall is {ran / least:.2f}x that"
    others = {t: statistics.median(w) for t, w in walls.items() if w and t != "sweeper"}
    if others:
        most = ", ".join(f"{t} {w / least:.2f}x" for t, w in others.items())
        line += f"; the most any tool doing sweeper's products at those shapes could gain: {most}"
    return line


# --- one tool, in its own process (python bench/peers.py --one TOOL --grid G --store URI) ---------


def _dataset(name: str):
    """sweeper's own split and scaling of the data set (its bundled loader, data.split_seed 0)."""
    from sweeper import data
    from sweeper.contract import choices

    return data.load(choices.option("data", name))


def _fit(ds, cfg: dict, seed: int = 0):
    """scikit-learn's MLP set to sweeper's algorithm for
    one configuration: the fitted model and its fit's seconds."""
    import warnings

    from sklearn.neural_network import MLPClassifier, MLPRegressor

    regression = ds.task == "regression"
    kind = MLPRegressor if regression else MLPClassifier
    model = kind(
        hidden_layer_sizes=(int(cfg["width"]),) * int(cfg["depth"]),
        activation="tanh",
        solver="sgd",
        batch_size=len(ds.X_train),
        learning_rate="constant",
        learning_rate_init=(2 if regression else 1) * float(cfg["lr"]),
        momentum=0.0,
        alpha=0.0,
        shuffle=False,
        tol=0.0,
        n_iter_no_change=10**9,
        max_iter=int(cfg["epochs"]),
        random_state=seed,
    )
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning: max_iter reached on purpose
        model.fit(ds.X_train, ds.y_train.ravel() if regression else ds.y_train.ravel().astype(int))
    return model, time.perf_counter() - t0


def _metric(ds) -> str:
    return "mse" if ds.task == "regression" else "accuracy"


def _score(ds, model, X, y) -> float:
    """The primary metric as sweeper reports it: MSE in the target's units, or accuracy."""
    import numpy as np

    pred = model.predict(X)
    if ds.task == "regression":
        return float(np.mean(((pred - y.ravel()) * ds.y_scale) ** 2))
    return float(np.mean(pred == y.ravel().astype(int)))


def _record(uri: str, tool: str, rows: list[tuple[dict, float, float, float]], metric: str) -> None:
    """The peers' records: a parent run and a child run a configuration (params, val_<metric>,
    test_<metric>, train_time_s), with MLflow's fluent API as a user writes them."""
    import mlflow

    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(f"peers-{tool}")
    with mlflow.start_run(run_name=tool):
        for cfg, val, test, seconds in rows:
            with mlflow.start_run(
                nested=True, run_name=",".join(f"{k}={v}" for k, v in cfg.items())
            ):
                mlflow.log_params(cfg)
                mlflow.log_metrics(
                    {f"val_{metric}": val, f"test_{metric}": test, "train_time_s": seconds}
                )


def run_gridsearch(ds, grid: dict, uri: str) -> None:
    import numpy as np
    from sklearn.model_selection import GridSearchCV, PredefinedSplit
    from sklearn.neural_network import MLPClassifier, MLPRegressor

    regression = ds.task == "regression"
    X = np.vstack([ds.X_train, ds.X_val])
    y = np.concatenate([ds.y_train.ravel(), ds.y_val.ravel()])
    y = y if regression else y.astype(int)
    # train on the training rows, score on val
    split = PredefinedSplit([-1] * len(ds.X_train) + [0] * len(ds.X_val))
    n = len(ds.X_train)
    kind = MLPRegressor if regression else MLPClassifier
    base = kind(
        activation="tanh",
        solver="sgd",
        batch_size=n,
        learning_rate="constant",
        momentum=0.0,
        alpha=0.0,
        shuffle=False,
        tol=0.0,
        n_iter_no_change=10**9,
        random_state=0,
    )
    params = {
        "learning_rate_init": [(2 if regression else 1) * lr for lr in grid["lr"]],
        "hidden_layer_sizes": [(w,) * d for d in grid["depth"] for w in grid["width"]],
        "max_iter": list(grid["epochs"]),
    }
    X_test, y_test = ds.X_test, ds.y_test

    def on_val(model, Xv, yv):
        return _score(ds, model, Xv, yv)

    def on_test(model, _X, _y):  # the test rows, not the fold's: each configuration's test metric
        return _score(ds, model, X_test, y_test)

    search = GridSearchCV(
        base,
        params,
        cv=split,
        refit=False,
        n_jobs=cores(),
        scoring={"val": on_val, "test": on_test},
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(X, y)
    r = search.cv_results_
    rows = []
    for i, p in enumerate(r["params"]):
        cfg = {
            "lr": p["learning_rate_init"] / (2 if regression else 1),
            "depth": len(p["hidden_layer_sizes"]),
            "width": p["hidden_layer_sizes"][0],
            "epochs": p["max_iter"],
        }
        rows.append(
            (
                cfg,
                float(r["mean_test_val"][i]),
                float(r["mean_test_test"][i]),
                float(r["mean_fit_time"][i]),
            )
        )
    _record(uri, "gridsearch", rows, _metric(ds))


def run_optuna(ds, grid: dict, uri: str) -> None:
    import mlflow
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    metric = _metric(ds)
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("peers-optuna")
    study = optuna.create_study(
        sampler=optuna.samplers.GridSampler(grid, seed=0),
        direction="minimize" if ds.task == "regression" else "maximize",
    )

    def objective(trial):
        cfg = {k: trial.suggest_categorical(k, v) for k, v in grid.items()}
        model, seconds = _fit(ds, cfg)
        val, test = _score(ds, model, ds.X_val, ds.y_val), _score(ds, model, ds.X_test, ds.y_test)
        with mlflow.start_run(nested=True, run_name=",".join(f"{k}={v}" for k, v in cfg.items())):
            mlflow.log_params(cfg)
            mlflow.log_metrics(
                {f"val_{metric}": val, f"test_{metric}": test, "train_time_s": seconds}
            )
        return val

    with mlflow.start_run(run_name="optuna"):
        study.optimize(objective, n_trials=len(configurations(grid)), n_jobs=1)


def run_ray(ds, grid: dict, uri: str) -> None:
    import ray
    from ray import tune

    ray.init(
        num_cpus=cores(), include_dashboard=False, log_to_driver=False, configure_logging=False
    )

    def trainable(cfg):
        model, seconds = _fit(ds, cfg)
        return {
            "val": _score(ds, model, ds.X_val, ds.y_val),
            "test": _score(ds, model, ds.X_test, ds.y_test),
            "train_time_s": seconds,
        }

    RunConfig = (
        getattr(tune, "RunConfig", None)
        or __import__("ray.train", fromlist=["RunConfig"]).RunConfig
    )
    tuner = tune.Tuner(
        trainable,
        param_space={k: tune.grid_search(v) for k, v in grid.items()},
        tune_config=tune.TuneConfig(num_samples=1, max_concurrent_trials=cores()),
        run_config=RunConfig(storage_path=str(Path.cwd() / "ray_results"), verbose=0),
    )
    results = tuner.fit()
    rows = [
        (
            {k: r.config[k] for k in grid},
            r.metrics["val"],
            r.metrics["test"],
            r.metrics["train_time_s"],
        )
        for r in results
    ]
    _record(uri, "ray", rows, _metric(ds))
    ray.shutdown()


def one(tool: str, grid_name: str, uri: str) -> None:
    name, grid = GRIDS[grid_name]
    ds = _dataset(name)
    {"gridsearch": run_gridsearch, "optuna": run_optuna, "ray": run_ray}[tool](ds, grid, uri)


# --- the measurement ------------------------------------------------------------------------------


def available(tool: str) -> str | None:
    """Why ``tool`` cannot run here (None: it can)."""
    import importlib.util

    need = {"optuna": "optuna", "ray": "ray"}.get(tool)
    if need and importlib.util.find_spec(need) is None:
        return f"{need} is not installed" + (
            " (pip install 'ray[tune]')" if tool == "ray" else " (the dev extra)"
        )
    return None


def command(tool: str, grid_name: str, uri: str, scratch: str) -> list[str]:
    if tool == "sweeper":
        name, grid = GRIDS[grid_name]
        return [
            sys.executable,
            "-m",
            "sweeper",
            "-m",
            f"data={name}",
            *(f"{k}={','.join(map(str, v))}" for k, v in grid.items()),
            "activation=tanh",
            "baselines=none",
            f"tracking.uri={uri}",
            f"hydra.sweep.dir={scratch}/sweep",
        ]
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "--one",
        tool,
        "--grid",
        grid_name,
        "--store",
        uri,
    ]


def logged(uri: str, n: int) -> str:
    """How many child runs with a validation and test metric the
    store holds: each tool must log all ``n``."""
    from mlflow import MlflowClient

    c = MlflowClient(uri)
    runs = [
        r
        for e in c.search_experiments()
        for r in c.search_runs([e.experiment_id], max_results=5000)
    ]
    kids = [
        r
        for r in runs
        if "mlflow.parentRunId" in r.data.tags
        and any(k.startswith("val_") for k in r.data.metrics)
        and any(k.startswith("test_") for k in r.data.metrics)
    ]
    return f"{len(kids)}/{n}"


def timed(tool: str, grid_name: str) -> tuple[float, float, str, str, str | None]:
    """One run of ``tool``: wall s, CPU s of its process tree, the records it
    left, the processes it trained on (sweeper: its CPU workers, which it starts
    only where they pay, said in its output), its error (None: it ended well)."""
    from pathlib import Path as P

    from sweep_bench import _empty_store, _scratch

    scratch = _scratch()
    uri = _empty_store(P(scratch))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    os.sync()
    t0 = time.perf_counter()
    proc = subprocess.run(
        command(tool, grid_name, uri, scratch),
        cwd=scratch,
        capture_output=True,
        text=True,
        env={**os.environ, **ONE_THREAD},
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    error = None if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["?"])[-1][:120]
    if tool == "sweeper":
        import re

        workers = re.search(r"(\d+) CPU worker processes started", proc.stdout + proc.stderr)
        used = f"{workers[1] if workers else 1} × 1"
    else:
        used = f"{1 if tool == 'optuna' else cores()} × 1"
    return wall, cpu, logged(uri, len(configurations(GRIDS[grid_name][1]))), used, error


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--grid", choices=sorted(GRIDS), default="digits")
    ap.add_argument(
        "--quick", action="store_true", help="the 4-configuration grid, once (checks the script)"
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tools", default=",".join(TOOLS), help=f"a comma list of {', '.join(TOOLS)}")
    ap.add_argument("--one", choices=TOOLS[1:], help=argparse.SUPPRESS)  # a peer's own process
    ap.add_argument("--store", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        one(args.one, args.grid, args.store)
        return 0
    if args.quick:
        args.grid, args.repeats = "quick", 1
    from trainer_bench import about, table

    name, grid = GRIDS[args.grid]
    n = len(configurations(grid))
    tools = [t for t in args.tools.split(",") if t]
    bad = [t for t in tools if t not in TOOLS]
    if bad:
        ap.error(f"--tools: {', '.join(bad)}: expected {', '.join(TOOLS)}")
    skipped = {t: why for t in tools if (why := available(t))}
    tools = [t for t in tools if t not in skipped]
    print(f"# bench/peers.py, {datetime.datetime.now():%Y-%m-%d %H:%M}, {about()}")
    print(
        f"# grid {args.grid}: data={name}, {n} configurations ("
        f"{' × '.join(f'{k} {v}' for k, v in grid.items())}), "
        f"{args.repeats} repeat(s), interleaved; load "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} before"
    )
    for t, why in skipped.items():
        print(f"# {t}: skipped: {why}")
    walls: dict[str, list[float]] = {t: [] for t in tools}
    cpus: dict[str, list[float]] = {t: [] for t in tools}
    records: dict[str, str] = {}
    used: dict[str, str] = {}
    errors: dict[str, str] = {}
    for r in range(args.repeats):
        for tool in tools[r % len(tools) :] + tools[: r % len(tools)]:
            if tool in errors:
                continue
            wall, cpu, kept, used[tool], error = timed(tool, args.grid)
            if error:
                errors[tool] = error
                continue
            walls[tool].append(wall)
            cpus[tool].append(cpu)
            records[tool] = kept
    rows = []
    base = walls.get("sweeper") or []
    for tool in tools:
        if tool in errors:
            rows.append([tool, used.get(tool, ""), "error", errors[tool], "", "", "", ""])
            continue
        w = walls[tool]
        ratio = (
            f"{statistics.median(a / b for a, b in zip(w, base)):.2f}x"
            if base and len(base) == len(w)
            else ""
        )
        rows.append(
            [
                tool,
                used[tool],
                f"{statistics.median(w):.1f}",
                f"{min(w):.1f}-{max(w):.1f}",
                f"{statistics.median(cpus[tool]):.1f}",
                f"{statistics.median(c / x for c, x in zip(cpus[tool], w)):.2f}",
                ratio,
                records[tool],
            ]
        )
    print(
        table(
            [
                "tool",
                "procs × threads",
                "wall s",
                "range",
                "CPU s",
                "cores busy",
                "wall / sweeper's",
                "runs logged",
            ],
            rows,
        )
    )
    print(
        f"# load {' '.join(f'{x:.2f}' for x in os.getloadavg())} after; {cores()} cores: procs × "
        "threads is what each "
        "tool trained on (sweeper: its CPU workers, started where they pay, one BLAS thread "
        "each); Optuna runs its trials "
        "one after another: where the processes differ, the ratio compares unequal cores, as "
        "this line says"
    )
    print(bound(args.grid, walls))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
