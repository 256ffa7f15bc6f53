"""Issue 61: packed groups (every width, depth and activation of a
grid in one computation) against today's grouping (one shape a group),
the activations' forms, and the peers' grid against GridSearchCV.

    python bench/sweep_bench.py --only packing --quick   # a few minutes: 1 repeat, epochs / 10
                                                         # (validates the rows)
    python bench/sweep_bench.py --only packing --full    # the table: median of 3, interleaved (~1
                                                         # hour on 2 cores)
    python bench/packing_bench.py --quick                # the same, run directly

1. Training alone (one thread, in this process): the digits grid width {4, 8, 16, 32, 64} x depth
   {1, 2} x 16 learning rates (160 members, full-batch gradient descent, float64), packed (one
   ``train_packed``) against apart (one ``train_group`` a shape), with tanh in each of its forms
   and with relu, interleaved: member-epochs per second, and the FLOP efficiency: the products'
   FLOPs (forward and backward, every member's own epochs) per second of training, against the rate
   one thread of NumPy multiplies the very products the epoch makes (each timed alone in a loop, in
   this run): the share of the machine's GEMM rate the training reaches (the issue's target: 40%).
2. End to end (``python -m sweeper -m ...`` into a fresh embedded store, wall seconds from the
   command to its exit, interleaved, median): the peers' 32-configuration grid (lr 4 x depth 2
   x width 8, 16 x epochs 1000/3000, full batch, tanh) on diabetes and digits, packed, apart
   (``hydra.launcher.pack=false``) and scikit-learn's ``GridSearchCV(n_jobs=<cores>)`` over
   the same grid on sweeper's split (``MLPRegressor``/``MLPClassifier``, sgd, full batch, no
   momentum, tanh) logging the same 32 runs (params and the validation score) to a fresh
   MLflow store; and the digits grid of 1. as a sweep, packed and apart.
3. The planner's estimate against the training (:func:`calibration_section`): for each
   packed group the planner forms (diabetes and digits; the peers' shapes and the 160
   grid) and for all the shapes in one, the probe's epoch ratio, the planner's estimate
   and the measured training ratio, and how long the planning with a fresh probe took.
4. The activations' forms: ns a value of each form on this machine
   (:func:`sweeper.models.forms.probe`), and with NumPy's AVX-512 loops turned off
   (``NPY_DISABLE_CPU_FEATURES=X86_V4``: a CPU like the one DESIGN.md measured).

This machine is shared: compare ratios measured in the same run, never absolute times across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

PEERS = {"lr": "0.001,0.002,0.005,0.01", "depth": "1,2", "width": "8,16", "epochs": "1000,3000"}
WIDTHS, DEPTHS, LRS = (
    (4, 8, 16, 32, 64),
    (1, 2),
    [round(float(v), 5) for v in np.geomspace(0.005, 0.5, 16)],
)


def _table(header: list[str], rows: list[list]) -> str:
    from trainer_bench import table

    return table(header, rows)


# --- 1. training alone ----------------------------------------------------------------------------


def _grid_blocks(ds, activation: str, epochs: int, widths=WIDTHS, depths=DEPTHS, lrs=LRS):
    from sweeper.models.batched import Member, stacked_params
    from sweeper.models.packed import Shape

    blocks = []
    for depth in depths:
        for width in widths:
            sizes = [ds.n_features] + [width] * depth + [ds.n_outputs]
            members = [Member(lr, epochs, seed=i) for i, lr in enumerate(lrs)]
            blocks.append(
                (
                    Shape(tuple(sizes), activation),
                    stacked_params(sizes, activation, [m.seed for m in members], "float64"),
                    members,
                )
            )
    return blocks


def planned(blocks, epochs: int, name: str = "digits") -> list[list[int]]:
    """How the planner groups the grid's shapes on this machine (indices into ``blocks``): its cost
    model's decision (:func:`sweeper.sweep.packing.pack`; each job's ``idx`` is its block's)."""
    from sweeper.sweep.packing import pack

    return [
        sorted({j.idx for j in g})
        for g in pack(_sets(blocks, epochs, name), [{"shared": "all"}] * len(blocks), True)
    ]


