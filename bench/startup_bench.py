"""Start-up cost of each command: the median wall time of N real runs,
against ``import hydra`` and ``import mlflow``.

    python bench/startup_bench.py                    # every command, 3 runs each (~1-2 min on 2
                                                     # cores)
    python bench/startup_bench.py -n 5 --only help   # rows whose name contains "help"
    python bench/startup_bench.py --importtime       # and what a single run and a multirun import,
                                                     # in order
    python bench/startup_bench.py --baseline /tmp/base   # before/after: another checkout,
                                                         # interleaved
    python bench/startup_bench.py --small [--baseline /tmp/base]
                                                     # small sweeps: the quick start on a new and on
                                                     # an existing store, grid-16 against a by-hand
                                                     # loop, a second sweeper.multirun of 2
                                                     # configurations (issue 57's table)

Every row is a fresh ``python`` process run the same way (same interpreter, environment, working
directory): ``python -c "import hydra"`` is the floor of any Hydra
command, ``python -c "import mlflow"`` the cost a command pays when it imports MLflow
before it needs it. The runs use a warm SQLite store (created by an untimed first run)
and folders in a temporary directory; the checkout benchmarked is the one this file sits
in (``PYTHONPATH`` points at it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FAST = ["epochs=300", "log_every=10"]


def commands(tmp: Path) -> list[tuple[str, list[str]]]:
    """(row name, arguments after ``python``) of every measured command."""
    store = [f"tracking.uri=sqlite:///{tmp / 'mlflow.db'}"]
    return [
        ("import hydra", ["-c", "import hydra"]),
        ("import mlflow", ["-c", "import mlflow"]),
        *[
            (f"{m} --help", ["-m", m, "--help"])
            for m in (
                "sweeper",
                "sweeper.promote",
                "sweeper.report",
                "sweeper.compare",
                "sweeper.summary",
                "sweeper.upload",
            )
        ],
        ("refused lr=-1", ["-m", "sweeper", "lr=-1"]),
        ("refused -m lr=0.1,-1", ["-m", "sweeper", "-m", "lr=0.1,-1"]),
        (
            "refused data.name=nope",
            ["-m", "sweeper", "data.name=nope", f"hydra.run.dir={tmp / 'run'}", *store],
        ),
        ("single run", ["-m", "sweeper", *FAST, f"hydra.run.dir={tmp / 'run'}", *store]),
        (
            "multirun lr=0.001,0.005",
            [
                "-m",
                "sweeper",
                "-m",
                "lr=0.001,0.005",
                *FAST,
                f"hydra.sweep.dir={tmp / 'sweep'}",
                *store,
            ],
        ),
        # the Python API (sweeper.api) in a script: the same sweep, and two of
        # them in one process (a notebook's second call pays neither the imports
        # nor Hydra's plugin discovery again); Python's own exit included
        ("python: import sweeper", ["-c", "import sweeper"]),
        (
            "python: run()",
            [
                "-c",
                python(f"sweeper.run({[*FAST, 'hydra.run.dir=' + str(tmp / 'run'), *store]!r})"),
            ],
        ),
        ("python: multirun()", ["-c", python(_multirun(tmp / "sweep_py", store))]),
        (
            "python: multirun() twice",
            ["-c", python(_multirun(tmp / "sweep_a", store), _multirun(tmp / "sweep_b", store))],
        ),
    ]


GRID_16 = ["lr=0.001,0.002,0.005,0.01", "depth=1,2", "width=8,16", "epochs=1000"]
BY_HAND_16 = r"""
import itertools, sys, warnings
import mlflow, numpy as np
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPRegressor
from sklearn.preprocessing import StandardScaler

mlflow.set_tracking_uri(sys.argv[1])
mlflow.set_experiment("by-hand")
X, y = load_diabetes(return_X_y=True)
for lr, depth, width in itertools.product([0.001, 0.002, 0.005, 0.01], [1, 2], [8, 16]):
    Xt, Xs, yt, ys = train_test_split(X, y, test_size=0.2, random_state=0)
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
        max_iter=1000,
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(Xt, sy.transform(yt.reshape(-1, 1)).ravel())
    pred = sy.inverse_transform(m.predict(Xs).reshape(-1, 1)).ravel()
    with mlflow.start_run():
        mlflow.log_params({"lr": lr, "depth": depth, "width": width, "epochs": 1000})
        mlflow.log_metrics(
            {
                "test_mse": float(np.mean((pred - ys) ** 2)),
                "test_mae": float(np.mean(np.abs(pred - ys))),
            }
        )
