"""Issue 7: our full-batch trainer against scikit-learn and PyTorch, side by side, in one process.

    python bench/trainer_bench.py                 # W1-W4 in float32 and float64, limits, sweep
                                                  # overhead (~10 min)
    python bench/trainer_bench.py --quick         # the same table on small sizes: a CI smoke test
                                                  # (< 1 min)
    python bench/trainer_bench.py --workloads W1 --dtypes float64 --repeats 5 --no-sweep

Every trainer runs the same algorithm from the same initial weights
(ours, drawn by models.init_params): full-batch gradient descent on
MSE with a constant learning rate, tanh hidden layers.

- ours: ``models.train`` (train_time_s: after the warm-up pass; it
  also samples both losses every 50 epochs).
- scikit-learn: ``MLPRegressor`` set to that algorithm
  (solver='sgd', batch_size=n_train, momentum=0, alpha=0, constant
  rate, shuffle=False, tol=0, no early stop) with ``learning_rate_init = 2·lr``,
  because it minimises ½·MSE; our weights are copied into ``coefs_`` / ``intercepts_``
  and ``fit`` continues from them (``warm_start``). Time: the ``fit`` call.
- torch eager / torch.compile (when torch is installed: ``pip install -e '.[bench]'``):
  ``nn.Sequential`` of ``Linear`` + ``Tanh`` with our weights, ``torch.optim.SGD(lr)``;
  compile wraps the loss (forward and, through AOTAutograd, backward). Time: the epoch
  loop after three warm-up steps, weights restored.

The ``-adam`` and ``-b64`` rows (W1, W3) run Adam (β 0.9/0.999, ε 1e-8)
and mini-batches of 64 rows in order (scikit-learn's ``shuffle=False``) on
every trainer: ``torch.optim.Adam`` (its ε sits outside the bias correction, so its
test MSE differs in the 7th digit), sklearn ``solver='adam'`` with ε halved (½·MSE).

Each cell is the median of ``--repeats`` runs (epochs/s) with the final test MSE
(standardised target units), so equal work is visible. Limits: the measured matmul
peak (GFLOP/s) and the per-call floor (the cheapest NumPy ufunc call with ``out=``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from sweeper import data  # noqa: E402
from sweeper import models  # noqa: E402
from sweeper.models.mlp import MLP, FullBatch, init_params  # noqa: E402
from sweeper.models.optim import Optimizer  # noqa: E402
from sweeper.base.backend import resolve  # noqa: E402

try:
    import torch
except ImportError:  # the bench extra is optional: the torch columns are skipped
    torch = None

LOG_EVERY = 50
SYNTH = dict(name="synthetic", task="regression", noise=0.1)
WORKLOADS = {
    "W1": dict(data=dict(name="diabetes"), depth=1, width=16, lr=0.005, epochs=40_000),
    "W2": dict(data=dict(name="diabetes"), depth=3, width=64, lr=0.005, epochs=4_000),
    "W3": dict(
        data=dict(SYNTH, n_samples=20_000, n_features=100), depth=2, width=256, lr=0.01, epochs=20
    ),
    "W4": dict(
        data=dict(SYNTH, n_samples=200_000, n_features=500), depth=2, width=512, lr=0.01, epochs=2
    ),
    # W1 and W3 with Adam, and with mini-batches of 64 rows (in order: scikit-learn's shuffle=False)
    "W1-adam": dict(
        data=dict(name="diabetes"), depth=1, width=16, lr=0.001, epochs=20_000, optimizer="adam"
    ),
    "W1-b64": dict(
        data=dict(name="diabetes"), depth=1, width=16, lr=0.005, epochs=5_000, batch_size=64
    ),
    "W3-adam": dict(
        data=dict(SYNTH, n_samples=20_000, n_features=100),
        depth=2,
        width=256,
        lr=0.001,
        epochs=20,
        optimizer="adam",
    ),
    "W3-b64": dict(
        data=dict(SYNTH, n_samples=20_000, n_features=100),
        depth=2,
        width=256,
        lr=0.001,
        epochs=2,
        batch_size=64,
    ),
}
QUICK = {
    "W1": dict(epochs=2_000),
    "W2": dict(epochs=300),
    "W3": dict(epochs=5),
    "W4": dict(epochs=1, data=dict(n_samples=20_000)),
    "W1-adam": dict(epochs=2_000),
    "W1-b64": dict(epochs=500),
    "W3-adam": dict(epochs=5),
    "W3-b64": dict(epochs=1),
}
TARGETS = {  # issue 7: (trainer whose speed ours is divided by, the least ratio)
    "W1": [("sklearn", 10.0), ("torch eager", 10.0)],
    "W2": [("torch eager", 2.0)],
    "W3": [("torch.compile", 1.0)],
}
W1_MIN_EPOCHS_PER_S = 60_000
W4_MIN_PEAK_FRACTION = 0.9


# ---- workloads -----------------------------------------------------------------------------------


def workload(name: str, quick: bool) -> SimpleNamespace:
    spec = {**WORKLOADS[name], "data": dict(WORKLOADS[name]["data"])}
    if quick:
        spec["data"].update(QUICK[name].get("data", {}))
        spec.update({k: v for k, v in QUICK[name].items() if k != "data"})
    spec["data"].update(val_fraction=0.2, test_fraction=0.2)
    spec = {"optimizer": "gd", "batch_size": 0, **spec}
    return SimpleNamespace(
        **{**spec, "data": SimpleNamespace(**spec["data"])}, activation="tanh", seed=0
    )


def arrays(ds: data.Dataset, dtype: str) -> dict[str, np.ndarray]:
    names = ("X_train", "y_train", "X_val", "y_val", "X_test", "y_test")
    return {k: np.ascontiguousarray(getattr(ds, k), dtype=dtype) for k in names}


def epoch_flops(sizes: list[int], n: int) -> float:
    """Matmul FLOPs of one epoch: forward 2n(k+1)m per layer, dP
    2n(k+1)m, and dA 2nkm below the output."""
    total = 0.0
    for l, (k, m) in enumerate(zip(sizes[:-1], sizes[1:])):
        total += 2 * 2 * n * (k + 1) * m + (2 * n * k * m if l > 0 else 0)
    return total


def gemm_peak() -> float:
    """One thread's float64 GEMM rate at 1024², GFLOP/s."""
    a, b = np.random.default_rng(0).standard_normal((2, 1024, 1024))
    out = np.empty_like(a)
    reps = []
    for _ in range(7):
        t0 = time.thread_time()
        np.matmul(a, b, out=out)
        reps.append(time.thread_time() - t0)
    return 2 * 1024**3 / statistics.median(reps) / 1e9