def _sets(blocks, epochs: int, name: str):
    """The planner's input for ``blocks``: each shape's trajectories
    (one job each, ``idx`` its block's)."""
    from sweeper.contract.compose import plain as plain_config
    from sweeper.sweep.groups import Job
    from conftest import make_cfg

    base = plain_config(make_cfg(f"data={name}", f"epochs={epochs}", "log_every=50"))
    return [
        [
            [
                Job(
                    b,
                    [],
                    None,
                    {
                        **base,
                        "depth": len(s.sizes) - 2,
                        "width": s.sizes[1],
                        "lr": m.lr,
                        "activation": s.activation,
                    },
                )
            ]
            for m in members
        ]
        for b, (s, _, members) in enumerate(blocks)
    ]


def _train(ds, blocks, grouping: list[list[int]]) -> float:
    """Training seconds of the grid grouped as ``grouping`` (lists of block
    indices), one group after another: this thread's CPU seconds (a shared
    machine's other work does not count in them, as it does in wall seconds)."""
    from sweeper.base.backend import Backend
    from sweeper.models.batched import train_packed

    class CPUTime(Backend):
        def clock(self) -> float:
            return time.thread_time()

    arrays = [a.astype("float64") for a in (ds.X_train, ds.y_train, ds.X_val, ds.y_val)]
    cpu = CPUTime("cpu", np)
    groups = [[blocks[b] for b in g] for g in grouping]
    total = 0.0
    for g in groups:
        fit = train_packed(
            cpu,
            [(s, [p.copy() for p in params]) for s, params, _ in g],
            ds.task,
            *arrays,
            [m for _, _, ms in g for m in ms],
            log_every=50,
            threads=1,
        )
        total += fit.train_time_s
    return total


def _products(ds, blocks, grouping: list[list[int]]) -> tuple[float, float]:
    """The matrix products an epoch of the grid makes (grouped as ``grouping``):
    their FLOPs, and the seconds one thread of NumPy takes for them, each
    product timed alone (median of 5 loops, CPU seconds) on its own operands."""
    from sweeper.models.activations import ACTIVATIONS
    from sweeper.models.batched_pass import _Pass
    from sweeper.models.optim import Optimizer, State
    from sweeper.models.packed import Layout

    flops, seconds = 0.0, 0.0
    for g in [[blocks[b] for b in g] for g in grouping]:
        layout = Layout([s for s, _, _ in g], [len(ms) for _, _, ms in g])
        P = layout.pack([p for _, p, _ in g], "float64")
        scale = np.full((layout.K, 1, 1), -1e-3)
        p = _Pass(
            np,
            layout,
            P,
            [ACTIVATIONS[s.activation] for s, _, _ in g],
            ds.task,
            ds.X_train,
            ds.y_train.astype("float64"),
            scale,
            State(np, [P], Optimizer(), 0.0, [Ellipsis]),
        )
        for call in p.forward_calls + p.backward_calls:
            if getattr(call, "func", None) not in (np.matmul, np.dot):
                continue
            a, b = call.args[:2]
            batch = (
                int(np.prod(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])))
                if a.ndim > 2 or b.ndim > 2
                else 1
            )
            flops += 2.0 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]
            reps = []
            for _ in range(5):
                t0 = time.thread_time()
                for _ in range(3):
                    call()
                reps.append((time.thread_time() - t0) / 3)
            seconds += statistics.median(reps)
    return flops, seconds


