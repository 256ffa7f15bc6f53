"""Does the sweep advisor's advice hold up? Small sweeps on bundled
and synthetic data, each followed by its next command.

    python bench/advice_eval.py            # every case: 18 sweeps with their next commands (~5 min
                                           # on an idle 2-core machine; more under load)
    python bench/advice_eval.py --only iris_seeds

For each case: ``python -m sweeper -m <grid>`` into a fresh embedded store, the
advisor's findings on it (as the end of the multirun computes them), then its next
command (``resume=true``: finished configurations are reused). Printed per finding kind:
- ``found``: how many sweeps had it; ``followed``: how many of those
  put a change of it into the next command;
- ``improved``: of the followed, how often the next command's best configuration
  (mean over its seeds) beat the first sweep's beyond the noise (measured over
  seeds when the case has them, else the advisor's stated default, ``SAME`` of the
  best value); attribution is to every finding whose change the command carried;
- ``contradicted``: how many findings the runs already in the sweep contradict (target 0),
  checked here with code of its own: "train longer" while a longer run of the same
  configuration is in the grid; an edge extended in a direction the grid already tried; a
  new lr at or above one that diverged; overfitting named where the named run's validation
  curve did not bottom out before its end; a saturation whose tied scores differ. It also
  prints the measured seed-to-seed spread (relative std of the validation metric) of the
  cases with seeds: the evidence for the advisor's default noise without seeds.

Issue 39 added: contradictions of the per-slice rules (a divergence's value left out where it
finished, or out of the chosen or runner-up configuration; "did not matter" where a slice, judged
by its own seed spread, moved; a key both "did not matter" and the subject of another finding;
seeds added to ties at the metric's edge; a device left in whose jobs were SKIPPED; a configuration
with a FAILED seed ranked ahead of a fully finished one inside the noise), counted per finding kind
on the sweeps *and* on constructed, slice-structured cases (``SLICED``, no training); the share of
next commands that would train nothing (printed commands only; target 0) and each command's new
runs against its round's budget. ``--baselines`` times the baselines on every bundled data set.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASES = {  # name → the grid (small epochs: the whole harness runs in a few minutes)
    "quick_start": "lr=0.001,0.005",  # the quick start exactly (diabetes, 5000 epochs)
    "diabetes_seeds": "lr=0.003,0.01 depth=1,2 seed=0,1,2 epochs=600",
    "breast_cancer": "data=breast_cancer lr=0.01,0.1 depth=0,1 epochs=300",
    "iris_seeds": "data=iris lr=0.01,0.1 width=4,16 seed=0,1 epochs=400",
    "wine_splits": "data=wine lr=0.01,0.05 data.split_seed=0,1,2 epochs=300",
    "synthetic_reg": (
        "data=synthetic data.n_samples=400 data.n_features=8 lr=0.003,0.03 width=4,16 epochs=400"
    ),
    "synthetic_bin": (
        "data=synthetic data.task=binary data.n_samples=400 lr=0.03,0.3 epochs=200,800"
    ),
    # issue 39: a divergence that depends on the optimizer (gd
    # diverges at lr=3, adam does not), both baselines
    "slices_diverge": "optimizer=gd,adam lr=0.01,0.3,3 epochs=200 baselines=linear,boosting",
    # half the jobs SKIPPED on a machine without a GPU
    "no_gpu": "lr=0.01,0.05 device=cpu,gpu epochs=200",
}


def sweep(args: list[str], uri: str, experiment: str) -> float:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    cmd = [
        sys.executable,
        "-m",
        "sweeper",
        *args,
        f"tracking.uri={uri}",
        f"tracking.experiment={experiment}",
        "tracking.log_model=false",
        "tracking.system_metrics=false",
    ]
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(
            f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip().splitlines()[-1:]}"
        )
    return time.perf_counter() - t


def latest(uri: str, experiment: str):
    """The latest sweep of ``experiment``: (Sweep, Advice, board, its SKIPPED jobs)."""
    from sweeper import tracking
    from sweeper.insight.advice import advisor
    from sweeper.insight.advice.evidence import CURVES, Sweep, record
    from sweeper.insight.leaderboard import build
    from sweeper.insight.advice.outside_grid import skipped_lines
    from sweeper.insight.baselines import read
    from sweeper.insight.publish import children, latest_parent, reused_runs

    c = tracking.client(uri)
    parent = latest_parent(c, experiment, uri)
    runs = children(c, parent)
    mine = {r.info.run_id for r in runs}
    runs += [r for r in reused_runs(c, parent) if r.info.run_id not in mine]
    board = build(runs)
    by_id = {r.info.run_id: r for r in runs}
    records = [record(by_id[row["run_id"]]) for row in board.rows]
    curves = {
        r.info.run_id: {
            n: [(h.step, h.value) for h in c.get_metric_history(r.info.run_id, n)] for n in CURVES
        }
        for r in runs
        if r.info.status == "FINISHED"
    }
    for r in records:  # runs an earlier round trained, reused here: not this round's budget
        r["reused"] = r.get("parent") not in (None, parent.info.run_id)
    advice = advisor.advise(
        records,
        advisor.sweep_argv(parent.data.tags),
        curves,
        skipped=skipped_lines(parent.data.tags),
        baselines=read(parent.data.metrics),
    )
    return Sweep(records, curves), advice, board, tuple(skipped_lines(parent.data.tags))


def contradicted(s, f) -> str | None:
    """Why the runs already in the sweep contradict finding ``f``
    (None: they do not). Independent of the advisor."""
    b = s.best
    if b is None:
        return None
    if f.kind == "under_training":
        others = {
            k: v
            for k, v in b["params"].items()
            if k not in ("epochs", "patience", "resume")
            and not k.startswith(("tracking.", "hydra"))
        }
        for r in s.finished:
            if all(r["params"].get(k) == v for k, v in others.items()) and float(
                r["params"]["epochs"]
            ) > float(b["params"]["epochs"]):
                return f"{r['run']} trained longer and scored {s.value(r)} (chosen: {s.value(b)})"
    if f.kind == "edge":
        key, way = f.tag.split(":")
        best_value = float(b["params"][key])
        beyond = [
            r
            for r in s.finished
            if (
                float(r["params"][key]) > best_value
                if way == "up"
                else float(r["params"][key]) < best_value
            )
        ]
        if beyond:
            return f"{key} {way}: {beyond[0]['run']} was tried and scored {s.value(beyond[0])}"
    if f.kind == "divergence" and f.add.get("lr"):
        bad = [
            float(r["params"]["lr"])
            for r in s.records
            if r["status"] == "FAILED" and (r["reason"] or "").startswith("diverged")
        ]
        if bad and any(float(v) >= min(bad) for v in f.add["lr"]):
            return f"lr={f.add['lr']} at or above a diverged lr ({min(bad)})"
    if f.kind == "overfitting":
        step = int(f.tag.split("=")[1].split("/")[0])
        named = [r for r in s.finished if s.curve(r)]
        if not any(
            min(s.curve(r), key=lambda p: p[1])[0] == step
            and s.curve(r)[-1][1] > min(v for _, v in s.curve(r))
            for r in named
        ):
            return f"no run's validation curve bottoms out at epoch {step} and rises"
    if f.kind == "saturation":
        top = s.ranked()
        values = {s.mean(c)[0] for c in top[: int(f.tag.split("@")[0])]}
        if len(values) > 1:
            return f"the tied scores differ: {sorted(values)}"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--only", help="comma list of cases: " + ", ".join(CASES))
    ap.add_argument(
        "--constructed", action="store_true", help="only the constructed slice cases (no training)"
    )
    ap.add_argument(
        "--baselines", action="store_true", help="also time the baselines on every bundled data set"
    )
    args = ap.parse_args(argv)
    if args.constructed:
        sys.path.insert(0, str(ROOT))
        constructed()
        if args.baselines:
            print("\n" + baseline_costs())
        return 0
    cases = {k: v for k, v in CASES.items() if not args.only or k in args.only.split(",")}
    sys.path.insert(0, str(ROOT))
    from sweeper.base.fmt import cell
    from sweeper.insight.advice.noise import SAME, between
    from advice_tables import best

    kinds: dict[str, dict[str, int]] = {}
    spreads: list[str] = []
    rows = []
    rounds: list = []  # (case, advice, sweep): the next commands' size against their budget
    with tempfile.TemporaryDirectory() as tmp:
        for name, grid in cases.items():
            uri = f"sqlite:///{tmp}/{name}.db"
            t1 = sweep(["-m", *shlex.split(grid)], uri, name)
            s, advice, _, skipped = latest(uri, name)
            first = best(s)
            before = first[2]
            if s.seeded:
                spreads.append(
                    f"{name}: the best configuration's own seed std = {s.rel_noise():.1%} of its "
                    "mean"
                )
            command = advice.command
            t2, after, improved = 0.0, before, False
            for one in advice.commands:
                next_args = shlex.split(one)[3:]  # drop "python -m sweeper"
                t2 += sweep(next_args, uri, name)
            # the best after against the best before, by their own seeds (paired where shared)
            if command:
                then = best(latest(uri, name)[0])
                after, d = then[2], between(then[1], first[1])
                improved = (-d.d if s.lower else d.d) > 0 and d.beyond()
            rounds.append((name, advice, s))
            noise = d.se if command and d.se is not None else SAME * abs(before)
            followed_kinds = []
            for f in advice.findings:
                k = kinds.setdefault(
                    f.kind, {"found": 0, "followed": 0, "improved": 0, "contradicted": 0}
                )
                k["found"] += 1
                why = contradicted(s, f) or sliced_contradiction(s, advice, f, grid, skipped)
                if why:
                    k["contradicted"] += 1
                    print(f"  CONTRADICTED [{name}] {f.kind}: {why}")
                if command and (f.add or f.set or f.drop) and f not in _left(advice):
                    k["followed"] += 1
                    k["improved"] += improved
                    followed_kinds.append(f.kind)
            rows.append(
                [
                    name,
                    s.metric,
                    cell(before),
                    cell(after),
                    cell(noise),
                    "yes" if improved else "no",
                    ",".join(f.kind for f in advice.findings),
                    f"{advice.sizes[0] - advice.sizes[1]}/{len(s.records)}",
                    f"{t1 + t2:.0f}",
                ]
            )
            print(
                f"[{name}] {grid}\n  next: {command}\n  best {s.metric}: {cell(before)} → "
                f"{cell(after)} "
                f"(noise {cell(noise)}); findings: {', '.join(f.kind for f in advice.findings)}",
                flush=True,
            )
    from tabulate import tabulate

    print()
    print(
        tabulate(
            rows,
            headers=[
                "case",
                "metric",
                "best before",
                "after",
                "noise",
                "improved",
                "findings",
                "to train/sweep runs",
                "s",
            ],
            disable_numparse=True,
        )
    )
    print()
    table = [
        [k, v["found"], v["followed"], f"{v['improved']}/{v['followed']}", v["contradicted"]]
        for k, v in sorted(kinds.items())
    ]
    print(
        tabulate(
            table,
            headers=[
                "finding",
                "found",
                "followed",
                "improved beyond noise",
                "contradicted by the sweep",
            ],
            disable_numparse=True,
        )
    )
    if spreads:
        print("\nmeasured noise (the advisor's default without seeds: " + f"{SAME:.0%}):")
        print("\n".join("  " + x for x in spreads))
    constructed()
    if rounds:
        print("\n" + budgets(rounds))
    if args.baselines:
        print("\n" + baseline_costs())
    return 0


def _left(advice) -> list:
    """The findings the command left out for its budget (named in its note)."""
    return [f for f in advice.findings if advice.note and f.step in advice.note]


from advice_cases import baseline_costs, budgets, constructed, sliced_contradiction  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
