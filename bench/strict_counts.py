"""What crosses between host and device, per phase, on the strict
device stand-in: the table behind tests/test_syncs.py.

    python bench/strict_counts.py            # every optimizer (worst case over them), task and
                                             # mode; ~1 min

For one configuration (``models.train``), a batched group of four (``train_group``: two read
at other counts, one diverging on regression) and a user's model stacked (``train_stacked``),
200 epochs, ``log_every=10``: the epochs run (marked), the events inside them (the design:
0), the segment ends and, at one segment end, the most copies to the host (d2h), waits (sync)
and copies to the device (h2d: new rates when a member stops), then the end's events (the
clock's wait; the weights' copies). Counts, not times: the stand-in has no kernels.
"""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the checkout; tests/test_syncs.py's runs
os.environ["SWEEPER_FAKE_GPU"] = "strict"

from sweeper.base.backend import resolve  # noqa: E402
from sweeper.base.strict import LEDGER  # noqa: E402
from test_syncs import MODES, OPTIMIZERS, TASKS, group, one_run, stacked  # noqa: E402


def counts(run) -> dict[str, dict[str, int]]:
    run()
    return LEDGER.per_phase()


def row(trainer: str, mode: str, task: str, runs: list) -> list[str]:
    """The worst case over the optimizers' runs."""
    got = [counts(r) for r in runs]

    def most(phase: str, key: str) -> int:
        return max(g.get(phase, {}).get(key, 0) for g in got)

    in_epochs = max(sum(g["epoch"].get(k, 0) for k in ("h2d", "d2h", "sync")) for g in got)
    return [
        trainer,
        mode,
        task,
        str(most("epoch", "marks")),
        str(in_epochs),
        str(most("segment end", "marks")),
        *(str(most("segment end", f"{k}_max")) for k in ("d2h", "sync", "h2d")),
        *(str(most("end", k)) for k in ("d2h", "sync", "h2d")),
    ]


def main() -> int:
    gpu = resolve("gpu")
    rows = []
    for task in TASKS:
        opts = list(OPTIMIZERS.values())
        for mode, (patience, batch_size) in MODES.items():
            rows.append(
                row(
                    "one",
                    mode,
                    task,
                    [partial(one_run, gpu, task, o, patience, batch_size) for o in opts],
                )
            )
            rows.append(
                row(
                    "group",
                    mode,
                    task,
                    [partial(group, gpu, task, o, patience, batch_size) for o in opts],
                )
            )
        rows.append(row("stacked", "no-stop", task, [partial(stacked, gpu, task, o) for o in opts]))
    header = [
        "trainer",
        "mode",
        "task",
        "epochs",
        "in epochs",
        "segment ends",
        "seg d2h",
        "seg sync",
        "seg h2d",
        "end d2h",
        "end sync",
        "end h2d",
    ]
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    for r in [header, ["-" * w for w in widths], *sorted(rows, key=lambda r: (r[0], r[1], r[2]))]:
        print("  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip())
    print(
        f"(worst case over the optimizers {', '.join(OPTIMIZERS)}; seg = the most at one segment "
        "end)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