def training_section(repeats: int, epochs: int) -> list[str]:
    from threadpoolctl import threadpool_limits

    from sweeper import data
    from sweeper.models import forms
    from conftest import make_cfg
    from trainer_bench import gemm_peak

    ds = data.load(make_cfg("data=digits").data, 0)
    cases = [("tanh", "library"), ("tanh", "exp"), ("relu", "library")]
    times: dict[tuple, list[float]] = {}
    with threadpool_limits(1):
        peak = gemm_peak()
        blocks = {a: _grid_blocks(ds, a, epochs) for a in ("tanh", "relu")}
        n = len(blocks["tanh"])
        groupings = {
            "one packed group": [list(range(n))],
            "as planned": planned(blocks["tanh"], epochs),
            "apart (today)": [[b] for b in range(n)],
        }
        for _ in range(repeats):  # interleaved: every case in every grouping in each round
            for activation, form in cases:
                os.environ[forms.ENV] = f"{activation}={form}" if form != "library" else "library"
                for name, grouping in groupings.items():
                    times.setdefault((activation, form, name), []).append(
                        _train(ds, blocks[activation], grouping)
                    )
        os.environ.pop(forms.ENV, None)
        gemm = {
            name: _products(ds, blocks["tanh"], grouping) for name, grouping in groupings.items()
        }
    members = len(WIDTHS) * len(DEPTHS) * len(LRS)
    rows = []
    for (activation, form, name), ts in times.items():
        t = statistics.median(ts)
        flops, gemm_s = gemm[name]
        useful = flops * epochs  # every member trains all its epochs here: executed = useful
        apart = statistics.median(times[(activation, form, "apart (today)")])
        rows.append(
            [
                f"{activation} ({form})",
                name,
                f"{t:.2f}",
                f"{members * epochs / t:,.0f}",
                f"{useful / t / 1e9:.1f}",
                f"{flops / gemm_s / 1e9:.1f}",
                f"{100 * gemm_s * epochs / t:.0f}%",
                f"{apart / t:.2f}x",
            ]
        )
    plan = ", ".join(_names(blocks["tanh"], g) for g in groupings["as planned"])
    return [
        f"## Training alone: the digits grid (160 members: width {WIDTHS} x depth {DEPTHS} x 16 "
        f"lr, {epochs} "
        f"epochs, float64, one thread, CPU seconds, median of {repeats}, interleaved)",
        "",
        f"One thread's float64 GEMM at 1024²: {peak:.1f} GFLOP/s (this run). Useful FLOPs = "
        "executed FLOPs here "
        "(every member trains all the epochs; the validation passes every 50 epochs are not "
        "counted). The "
        f"planner's groups (depth x width): {plan}.",
        "",
        _table(
            [
                "activation (form)",
                "grouping",
                "train CPU s",
                "member-epochs/s",
                "GFLOP/s",
                "GEMM GFLOP/s on its products",
                "share of GEMM rate",
                "speed-up vs apart",
            ],
            rows,
        ),
    ]


def calibration_section(repeats: int, epochs: int) -> list[str]:
    """The planner's cost model against the training it predicts: on diabetes and digits, the
    peers' shapes (width 8, 16 x depth 1, 2 x 4 lr) and the 160-member grid, for every packed
    group the planner forms and for one packed group of all the shapes: the probe's epoch apart
    over packed, the planner's estimate (epochs and starts included) and the measured training
    apart over packed (train_packed, CPU s, interleaved, least of the repeats). The probe runs
    fresh (an empty cache folder): its seconds are the planner's on a machine's first sweep."""
    import tempfile

    from threadpoolctl import threadpool_limits

    from sweeper import data
    from sweeper.base import state
    from sweeper.sweep import packing
    from conftest import make_cfg

    grids = {
        "peers' shapes": ((8, 16), (1, 2), [0.001, 0.002, 0.005, 0.01]),
        "160": (WIDTHS, DEPTHS, LRS),
    }
    rows = []
    with tempfile.TemporaryDirectory() as cache, threadpool_limits(1):
        os.environ["SWEEPER_CACHE_DIR"] = cache
        for name in ("diabetes", "digits"):
            ds = data.load(make_cfg(f"data={name}").data, 0)
            for grid, (widths, depths, lrs) in grids.items():
                state.process().costs.clear()
                blocks = _grid_blocks(ds, "tanh", epochs, widths, depths, lrs)
                t0 = time.perf_counter()
                plan = planned(blocks, epochs, name)
                probe_s = time.perf_counter() - t0
                sets, costs = (
                    _sets(blocks, epochs, name),
                    next(iter(state.process().costs.values())),
                )
                shape = (ds.X_train.shape[0], ds.n_features, ds.n_outputs, 1)
                cands = {f"planned {_names(blocks, g)}": g for g in plan if len(g) > 1}
                cands[f"all {len(blocks)} shapes"] = list(range(len(blocks)))
                times: dict[tuple[str, str], list[float]] = {}
                for _ in range(repeats):
                    for c, g in cands.items():
                        times.setdefault((c, "packed"), []).append(_train(ds, blocks, [g]))
                        times.setdefault((c, "apart"), []).append(
                            _train(ds, blocks, [[b] for b in g])
                        )
                for c, g in cands.items():
                    sub = [sets[b] for b in g]
                    epoch = sum(packing.group_s(costs, [s], shape) for s in sub) / packing.group_s(
                        costs, sub, shape
                    )
                    probe = sum(costs.epoch([_block(blocks[b])]) for b in g) / costs.epoch(
                        [_block(blocks[b]) for b in g]
                    )
                    rows.append(
                        [
                            name,
                            grid,
                            c,
                            f"{probe:.2f}x",
                            f"{epoch:.2f}x",
                            f"{min(times[(c, 'apart')]) / min(times[(c, 'packed')]):.2f}x",
                            "packed" if g in plan else "apart",
                            f"{probe_s:.2f}",
                        ]
                    )
        os.environ.pop("SWEEPER_CACHE_DIR")
    return [
        f"## The planner's estimate against the training ({epochs} epochs, tanh, float64, one "
        "thread, least of "
        f"{repeats}, interleaved)",
        "",
        "Ratios are apart over packed (above 1: packing is faster). The probe's: its measured "
        "epochs; the "
        "planner's: with each trajectory's epochs and each group's start (what it decides on, "
        "packing at "
        f"{1 / packing.GAIN:.2f}x); measured: training alone apart over packed.",
        "",
        _table(
            [
                "data",
                "grid",
                "group (depth x width)",
                "probe's epoch",
                "planner's estimate",
                "measured training",
                "planner",
                "plan + probe s",
            ],
            rows,
        ),
    ]