# ---- trainers: each returns (seconds of training, test MSE) --------------------------------------


def run_ours(cfg, a, params, dtype) -> tuple[float, float]:
    model = MLP(np, [p.copy() for p in params], "tanh", "regression")
    fit = models.train(
        resolve("cpu"),
        model,
        a["X_train"],
        a["y_train"],
        a["X_val"],
        a["y_val"],
        lr=cfg.lr,
        epochs=cfg.epochs,
        log_every=LOG_EVERY,
        opt=Optimizer(cfg.optimizer),
        batch_size=cfg.batch_size,
        shuffle=False,
    )
    assert fit.epochs_run == cfg.epochs, fit
    return fit.train_time_s, float(np.mean((model.predict(a["X_test"]) - a["y_test"]) ** 2))


def run_sklearn(cfg, a, params, dtype) -> tuple[float, float]:
    from sklearn.neural_network import MLPRegressor

    X, y = a["X_train"], a["y_train"].ravel()
    # Adam is invariant to the gradient's factor 2 once epsilon is halved
    adam = cfg.optimizer == "adam"
    ref = MLPRegressor(
        hidden_layer_sizes=(cfg.width,) * cfg.depth,
        activation="tanh",
        solver="adam" if adam else "sgd",
        batch_size=cfg.batch_size or len(X),
        learning_rate="constant",
        learning_rate_init=cfg.lr if adam else 2 * cfg.lr,
        epsilon=0.5e-8,
        momentum=0.0,
        nesterovs_momentum=False,
        alpha=0.0,
        shuffle=False,
        tol=0.0,
        n_iter_no_change=10**9,
        max_iter=cfg.epochs,
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning: max_iter is reached on purpose
        # builds coefs_ and the optimizer (one step), then our weights replace them
        ref.partial_fit(X, y)
        ref.coefs_ = [p.copy() for p in params[::2]]
        ref.intercepts_ = [p.ravel().copy() for p in params[1::2]]
        ref.warm_start = True
        t0 = time.perf_counter()
        ref.fit(X, y)
        seconds = time.perf_counter() - t0
    assert ref.n_iter_ == cfg.epochs
    pred = ref.predict(a["X_test"]).reshape(-1, 1)
    return seconds, float(np.mean((pred - a["y_test"]) ** 2))


def _torch_model(params: list[np.ndarray]) -> Any:
    layers = []
    for l, (W, b) in enumerate(zip(params[::2], params[1::2])):
        lin = torch.nn.Linear(*W.shape, dtype=getattr(torch, str(W.dtype)))
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(W.T.copy()))
            lin.bias.copy_(torch.from_numpy(b.ravel().copy()))
        layers += [lin] if l == len(params) // 2 - 1 else [lin, torch.nn.Tanh()]
    return torch.nn.Sequential(*layers)


