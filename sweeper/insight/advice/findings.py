"""The advisor's findings, each from the grid's own evidence: a saturated score,
seed noise and ties (named before any trend), keys with no effect, best values
at an edge of the grid, divergence (the curves' findings: ``curves``)."""

from __future__ import annotations

import math
import statistics
from typing import Any, Iterable

from sweeper.base.fmt import cell, text_cell
from sweeper.insight.advice.curves import at_best_epoch
from sweeper.insight.advice.evidence import FLOOR, Finding, Sweep, _format, _label, _number, extend
from sweeper.insight.advice.noise import ALPHA, SAME


__all__ = ["divergence", "edges", "noise", "saturation", "seed_list", "ties"]


def edges(s: Sweep, flat: set[str]) -> list[Finding]:
    """Numeric keys whose best value is the smallest or largest tried,
    the score improving toward it."""
    found = []
    for key in s.hyper:
        tried = s.tried(key)
        if key in flat or len(tried) < 2 or any(_number(v) is None for v in tried):
            continue
        # each value's best mean score over the other keys
        profile: dict[str, tuple[float, int]] = {}
        where: dict[str, tuple] = {}  # ... and the configuration that scored it
        for config in s.configs:
            m, v = s.mean(config), dict(config)[key]
            if m is not None and (v not in profile or s.better(m[0], profile[v][0])):
                profile[v], where[v] = m, config
        done = [v for v in tried if v in profile]
        if len(done) < 2:
            continue
        best = min(done, key=lambda v: profile[v][0] if s.lower else -profile[v][0])
        if best not in (tried[0], tried[-1]):
            continue
        up = best == tried[-1] and best != tried[0]
        inner = done[-2] if up else done[1]
        a, b = profile[best][0], profile[inner][0]
        diff = s.between(where[best], where[inner])
        if not diff.beyond() or not s.better(a, b) or (not s.lower and a >= 1 - 1e-12):
            # within the noise; or at the metric's ceiling (accuracy
            # 1): beyond the edge it cannot score higher
            continue
        if at_best_epoch(s, where[best], where[inner]) is False or (
            key == "epochs" and not up and s.curve(s.lead(where[best]))
        ):
            # read at each run's best epoch the edge is no better: a
            # story of training length (see overfitting);
            continue
            # fewer epochs than a run's own are in its curve already
        new, spacing = extend(key, tried, up, bounds=s.bounds(key))
        if not new:
            continue
        way = "upward" if up else "downward"
        how = [
            w
            for w, on in (
                ("mean over seeds", s.seeded),
                ("best over the other keys", len(s.hyper) > 1),
            )
            if on
        ]
        by = f"per {key}" + (f" ({', '.join(how)})" if how else "")
        found.append(
            Finding(
                "edge",
                f"edge of the grid: {key}",
                f"the best {key} ({text_cell(best)}) is the {'largest' if up else 'smallest'} "
                f"tried and {s.metric} improves "
                f"toward it ({cell(b)} at {key}={text_cell(inner)} → {cell(a)} at {key}="
                f"{text_cell(best)})",
                [
                    f"{s.metric} {by}: "
                    + ", ".join(f"{text_cell(v)}: {cell(profile[v][0])}" for v in done),
                    f"{_label(where[best])} against {_label(where[inner])}: {diff.text()}",
                ],
                f"extend {key} {way} ({spacing}): add {', '.join(new)}",
                f"{key}:{'up' if up else 'down'}",
                add={key: new},
            )
        )
    return found