def _block(block) -> tuple[int, int, str, int]:
    shape, _, members = block
    return len(shape.sizes) - 2, shape.sizes[1], shape.activation, len(members)


def _names(blocks, group: list[int]) -> str:
    return "+".join(f"{len(blocks[b][0].sizes) - 2}x{blocks[b][0].sizes[1]}" for b in group)


# --- 2. end to end --------------------------------------------------------------------------------


def _store(where: Path) -> str:
    from sweep_bench import _empty_store

    return _empty_store(where)


def _timed(cmd: list[str], cwd: str) -> tuple[float, float]:
    """Wall seconds of ``cmd`` and the CPU seconds it and the
    processes it waited for used (its workers')."""
    import resource

    os.sync()
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd[:6])} ... failed: {proc.stderr.strip()[-600:]}")
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def sweep_wall(overrides: list[str]) -> tuple[float, float]:
    from sweep_bench import _scratch

    tmp = _scratch()
    return _timed(
        [
            sys.executable,
            "-m",
            "sweeper",
            "-m",
            *overrides,
            f"tracking.uri={_store(Path(tmp))}",
            f"hydra.sweep.dir={tmp}/sweep",
        ],
        tmp,
    )


def gridsearch_wall(name: str, epochs: str) -> tuple[float, float]:
    from sweep_bench import _scratch

    tmp = _scratch()
    return _timed([sys.executable, __file__, "--gridsearch", name, epochs, _store(Path(tmp))], tmp)


