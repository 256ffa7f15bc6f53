"""Start-up cost of each command: the median wall time of N real runs, against ``import hydra`` and ``import mlflow``.

    python bench/startup_bench.py                    # every command, 3 runs each (~1-2 min on 2 cores)
    python bench/startup_bench.py -n 5 --only help   # rows whose name contains "help"
    python bench/startup_bench.py --importtime       # and what a single run and a multirun import, in order
    python bench/startup_bench.py --baseline /tmp/base   # before/after: another checkout, interleaved

Every row is a fresh ``python`` process run the same way (same interpreter, environment, working
directory): ``python -c "import hydra"`` is the floor of any Hydra command, ``python -c "import mlflow"``
the cost a command pays when it imports MLflow before it needs it. The runs use a warm SQLite store
(created by an untimed first run) and folders in a temporary directory; the checkout benchmarked is
the one this file sits in (``PYTHONPATH`` points at it).
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

ROOT = Path(__file__).resolve().parent.parent
FAST = ["epochs=300", "log_every=10"]


def commands(tmp: Path) -> list[tuple[str, list[str]]]:
    """(row name, arguments after ``python``) of every measured command."""
    store = [f"tracking.uri=sqlite:///{tmp / 'mlflow.db'}"]
    return [
        ("import hydra", ["-c", "import hydra"]),
        ("import mlflow", ["-c", "import mlflow"]),
        *[(f"{m} --help", ["-m", m, "--help"]) for m in
          ("sweeper", "sweeper.promote", "sweeper.report", "sweeper.compare", "sweeper.summary", "sweeper.upload")],
        ("refused lr=-1", ["-m", "sweeper", "lr=-1"]),
        ("refused -m lr=0.1,-1", ["-m", "sweeper", "-m", "lr=0.1,-1"]),
        ("refused data.name=nope", ["-m", "sweeper", "data.name=nope", f"hydra.run.dir={tmp / 'run'}", *store]),
        ("single run", ["-m", "sweeper", *FAST, f"hydra.run.dir={tmp / 'run'}", *store]),
        ("multirun lr=0.001,0.005", ["-m", "sweeper", "-m", "lr=0.001,0.005", *FAST, f"hydra.sweep.dir={tmp / 'sweep'}", *store]),
        # the Python API (sweeper.api) in a script: the same sweep, and two of them in one process (a notebook's
        # second call pays neither the imports nor Hydra's plugin discovery again); Python's own exit included
        ("python: import sweeper", ["-c", "import sweeper"]),
        ("python: run()", ["-c", python(f"sweeper.run({[*FAST, 'hydra.run.dir=' + str(tmp / 'run'), *store]!r})")]),
        ("python: multirun()", ["-c", python(_multirun(tmp / "sweep_py", store))]),
        ("python: multirun() twice", ["-c", python(_multirun(tmp / "sweep_a", store), _multirun(tmp / "sweep_b", store))]),
    ]


def _multirun(sweep_dir: Path, store: list[str]) -> str:
    return f"sweeper.multirun({['lr=0.001,0.005', *FAST, 'hydra.sweep.dir=' + str(sweep_dir), *store]!r})"


def python(*calls: str) -> str:
    """A script of API calls."""
    return "; ".join(["import sweeper", *calls])


def timed(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 2):
        raise SystemExit(f"python {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return wall


def importtime(args: list[str], cwd: Path, env: dict[str, str], least: float) -> list[tuple[float, str]]:
    """What a command's own code imported (the outermost imports of ``-X importtime``, in order), each with
    its cumulative seconds, those of at least ``least`` s; the first row is their total."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *args], cwd=cwd, env=env, capture_output=True, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cum_us, name = line[len("import time:"):].split("|")
            if not name[1:].startswith(" "):  # not nested: imported by the command's code or the interpreter
                rows.append((int(cum_us) / 1e6, name.strip()))
    return [(sum(t for t, _ in rows), "all imports")] + [r for r in rows if r[0] >= least]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--runs", type=int, default=3, help="runs of each command; the table shows the median")
    ap.add_argument("--only", help="measure only the rows whose name contains this (the two references always run)")
    ap.add_argument("--baseline", type=Path, help="another checkout (e.g. git worktree add /tmp/base main), run "
                    "interleaved with this one: its medians and the ratio baseline / this")
    ap.add_argument("--importtime", action="store_true", help="also list what a single run and a multirun import")
    args = ap.parse_args(argv)
    checkouts = {"this": ROOT, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    envs = {name: {**os.environ, "PYTHONWARNINGS": "ignore",
                   "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
            for name, root in checkouts.items()}

    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        rows = [c for c in commands(tmp) if c[0].startswith("import ") or not args.only or args.only in c[0]]
        timed(dict(commands(tmp))["single run"], tmp, envs["this"])  # creates the store: later runs find it warm
        times = {(row, name): [] for row, _ in rows for name in checkouts}
        for _ in range(args.runs):  # interleaved, so that a busy moment of the machine hits every row alike
            for row, cmd in rows:
                for name in checkouts if not row.startswith("import ") else ["this"]:
                    times[row, name].append(timed(cmd, tmp, envs[name]))
        med = {key: statistics.median(t) for key, t in times.items() if t}
        hydra, mlflow = med["import hydra", "this"], med["import mlflow", "this"]
        print(f"{sys.executable} · {os.cpu_count()} CPUs · median of {args.runs} runs · this: {ROOT}"
              + (f" · baseline: {args.baseline}" if args.baseline else "") + "\n")
        head = f"{'command':<26} {'median s':>9} {'min s':>6} {'max s':>6} {'/ import hydra':>15} {'/ import mlflow':>16}"
        print(head + (f" {'baseline s':>11} {'baseline / this':>16}" if args.baseline else ""))
        for row, _ in rows:
            t, m = times[row, "this"], med[row, "this"]
            line = f"{row:<26} {m:>9.2f} {min(t):>6.2f} {max(t):>6.2f} {m / hydra:>14.1f}x {m / mlflow:>15.2f}x"
            if args.baseline and times[row, "baseline"]:
                line += f" {med[row, 'baseline']:>11.2f} {med[row, 'baseline'] / m:>15.1f}x"
            print(line)
        if args.importtime:
            for row in ("single run", "multirun lr=0.001,0.005"):
                print(f"\nimports of one {row} in the order they happen, >= 50 ms (cumulative s, python -X importtime):")
                for cum, module in importtime(dict(commands(tmp))[row], tmp, envs["this"], 0.05):
                    print(f"  {cum:6.2f}  {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