def divergence(s: Sweep) -> list[Finding]:
    """The smallest lr that diverged (or exploded) and the largest that did not."""
    diverged = [
        r
        for r in s.records
        if r["status"] == "FAILED" and (r["reason"] or "").startswith("diverged")
    ]
    if not diverged or any("lr" not in r["params"] for r in diverged):
        return []
    first = min(diverged, key=lambda r: s.param(r, "lr"))
    d = s.param(first, "lr")
    ok = s.finished
    evidence = [
        "diverged: "
        + ", ".join(f"{r['run']} ({r['reason']})" for r in diverged[:5])
        + (f" and {len(diverged) - 5} more" if len(diverged) > 5 else "")
    ]
    lrs = s.tried("lr")
    chosen = s.best["params"]["lr"] if s.best else None
    drop, where = _left_out(s, diverged) if len(lrs) > 1 else ([], [])
    add: list[str] = []
    if not ok:
        summary = (
            f"every run diverged; the smallest lr tried was {text_cell(first['params']['lr'])}"
        )
        add = (
            extend("lr", lrs, up=False)[0]
            if len(lrs) > 1
            else [_format("lr", float(lrs[0]) / 10, integer=False) or ""]
        )
        add = [a for a in add if a]
        step = f"lower lr: try {', '.join(add)}" if add else "lower lr"
        tag = f"lr:..{first['params']['lr']}"
    else:
        top = max(ok, key=lambda r: s.param(r, "lr"))
        f = s.param(top, "lr")
        evidence.append(
            f"largest lr that did not diverge: {text_cell(top['params']['lr'])} ({top['run']}, "
            f"{s.metric}={cell(s.value(top))})"
        )
        tag = f"lr:{top['params']['lr']}..{first['params']['lr']}"
        if f < d:
            summary = (
                f"runs diverge from lr={text_cell(first['params']['lr'])} on; lr="
                f"{text_cell(top['params']['lr'])} "
                "is the largest that did not"
            )
        else:
            summary = (
                f"lr={text_cell(first['params']['lr'])} diverged ({first['run']}) while lr up to "
                f"{text_cell(top['params']['lr'])} "
                f"did not elsewhere: the boundary depends on the other keys"
            )
            evidence += _boundaries(s, diverged)
        step = f"keep lr below {text_cell(first['params']['lr'])}"
        if chosen is not None and s.param(s.best, "lr") == f and f < d:
            mid = _format("lr", math.sqrt(f * d), integer=False)
            if mid is not None and all(float(mid) != float(v) for v in lrs):
                add = [mid]
                step += (
                    f"; the chosen lr ({text_cell(chosen)}) is the largest that did not "
                    f"diverge: try lr={mid} between them"
                )
    if drop:
        step += (
            f"; the next command leaves out lr={','.join(map(text_cell, drop))} (it diverged "
            "wherever it ran)"
        )
    if where:
        step += (
            "; the next command leaves out "
            + "; ".join(
                f"lr={','.join(map(text_cell, v))} at {_label(o.items())}" for o, v in where[:4]
            )
            + (f" and {len(where) - 4} more" if len(where) > 4 else "")
            + " only (and any larger lr added there): where it diverged (elsewhere it finished, "
            "and stays)"
        )
    return [
        Finding(
            "divergence",
            "divergence boundary",
            summary,
            evidence,
            step,
            tag,
            add={"lr": add} if add else {},
            drop={"lr": drop} if drop else {},
            drop_where=where,
        )
    ]


def _left_out(
    s: Sweep, diverged: list[dict[str, Any]]
) -> tuple[list[str], list[tuple[dict[str, str], list[str]]]]:
    """What the next command leaves out for a divergence, per slice of the other keys:
    the lr values that diverged in every slice they ran in (left out everywhere), and
    per slice those that diverged only there. Never a value of the chosen configuration
    or the runner-up (their finished seeds are the evidence the ranking stands on)."""
    keep = set(s.ranked()[:2])

    def other(c: tuple) -> tuple:
        return tuple(kv for kv in c if kv[0] != "lr")

    bad: dict[str, set[tuple]] = {}  # lr value → the slices where a run of it diverged
    for r in diverged:
        c = s.config(r)
        if c not in keep:
            bad.setdefault(r["params"]["lr"], set()).add(other(c))
    ran: dict[str, set[tuple]] = {}  # lr value → the slices it ran in
    for c in s.configs:
        ran.setdefault(dict(c).get("lr"), set()).add(other(c))
    protected = {dict(c).get("lr") for c in keep}
    everywhere = [
        v for v in s.tried("lr") if v in bad and bad[v] == ran.get(v) and v not in protected
    ]
    where: dict[tuple, list[str]] = {}
    for v in s.tried("lr"):
        if v in bad and v not in everywhere:
            for o in sorted(bad[v]):
                where.setdefault(o, []).append(v)
    return everywhere, [(dict(o), v) for o, v in where.items()]


def _boundaries(s: Sweep, diverged: list[dict[str, Any]]) -> list[str]:
    """Per slice of the other keys that had a run diverge: the
    smallest lr that diverged there and the largest that finished."""

    def other(r: dict[str, Any]) -> tuple:
        return tuple(kv for kv in s.config(r) if kv[0] != "lr")

    out = []
    for o in list(dict.fromkeys(other(r) for r in diverged))[:4]:
        bad = min(s.param(r, "lr") for r in diverged if other(r) == o)
        good = [s.param(r, "lr") for r in s.finished if other(r) == o]
        out.append(
            f"{_label(o)}: diverged from lr={cell(bad)}, "
            + (f"finished up to lr={cell(max(good))}" if good else "nothing finished")
        )
    return out


