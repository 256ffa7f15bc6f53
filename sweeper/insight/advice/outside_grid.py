"""Findings from outside the grid's scores: the baselines fitted on
the same rows (is the network worth it?) and the devices a sweep could
not use (their jobs SKIPPED: the next command leaves them out)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from sweeper.base.fmt import cell
from sweeper.insight.advice.evidence import Finding, Sweep, _label

__all__ = ["beside_best", "devices", "reference", "skipped_lines"]

# how a job SKIPPED for a missing device begins its reason (sweeper.base.backend)
MISSING_DEVICE = ("device=gpu",)


def devices(argv: list[str], skipped: list[str]) -> list[Finding]:
    """A device whose jobs were all SKIPPED for want of it (``skipped``: "overrides: reason"
    lines of the parent): the next command leaves it out of the sweep's ``device=`` list."""
    missing = {}
    for line in skipped:
        _, _, reason = line.partition(": ")
        if reason.startswith(MISSING_DEVICE):
            missing.setdefault("gpu", reason)
    arg = next((a for a in argv if a.lstrip("+").startswith("device=")), None)
    if not missing or arg is None:
        return []
    tried = [v.strip() for v in arg.partition("=")[2].split(",")]
    left = [v for v in tried if v not in missing] or ["cpu"]
    gone = [v for v in tried if v in missing]
    if not gone:
        return []
    n = sum(1 for line in skipped if line.partition(": ")[2].startswith(MISSING_DEVICE))
    return [
        Finding(
            "device",
            "a device this machine does not have",
            f"{n} job(s) with device={','.join(gone)} were SKIPPED: {missing[gone[0]]}",
            [f"the sweep's {arg}"],
            f"the next command runs device={','.join(left)} only",
            ",".join(gone),
            set={"device": ",".join(left)},
        )
    ]


NAMES = MappingProxyType(
    {
        "linear": "the linear reference",
        "boosting": "gradient boosting (tuned on the validation rows)",
    }
)


def reference(
    s: Sweep, baselines: dict[str, dict[str, float]]
) -> tuple[list[Finding], list[Finding]]:
    """The baselines against the network's best configuration, by its own seeds or folds
    (a one-sample test: a baseline is fitted once on the same rows):
    ``(first, last)``. ``first``: the strongest baseline that beats it beyond the noise
    (validation metric; the test split is shown, never used), said before every other
    finding with both numbers and the gap in percent; ``last``: the linear reference when
    no configuration beats it beyond the noise and it does not beat them either (a tie)."""
    top = s.ranked()
    if not top or not baselines:
        return [], []
    best = top[0]
    a = s.mean(best)[0]
    test = f"test_{s.metric[4:]}"
    tests = [
        r["metrics"].get(test)
        for r in s.configs[best]
        if r["status"] == "FINISHED" and test in r["metrics"]
    ]
    shown = f"{s.metric} {cell(a)} ({s.n_text(best)})" + (
        f", {test} {cell(sum(tests) / len(tests))}" if tests else ""
    )
    diffs = {
        name: s.against(best, m[s.metric])
        for name, m in baselines.items()
        if m.get(s.metric) is not None
    }

    def line(name: str) -> str:
        m = baselines[name]
        return (
            f"{NAMES.get(name, name)} (same split and rows): {s.metric} {cell(m[s.metric])}"
            + (f", {test} {cell(m[test])}" if test in m else "")
            + f"; the best against it: {diffs[name].text()}"
        )

    name = _strongest(s, diffs)
    first, last = [], []
    if name is not None:
        b = diffs[name].b
        said = (
            f"{NAMES.get(name, name)} scores {s.metric} {cell(b)} against the network's best "
            f"{cell(a)} "
            f"({_label(best)}): {_gap(a, b)} better, beyond the noise"
        )
        evidence = [line(n) for n in (name, *(n for n in diffs if n != name))] + [
            f"best configuration: {shown}"
        ]
        if name == "linear":
            first.append(
                Finding(
                    "baseline",
                    "the network does not beat the linear reference",
                    said,
                    evidence,
                    f"prefer {_linear(s)} unless a configuration beats it beyond the noise",
                    "linear",
                )
            )
        else:
            first.append(
                Finding(
                    "baseline",
                    "a tree model fits this table better",
                    said,
                    evidence,
                    "use gradient boosting for this table, or give the network what trees "
                    "exploit (more "
                    "data, features)",
                    name,
                )
            )
    lin = diffs.get("linear")
    if lin is not None and not lin.beyond():
        last.append(
            Finding(
                "baseline",
                "the network does not beat the linear reference",
                "no configuration beats the linear reference beyond the noise: it ties with the "
                f"best ({_label(best)})",
                [line("linear"), f"best configuration: {shown}"],
                f"prefer {_linear(s)} unless a configuration beats it beyond the noise",
                "linear",
            )
        )
    return first, last


def _strongest(s: Sweep, diffs: dict[str, Any]) -> str | None:
    """The best of the baselines that beat the network's best beyond the noise (None: none does)."""
    beaten = [n for n, d in diffs.items() if s.better(d.b, d.a) and d.beyond()]
    return min(beaten, key=lambda n: diffs[n].b if s.lower else -diffs[n].b) if beaten else None


def _gap(a: float, b: float) -> str:
    return f"{abs(a - b) / (abs(a) or 1.0):.1%}"


def beside_best(
    records: list[dict[str, Any]], baselines: dict[str, dict[str, float]]
) -> tuple[str, str, float] | None:
    """The baseline that beats the network's best beyond the noise (``records``: the
    runs as the advisor reads them, best first), for the sweep's ``best:`` line: its
    name, words and validation score; None when none does."""
    s = Sweep(records)
    top = s.ranked()
    if not top:
        return None
    diffs = {
        n: s.against(top[0], m[s.metric])
        for n, m in baselines.items()
        if m.get(s.metric) is not None
    }
    name = _strongest(s, diffs)
    if name is None:
        return None
    d = diffs[name]
    said = (
        f"beside it, the {name} baseline scores {s.metric}={cell(d.b)}: {_gap(d.a, d.b)} better "
        "than the network's "
        "best configuration, beyond the noise"
    )
    return name, said, d.b


def _linear(s: Sweep) -> str:
    """The linear model in the sweep's own terms, as its model offers one
    (sweeper's MLP: depth=0); else (a model of yours, a function trainer) the reference itself."""
    # lazy: saves ~132 ms at this module's import (measured)
    from sweeper.models.interface import offer

    path = next((p for r in s.records if (p := r["params"].get("model._target_"))), None)
    linear = offer({"_target_": path} if path else None, quiet=True).linear
    return (
        f"the linear model ({', '.join(f'{k}={v}' for k, v in linear)})"
        if linear
        else "the linear reference"
    )


def skipped_lines(tags: dict[str, Any]) -> list[str]:
    """A parent run's SKIPPED jobs, "overrides: reason" each (its
    ``skipped.<job>`` tags, else ``skipped_jobs``)."""
    lines = [v for k, v in tags.items() if k.startswith("skipped.")]
    return lines or [x for x in str(tags.get("skipped_jobs", "")).splitlines() if x]