def gridsearch(name: str, epochs: str, uri: str) -> None:
    """The peers' grid under scikit-learn's GridSearchCV on every
    core, on sweeper's split, then its 32 runs logged."""
    import warnings

    from sklearn.model_selection import GridSearchCV, PredefinedSplit
    from sklearn.neural_network import MLPClassifier, MLPRegressor

    from sweeper import data
    from sweeper.sweep.cores import cores
    from conftest import make_cfg

    ds = data.load(make_cfg(f"data={name}").data, 0)
    X, y = np.vstack([ds.X_train, ds.X_val]), np.vstack([ds.y_train, ds.y_val]).ravel()
    split = PredefinedSplit([-1] * len(ds.X_train) + [0] * len(ds.X_val))
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
    grid = {
        "learning_rate_init": [float(v) for v in PEERS["lr"].split(",")],
        "hidden_layer_sizes": [
            (int(w),) * int(d) for w in PEERS["width"].split(",") for d in PEERS["depth"].split(",")
        ],
        "max_iter": [int(e) for e in epochs.split(",")],
    }
    search = GridSearchCV(est, grid, cv=split, n_jobs=cores(), refit=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(X, y)
    import mlflow

    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(f"gridsearch-{name}")
    res = search.cv_results_
    for i, params in enumerate(res["params"]):
        with mlflow.start_run():
            mlflow.log_params({k: str(v) for k, v in params.items()})
            mlflow.log_metrics(
                {
                    "val_score": float(res["mean_test_score"][i]),
                    "fit_time_s": float(res["mean_fit_time"][i]),
                }
            )


def sweep_section(repeats: int, scale: int) -> list[str]:
    epochs = ",".join(str(int(e) // scale) for e in PEERS["epochs"].split(","))
    peers = [f"{k}={v}" for k, v in PEERS.items() if k != "epochs"] + [
        f"epochs={epochs}",
        "activation=tanh",
    ]
    digits = [
        f"width={','.join(map(str, WIDTHS))}",
        f"depth={','.join(map(str, DEPTHS))}",
        f"lr={','.join(map(str, LRS))}",
        f"epochs={1000 // scale}",
        "data=digits",
        "log_every=50",
    ]
    cases = {
        "peers' 32, diabetes": (["data=diabetes", *peers], "diabetes"),
        "peers' 32, digits": (["data=digits", *peers], "digits"),
        "digits 160 (width x depth x lr)": (digits, None),
    }
    walls: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(repeats):
        for name, (args, peer) in cases.items():  # interleaved: each contender once a round
            walls.setdefault((name, "packed"), []).append(sweep_wall(args))
            walls.setdefault((name, "apart (today)"), []).append(
                sweep_wall([*args, "hydra.launcher.pack=false"])
            )
            if peer:
                walls.setdefault((name, f"GridSearchCV(n_jobs={_cores()})"), []).append(
                    gridsearch_wall(peer, epochs)
                )
    rows = []
    for name in cases:
        mine = walls[(name, "packed")]
        for (case, who), ts in walls.items():
            if case != name:
                continue
            wall, cpu = statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts)
            rows.append(
                [
                    name,
                    who,
                    f"{wall:.1f}",
                    f"{min(t[0] for t in ts):.1f}-{max(t[0] for t in ts):.1f}",
                    f"{cpu:.1f}",
                    f"{wall / statistics.median(t[0] for t in mine):.2f}x",
                    f"{cpu / statistics.median(t[1] for t in mine):.2f}x",
                ]
            )
    return [
        "## End to end (wall s from the command to its exit, and the CPU s it and its workers "
        "used; median of "
        f"{repeats}, interleaved; epochs / {scale})",
        "",
        _table(
            [
                "sweep",
                "contender",
                "wall s",
                "range",
                "CPU s",
                "its wall / packed's",
                "its CPU / packed's",
            ],
            rows,
        ),
    ]


def _cores() -> int:
    from sweeper.sweep.cores import cores

    return cores()


# --- 3. the activations' forms --------------------------------------------------------------------

PROBE = (
    "import json, numpy; from sweeper.models import forms; "
    "print(json.dumps({d: forms.probe(d, repeats=15) for d in ('float64', 'float32')}))"
)


def forms_section() -> list[str]:
    rows = []
    for label, env in (
        ("this CPU's NumPy loops", {}),
        (
            "AVX-512 loops off (NPY_DISABLE_CPU_FEATURES=X86_V4)",
            {"NPY_DISABLE_CPU_FEATURES": "X86_V4"},
        ),
    ):
        out = subprocess.run(
            [sys.executable, "-c", PROBE],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, **env, "OMP_NUM_THREADS": "1"},
        )
        for dtype, (choice, rates) in json.loads(out.stdout).items():
            for activation, by_form in rates.items():
                rows.append(
                    [
                        label,
                        dtype,
                        activation,
                        *(f"{by_form.get(f, float('nan')):.2f}" for f in ("library", "exp")),
                        choice[activation],
                    ]
                )
    return [
        "## The activations' forms (ns a value, 2^17 values in place, one thread, median of 15; "
        "models/forms.py)",
        "",
        _table(["NumPy dispatch", "dtype", "activation", "library", "exp", "chosen"], rows),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--quick", action="store_true", help="1 repeat, epochs / 10")
    p.add_argument(
        "--full", action="store_true", help="median of 3, the issue's epochs (the default)"
    )
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument(
        "--sections",
        default="forms,training,calibration,sweeps",
        help="comma-separated: forms, training, calibration, sweeps",
    )
    p.add_argument(
        "--gridsearch", nargs=3, metavar=("DATA", "EPOCHS", "URI"), help=argparse.SUPPRESS
    )
    args = p.parse_args(argv)
    if args.gridsearch:
        gridsearch(*args.gridsearch)
        return 0
    from trainer_bench import about

    repeats, scale = args.repeats or (1 if args.quick else 3), 10 if args.quick else 1
    out = [
        f"# Packed groups (issue 61, {time.strftime('%Y-%m-%d %H:%M')}, "
        f"{'quick' if args.quick else 'full'})",
        "",
        about(),
        "",
    ]
    print("\n".join(out), flush=True)
    for section in args.sections.split(","):
        lines = {
            "forms": forms_section,
            "training": lambda: training_section(repeats, 1000 // scale),
            "calibration": lambda: calibration_section(max(repeats, 2), 1000 // scale),
            "sweeps": lambda: sweep_section(repeats, scale),
        }[section]() + [""]
        print("\n".join(lines), flush=True)
        out += lines
    return 0


if __name__ == "__main__":
    sys.exit(main())