def seed_list(values: Iterable[str], count: int) -> str:
    """``count`` seeds: those given, then the next ones."""
    have = sorted({int(float(v)) for v in values})
    extra = [have[-1] + i for i in range(1, count - len(have) + 1)]
    return ",".join(str(v) for v in have + extra)


def noise(s: Sweep) -> list[Finding]:
    """Mean ± std per configuration over seeds and whether the best beats
    the runner-up; or that there is no noise estimate, and the seeds to add."""
    if not s.finished:
        return []
    # data.folds=k: the noise is the folds'
    if not s.seeded and (paired := _paired(s)) is not None:
        return [paired]
    if not s.seeded and saturated(s):
        return [
            Finding(
                "noise",
                "noise and significance",
                "the ranking has no noise estimate (one seed each)",
                [
                    f"every configuration ran with one seed: scores within {SAME:.0%} count as "
                    "the same"
                ],
                "more seeds cannot separate ties at the metric's edge: see the saturation finding",
                "saturated",
            )
        ]
    if not s.seeded and s.deterministic:  # seeds repeat the same scores: none proposed
        seeds = s.tried("seed")
        return [
            Finding(
                "noise",
                "noise and significance",
                "the model is deterministic in seed: every configuration scored the same for "
                f"seed={','.join(seeds)}",
                [
                    "no noise from seed: its seeds repeat the same scores; scores within "
                    f"{SAME:.0%} count as the same (a "
                    "stated default)"
                ],
                f"drop the seed sweep: seed={seeds[0]} (more seeds repeat the same scores)",
                "deterministic",
                set={"seed": seeds[0]},
            )
        ]
    if not s.seeded:
        seeds = s.tried("seed") or ["0"]
        new = seed_list(seeds, 3)
        ranked = s.finished[:2]
        gap = (
            (
                f"; the best ({ranked[0]['run']}, {cell(s.value(ranked[0]))}) and the runner-up ("
                f"{ranked[1]['run']}, "
                f"{cell(s.value(ranked[1]))}) differ by "
                f"{cell(abs(s.value(ranked[0]) - s.value(ranked[1])))}"
            )
            if len(ranked) > 1
            else ""
        )
        top = s.ranked()[:2]
        return [
            Finding(
                "noise",
                "noise and significance",
                "the ranking has no noise estimate: every configuration ran with one seed (seed="
                f"{','.join(seeds)})",
                [
                    "seed draws the initial weights (data.split_seed the split), so "
                    f"seed-to-seed variation is unknown{gap}",
                    f"until it is measured, scores within {SAME:.0%} count as the same (a stated "
                    "default)",
                ],
                f"add seeds: seed={new} (seed {seeds[0]} is reused)",
                "none",
                set={"seed": new},
                **(_top_two(s, *top) if len(top) == 2 else {}),
            )
        ]
    # by the mean; a configuration with a FAILED seed behind the fully
    # finished ones inside the noise
    ranked = s.ranked()
    evidence = []
    for c in ranked[:5]:
        v = s.scores[c]
        sd = f" ± {cell(statistics.stdev(v))}" if len(v) > 1 else ""
        evidence.append(f"{_label(c)}: {s.metric} {cell(statistics.fmean(v))}{sd} ({s.n_text(c)})")
    if len(ranked) < 2:
        return [
            Finding(
                "noise",
                "noise and significance",
                "one configuration: nothing to compare it with",
                evidence,
                "sweep another key",
                "single",
            )
        ]
    first, second = ranked[:2]
    # their own seeds, paired where shared: never a spread other configurations inflate
    diff = s.between(first, second)
    p = diff.p()
    a, b = diff.a, diff.b
    evidence.append(
        f"best against runner-up: {diff.text() if diff.measured else 'too few seeds for a test'}"
    )
    if s.config(s.best) != first:
        evidence.append(
            f"the leaderboard's best single run ({s.best['run']}) is not of the best "
            "configuration on average"
        )
    if s.failed.get(second) and s.better(b, a):
        return [
            Finding(
                "noise",
                "noise and significance",
                f"the runner-up ({_label(second)}) scored better on its finished seeds, but a "
                "seed of it FAILED "
                f"({s.n_text(second)}): it ranks behind {_label(first)}, whose seeds all "
                "finished, within the noise",
                evidence,
                f"keep {_label(first)}; {_label(second)} is not reliable at these settings",
                "failed",
            )
        ]
    if p is not None and p < ALPHA:
        return [
            Finding(
                "noise",
                "noise and significance",
                f"the best ({_label(first)}) is distinguishable from the runner-up ("
                f"{_label(second)}): p={p:.2g}",
                evidence,
                f"keep {_label(first)}",
                "distinct",
            )
        ]
    # tied at the ceiling: more seeds tie again; a proper scoring rule or more rows separate them
    if saturated(s):
        return [
            Finding(
                "noise",
                "noise and significance",
                f"the best ({_label(first)}) and the runner-up ({_label(second)}) tie at "
                f"{s.metric}'s edge",
                evidence,
                "more seeds cannot separate ties at the metric's edge: see the saturation finding",
                "saturated",
            )
        ]
    new = seed_list(s.tried("seed"), 2 * len(s.tried("seed")))
    return [
        Finding(
            "noise",
            "noise and significance",
            f"the best ({_label(first)}) and the runner-up ({_label(second)}) overlap: not "
            "distinguishable "
            + (f"(p={p:.2g} ≥ {ALPHA})" if p is not None else "(too few seeds for a test)"),
            evidence,
            f"add seeds: seed={new}, or treat them as equivalent (prefer the cheaper)",
            "overlap",
            set={"seed": new},
            **_top_two(s, first, second),
        )
    ]


