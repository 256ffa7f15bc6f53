"""A key's effect, slice by slice: a *slice* of key ``k`` is one set of values of
every other swept key (seeds left out). Each slice gets a verdict on its own noise
(:func:`_flat`); the findings read them: "did not matter" only where an interval shows
it in every slice with evidence, "matters in some slices only" named with the slices,
and "not measured" where no interval decides (no command fixes a key on that)."""

from __future__ import annotations

import math
from typing import Any, Iterable

from sweeper.base.fmt import cell, text_cell
from sweeper.insight.advice import noise as _noise
from sweeper.insight.advice.evidence import FLOOR, Finding, Sweep, _label, _number
from sweeper.insight.advice.noise import ALPHA, SAME, Diff


__all__ = ["UNMEASURED", "no_effect", "not_measured"]


def no_effect(s: Sweep) -> list[Finding]:
    """Keys that did not matter: in every slice of the other keys with evidence, an
    equivalence interval of the key's effect lies inside the margin (:func:`_flat`);
    keys that matter in some slices and not in others, named with the slices; and
    keys no interval decides (not measured: no command fixes them)."""
    found, unmeasured = [], []
    for key in s.hyper:
        slices = {m: _slices(s, key, m) for m in s.measures}
        tests = len(slices[s.metric]) * len(s.measures)
        verdict: dict[tuple, tuple[str, str]] = {}
        for other in slices[s.metric]:
            within = slice_configs(s, key, other)
            said = [_flat(s, slices[m][other], m, tests, within) for m in s.measures]
            if None in said:
                continue
            kinds = [v for v, _ in said]
            v = (
                DIFFERS
                if DIFFERS in kinds
                else SAME_SLICE
                if set(kinds) == {SAME_SLICE}
                else UNCLEAR
            )
            verdict[other] = (v, next(text for k, text in said if k == v))
        by = {
            v: sorted(
                (o for o, (k, _) in verdict.items() if k == v),
                key=lambda o: _spread(slices[s.metric][o]),
                reverse=True,
            )
            for v in (SAME_SLICE, DIFFERS, UNCLEAR)
        }  # the evidence shows the largest spreads

        def shown(
            other: tuple, slices: dict = slices[s.metric], key: str = key, verdict: dict = verdict
        ) -> str:
            values = ", ".join(
                f"{text_cell(v)}: {cell(m[0])}"
                for v, m in sorted(slices[other].items(), key=lambda kv: _number(kv[0]) or 0)
            )
            return (
                f"{s.metric} by {key}"
                + (f" at {_label(other)}" if other else "")
                + f": {values}; {verdict[other][1]}"
            )

        if by[SAME_SLICE] and not by[DIFFERS] and not by[UNCLEAR]:
            chosen = s.best["params"].get(key) if s.best else None
            also = [f"{', '.join(s.measures[1:])} likewise"] if len(s.measures) > 1 else []
            found.append(
                Finding(
                    "no_effect",
                    f"{key} did not matter",
                    f"in every slice with evidence ({len(by[SAME_SLICE])}) the effect of {key} "
                    f"on {s.metric} is shown within "
                    f"±max(noise, {SAME:.0%}): a 90% interval inside it (two one-sided tests at "
                    f"{ALPHA:.0%}, on each slice's "
                    "own noise), or identical scores",
                    [shown(o) for o in by[SAME_SLICE][:4]] + also,
                    f"fix {key}={text_cell(chosen)} (the chosen run's value) and spend the runs "
                    "on other keys"
                    if chosen
                    else f"fix {key} to one value",
                    key,
                    set={key: chosen} if chosen else {},
                )
            )
        elif by[SAME_SLICE] and by[DIFFERS]:
            found.append(_in_some_slices(s, key, by, shown))
        elif by[UNCLEAR] and not by[DIFFERS]:
            unmeasured.append(key)
    if unmeasured:
        found.append(not_measured(unmeasured, s.metric))
    return found


UNMEASURED = "unmeasured:"  # the tag of the "not measured" finding, before its keys


def not_measured(keys: list[str], metric: str) -> Finding:
    """The keys no interval decides: neither shown to matter nor shown
    not to (no command fixes them)."""
    return Finding(
        "no_effect",
        f"not measured: {', '.join(keys)}",
        f"no interval shows whether {', '.join(keys)} matter{'s' * (len(keys) == 1)}: where "
        f"{'they' if len(keys) > 1 else 'it'} moved {metric} it stayed within the noise, but the "
        "intervals are wider than "
        f"±max(noise, {SAME:.0%}): absence of evidence, not evidence of absence",
        [
            f"{len(keys)} key(s) neither shown to matter nor shown not to (two one-sided tests "
            f"at {ALPHA:.0%})"
        ],
        "more seeds narrow the intervals; no key is fixed on this evidence",
        UNMEASURED + ",".join(keys),
    )


def _spread(by_value: dict[str, tuple[float, int] | None]) -> float:
    means = [m[0] for m in by_value.values() if m is not None]
    return max(means) - min(means) if means else 0.0


