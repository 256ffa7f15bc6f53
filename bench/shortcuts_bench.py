"""Shortcuts benchmark: what each of sweeper's shortcuts past a
framework's public API saves on the standard sweeps.

    python bench/shortcuts_bench.py                       # every shortcut, the three sweeps, median
                                                          # of 3 (hours)
    python bench/shortcuts_bench.py --quick               # a validation run: 1 repeat, 200
                                                          # configurations (~1 h)
    python bench/shortcuts_bench.py --shortcuts writer,bulk --sweeps grid-16 --repeats 5

Each shortcut (``sweeper.base.environment.SHORTCUTS``) is measured on each
standard sweep: ``python -m sweeper -m`` in a subprocess into an empty embedded store
(a copy of one made once), wall time from the command to its exit, with every shortcut
on and with that one off (``SWEEPER_PUBLIC_ONLY=<name>``: the public path it stands in
for), the two runs of a pair one after the other and in alternating order from one
repeat to the next (a change in the machine's load touches both). The sweeps:

- grid-16: ``lr=0.001,0.002,0.005,0.01 depth=1,2 width=8,16 epochs=1000``;
- grid-64: ``bench/sweep_bench.py``'s ``GRID_64``;
- 1,000 configurations of one shape: ``lr=range(...)``, 10 epochs, no
  model files (``bench/sweep_bench.py --configs``).

Every pair runs under the default (batched) launcher. The saving is (wall without - wall with) /
wall with: the share of the sweep's wall today that the shortcut saves (negative: the public path
was faster). The first row of each sweep is the control (``none``): a pair with every shortcut on
in both runs, whose "saving" is the noise of one figure on this machine at that time. The rule
(docs/benchmarks.md): a shortcut that saves less than 5 % on every standard sweep goes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "bench"))

from sweep_bench import GRID_64, LAUNCHERS, _empty_store, _median, _scratch, _timed  # noqa: E402
from trainer_bench import about, table  # noqa: E402

from sweeper.base.environment import SHORTCUTS  # noqa: E402

GRID_16 = ["lr=0.001,0.002,0.005,0.01", "depth=1,2", "width=8,16", "epochs=1000"]
RULE = 5.0  # % of a standard sweep's wall: a shortcut that saves less goes
# the control: both runs of a pair with every shortcut on, so its
# "saving" is the noise of one figure on this machine
CONTROL = "none"


def one_shape(n: int) -> list[str]:
    """``n`` learning rates of one shape at 10 epochs, no model files:
    ``bench/sweep_bench.py --configs n``."""
    return [
        f"lr=range(0.0001,{0.0001 * (n + 1):.4f},0.0001)",
        "epochs=10",
        "tracking.log_model=false",
    ]


def sweeps(configs: int) -> dict[str, tuple[list[str], int]]:
    """The standard sweeps: name -> (overrides, configurations)."""
    return {
        "grid-16": (GRID_16, 16),
        "grid-64": (GRID_64, 64),
        f"{configs} configs": (one_shape(configs), configs),
    }


def wall(overrides: list[str], launcher: list[str], off: str) -> tuple[float, str | None]:
    """One sweep's wall seconds (and its error's last line) with the
    shortcuts ``off`` (``"0"``: none)."""
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
    return _timed(cmd, tmp, {"SWEEPER_PUBLIC_ONLY": off, "SWEEPER_WRITER": ""})


def pair(
    overrides: list[str], launcher: list[str], name: str, repeats: int
) -> tuple[list[float], list[float], str]:
    """``repeats`` walls with every shortcut on and with ``name`` off
    (:data:`CONTROL`: on as well), interleaved; the first error, if any."""
    walls: tuple[list[float], list[float]] = ([], [])
    for i in range(repeats):
        for side in (0, 1) if i % 2 == 0 else (1, 0):
            t, error = wall(overrides, launcher, name if side and name != CONTROL else "0")
            if error:
                return *walls, error
            walls[side].append(t)
    return *walls, ""


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (1 min) / {five:.1f} (5 min)"


def section(names: list[str], chosen: dict[str, tuple[list[str], int]], repeats: int) -> list[str]:
    rows = []
    for sweep, (overrides, n) in chosen.items():
        for name in names:
            label = "batched"
            before = load()
            on, off, error = pair(overrides, LAUNCHERS[label], name, repeats)
            if error:
                rows.append([name, sweep, n, label, "error", error, "", "", ""])
            else:
                w, wo = _median(on), _median(off)
                saving = 100 * (wo - w) / w
                verdict = "(noise)" if name == CONTROL else "yes" if saving >= RULE else "no"
                rows.append(
                    [
                        name,
                        sweep,
                        n,
                        label,
                        f"{w:.2f}",
                        f"{wo:.2f}",
                        f"{wo - w:+.2f}",
                        f"{saving:+.1f}",
                        verdict,
                    ]
                )
            print(
                " | ".join(map(str, rows[-1])) + f"   (load before {before}, after {load()})",
                flush=True,
            )
    return [
        "## Shortcuts past the frameworks (wall s from the command to its exit, median of %d, "
        "interleaved)" % repeats,
        "",
        table(
            [
                "shortcut",
                "sweep",
                "configs",
                "launcher",
                "wall with s",
                "wall without s",
                "saving s",
                "saving % of wall",
                f"saves >= {RULE:g} %",
            ],
            rows,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--quick", action="store_true", help="a validation run: 1 repeat, 200 configurations"
    )
    p.add_argument(
        "--repeats", type=int, default=None, help="pairs per figure (default 3; 1 with --quick)"
    )
    p.add_argument(
        "--configs",
        type=int,
        default=None,
        help="the one-shape sweep's size (default 1000; 200 with --quick)",
    )
    p.add_argument(
        "--shortcuts",
        default=",".join([CONTROL, *SHORTCUTS]),
        help=f"comma-separated: {CONTROL} (the control: every shortcut on in both runs), "
        + ", ".join(SHORTCUTS),
    )
    p.add_argument(
        "--sweeps",
        default=None,
        help="comma-separated: grid-16, grid-64, configs (default: all three)",
    )
    p.add_argument("--out", type=Path, default=None, help="also write the table to this file")
    args = p.parse_args(argv)
    names = [s.strip() for s in args.shortcuts.split(",") if s.strip()]
    unknown = [s for s in names if s not in SHORTCUTS and s != CONTROL]
    if unknown:
        p.error(
            f"--shortcuts {','.join(unknown)}: not a shortcut; expected some of "
            f"{', '.join(SHORTCUTS)}"
        )
    everything = sweeps(args.configs or (200 if args.quick else 1000))
    wanted = (
        [s.strip() for s in args.sweeps.split(",")]
        if args.sweeps
        else ["grid-16", "grid-64", "configs"]
    )
    chosen = {
        k: v
        for k, v in everything.items()
        if k in wanted or (k.endswith(" configs") and "configs" in wanted)
    }
    if not chosen:
        p.error(f"--sweeps {args.sweeps}: expected some of grid-16, grid-64, configs")
    repeats = args.repeats or (1 if args.quick else 3)
    out = [
        f"# Shortcuts benchmark ({time.strftime('%Y-%m-%d %H:%M')}; load average at the start "
        f"{load()})",
        "",
        about(),
        "",
    ]
    print("\n".join(out), flush=True)
    out += section(names, chosen, repeats)
    out += ["", f"load average at the end: {load()}"]
    print("\n".join(out[-5:]), flush=True)
    if args.out:
        args.out.write_text("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