def _paired(s: Sweep) -> Finding | None:
    """Without seeds, configurations scored on units they share (cross-validated, data.folds=k
    with one split seed: the same folds for all; :meth:`Sweep.samples` gives them and their
    unit) are compared paired by unit: the best against the runner-up, a paired t-test over
    the k units (:meth:`Sweep.between`). None when the runs are not scored by such units."""
    ranked = s.ranked()
    if not s.folded or not ranked:
        return None
    by_unit = {c: s.samples(c) for c in ranked[:5]}
    scores, unit = by_unit[ranked[0]]
    if not scores:
        return None
    k = len(scores)
    evidence = [
        f"{_label(c)}: {s.metric} {cell(statistics.fmean(v))} ± {cell(statistics.pstdev(v))} "
        f"over {len(v)} {unit}"
        for c, (by, u) in by_unit.items()
        if by and u == unit and (v := list(by.values()))
    ]
    if len(ranked) < 2:
        return Finding(
            "noise",
            "noise and significance",
            "one configuration: nothing to compare it with",
            evidence,
            "sweep another key",
            "single",
        )
    first, second = ranked[:2]
    other, other_unit = by_unit[second]
    if other_unit != unit or len(other) != k:
        return None
    diff = s.between(first, second)
    p = diff.p()
    if p is None:
        return None
    evidence.append(f"best against runner-up: {diff.text()}")
    if p < ALPHA:
        return Finding(
            "noise",
            "noise and significance",
            f"the best ({_label(first)}) is distinguishable from the runner-up ({_label(second)}"
            f") across the {k} {unit}: p={p:.2g}",
            evidence,
            f"keep {_label(first)}",
            "distinct",
        )
    overlap = (
        f"the best ({_label(first)}) and the runner-up ({_label(second)}) overlap across the {k} "
        f"{unit}: not distinguishable (p={p:.2g} ≥ {ALPHA})"
    )
    if s.deterministic:  # seeds of the weights repeat the same scores
        return Finding(
            "noise",
            "noise and significance",
            overlap,
            evidence,
            "treat them as equivalent (prefer the cheaper); the model is deterministic in seed",
            "overlap",
        )
    seeds = s.tried("seed") or ["0"]
    new = seed_list(seeds, 3)
    return Finding(
        "noise",
        "noise and significance",
        overlap,
        evidence,
        f"treat them as equivalent (prefer the cheaper), or add seeds of the weights: seed={new}",
        "overlap",
        set={"seed": new},
        **_top_two(s, first, second),
    )


def _top_two(s: Sweep, first: tuple, second: tuple) -> dict[str, Any]:
    """A finding's ``narrow`` and ``pair``: the best two configurations only (their keys
    fixed, the keys they differ in at both values), and each one's values of the keys
    they differ in: where seeds for the whole grid do not fit the budget, seeds for
    these two still separate them (two commands when they differ in more than one key:
    the grid of their values would be more than two). The runner-up is the best that
    differs from the best in a hyperparameter (a CPU/GPU pair is one model)."""
    a = dict(first)
    second = next((c for c in s.ranked() if any(dict(c).get(k) != a.get(k) for k in s.hyper)), None)
    if second is None:
        return {}
    b = dict(second)
    keys = [k for k in a if a[k] is not None and b.get(k) is not None and k in s.hyper]
    order = lambda v: (_number(v) is None, _number(v) or 0, v)
    narrow = {k: a[k] if a[k] == b[k] else ",".join(sorted((a[k], b[k]), key=order)) for k in keys}
    differ = [k for k in keys if a[k] != b[k]]
    return {"narrow": narrow, "pair": [{k: a[k] for k in differ}, {k: b[k] for k in differ}]}