def run_torch(cfg, a, params, dtype, compiled: bool) -> tuple[float, float]:
    model = _torch_model(params)
    X, y = torch.from_numpy(a["X_train"]), torch.from_numpy(a["y_train"])
    # the same objective as ours (mean squared error: the same
    # gradient), so Adam takes the same epsilon
    opt = (
        torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=(0.9, 0.999), eps=1e-8)
        if cfg.optimizer == "adam"
        else torch.optim.SGD(model.parameters(), lr=cfg.lr)
    )
    b = cfg.batch_size or len(X)
    # in order, as ours with shuffle=False
    batches = [(X[i : i + b], y[i : i + b]) for i in range(0, len(X), b)]

    def mse(X, y):
        return torch.mean((model(X) - y) ** 2)

    loss_fn = torch.compile(mse) if compiled else mse

    def step(X, y):
        opt.zero_grad(set_to_none=True)
        loss_fn(X, y).backward()
        opt.step()

    initial = [p.detach().clone() for p in model.parameters()]
    # compile (every batch shape) and warm the allocator
    for Xb, yb in (batches * 3)[: max(3, len(batches))]:
        step(Xb, yb)
    with torch.no_grad():  # the weights and the optimizer's state start over
        for p, p0 in zip(model.parameters(), initial):
            p.copy_(p0)
    opt.state.clear()
    t0 = time.perf_counter()
    for _ in range(cfg.epochs):
        for Xb, yb in batches:
            step(Xb, yb)
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        pred = model(torch.from_numpy(a["X_test"])).numpy()
    return seconds, float(np.mean((pred - a["y_test"]) ** 2))


def trainers() -> dict[str, Callable]:
    out = {"ours": run_ours, "sklearn": run_sklearn}
    if torch is not None:
        out["torch eager"] = lambda *args: run_torch(*args, compiled=False)
        out["torch.compile"] = lambda *args: run_torch(*args, compiled=True)
    return out


# ---- limits --------------------------------------------------------------------------------------


