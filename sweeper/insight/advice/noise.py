"""The advisor's one noise model: every comparison by the compared configurations' own spread.

A configuration's scores over its seeds (or, cross-validated without seeds, its folds) are
its own evidence. Two configurations are compared by their own scores only — a paired t-test
where they share seeds or folds (the same split and initial weights, the same rows), else
Welch's — and a configuration against a constant (a baseline fitted on the same rows) by
a one-sample t-test over its seeds; never by a spread pooled over the grid, which a few
diverging or unstable configurations elsewhere inflate (a bike-sharing grid's pooled std was
1.7e6 against its winner's 2,768). Without repeated scores there is no spread: differences
within :data:`SAME` of the larger count as the same (a stated default, not a measurement).

"Did not matter" needs more than a test that failed to reject: an equivalence test
(two one-sided tests, TOST, at :data:`ALPHA`): the ``1 - 2·ALPHA`` interval of the
difference lies inside ``±margin``, the margin being the larger of the noise (a score's
std) and :data:`SAME` of the score (:func:`margin`). Neither shown is "not measured".

Nothing here reads a sweep: :class:`sweeper.insight.advice.evidence.Sweep` hands over the scores.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from typing import Hashable, Mapping, Sequence

from sweeper.base.fmt import cell

__all__ = [
    "ALPHA",
    "Diff",
    "SAME",
    "against",
    "between",
    "margin",
    "model_text",
    "pooled",
    "range_quantile",
]

# significance level of every test; an equivalence interval is the 1 - 2·ALPHA one (90%)
ALPHA = 0.05
# Without repeated scores there is no noise estimate: two validation scores count as the
# same when they differ by less than this fraction, a stated default of the seed-to-seed
# spread (bench/advice_eval.py measures it on the bundled data sets; sweep seed to
# measure your own). It is also the smallest margin of an equivalence ("did not matter").
SAME = 0.02


@dataclass(frozen=True)
class Diff:
    """``a - b``: two mean scores (or a mean and a constant) with the
    difference's standard error ``se`` and its degrees of freedom (``se`` None:
    no spread measured), and how they were compared, in words."""

    a: float
    b: float
    se: float | None
    dof: int
    how: str

    @property
    def d(self) -> float:
        return self.a - self.b

    @property
    def measured(self) -> bool:
        return self.se is not None and self.dof > 0

    def p(self) -> float | None:
        """The two-sided p-value of a difference of zero; None without a spread."""
        if not self.measured:
            return None
        if self.se == 0:
            return 0.0 if self.d else 1.0
        # lazy: saves ~768 ms at this module's import (measured)
        from scipy import stats  # only where a test is made

        return float(2 * stats.t.sf(abs(self.d) / self.se, self.dof))

    def beyond(self) -> bool:
        """Whether they differ beyond the noise: p < ALPHA; without a
        spread, by more than SAME of the larger."""
        p = self.p()
        if p is None:
            return abs(self.d) > SAME * max(abs(self.a), abs(self.b)) + 1e-12
        return p < ALPHA

    def interval(self) -> tuple[float, float] | None:
        """The ``1 - 2·ALPHA`` (90%) interval of the difference: what TOST at ALPHA reads."""
        if not self.measured:
            return None
        # lazy: saves ~768 ms at this module's import (measured)
        from scipy import stats

        half = float(stats.t.ppf(1 - ALPHA, self.dof)) * self.se
        return self.d - half, self.d + half

    def within(self, margin: float) -> bool | None:
        """Equivalence (TOST at ALPHA): the 90% interval inside
        ``±margin``; None without a spread."""
        ci = self.interval()
        return None if ci is None else (-margin <= ci[0] and ci[1] <= margin)

    def text(self) -> str:
        """The difference and its test, in words."""
        p = self.p()
        return f"difference {cell(abs(self.d))}, {self.how}" + (
            f": p={p:.2g}" if p is not None else ""
        )


def margin(noise: float | None, *scores: float) -> float:
    """The equivalence margin: the larger of the noise (a score's std)
    and SAME of the largest score."""
    return max(noise or 0.0, SAME * max(abs(x) for x in scores))


def between(a: Mapping[Hashable, float], b: Mapping[Hashable, float], unit: str = "seeds") -> Diff:
    """Two configurations by their own scores (``unit`` → score: seeds,
    or folds): paired where they share at least two units, else Welch's t
    (one side's spread stands for both when the other has one score)."""
    ma, mb = statistics.fmean(a.values()), statistics.fmean(b.values())
    common = [k for k in a if k in b]
    if len(common) >= 2:
        diffs = [a[k] - b[k] for k in common]
        se = statistics.stdev(diffs) / math.sqrt(len(diffs))
        d = statistics.fmean(diffs)
        return Diff(
            mb + d, mb, se, len(diffs) - 1, f"paired t-test over their {len(diffs)} shared {unit}"
        )
    va = statistics.variance(a.values()) if len(a) > 1 else None
    vb = statistics.variance(b.values()) if len(b) > 1 else None
    na, nb = len(a), len(b)
    if va is None and vb is None:
        return Diff(
            ma, mb, None, 0, f"one score each (no spread): judged by the stated {SAME:.0%} default"
        )
    if va is None or vb is None:
        v, n = (va, na) if vb is None else (vb, nb)
        return Diff(
            ma,
            mb,
            math.sqrt(v * (1 / na + 1 / nb)),
            n - 1,
            f"t-test on the spread of the one with {n} {unit}",
        )
    se2 = va / na + vb / nb
    if se2 == 0:
        return Diff(ma, mb, 0.0, na + nb - 2, f"Welch t-test ({na} and {nb} {unit})")
    dof = se2**2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
    return Diff(ma, mb, math.sqrt(se2), max(1, int(dof)), f"Welch t-test ({na} and {nb} {unit})")


def against(a: Sequence[float], value: float, unit: str = "seeds") -> Diff:
    """A configuration's scores against a constant (a baseline fitted once on the same rows):
    a one-sample t-test over its own ``unit``; without two scores, the stated default."""
    m = statistics.fmean(a)
    if len(a) < 2:
        return Diff(
            m, value, None, 0, f"one score (no spread): judged by the stated {SAME:.0%} default"
        )
    return Diff(
        m,
        value,
        statistics.stdev(a) / math.sqrt(len(a)),
        len(a) - 1,
        f"one-sample t-test over its {len(a)} {unit}",
    )


def pooled(groups: Sequence[Sequence[float]]) -> tuple[float, int] | None:
    """The std of a score pooled over ``groups`` (each one configuration's
    repeated scores) and its degrees of freedom; None without a repeated score."""
    spread = [(len(v) - 1, statistics.variance(v)) for v in groups if len(v) > 1]
    dof = sum(d for d, _ in spread)
    return (math.sqrt(sum(d * var for d, var in spread) / dof), dof) if dof else None


@lru_cache(maxsize=64)
def range_quantile(among: int, dof: int, alpha: float) -> float:
    """The studentized range's 1 - alpha quantile for ``among`` means
    and ``dof`` degrees of freedom."""
    # lazy: saves ~768 ms at this module's import (measured)
    from scipy import stats

    return float(stats.studentized_range.ppf(1 - alpha, among, dof))


def model_text(measured: str | None, why: str = "one score per configuration") -> str:
    """The noise model in one line, said once at the top of the advice (``measured``: over what the
    spreads are measured, "seeds" or "folds"; None: no repeated scores, for the reason ``why``)."""
    rule = (
        f"'did not matter' only where a {1 - 2 * ALPHA:.0%} interval of a key's effect lies "
        "inside ±max(noise, "
        f"{SAME:.0%}) in every slice (TOST); neither shown: not measured"
    )
    if measured is None:
        how = (
            "sweep seed=0,1,2 to measure it"
            if why == "one score per configuration"
            else "not measured"
        )
        return (
            f"noise: not measured ({why}): scores within {SAME:.0%} count as the same (a stated "
            f"default; {how}), "
            f"and no key is said not to matter; {rule}"
        )
    return (
        f"noise: each comparison by the compared configurations' own {measured} (a paired t-test "
        "where they share "
        f"{measured}, else Welch's; against a baseline, a one-sample t-test), never a spread "
        "pooled over the grid; "
        f"significant at {ALPHA:.0%}; {rule}"
    )
