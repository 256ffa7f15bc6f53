"""Sweep benchmark: what a whole sweep costs, end to end, under each
launcher — and the training alone.

    python bench/sweep_bench.py                  # everything, medians of 3 (about 15-25 minutes on
                                                 # 2 cores)
    python bench/sweep_bench.py --quick          # 1 repeat, no grid-256 (a few minutes)
    python bench/sweep_bench.py --only training  # the batched trainer alone
    python bench/sweep_bench.py --search         # +sweep=optuna: 64 trials, batch 16 against batch
                                                 # 1 (minutes)
    python bench/sweep_bench.py --only training --optimizers momentum,adam --ks 64
        # other update rules
    python bench/sweep_bench.py --only trajectories [--grid-scale 4]
        # sweeps over epochs: batched vs basic
    python bench/sweep_bench.py --configs 1000,10000   # one shape at scale: first job line, whole,
                                                       # per config, RSS
    python bench/sweep_bench.py --cores [--workers 1,2,4,8,16]   # CPU groups on worker processes
                                                                 # (bench/cores_bench.py)
    python bench/sweep_bench.py --only packing --quick|--full   # packed groups vs one shape a group
                                                                # (bench/packing_bench.py)

1. Training alone: configuration-epochs/s of the batched trainer for K = 1, 8, 64,
   256 (``--ks``) members of the W1 shape (diabetes, depth 1, width 16), float32 and
   float64, against the one-configuration trainer (``models.train``) measured in the
   same process, for each update rule of ``--optimizers`` (``gd``, ``momentum`` with
   Nesterov, ``adam``; ``name+wd`` adds weight decay 1e-3); ``--threads 1`` compares
   one core with one core (the one-configuration trainer runs W1 on one).
2. End to end: ``python -m sweeper -m ...`` in a subprocess into an empty embedded store (a copy
   of one made once, as a user's store exists after their first run), wall time from the command
   to its exit, under ``hydra/launcher=basic``, ``batched`` (the default) and ``joblib`` with 2
   workers; and grid-64 done by hand: a Python loop calling scikit-learn's ``MLPRegressor`` (the
   same full-batch algorithm, as in bench/trainer_bench.py) with one ``mlflow.start_run`` +
   ``log_params`` + ``log_metrics`` per configuration into a fresh SQLite store, run the same way.
3. Trajectories: the seed sweep and an epochs grid (8 lr x epochs 20k-160k, float32 and
   float64), batched against basic, once each, with the configuration-epochs each trained
   (a trajectory's longest run counts once: ``trained_work``). Ratios are against the
   batched launcher's time in the same run. This machine is shared: compare ratios.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "bench"))

from trainer_bench import about, fmt_rate, table  # noqa: E402

GRID_64 = ["lr=0.001,0.002,0.005,0.01", "depth=1,2", "width=8,16", "epochs=1000,3000", "seed=0,1"]
GRID_256 = [
    "lr=0.001,0.0015,0.002,0.003,0.005,0.007,0.01,0.015",
    "depth=1,2",
    "width=8,16",
    "epochs=1000,3000",
    "seed=0,1,2,3",
]
WORKLOADS = {  # name: (overrides, configurations)
    "quick start": (["lr=0.001,0.005"], 2),
    "+sweep=seed": (["+sweep=seed"], 8),
    "grid-64": (GRID_64, 64),
    "grid-256": (GRID_256, 256),
}
LAUNCHERS = {
    "batched": [],
    "basic": ["hydra/launcher=basic"],
    "joblib x2": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
}

BY_HAND = r"""
import itertools, sys, warnings
import mlflow, numpy as np
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPRegressor
from sklearn.preprocessing import StandardScaler

