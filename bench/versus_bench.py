"""Versus benchmark: this checkout against another one (issue 58's "every benchmark within 5 %
of the day the issue was filed"), interleaved.

    git worktree add --detach /tmp/base 8f5099a
    (cd /tmp/base && python -m venv .venv && .venv/bin/pip install -e '.[dev]')
    python bench/versus_bench.py --base-python /tmp/base/.venv/bin/python     # ~30 min on 2 cores
    python bench/versus_bench.py --base-python ... --sweeps grid-16 --repeats 1 --workloads W1

Each side runs its own code: ``--base-python`` is a virtual environment with the other
checkout installed in editable mode (its ``sweeper``, its Hydra plugins, its
``bench/trainer_bench.py``); this checkout runs under the Python that runs this script. Rows:

- the standard sweeps of ``bench/shortcuts_bench.py`` (grid-16, grid-64, ``--configs``
  configurations of one shape), one run (``python -m sweeper``, no ``-m``) and the 32-configuration
  grids of ``bench/peers.py`` (diabetes; digits on request): ``python -m
  sweeper`` in a subprocess into a copy of an empty embedded store that each side made once with
  its own ``sweeper.tracking.open_store``, wall seconds from the command to its exit;
- the one-configuration trainer (``models.train``): each side's ``bench/trainer_bench.py
  --no-sweep`` on ``--workloads`` in ``--dtypes``, its "ours" epochs/s.

The two sides of a pair run one after the other, in alternating order from one repeat to the
next, so a change in the machine's load touches both. The change is this checkout's against the
base (a wall: negative is faster; a rate: positive is faster); "within 5 %" is a wall no more than
5 % longer, a rate no more than 5 % lower.
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from peers import GRIDS  # noqa: E402
from shortcuts_bench import load, sweeps  # noqa: E402
from sweep_bench import _median, _scratch, _timed  # noqa: E402
from trainer_bench import about, table  # noqa: E402

WITHIN = 5.0  # % of the base's figure
OURS = re.compile(r"^\|\s*\S+\s*\|\s*\w+\s*\|\s*ours\s*\|\s*([\d,.]+)\s*\|")  # the table's row
STORE = "import sys; from sweeper import tracking; tracking.open_store(sys.argv[1])"


class Side:
    """One checkout: its Python, its tree and its empty store."""

    def __init__(self, python: str) -> None:
        self.python = python
        try:
            found = subprocess.run(
                [
                    python,
                    "-c",
                    "import sweeper, pathlib; print(pathlib.Path(sweeper.__file__).parent)",
                ],
                capture_output=True,
                text=True,
                cwd=tempfile.gettempdir(),
            )
        except OSError as e:
            raise SystemExit(f"versus_bench: {python}: {e.strerror}") from None
        if found.returncode:
            said = (found.stderr.strip().splitlines() or ["?"])[-1]
            raise SystemExit(f"versus_bench: {python} cannot import sweeper: {said}")
        self.tree = Path(found.stdout.strip()).parent
        self.label = subprocess.run(
            ["git", "-C", str(self.tree), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip() + (" (dirty)" if self.dirty() else "")
        self.store = Path(tempfile.mkdtemp(dir=_scratch())) / "mlflow.db"
        subprocess.run([python, "-c", STORE, f"sqlite:///{self.store}"], check=True)

    def dirty(self) -> bool:
        status = ["git", "-C", str(self.tree), "status", "--porcelain", "--untracked-files=no"]
        return bool(subprocess.run(status, capture_output=True, text=True).stdout.strip())

    def sweep(self, overrides: list[str]) -> tuple[float, str | None]:
        tmp = Path(_scratch())
        (tmp / "mlruns").mkdir()
        shutil.copy(self.store, tmp / "mlruns" / "mlflow.db")
        cmd = [
            self.python,
            "-m",
            "sweeper",
            *overrides,
            f"tracking.uri=sqlite:///{tmp}/mlruns/mlflow.db",
            f"hydra.sweep.dir={tmp}/sweep",
            f"hydra.run.dir={tmp}/run",
        ]
        return _timed(cmd, str(tmp), {"SWEEPER_PUBLIC_ONLY": "", "SWEEPER_WRITER": ""})

    def epochs(self, workload: str, dtype: str) -> tuple[float, str | None]:
        cmd = [
            self.python,
            str(self.tree / "bench" / "trainer_bench.py"),
            "--no-sweep",
            "--workloads",
            workload,
            "--dtypes",
            dtype,
            "--repeats",
            "1",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=self.tree)
        for line in proc.stdout.splitlines():
            if m := OURS.match(line):
                return float(m.group(1).replace(",", "")), None
        return 0.0, (proc.stderr.strip().splitlines() or ["no 'ours' row"])[-1][:100]


def interleaved(measure, sides: tuple[Side, Side], repeats: int):
    """``repeats`` figures of ``measure(side)`` for both sides, alternating which goes first:
    the base's, this checkout's and the first error, if any."""
    figures: tuple[list[float], list[float]] = ([], [])
    for i in range(repeats):
        for side in (0, 1) if i % 2 == 0 else (1, 0):
            value, error = measure(sides[side])
            if error:
                return *figures, error
            figures[side].append(value)
    return *figures, ""


def row(what: str, unit: str, base: list[float], head: list[float], error: str) -> list[str]:
    if error:
        return [what, unit, "error", error, "", ""]
    b, h = _median(base), _median(head)
    change = 100 * (h - b) / b
    ok = change <= WITHIN if unit == "wall s" else change >= -WITHIN
    return [what, unit, _figure(b), _figure(h), f"{change:+.1f} %", "yes" if ok else "NO"]


def _figure(x: float) -> str:
    return f"{x:,.0f}" if x >= 1000 else f"{x:.2f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--base-python", required=True, help="the other checkout's venv Python")
    p.add_argument("--repeats", type=int, default=3, help="figures per side (median)")
    p.add_argument(
        "--sweeps",
        default="one run,grid-16,grid-64,configs,peers diabetes",
        help="comma-separated: one run, grid-16, grid-64, configs, peers diabetes, peers digits "
        "('' for none)",
    )
    p.add_argument("--configs", type=int, default=1000, help="the one-shape sweep's size")
    p.add_argument("--workloads", default="W1,W2,W3,W4", help="trainer_bench workloads ('' none)")
    p.add_argument("--dtypes", default="float64,float32")
    p.add_argument("--out", type=Path, default=None, help="also write the table to this file")
    args = p.parse_args(argv)
    standard = sweeps(args.configs)
    standard["one run"] = ([], 1)
    for grid, (data, keys) in GRIDS.items():  # bench/peers.py's command for sweeper
        overrides = [f"{k}={','.join(map(str, v))}" for k, v in keys.items()]
        standard[f"peers {grid}"] = (
            [f"data={data}", *overrides, "activation=tanh", "baselines=none"],
            math.prod(map(len, keys.values())),
        )
    known = ["one run", "grid-16", "grid-64", "configs", *(f"peers {g}" for g in GRIDS)]
    wanted = [s.strip() for s in args.sweeps.split(",") if s.strip()]
    if unknown := [w for w in wanted if w not in known]:
        p.error(f"--sweeps {unknown[0]!r}: expected some of {', '.join(known)}")
    names = [k for k in standard if k in wanted or (k.endswith(" configs") and "configs" in wanted)]
    sides = (Side(args.base_python), Side(sys.executable))
    rows, n = [], args.repeats

    def say(r: list[str]) -> None:
        rows.append(r)
        print(" | ".join(r) + f"   (load {load()})", flush=True)

    for name in sorted(names, key=lambda k: standard[k][1]):
        overrides, configs = standard[name]
        multirun = ["-m", *overrides] if configs > 1 else overrides
        say(row(name, "wall s", *interleaved(partial(Side.sweep, overrides=multirun), sides, n)))
    for workload in filter(None, args.workloads.split(",")):
        for dtype in filter(None, args.dtypes.split(",")):
            say(
                row(
                    f"{workload} {dtype} trainer",
                    "epochs/s",
                    *interleaved(partial(Side.epochs, workload=workload, dtype=dtype), sides, n),
                )
            )
    out = [
        f"# Versus benchmark ({time.strftime('%Y-%m-%d %H:%M')})",
        "",
        about(),
        "",
        f"base: {sides[0].label} ({sides[0].tree}); this: {sides[1].label} ({sides[1].tree}); "
        f"median of {args.repeats}, interleaved",
        "",
        table(
            ["benchmark", "unit", sides[0].label, sides[1].label, "change", f"within {WITHIN:g} %"],
            rows,
        ),
    ]
    print("\n".join(out), flush=True)
    if args.out:
        args.out.write_text("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