def saturated(s: Sweep) -> list[tuple]:
    """The configurations whose mean sits at the primary metric's ceiling (accuracy 1)
    or floor (a loss of ~0) with the best one: two or more of them, or []."""
    top = s.ranked()
    if len(top) < 2:
        return []
    best = s.mean(top[0])[0]
    at_edge = best >= 1 - 1e-12 if not s.lower else abs(best) <= 1e-9
    tied = [c for c in top if abs(s.mean(c)[0] - best) <= 1e-12] if at_edge else []
    return tied if len(tied) > 1 else []


def saturation(s: Sweep) -> list[Finding]:
    """Ties at the metric's ceiling or floor: the validation score
    cannot rank them (and no trend is read from them)."""
    tied = saturated(s)
    if not tied:
        return []
    what = "ceiling" if not s.lower else "floor"
    loss = [
        (c, m[0])
        for c in tied
        if (m := s.mean(c, "val_log_loss") if "val_log_loss" in s.stats else None)
    ]
    evidence = [
        f"{len(tied)} of {len(s.ranked())} configurations at {s.metric}="
        f"{cell(s.mean(tied[0])[0])}: "
        + ", ".join(_label(c) for c in tied[:6])
        + (" …" if len(tied) > 6 else "")
    ]
    if loss:
        lo, hi = min(v for _, v in loss), max(v for _, v in loss)
        evidence.append(
            f"val_log_loss among them: {cell(lo)} … {cell(hi)}"
            + (f" (below {FLOOR:g}: at its floor too, no evidence either)" if hi < FLOOR else "")
        )
    step = (
        "rank by a proper scoring rule (python -m sweeper.promote --metric val_log_loss) "
        "or hold out more validation rows (e.g. data.val_fraction=0.3, or more data); read no "
        "trend from these ties"
    )
    return [
        Finding(
            "saturation",
            "the validation score cannot rank these",
            f"{len(tied)} configurations tie at {s.metric}'s {what} ({cell(s.mean(tied[0])[0])})",
            evidence,
            step,
            f"{len(tied)}@{cell(s.mean(tied[0])[0])}",
        )
    ]


def ties(s: Sweep) -> list[Finding]:
    """Runs that tie with the best on the primary metric, and how the leaderboard ordered them."""
    if len(s.finished) < 2 or saturated(s):
        return []
    top = s.value(s.finished[0])
    tied = [r for r in s.finished if abs(s.value(r) - top) <= 1e-12 * max(1.0, abs(top))]
    if s.deterministic:  # a configuration's seeds tie by design: one run of each
        firsts: dict[tuple, dict[str, Any]] = {}
        tied = [firsts.setdefault(s.config(r), r) for r in tied if s.config(r) not in firsts]
    if len(tied) < 2:
        return []
    second = "val_log_loss" if s.task == "binary" else "val_mae"
    values = [_number(r["metrics"].get(second)) for r in tied]
    order = [r["run_id"] for r in tied]
    evidence = [
        f"{len(tied)} runs at {s.metric}={cell(top)}: "
        + ", ".join(
            f"{r['run']} ({second}={cell(v)})" if v is not None else r["run"]
            for r, v in zip(tied, values)
        )
    ]
    have = None not in values
    if (
        have
        and order == [r["run_id"] for _, r in sorted(zip(values, tied), key=lambda p: p[0])]
        and len(set(values)) > 1
    ):
        how = f"by {second} (lower first)"
    elif order == [r["run_id"] for r in sorted(tied, key=lambda r: r["run"] or "")]:
        how = "by run name, which says nothing about the models"
    else:
        how = "in the leaderboard's order"
    if have and len(set(values)) == 1:
        step = (
            f"the tied runs have the same {second} too: the same model in effect; any of "
            "them (prefer the cheapest)"
        )
    elif have and not how.startswith("by val"):
        pick = tied[min(range(len(tied)), key=lambda i: values[i])]
        step = f"prefer {pick['run']}: the lowest {second} of the tied runs"
    else:
        step = "the tie-break is a finer metric, not a better score"
    if not (s.seeded or s.folded or s.deterministic) and not (have and len(set(values)) == 1):
        step += "; seeds (see noise) would tell whether the tie is real"
    return [
        Finding(
            "ties",
            "ties",
            f"{len(tied)} runs tie with the best on {s.metric}; the leaderboard ordered them {how}",
            evidence,
            step,
            str(len(tied)),
        )
    ]