mlflow.set_tracking_uri(sys.argv[1])
mlflow.set_experiment("by-hand")
X, y = load_diabetes(return_X_y=True)
for lr, depth, width, epochs, seed in itertools.product(
    [0.001, 0.002, 0.005, 0.01], [1, 2], [8, 16], [1000, 3000], [0, 1]
):
    Xt, Xs, yt, ys = train_test_split(X, y, test_size=0.2, random_state=seed)
    sx, sy = StandardScaler().fit(Xt), StandardScaler().fit(yt.reshape(-1, 1))
    Xt, Xs = sx.transform(Xt), sx.transform(Xs)
    m = MLPRegressor(
        hidden_layer_sizes=(width,) * depth,
        activation="tanh",
        solver="sgd",
        batch_size=len(Xt),
        learning_rate_init=2 * lr,
        momentum=0.0,
        alpha=0.0,
        shuffle=False,
        tol=0.0,
        n_iter_no_change=10**9,
        max_iter=epochs,
        random_state=seed,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(Xt, sy.transform(yt.reshape(-1, 1)).ravel())
    pred = sy.inverse_transform(m.predict(Xs).reshape(-1, 1)).ravel()
    with mlflow.start_run():
        mlflow.log_params(
            {"lr": lr, "depth": depth, "width": width, "epochs": epochs, "seed": seed}
        )
        mlflow.log_metrics(
            {
                "test_mse": float(np.mean((pred - ys) ** 2)),
                "test_mae": float(np.mean(np.abs(pred - ys))),
            }
        )
"""


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def update_rule(spec: str):
    """``gd``, ``momentum`` (Nesterov's), ``adam``, each with ``+wd`` for weight decay 1e-3."""
    from sweeper.models.optim import Optimizer

    name, _, wd = spec.partition("+")
    return Optimizer(name, nesterov=name == "momentum", weight_decay=1e-3 if wd else 0.0)


def training_section(
    repeats: int,
    epochs: int,
    optimizers: list[str] = ("gd",),
    ks: list[int] = (1, 8, 64, 256),
    threads: int | None = None,
) -> list[str]:
    from sweeper import data, models
    from sweeper.base.backend import resolve
    from sweeper.contract.config import ConfigError  # noqa: F401 (registers the ${sweeper_root:}

    # resolver)
    from sweeper.base.backend import cpu_threads
    from sweeper.models.batched import MIN_PART, Member, stacked_params, train_group
    from sweeper.models.mlp import MLP, init_params

    ds = data.load_plain(dict(name="diabetes", val_fraction=0.2, test_fraction=0.2), 0)
    backend = resolve("cpu")
    lr = {"adam": 0.001}  # Adam's steps are lr-sized whatever the gradient's scale
    rows = []
    for spec in optimizers:
        opt = update_rule(spec)
        for dtype in ("float32", "float64"):
            a = [x.astype(dtype) for x in (ds.X_train, ds.y_train, ds.X_val, ds.y_val)]
            base_lr = lr.get(opt.name, 0.01)
            single = []
            for _ in range(repeats):
                model = MLP(np, init_params([10, 16, 1], "tanh", 0, dtype), "tanh", "regression")
                fit = models.train(
                    backend, model, *a, lr=base_lr, epochs=epochs, log_every=50, opt=opt
                )
                single.append(epochs / fit.train_time_s)
            base = _median(single)
            # W1: one block
            rows.append(["W1", spec, dtype, "one-config trainer", 1, 1, fmt_rate(base), "1.00x"])
            for k in ks:
                members = [Member(base_lr * (1 + i / k), epochs, seed=i) for i in range(k)]
                rates = []
                for _ in range(repeats):
                    params = stacked_params([10, 16, 1], "tanh", [m.seed for m in members], dtype)
                    fit = train_group(
                        backend,
                        params,
                        "tanh",
                        "regression",
                        *a,
                        members,
                        log_every=50,
                        opt=opt,
                        threads=threads,
                    )
                    rates.append(k * epochs / fit.train_time_s)
                rate = _median(rates)
                # as train_group splits a group
                parts = min(threads or cpu_threads(), k // MIN_PART)
                rows.append(
                    [
                        "W1",
                        spec,
                        dtype,
                        "batched group",
                        k,
                        parts if parts >= 2 else 1,
                        fmt_rate(rate),
                        f"{rate / base:.2f}x",
                    ]
                )
    return [
        "## Training alone (configuration-epochs/s, median of %d, %d epochs)" % (repeats, epochs),
        "",
        table(
            [
                "shape",
                "update",
                "dtype",
                "trainer",
                "K",
                "threads",
                "config-epochs/s",
                "vs one-config",
            ],
            rows,
        ),
        "",
        "(threads: the one-configuration trainer runs W1 on one (its products are small); a "
        "group of K >= 16 "
        "splits over the cores unless --threads 1: where the threads differ, so do the cores the "
        "ratio compares)",
    ]


# Every timed command's folder stays until the benchmark ends: deleting a sweep's
# thousands of files (this disk is mounted with `discard`) stalled the next command's file
# writes for seconds — the figures of the command measured right after a deletion doubled.
_SCRATCH: list[Path] = []


def _scratch() -> str:
    if not _SCRATCH:
        _SCRATCH.append(Path(tempfile.mkdtemp(prefix="sweep-bench-")))
        atexit.register(shutil.rmtree, _SCRATCH[0], True)
    return tempfile.mkdtemp(dir=_SCRATCH[0])


def _timed(cmd: list[str], cwd: str, env: dict[str, str] | None = None) -> tuple[float, str | None]:
    os.sync()  # what earlier commands wrote is on disk before this one is timed
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    wall = time.perf_counter() - t0
    return wall, None if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["?"])[-1][
        :100
    ]


_EMPTY_STORE: list[Path] = []


def _empty_store(where: Path) -> str:
    """A copy of an empty SQLite store made once (creating MLflow's
    schema costs 1-3 s; a user's store exists after their first run):
    every sweep and the by-hand loop start from the same warm store."""
    if not _EMPTY_STORE:
        from sweeper import tracking

        db = Path(tempfile.mkdtemp()) / "mlflow.db"
        tracking.open_store(f"sqlite:///{db}")
        _EMPTY_STORE.append(db)
    (where / "mlruns").mkdir()
    shutil.copy(_EMPTY_STORE[0], where / "mlruns" / "mlflow.db")
    return f"sqlite:///{where}/mlruns/mlflow.db"


def sweep_wall(
    overrides: list[str], launcher: list[str], env: dict[str, str] | None = None
) -> tuple[float, str | None]:
    tmp = _scratch()
    cmd = [
        sys.executable,
        "-m",
        "sweeper",
        "-m",
        *overrides,
        *launcher,
        f"tracking.uri={_empty_store(Path(tmp))}",
        f"hydra.sweep.dir={tmp}/sweep",
    ]
    return _timed(cmd, tmp, env)


def by_hand_wall() -> tuple[float, str | None]:
    tmp = _scratch()
    return _timed([sys.executable, "-c", BY_HAND, _empty_store(Path(tmp))], tmp)


def sweep_section(repeats: int, names: list[str], launchers: list[str]) -> list[str]:
    rows = []
    for name in names:
        overrides, n = WORKLOADS[name]
        walls: dict[str, float] = {}
        for launcher in launchers:
            times, error = [], None
            for _ in range(repeats):
                wall, error = sweep_wall(overrides, LAUNCHERS[launcher])
                if error:
                    break
                times.append(wall)
            if error:
                rows.append([name, n, launcher, "error", error, ""])
                continue
            walls[launcher] = _median(times)
        if name == "grid-64":
            times = [by_hand_wall() for _ in range(repeats)]
            if all(e is None for _, e in times):
                walls["by hand: sklearn + mlflow"] = _median([t for t, _ in times])
        ref = walls.get("batched")
        for launcher, wall in walls.items():
            ratio = f"{wall / ref:.2f}x" if ref else "-"
            rows.append([name, n, launcher, f"{wall:.2f}", f"{n / wall:.2f}", ratio])
    return [
        "## End to end (wall s from the command to its exit, median of %d)" % repeats,
        "",
        table(["sweep", "configs", "launcher", "wall s", "configs/s", "time vs batched"], rows),
    ]


EPOCHS_GRID = ["lr=0.001,0.002,0.003,0.004,0.005,0.006,0.007,0.008", "epochs={}", "depth=1"]


def trained_work(sweep_dir: Path) -> int:
    """Configuration-epochs trained by a finished sweep, from its jobs' result.json: a batched
    trajectory's longest run once (its configurations share it), every other job its own epochs."""
    import json

    longest: dict[str, int] = {}
    for i, f in enumerate(sorted(sweep_dir.glob("*/result.json"))):
        r = json.loads(f.read_text())
        key = r.get("trajectory") or f"job-{i}"
        longest[key] = max(longest.get(key, 0), int(r["metrics"].get("epochs_run", 0)))
    return sum(longest.values())


def trajectory_section(scale: int, launchers: list[str]) -> list[str]:
    """Sweeps whose configurations share trajectories (differ only in epochs): the seed sweep (lr
    x depth x epochs 2000,10000) and an epochs grid (8 lr x epochs 20k,40k,80k,160k, depth 1,
    float32 and float64), each run once. ``scale`` divides the grid's epochs (1: as stated)."""
    epochs = ",".join(str(e // scale) for e in (20000, 40000, 80000, 160000))
    workloads = [("+sweep=seed", ["+sweep=seed"], 8)]
    workloads += [
        (
            f"epochs grid {dtype}",
            [*EPOCHS_GRID[:1], EPOCHS_GRID[1].format(epochs), EPOCHS_GRID[2], f"dtype={dtype}"],
            32,
        )
        for dtype in ("float32", "float64")
    ]
    rows = []
    for name, overrides, n in workloads:
        walls = {}
        for launcher in launchers:
            tmp = _scratch()
            cmd = [
                sys.executable,
                "-m",
                "sweeper",
                "-m",
                *overrides,
                *LAUNCHERS[launcher],
                "tracking.log_model=false",
                f"tracking.uri={_empty_store(Path(tmp))}",
                f"hydra.sweep.dir={tmp}/sweep",
            ]
            wall, error = _timed(cmd, tmp)
            if error:
                rows.append([name, n, launcher, "error", error, ""])
                continue
            walls[launcher] = wall
            rows.append(
                [name, n, launcher, f"{wall:.2f}", f"{trained_work(Path(tmp) / 'sweep'):,}", ""]
            )
        for row in rows[-len(walls) :]:
            if "basic" in walls and row[2] in walls:
                row[5] = f"{walls['basic'] / walls[row[2]]:.2f}x"
    return [
        f"## Trajectories (wall s from the command to its exit, once; grid epochs / {scale})",
        "",
        table(
            ["sweep", "configs", "launcher", "wall s", "config-epochs trained", "speed vs basic"],
            rows,
        ),
    ]


def per_job_section(repeats: int, launchers: list[str]) -> list[str]:
    """The marginal cost of a job outside training: (wall of 20 tiny jobs -
    wall of 2) / 18, per launcher, with the writer process (a sweep of 20
    jobs has one) and without it (``SWEEPER_WRITER=off``). The sizes are
    interleaved, so that a change in the machine's load touches both."""
    tiny = ["epochs=10", "log_every=5"]
    rows = []
    for launcher in launchers:
        for label, env in (("", {}), (" (SWEEPER_WRITER=off)", {"SWEEPER_WRITER": "off"})):
            times: dict[int, list[float]] = {2: [], 20: []}
            for _ in range(repeats):
                for n in (2, 20):
                    lrs = ",".join(f"{0.001 + 0.0001 * i:.4f}" for i in range(n))
                    times[n].append(sweep_wall([f"lr={lrs}", *tiny], LAUNCHERS[launcher], env)[0])
            walls = {n: _median(t) for n, t in times.items()}
            rows.append(
                [
                    launcher + label,
                    f"{walls[2]:.2f}",
                    f"{walls[20]:.2f}",
                    f"{(walls[20] - walls[2]) / 18 * 1000:.0f}",
                ]
            )
    return [
        "## Per job outside training (20 jobs of 10 epochs vs 2, median of %d)" % repeats,
        "",
        table(["launcher", "2 jobs wall s", "20 jobs wall s", "ms per extra job"], rows),
    ]


def joblib_section(
    repeats: int, sizes: tuple[int, ...] = (8, 16), epochs: int = 20000
) -> list[str]:
    """joblib's 2 workers against 1 (joblib then runs the jobs in this process)
    on jobs that train ~0.33 s (diabetes, 20000 epochs), interleaved."""
    rows = []
    for n in sizes:
        lrs = ",".join(f"{0.001 + 0.0005 * i:.4f}" for i in range(n))
        times: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(repeats):
            for workers in (1, 2):
                launcher = ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={workers}"]
                times[workers].append(sweep_wall([f"lr={lrs}", f"epochs={epochs}"], launcher)[0])
        one, two = _median(times[1]), _median(times[2])
        rows.append([n, f"{one:.2f}", f"{two:.2f}", f"{one / two:.2f}x"])
    return [
        "## joblib: 2 workers against 1, jobs of ~0.33 s of training (median of %d)" % repeats,
        "",
        table(["jobs", "n_jobs=1 wall s", "n_jobs=2 wall s", "2 workers' speedup"], rows),
    ]


# The search of issue 30: 64 TPE trials on diabetes, depth 1-2,
# width 8-64 (the four widths the grids use: a width of its own per
# trial would leave nothing to group), lr log-uniform, 3000 epochs.
SEARCH = [
    "+sweep=optuna",
    "hydra.sweeper.n_trials=64",
    "epochs=3000",
    "depth=choice(1,2)",
    "width=choice(8,16,32,64)",
    "lr=tag(log, interval(0.0005, 0.05))",
]


def search_section(batches: tuple[int, ...] = (16, 1), device: str = "cpu") -> list[str]:
    """``+sweep=optuna`` end to end with each round's trials launched together
    (``hydra.sweeper.batch``) against one trial a round: wall seconds and the
    best validation MSE the search found (its own fresh study)."""
    from omegaconf import OmegaConf

    rows, walls = [], {}
    for batch in batches:
        tmp = _scratch()
        cmd = [
            sys.executable,
            "-m",
            "sweeper",
            "-m",
            *SEARCH,
            f"hydra.sweeper.batch={batch}",
            f"device={device}",
            f"tracking.uri={_empty_store(Path(tmp))}",
            f"hydra.sweep.dir={tmp}/sweep",
        ]
        wall, error = _timed(cmd, tmp)
        if error:
            rows.append([batch, "error", error, "", "", ""])
            continue
        found = OmegaConf.load(Path(tmp) / "sweep" / "optimization_results.yaml")
        walls[batch] = wall
        rows.append(
            [
                batch,
                f"{wall:.1f}",
                f"{64 / wall:.2f}",
                f"{found.best_value:.1f}",
                found.best_trial,
                ", ".join(
                    f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in found.best_params.items()
                ),
            ]
        )
    ref = walls.get(1)
    for row in rows:
        row.append(f"{ref / walls[row[0]]:.2f}x" if ref and row[0] in walls else "-")
    return [
        "## Search: 64 TPE trials on diabetes (%s, device=%s), one run each"
        % (" ".join(SEARCH[2:]), device),
        "",
        table(
            [
                "batch",
                "wall s",
                "trials/s",
                "best val_mse",
                "best trial",
                "best params",
                "faster than batch 1",
            ],
            rows,
        ),
    ]


def scale_row(n: int) -> list[str]:
    """One sweep of ``n`` configurations of one shape (``lr=range(...)``, 10
    epochs, no model files) into an empty embedded store: seconds to the first job
    line, the whole sweep, seconds per configuration beyond training (after the
    first line: (wall - first line) / (n - 1) - mean train_time_s), peak RSS of
    the largest process (``ru_maxrss`` of the children), and the runs recorded."""
    import json
    import resource

    tmp = Path(_scratch())
    uri = _empty_store(tmp)
    stop = 0.0001 * (n + 1)
    cmd = [
        sys.executable,
        "-m",
        "sweeper",
        "-m",
        f"lr=range(0.0001,{stop:.4f},0.0001)",
        "epochs=10",
        "tracking.log_model=false",
        f"tracking.uri={uri}",
        f"hydra.sweep.dir={tmp}/sweep",
    ]
    os.sync()
    t0 = time.perf_counter()
    first = progress = None
    proc = subprocess.Popen(
        cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    tail = []
    for line in proc.stdout:
        now = time.perf_counter() - t0
        if progress is None and "composing" in line:
            progress = now
        if first is None and "[1/" in line:
            first = now
        tail = (tail + [line])[-5:]
    code = proc.wait()
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    results = [json.loads(f.read_text()) for f in (tmp / "sweep").glob("*/result.json")]
    train = sum(r["metrics"].get("train_time_s", 0.0) for r in results) / max(len(results), 1)
    from sweeper import tracking

    c = tracking.client(uri)
    runs = sum(
        len(tracking.search(c, [e.experiment_id], "tags.mlflow.parentRunId != ''"))
        for e in c.search_experiments()
    )
    per = (wall - (first or wall)) / max(n - 1, 1) - train
    return [
        n,
        f"{progress:.1f}" if progress is not None else "-",
        f"{first:.1f}" if first else "-",
        f"{wall:.1f}",
        f"{per * 1000:.1f}",
        f"{rss:.0f}",
        f"{runs}" + ("" if code == 0 else f" (exit {code}: {tail[-1].strip()[:60]})"),
    ]


def scale_section(sizes: list[int]) -> list[str]:
    rows = []
    for n in sizes:
        rows.append(scale_row(n))
        print(" | ".join(map(str, rows[-1])), flush=True)
    return [
        "## One shape at scale (lr=range(...), 10 epochs, no model files, embedded store; one "
        "run each)",
        "",
        table(
            [
                "configs",
                "progress line s",
                "first job line s",
                "whole s",
                "ms per config beyond training",
                "peak RSS MB",
                "runs recorded",
            ],
            rows,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="1 repeat, fewer epochs, no grid-256")
    p.add_argument(
        "--repeats", type=int, default=None, help="runs per figure (default 3; 1 with --quick)"
    )
    p.add_argument(
        "--only",
        choices=["training", "sweeps", "joblib", "trajectories", "packing"],
        default=None,
        help=(
            "packing: packed groups against one shape a group (bench/packing_bench.py; "
            "--quick or --full)"
        ),
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="every row, median of 3 (the default; --only packing: the table)",
    )
    p.add_argument(
        "--search", action="store_true", help="only the Optuna search: batch 16 against batch 1"
    )
    p.add_argument(
        "--device", choices=["cpu", "gpu"], default="cpu", help="--search: the trials' device"
    )
    p.add_argument(
        "--grid-scale",
        type=int,
        default=1,
        help="trajectories section: divide the epochs grid's epochs by this (1: 20k..160k)",
    )
    p.add_argument(
        "--launchers", default=",".join(LAUNCHERS), help="comma-separated: " + ", ".join(LAUNCHERS)
    )
    p.add_argument("--sweeps", default=None, help="comma-separated: " + ", ".join(WORKLOADS))
    p.add_argument("--out", type=Path, default=None, help="also write the tables to this file")
    p.add_argument(
        "--optimizers",
        default="gd",
        help="training section: comma-separated gd, momentum, adam (+wd)",
    )
    p.add_argument(
        "--ks", default="1,8,64,256", help="training section: comma-separated group sizes"
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="training section: CPU threads of a group (default: the CPUs this process may use)",
    )
    p.add_argument(
        "--configs",
        default=None,
        help="comma-separated sizes: only the one-shape sweeps at scale (e.g. 1000,10000)",
    )
    p.add_argument(
        "--cores",
        action="store_true",
        help="only hydra.launcher.cpu_workers: 1 against the default (bench/cores_bench.py)",
    )
    p.add_argument(
        "--workers",
        default="1,default",
        help="--cores: comma-separated worker counts (default: the option unset)",
    )
    args = p.parse_args(argv)
    if args.only == "packing":
        from packing_bench import main as packing

        return packing(
            [
                "--quick" if args.quick else "--full",
                *(["--repeats", str(args.repeats)] if args.repeats else []),
            ]
        )
    if args.cores:
        from cores_bench import cores_section

        out = [f"# Sweep benchmark ({time.strftime('%Y-%m-%d %H:%M')})", "", about(), ""]
        out += cores_section(
            args.repeats or (1 if args.quick else 3),
            args.workers.split(","),
            args.sweeps.split(",") if args.sweeps else None,
        )
        print("\n".join(out), flush=True)
        if args.out:
            args.out.write_text("\n".join(out) + "\n")
        return 0
    if args.configs:
        out = [f"# Sweep benchmark ({time.strftime('%Y-%m-%d %H:%M')})", "", about(), ""]
        out += scale_section([int(n) for n in args.configs.split(",")])
        print("\n".join(out), flush=True)
        if args.out:
            args.out.write_text("\n".join(out) + "\n")
        return 0
    repeats = args.repeats or (1 if args.quick else 3)
    out = [f"# Sweep benchmark ({time.strftime('%Y-%m-%d %H:%M')})", "", about(), ""]
    if args.search:
        section = search_section(device=args.device)
        print("\n".join(out + section), flush=True)
        if args.out:
            args.out.write_text("\n".join(out + section) + "\n")
        return 0
    if args.only in (None, "training"):
        out += training_section(
            repeats,
            1000 if args.quick else 3000,
            args.optimizers.split(","),
            [int(k) for k in args.ks.split(",")],
            args.threads,
        ) + [""]
        print("\n".join(out), flush=True)
    if args.only in (None, "sweeps"):
        names = (
            args.sweeps.split(",")
            if args.sweeps
            else [n for n in WORKLOADS if not (args.quick and n == "grid-256")]
        )
        launchers = args.launchers.split(",")
        section = per_job_section(repeats, [l for l in launchers if l != "joblib x2"]) + [""]
        section += sweep_section(repeats, names, launchers)
        print("\n".join(section), flush=True)
        out += section
    if args.only in (None, "trajectories"):
        section = trajectory_section(args.grid_scale, ["batched", "basic"]) + [""]
        print("\n".join(section), flush=True)
        out += section
    if args.only in (None, "joblib"):
        section = joblib_section(repeats) + [""]
        print("\n".join(section), flush=True)
        out += section
    if args.out:
        args.out.write_text("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
