"""Every core: the batched launcher's CPU groups on
``hydra.launcher.cpu_workers`` worker processes (issue 44).

    python bench/sweep_bench.py --cores                      # cpu_workers=1 against the default,
                                                             # median of 3
    python bench/sweep_bench.py --cores --workers 1,2,4,8,16 # the scaling curve
                                                             # (bench/gpu_check.sh, 16 cores)

Four sweeps, each ``python -m sweeper -m ...`` in a subprocess into an empty embedded store (as
bench/sweep_bench.py's end-to-end rows): two 32-configuration digits grids (one of the issue's
weight, mostly training; one lighter, half start-up and recording) and a 32-configuration
diabetes grid (lr x depth x width x epochs: 4 groups of 4 learning rates, each read at 2 epoch
counts), and a one-group grid of 64 learning rates (diabetes: one group, split into chunks of
whole trajectories across the workers). Each is run with every worker count of ``--workers``
(``default``: the option unset, i.e. the cores this process may use), interleaved (repeat 1 of
every row, then repeat 2, ...), so that a change in the machine's load touches every row. Wall
seconds from the command to its exit, CPU seconds of the whole process tree (``RUSAGE_CHILDREN``:
the launching process, its workers and the writer), and the cores that kept busy on average (CPU
s / wall s); the speedup of medians, and the median of each repeat's own ratio (paired: the two
ran back to back). The load average before and after is printed: this machine is shared.
"""

from __future__ import annotations

import os
import resource
import statistics
import time

SWEEPS = {  # name: (overrides, configurations)
    # the weight: on one worker ~90% of the wall is training
    # (the issue measured 42.9 s of 48.4 s)
    "digits 32": (
        ["data=digits", "lr=0.05,0.1,0.2,0.3", "depth=1,2", "width=64,128", "epochs=600,1200"],
        32,
    ),
    # lighter: on one worker about half the wall is training, the
    # rest start-up, recording and the summary
    "digits 32, light": (
        ["data=digits", "lr=0.05,0.1,0.2,0.3", "depth=1,2", "width=32,64", "epochs=300,600"],
        32,
    ),
    "diabetes 32": (
        ["lr=0.002,0.005,0.01,0.02", "depth=1,2", "width=16,32", "epochs=4000,8000"],
        32,
    ),
    "one group, 64 lr": (
        ["lr=range(0.0005,0.0325,0.0005)", "depth=1", "width=32", "epochs=2000"],
        64,
    ),
}
COMMON = ["tracking.log_model=false"]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _one(overrides: list[str], workers: str) -> tuple[float, float, str | None]:
    """Wall s, CPU s of the process tree, error (the command's last line)."""
    from sweep_bench import sweep_wall

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    option = [] if workers == "default" else [f"hydra.launcher.cpu_workers={workers}"]
    wall, error = sweep_wall([*overrides, *COMMON, *option], [])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, error


def cores_section(repeats: int, workers: list[str], names: list[str] | None = None) -> list[str]:
    from trainer_bench import table

    names = names or list(SWEEPS)
    runs: dict[tuple[str, str], list[tuple[float, float]]] = {
        (n, w): [] for n in names for w in workers
    }
    errors: dict[tuple[str, str], str] = {}
    start = load()
    t0 = time.perf_counter()
    for r in range(repeats):
        for name in names:
            for w in workers:
                if (name, w) in errors:
                    continue
                wall, cpu, error = _one(SWEEPS[name][0], w)
                if error:
                    errors[(name, w)] = error
                    continue
                runs[(name, w)].append((wall, cpu))
                print(
                    f"  [{r + 1}/{repeats}] {name}, cpu_workers={w}: {wall:.1f} s wall, {cpu:.1f}"
                    " s CPU "
                    f"(load {load()})",
                    flush=True,
                )
    rows = []
    for name in names:
        base = None
        for w in workers:
            if (name, w) in errors:
                rows.append(
                    [name, SWEEPS[name][1], w, "error", errors[(name, w)][:60], "", "", "", ""]
                )
                continue
            walls = [x for x, _ in runs[(name, w)]]
            wall = statistics.median(walls)
            cpu = statistics.median(c for _, c in runs[(name, w)])
            base = base or walls
            # the same repeat's first row over this one: the load of that moment touches both
            paired = statistics.median(b / x for b, x in zip(base, walls))
            rows.append(
                [
                    name,
                    SWEEPS[name][1],
                    w,
                    f"{wall:.1f}",
                    f"{min(walls):.1f}-{max(walls):.1f}",
                    f"{cpu:.1f}",
                    f"{cpu / wall:.2f}",
                    f"{statistics.median(base) / wall:.2f}x",
                    f"{paired:.2f}x",
                ]
            )
    head = (
        f"## Every core: hydra.launcher.cpu_workers (median of {repeats}, interleaved; "
        f"{os.cpu_count()} cores, "
        f"{len(os.sched_getaffinity(0))} usable; default = {len(os.sched_getaffinity(0))} workers)"
    )
    return [
        head,
        "",
        f"load average (1, 5, 15 min) before: {start}; after: {load()}; "
        f"{time.perf_counter() - t0:.0f} s in all",
        "",
        table(
            [
                "sweep",
                "configs",
                "cpu_workers",
                "wall s",
                "range",
                "CPU s",
                "cores busy",
                "speedup",
                "paired speedup",
            ],
            rows,
        ),
    ]