def matmul_peak(dtype: str, size: int = 2048, repeats: int = 5) -> float:
    """GFLOP/s of the best of ``repeats`` (size x size) @ (size x
    size) products (NumPy's BLAS, all its threads)."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((size, size)).astype(dtype) for _ in range(2))
    c = np.empty_like(a)
    np.matmul(a, b, out=c)
    best = min(_timed(lambda: np.matmul(a, b, out=c)) for _ in range(repeats))
    return 2 * size**3 / best / 1e9


def call_floor(dtype: str, calls: int = 200_000) -> float:
    """Seconds per call of the cheapest NumPy call an epoch makes: a
    ufunc on 1-element arrays with ``out=``."""
    a, zero = np.ones(1, dtype=dtype), np.zeros(1, dtype=dtype)
    add = np.add

    def loop():
        for _ in range(calls):
            add(a, zero, a)

    return min(_timed(loop) for _ in range(5)) / calls


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def calls_per_epoch(cfg, a, dtype) -> int:
    params = init_params([a["X_train"].shape[1]] + [cfg.width] * cfg.depth + [1], "tanh", 0, dtype)
    return len(
        FullBatch(
            MLP(np, params, "tanh", "regression"), a["X_train"][:8], a["y_train"][:8], 0.1
        ).epoch_calls
    )


# ---- the sweep's own overhead --------------------------------------------------------------------


def sweep_overhead(n_runs: int, epochs: int, extra: list[str]) -> dict[str, Any]:
    """``python -m sweeper -m`` with ``n_runs`` tiny jobs into a fresh
    embedded store: wall time and time outside training."""
    with tempfile.TemporaryDirectory() as tmp:
        lrs = ",".join(f"{0.001 + 0.0001 * i:.4f}" for i in range(n_runs))
        cmd = [
            sys.executable,
            "-m",
            "sweeper",
            "-m",
            f"lr={lrs}",
            f"epochs={epochs}",
            *extra,
            f"tracking.uri=sqlite:///{tmp}/mlruns/mlflow.db",
            f"hydra.sweep.dir={tmp}/sweep",
        ]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:100]}
        results = [json.loads(p.read_text()) for p in Path(tmp, "sweep").glob("*/result.json")]
        train = sum(r["metrics"]["train_time_s"] + r["metrics"]["warmup_time_s"] for r in results)
        return {
            "runs": len(results),
            "wall": wall,
            "per_run": wall / n_runs,
            "outside": (wall - train) / n_runs,
        }


def tracking_overhead(epochs: int) -> dict[str, float]:
    """One run through ``sweeper.job.record.run`` (the CLI's code path, no
    Hydra) into the embedded store, with every ``sweeper.tracking`` call timed:
    the share of MLflow in a run whose training takes about a second."""
    from hydra import compose, initialize_config_dir

    import sweeper
    from sweeper import tracking
    from sweeper.tracking import ending, records, system
    from sweeper.job.context import JobContext
    from sweeper.job.record import run

    spent = {"t": 0.0}
    for name in (
        "client",
        "open_store",
        "experiment_id",
        "start_run",
        "end_runs",
        "system_monitor",
        "stop",
    ):
        fn = getattr(tracking, name, None) or getattr(ending, name)

        def timed(*args, _fn=fn, **kwargs):
            t0 = time.perf_counter()
            try:
                return _fn(*args, **kwargs)
            finally:
                spent["t"] += time.perf_counter() - t0

        setattr(tracking, name, timed)
        for module in (
            ending,
            records,
            system,
        ):  # the tracked run (sweeper.tracking.run) calls these by their modules
            if getattr(module, name, None) is fn:
                setattr(module, name, timed)
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{tmp}/mlruns/mlflow.db"
        tracking.open_store(store)  # an existing store, as on any run after the first
        with initialize_config_dir(config_dir=str(sweeper.CONF_DIR), version_base="1.3"):
            cfg = compose(
                config_name="config", overrides=[f"epochs={epochs}", f"tracking.uri={store}"]
            )
        rows = []
        for i in range(5):
            spent["t"] = 0.0
            t0 = time.perf_counter()
            result = run(cfg, JobContext(output_dir=Path(tmp) / f"job{i}"))
            total = time.perf_counter() - t0
            m = result["metrics"]
            rows.append(
                {
                    "total": total,
                    "train": m["train_time_s"],
                    "tracking": spent["t"],
                    "outside": total - m["train_time_s"] - m["warmup_time_s"],
                }
            )
        return {k: statistics.median(r[k] for r in rows) for k in rows[0]}  # medians of 5 runs


# ---- the table -----------------------------------------------------------------------------------


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = "| " + " | ".join(f"{{:<{w}}}" for w in widths) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line.format(*header), sep, *(line.format(*r) for r in rows)])


def about() -> str:
    from threadpoolctl import threadpool_info

    blas = next(
        (
            f"{i['internal_api']} {i['version']} ({i.get('architecture')}, {i['num_threads']} "
            "threads)"
            for i in threadpool_info()
            if i["user_api"] == "blas"
        ),
        "?",
    )
    import sklearn

    cpu = (
        next(
            (
                l.split(":", 1)[1].strip()
                for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")
            ),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else "?"
    )
    versions = f"numpy {np.__version__} ({blas}), scikit-learn {sklearn.__version__}"
    versions += (
        f", torch {torch.__version__} ({torch.get_num_threads()} threads)"
        if torch
        else ", torch not installed"
    )
    return f"{cpu}, {os.cpu_count()} cores; python {platform.python_version()}; {versions}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--workloads", default="W1,W2,W3,W4,W1-adam,W1-b64,W3-adam,W3-b64")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument(
        "--trainers",
        default=None,
        help="comma-separated subset of: ours, sklearn, torch eager, torch.compile",
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--quick", action="store_true", help="small sizes and a 4-job sweep: a smoke test"
    )
    ap.add_argument(
        "--no-sweep", action="store_true", help="leave out the sweep and tracking overhead"
    )
    ap.add_argument("--out", type=Path, help="also write the report (markdown) to this file")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")

    chosen = trainers()
    if args.trainers:
        chosen = {k: v for k, v in chosen.items() if k in args.trainers.split(",")}
    print(about(), flush=True)
    rows, checks, limits = [], [], {}
    for dtype in args.dtypes.split(","):
        limits[dtype] = {"peak": matmul_peak(dtype), "call": call_floor(dtype)}
    for name in args.workloads.split(","):
        cfg = workload(name, args.quick)
        ds = data.load(cfg.data, cfg.seed)
        for dtype in args.dtypes.split(","):
            a = arrays(ds, dtype)
            sizes = [ds.n_features] + [cfg.width] * cfg.depth + [1]
            params = init_params(sizes, "tanh", cfg.seed, dtype)
            print(
                f"{name} {dtype}: {len(a['X_train'])} x {ds.n_features}, depth {cfg.depth}, "
                f"width {cfg.width}, "
                f"lr {cfg.lr}, {cfg.epochs} epochs",
                flush=True,
            )
            rates = {}
            for trainer, fn in chosen.items():
                runs = [fn(cfg, a, params, dtype) for _ in range(args.repeats)]
                seconds = statistics.median(r[0] for r in runs)
                rates[trainer] = cfg.epochs / seconds
                print(
                    f"  {trainer}: {rates[trainer]:,.1f} epochs/s, test MSE {runs[0][1]:.10g}",
                    flush=True,
                )
                rows.append(
                    [name, dtype, trainer, fmt_rate(rates[trainer]), "", f"{runs[0][1]:.10g}"]
                )
            for r in rows[-len(rates) :]:
                if "ours" in rates:
                    r[4] = f"{rates['ours'] / rates[r[2]]:.2f}x"
            checks += target_checks(
                name, dtype, rates, limits[dtype], sizes, len(a["X_train"]), cfg, a
            )

    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    out = [
        f"Machine: {about()}",
        f"Load average at the end (1/5/15 min): {load} — other processes share these cores",
        "",
        f"Command: python bench/trainer_bench.py {' '.join(argv or sys.argv[1:])}".rstrip(),
        "",
    ]
    out += [
        table(
            ["workload", "dtype", "trainer", "epochs/s (median)", "ours ÷ this", "test MSE"], rows
        ),
        "",
    ]
    out += [
        "Limits (measured here): "
        + "; ".join(
            f"{dt}: matmul peak {v['peak']:.1f} GFLOP/s (2048³), per-call floor "
            f"{v['call'] * 1e6:.3f} µs"
            for dt, v in limits.items()
        ),
        "",
    ]
    if checks:
        out += [table(["target", "measured", "met"], checks), ""]
    if not args.no_sweep:
        out += sweep_section(args.quick)
    text = "\n".join(out)
    print("\n" + text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


def target_checks(name, dtype, rates, limit, sizes, n_train, cfg, a) -> list[list[str]]:
    if "ours" not in rates:
        return []
    checks = []
    for other, least in TARGETS.get(name, []):
        if other in rates:
            ratio = rates["ours"] / rates[other]
            checks.append(
                [
                    f"{name} {dtype}: ours ≥ {least:g}× {other}",
                    f"{ratio:.2f}×",
                    "yes" if ratio >= least else "NO",
                ]
            )
    if name == "W1":
        n_calls = calls_per_epoch(cfg, a, dtype)
        floor = 1 / (n_calls * limit["call"])
        checks.append(
            [
                f"W1 {dtype}: ≥ {W1_MIN_EPOCHS_PER_S:,} epochs/s",
                f"{rates['ours']:,.0f} "
                f"(per-call floor: {n_calls} calls × {limit['call'] * 1e6:.2f} µs = {floor:,.0f}"
                "/s)",
                "yes" if rates["ours"] >= W1_MIN_EPOCHS_PER_S else "NO",
            ]
        )
    if name == "W4":
        gflops = epoch_flops(sizes, n_train) * rates["ours"] / 1e9
        frac = gflops / limit["peak"]
        checks.append(
            [
                f"W4 {dtype}: ≥ {W4_MIN_PEAK_FRACTION:.0%} of matmul peak",
                f"{gflops:.1f} GFLOP/s = {frac:.0%} of {limit['peak']:.1f}",
                "yes" if frac >= W4_MIN_PEAK_FRACTION else "NO",
            ]
        )
    return checks


def sweep_section(quick: bool) -> list[str]:
    n_runs, epochs = (4, 50) if quick else (20, 100)
    print(f"sweep: {n_runs} jobs of {epochs} epochs ...", flush=True)
    rows = []
    plain = sweep_overhead(n_runs, epochs, [])
    rows.append(_sweep_row("basic launcher", n_runs, plain))
    joblib = {}
    try:
        import hydra_plugins.hydra_joblib_launcher  # noqa: F401
    except ImportError:
        rows.append(
            [
                "hydra/launcher=joblib",
                "-",
                "-",
                "-",
                "skipped: hydra-joblib-launcher is not installed",
            ]
        )
    else:
        for jobs in (1, 2):
            joblib[jobs] = sweep_overhead(
                n_runs, epochs, ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={jobs}"]
            )
            rows.append(_sweep_row(f"joblib n_jobs={jobs}", n_runs, joblib[jobs]))
        if all("wall" in joblib[j] for j in (1, 2)):
            rows[-1][-1] = (
                f"speedup of 2 workers over 1: {joblib[1]['wall'] / joblib[2]['wall']:.2f}x"
            )
        # the same with jobs that train for a while (~0.3-0.5 s each
        # here): where a second worker pays
        heavy_runs, heavy_epochs = (4, 2_000) if quick else (8, 20_000)
        print(
            f"sweep: {heavy_runs} jobs of {heavy_epochs} epochs, basic and joblib n_jobs=2 ...",
            flush=True,
        )
        heavy = {
            label: sweep_overhead(heavy_runs, heavy_epochs, extra)
            for label, extra in (
                ("basic", []),
                ("joblib", ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]),
            )
        }
        rows.append(_sweep_row(f"basic, {heavy_epochs} epochs", heavy_runs, heavy["basic"]))
        rows.append(
            _sweep_row(f"joblib n_jobs=2, {heavy_epochs} epochs", heavy_runs, heavy["joblib"])
        )
        if all("wall" in r for r in heavy.values()):
            rows[-1][-1] = (
                "speedup of 2 workers over the basic launcher: "
                f"{heavy['basic']['wall'] / heavy['joblib']['wall']:.2f}x"
            )
    print("tracking: one ~1 s run ...", flush=True)
    t = tracking_overhead(10_000 if quick else 40_000)
    share = t["tracking"] / t["train"]
    return [
        table(["sweep", "jobs", "wall s", "s per job", "s per job outside training / note"], rows),
        "",
        "Tracking overhead (one run, embedded SQLite store, every sweeper.tracking call timed; "
        "medians of 5): "
        f"{t['tracking'] * 1e3:.0f} ms for a {t['train']:.2f} s training ({share:.1%}; target ≤ "
        "5%); "
        f"the whole run took {t['total']:.2f} s, {t['outside'] * 1e3:.0f} ms of it outside "
        "training "
        f"(tracking, the model's files, data, config).",
        "",
    ]


def _sweep_row(label: str, n_runs: int, r: dict[str, Any]) -> list[str]:
    if "error" in r:
        return [label, str(n_runs), "-", "-", f"failed: {r['error']}"]
    return [label, str(r["runs"]), f"{r['wall']:.1f}", f"{r['per_run']:.2f}", f"{r['outside']:.2f}"]


if __name__ == "__main__":
    sys.exit(main())