"""
# Two 2-configuration sweeps in one process (a notebook): each call's
# wall and training (the group's train time), printed
API_TWICE = r"""
import sys, time, sweeper

for name in ("first", "second"):
    t = time.perf_counter()
    r = sweeper.multirun(
        [
            "lr=0.001,0.005",
            "hydra.sweep.dir=" + sys.argv[1] + "/" + name,
            "tracking.uri=" + sys.argv[2],
        ]
    )
    wall = time.perf_counter() - t
    print(f"API {name} {wall:.3f} {float(r.leaderboard['train_time_s'].astype(float).sum()):.3f}")
"""


def small(tmp: Path, counter: list[int]) -> list[tuple[str, list[str]]]:
    """Issue 57's rows: (row name, arguments after ``python``); a new
    store's row gets a new path each run."""
    store = f"tracking.uri=sqlite:///{tmp / 'mlflow.db'}"

    def fresh() -> str:
        counter[0] += 1
        return f"tracking.uri=sqlite:///{tmp / f'new{counter[0]}' / 'mlflow.db'}"

    return [
        ("import mlflow", ["-c", "import mlflow"]),
        (
            "quick start, new store",
            ["-m", "sweeper", "-m", "lr=0.001,0.005", f"hydra.sweep.dir={tmp / 'q'}", fresh()],
        ),
        (
            "quick start, existing store",
            ["-m", "sweeper", "-m", "lr=0.001,0.005", f"hydra.sweep.dir={tmp / 'q'}", store],
        ),
        ("grid-16", ["-m", "sweeper", "-m", *GRID_16, f"hydra.sweep.dir={tmp / 'g'}", store]),
        ("grid-16 by hand", ["-c", BY_HAND_16, f"sqlite:///{tmp / 'hand' / f'{counter[0]}.db'}"]),
        (
            "python: multirun() x2",
            ["-c", API_TWICE, str(tmp / "api"), f"sqlite:///{tmp / 'mlflow.db'}"],
        ),
    ]


def small_main(args: Any, checkouts: dict[str, Path], envs: dict[str, dict[str, str]]) -> int:
    """The small sweeps' table: each row interleaved across the
    checkouts, median of ``args.runs``."""
    with tempfile.TemporaryDirectory() as name:
        tmp, counter = Path(name), [0]
        (tmp / "hand").mkdir()
        timed(
            [
                "-m",
                "sweeper",
                "epochs=10",
                f"hydra.run.dir={tmp / 'run'}",
                f"tracking.uri=sqlite:///{tmp / 'mlflow.db'}",
            ],
            tmp,
            envs["this"],
        )  # the existing store (and sweeper's store template, where it keeps one)
        times: dict[tuple[str, str], list[float]] = {}
        api: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.runs):
            for row, _cmd in small(tmp, [0]):
                for who in (
                    checkouts if row not in ("import mlflow", "grid-16 by hand") else ["this"]
                ):
                    cmd = dict(small(tmp, counter))[row]
                    if row.startswith("python:"):
                        out = subprocess.run(
                            [sys.executable, *cmd],
                            cwd=tmp,
                            env=envs[who],
                            capture_output=True,
                            text=True,
                        )
                        for line in out.stdout.splitlines():
                            if line.startswith("API "):
                                _, call, wall, train = line.split()
                                api.setdefault((call, who), []).append((float(wall), float(train)))
                        continue
                    times.setdefault((row, who), []).append(timed(cmd, tmp, envs[who]))
        med = {k: statistics.median(v) for k, v in times.items()}
        ref = med["import mlflow", "this"]
        print(
            f"{sys.executable} · {os.cpu_count()} CPUs · median of {args.runs} runs · this: {ROOT}"
            + (f" · baseline: {args.baseline}" if args.baseline else "")
            + "\n"
        )
        head = f"{'row':<30} {'this s':>8} {'/ import mlflow':>16} {'/ by hand':>10}"
        print(head + (f" {'baseline s':>11} {'baseline / this':>16}" if args.baseline else ""))
        hand = med.get(("grid-16 by hand", "this"))
        for row, _ in small(tmp, [0]):
            if (row, "this") not in med:
                continue
            m = med[row, "this"]
            vs_hand = f"{hand / m:>9.2f}x" if row == "grid-16" and hand else f"{'':>10}"
            line = f"{row:<30} {m:>8.2f} {m / ref:>15.2f}x {vs_hand}"
            if (row, "baseline") in med:
                line += f" {med[row, 'baseline']:>11.2f} {med[row, 'baseline'] / m:>15.2f}x"
            print(line)
        for call in ("first", "second"):
            for who in checkouts:
                got = api.get((call, who))
                if got:
                    wall = statistics.median(w for w, _ in got)
                    train = statistics.median(t for _, t in got)
                    print(
                        f"python: multirun() {call} call ({who}): {wall:.2f} s, of which "
                        f"training {train:.2f} s: "
                        f"{wall - train:.2f} s beside its training"
                    )
    return 0


