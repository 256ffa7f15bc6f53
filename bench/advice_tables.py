"""Follow the advice as a user would, on public tables shipped with scikit-learn (issue 54).

    python bench/advice_tables.py                 # diabetes, iris, wine, breast_cancer (digits with
                                                  # --digits)
    python bench/advice_tables.py --only wine

For each table: a small seeded sweep (``python -m sweeper -m ...`` into a fresh embedded store; the
baselines at their default, ``auto``), what the sweep said (its first finding, the kinds of the
others), then its printed next command (every command of it, ``resume=true``) and the best
configuration after it. Printed, one row a table: the network's best configuration (validation, and
its test score, reported only), the tuned linear and boosting baselines on the same rows, the first
finding, and whether the followed command improved the best beyond the noise or made it worse
beyond the noise — the best after against the best before by their own seeds (a paired t-test over
the seeds they share, else Welch's: :mod:`sweeper.insight.advice.noise`), never a pooled spread.

The tables load without a network (scikit-learn's bundled files: ``load_diabetes``,
``load_iris``, ``load_wine``, ``load_breast_cancer``, ``load_digits``;
``load_linnerud`` has three targets, which sweeper does not train).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# small grids with two seeds each: the noise is measured, the round
# stays a few minutes on a loaded machine
TABLES = {
    "diabetes": "lr=0.003,0.03 depth=1,2 seed=0,1 epochs=400 optimizer=adam",
    "iris": "data=iris lr=0.01,0.1 width=4,16 seed=0,1 epochs=300",
    "wine": "data=wine lr=0.01,0.1 depth=0,1 seed=0,1 epochs=300",
    "breast_cancer": "data=breast_cancer lr=0.01,0.1 depth=0,1 seed=0,1 epochs=300",
}
DIGITS = {"digits": "data=digits lr=0.05,0.2 width=16,32 seed=0,1 epochs=100"}


def best(s) -> tuple[tuple, dict, float, float | None] | None:
    """The best configuration of a sweep (advice.evidence.Sweep): its
    key, its scores by seed, mean, and test mean."""
    top = s.ranked()
    if not top:
        return None
    c = top[0]
    samples, _ = s.samples(c)
    test = f"test_{s.metric[4:]}"
    tests = [
        r["metrics"][test]
        for r in s.configs[c]
        if r["status"] == "FINISHED" and test in r["metrics"]
    ]
    return c, samples, s.mean(c)[0], (sum(tests) / len(tests) if tests else None)


def one(name: str, grid: str, tmp: str) -> list[str]:
    from advice_eval import latest, sweep

    from sweeper.base.fmt import cell
    from sweeper.insight.advice.noise import between

    uri = f"sqlite:///{tmp}/{name}.db"
    t = time.perf_counter()
    sweep(["-m", *shlex.split(grid)], uri, name)
    s, advice, _, _ = latest(uri, name)
    parent_metrics = _parent_metrics(uri, name)
    before = best(s)
    first = advice.findings[0].title if advice.findings else "-"
    kinds = ",".join(dict.fromkeys(f.kind for f in advice.findings))
    after, improved, worse = before, "no command", "-"
    if advice.command:
        for command in advice.commands:
            sweep(shlex.split(command)[3:], uri, name)  # drop "python -m sweeper"
        s2 = latest(uri, name)[0]
        after = best(s2)
        d = between(after[1], before[1])  # after − before, by their own seeds (paired where shared)
        gain = -d.d if s.lower else d.d
        improved = "yes" if gain > 0 and d.beyond() else "no"
        worse = "yes" if gain < 0 and d.beyond() else "no"
    metric = s.metric[4:]

    def base(b: str) -> str:
        v, te = (
            parent_metrics.get(f"baseline_{b}_val_{metric}"),
            parent_metrics.get(f"baseline_{b}_test_{metric}"),
        )
        return f"{cell(v)} ({cell(te)})" if v is not None else "-"

    return [
        name,
        s.metric,
        f"{cell(before[2])} ({cell(before[3])})",
        base("linear"),
        base("boosting"),
        first,
        kinds,
        f"{cell(after[2])} ({_label(after[0])})",
        improved,
        worse,
        f"{time.perf_counter() - t:.0f}",
    ]


def _label(config: tuple) -> str:
    return ",".join(f"{k}={v}" for k, v in config)


def _parent_metrics(uri: str, experiment: str) -> dict[str, float]:
    """The first sweep's parent metrics (its baselines); the latest
    parent is the first until the command runs."""
    from sweeper import tracking
    from sweeper.insight.publish import latest_parent

    return dict(latest_parent(tracking.client(uri), experiment, uri).data.metrics)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--only", help="comma list of tables: " + ", ".join({**TABLES, **DIGITS}))
    ap.add_argument(
        "--digits",
        action="store_true",
        help="also digits (1797 rows × 64, 10 classes: minutes under load)",
    )
    args = ap.parse_args(argv)
    from tabulate import tabulate

    tables = {**TABLES, **(DIGITS if args.digits else {})}
    tables = (
        {k: v for k, v in {**TABLES, **DIGITS}.items() if k in args.only.split(",")}
        if args.only
        else tables
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, grid in tables.items():
            rows.append(one(name, grid, tmp))
            print(f"[{name}] {grid}: " + " | ".join(rows[-1][2:]), flush=True)
    print()
    print(
        tabulate(
            rows,
            headers=[
                "table",
                "metric",
                "network best val (test)",
                "linear val (test)",
                "boosting val (test)",
                "first finding",
                "findings",
                "best after the next command",
                "improved beyond noise",
                "worse beyond noise",
                "s",
            ],
            disable_numparse=True,
        )
    )
    followed = [r for r in rows if r[8] != "no command"]
    print(
        f"\nfollowed next commands: {len(followed)}/{len(rows)}; improved the best beyond the "
        "noise: "
        f"{sum(r[8] == 'yes' for r in followed)}/{len(followed)}; made it worse beyond the noise: "
        f"{sum(r[9] == 'yes' for r in followed)}/{len(followed)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