def _in_some_slices(s: Sweep, key: str, by: dict[str, list[tuple]], shown: Any) -> Finding:
    """A key that matters in some slices (beyond the noise) and is
    shown not to in others: said with the slices."""
    same, differs = by[SAME_SLICE], by[DIFFERS]
    where = ", ".join(_label(o) for o in differs[:3]) + (
        f" and {len(differs) - 3} more" if len(differs) > 3 else ""
    )
    flat = ", ".join(_label(o) for o in same[:3]) + (
        f" and {len(same) - 3} more" if len(same) > 3 else ""
    )
    step, tag = f"keep {key} in the grid: where it matters it changes the result", f"{key}@some"
    for other_key in sorted({k for o in same for k, _ in o}):
        values = {dict(o)[other_key] for o in same}
        if len(values) == 1 and not any(dict(o).get(other_key) in values for o in differs):
            value = values.pop()
            step, tag = (
                f"sweep {key} only where {other_key}≠{text_cell(value)}",
                f"{key}@{other_key}={value}",
            )
            break
    return Finding(
        "no_effect",
        f"{key} matters in some slices only",
        f"{key} changes {s.metric} beyond the noise at {where}; it did not matter at {flat}",
        [shown(o) for o in differs[:2]] + [shown(o) for o in same[:2]],
        step,
        tag,
    )


def _slices(
    s: Sweep, key: str, metric: str | None = None
) -> dict[tuple, dict[str, tuple[float, int] | None]]:
    """Configurations grouped by every swept key but ``key`` (and seed): each slice maps key's
    values to their mean score on ``metric`` and seed count (None where nothing finished)."""
    out: dict[tuple, dict[str, tuple[float, int] | None]] = {}
    for config in s.configs:
        out.setdefault(_other(config, key), {})[dict(config)[key]] = s.mean(config, metric)
    return {k: v for k, v in out.items() if len(v) > 1}


def _other(config: tuple, key: str) -> tuple:
    """A configuration's slice along ``key``: its other keys' values."""
    return tuple(kv for kv in config if kv[0] != key)


def slice_configs(s: Sweep, key: str, other: tuple) -> list[tuple]:
    """The configurations of one slice along ``key``."""
    return [c for c in s.configs if _other(c, key) == other]


SAME_SLICE, DIFFERS, UNCLEAR = (
    "same",
    "differs",
    "unclear",
)  # a slice's verdict on a key (:func:`_flat`)


def _flat(
    s: Sweep,
    by_value: dict[str, tuple[float, int] | None],
    metric: str,
    tests: int,
    configs: Iterable[tuple] = (),
) -> tuple[str, str] | None:
    """A slice's verdict on a key, one of ``tests`` slices, and the interval behind it in words:
    :data:`SAME_SLICE` when every pair of its values is equivalent (TOST at ALPHA: each
    difference's 90% interval inside ±margin, :func:`sweeper.insight.advice.noise.margin`),
    :data:`DIFFERS` when its range is beyond the noise (Tukey's range test at ALPHA split over
    ``tests``; or a value failed where another finished), :data:`UNCLEAR` when neither. Without a
    noise of its own (the slice repeats no seed or fold) only two things are evidence: scores
    identical to 1e-9 (training is deterministic: the key changed nothing there) and a range
    beyond the stated default :data:`SAME` (it moved); else None, as when nothing in it finished.

    Each slice is judged by its own spread (:meth:`Sweep.slice_noise`), not a spread
    pooled over the grid, which a few very noisy configurations elsewhere inflate."""
    scores = list(by_value.values())
    if all(v is None for v in scores):
        return None
    if any(v is None for v in scores):
        return DIFFERS, "a value failed where another finished"
    lo, hi = min(scores), max(scores)
    if _identical([s.samples(c, metric)[0] for c in configs]):
        return SAME_SLICE, f"identical scores ({cell(lo[0])}): the key changed nothing here"
    own = s.slice_noise(configs, metric)
    if own is None:
        if s.same(lo[0], hi[0], metric=metric):
            return None
        return (
            DIFFERS,
            f"range {cell(hi[0] - lo[0])}, beyond the stated {SAME:.0%} (no seeds here to "
            "measure a noise)",
        )
    if metric == "val_log_loss" and max(abs(lo[0]), abs(hi[0])) < FLOOR:
        return SAME_SLICE, f"{metric} below {FLOOR:g} throughout: at its floor"
    std, dof = own
    if not s.same(lo[0], hi[0], lo[1], hi[1], metric, among=len(scores), tests=tests, noise=own):
        return (
            DIFFERS,
            f"range {cell(hi[0] - lo[0])} beyond its noise (std {cell(std)}, {dof} degrees of "
            "freedom)",
        )
    bound = _noise.margin(std, *(x[0] for x in scores))
    ordered = sorted(scores)
    diffs = [
        Diff(y[0], x[0], std * math.sqrt(1 / x[1] + 1 / y[1]), dof, "")
        for i, x in enumerate(ordered)
        for y in ordered[i + 1 :]
    ]  # each the larger mean less the smaller
    widest = max(diffs, key=lambda d: d.interval()[1])
    ci = widest.interval()
    verdict = SAME_SLICE if all(d.within(bound) for d in diffs) else UNCLEAR
    return verdict, (
        f"90% interval of its largest difference [{cell(ci[0])}, {cell(ci[1])}] "
        f"{'inside' if verdict == SAME_SLICE else 'not inside'} ±{cell(bound)} (the larger of "
        "its noise std "
        f"{cell(std)} and {SAME:.0%})"
    )


def _identical(samples: list[dict[Any, float]]) -> bool:
    """Whether configurations scored the same to 1e-9 on every seed (fold) they share, and share
    them all: the key that tells them apart changed nothing (training is deterministic)."""
    first = samples[0] if samples else {}
    return bool(first) and all(
        v.keys() == first.keys()
        and all(abs(v[k] - first[k]) <= 1e-9 * max(abs(first[k]), 1e-12) for k in first)
        for v in samples[1:]
    )