def _multirun(sweep_dir: Path, store: list[str]) -> str:
    return (
        "sweeper.multirun("
        f"{['lr=0.001,0.005', *FAST, 'hydra.sweep.dir=' + str(sweep_dir), *store]!r})"
    )


def python(*calls: str) -> str:
    """A script of API calls."""
    return "; ".join(["import sweeper", *calls])


def timed(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 2):
        raise SystemExit(
            f"python {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-2000:]}"
        )
    return wall


def importtime(
    args: list[str], cwd: Path, env: dict[str, str], least: float
) -> list[tuple[float, str]]:
    """What a command's own code imported (the outermost imports of
    ``-X importtime``, in order), each with its cumulative seconds,
    those of at least ``least`` s; the first row is their total."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    rows = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cum_us, name = line[len("import time:") :].split("|")
            # not nested: imported by the command's code or the interpreter
            if not name[1:].startswith(" "):
                rows.append((int(cum_us) / 1e6, name.strip()))
    return [(sum(t for t, _ in rows), "all imports")] + [r for r in rows if r[0] >= least]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument(
        "-n", "--runs", type=int, default=3, help="runs of each command; the table shows the median"
    )
    ap.add_argument(
        "--only",
        help="measure only the rows whose name contains this (the two references always run)",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        help="another checkout (e.g. git worktree add /tmp/base main), run "
        "interleaved with this one: its medians and the ratio baseline / this",
    )
    ap.add_argument(
        "--importtime",
        action="store_true",
        help="also list what a single run and a multirun import",
    )
    ap.add_argument(
        "--small", action="store_true", help="the small sweeps' table (issue 57) instead"
    )
    args = ap.parse_args(argv)
    checkouts = {"this": ROOT, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    envs = {
        name: {
            **os.environ,
            "PYTHONWARNINGS": "ignore",
            "PYTHONPATH": os.pathsep.join(
                [str(root), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
        }
        for name, root in checkouts.items()
    }
    if args.small:
        return small_main(args, checkouts, envs)

    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        rows = [
            c
            for c in commands(tmp)
            if c[0].startswith("import ") or not args.only or args.only in c[0]
        ]
        # creates the store: later runs find it warm
        timed(dict(commands(tmp))["single run"], tmp, envs["this"])
        times = {(row, name): [] for row, _ in rows for name in checkouts}
        # interleaved, so that a busy moment of the machine hits every row alike
        for _ in range(args.runs):
            for row, cmd in rows:
                for name in checkouts if not row.startswith("import ") else ["this"]:
                    times[row, name].append(timed(cmd, tmp, envs[name]))
        med = {key: statistics.median(t) for key, t in times.items() if t}
        hydra, mlflow = med["import hydra", "this"], med["import mlflow", "this"]
        print(
            f"{sys.executable} · {os.cpu_count()} CPUs · median of {args.runs} runs · this: {ROOT}"
            + (f" · baseline: {args.baseline}" if args.baseline else "")
            + "\n"
        )
        head = (
            f"{'command':<26} {'median s':>9} {'min s':>6} {'max s':>6} "
            f"{'/ import hydra':>15} {'/ import mlflow':>16}"
        )
        print(head + (f" {'baseline s':>11} {'baseline / this':>16}" if args.baseline else ""))
        for row, _ in rows:
            t, m = times[row, "this"], med[row, "this"]
            line = (
                f"{row:<26} {m:>9.2f} {min(t):>6.2f} {max(t):>6.2f} {m / hydra:>14.1f}x "
                f"{m / mlflow:>15.2f}x"
            )
            if args.baseline and times[row, "baseline"]:
                line += f" {med[row, 'baseline']:>11.2f} {med[row, 'baseline'] / m:>15.1f}x"
            print(line)
        if args.importtime:
            for row in ("single run", "multirun lr=0.001,0.005"):
                print(
                    f"\nimports of one {row} in the order they happen, >= 50 ms (cumulative s, "
                    "python -X importtime):"
                )
                for cum, module in importtime(dict(commands(tmp))[row], tmp, envs["this"], 0.05):
                    print(f"  {cum:6.2f}  {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
