"""The advisor: the findings of a sweep in order — what the score cannot
tell (saturation, noise, ties) before any trend — the plan they make
within a budget and the next command, published on the parent run."""

from __future__ import annotations

import json
import math
import sys
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from sweeper.base.fmt import cell, python_call, resume_command, text_cell
from sweeper.base.hydra_internals import BASIC_SWEEPER
from sweeper.base.tags import SWEEP_FROM
from sweeper.insight.advice.curves import overfitting, rising_loss, under_training
from sweeper.insight.advice.evidence import (
    TOP,
    Advice,
    CURVES,
    Finding,
    Sweep,
    TAG,
    _number,
    record,
)
from sweeper.insight.advice.evidence import _label
from sweeper.insight.advice.findings import divergence, edges, noise, saturation, seed_list, ties
from sweeper.insight.advice.outside_grid import devices, reference, skipped_lines
from sweeper.insight.advice.slices import UNMEASURED, no_effect, not_measured

__all__ = [
    "advise",
    "budget",
    "interrupted_caveats",
    "is_search",
    "next_command",
    "plan",
    "publish",
    "sweep_argv",
]

# The next command trains at most as many runs as the sweep that produced
# it trained: the findings' changes join in order of PRIORITY; past the budget,
# values of a key that scored worse than its best beyond the noise leave the
# grid first, then a change that still does not fit is left out (and said).
PRIORITY = (
    "device",
    "divergence",
    "rising_loss",
    "no_effect",
    "overfitting",
    "under_training",
    "edge",
    "noise",
)


def _apply(s: Sweep, out: dict[str, str], f: Finding) -> dict[str, str]:
    """``out`` (key → comma list) with the finding's changes."""
    out = dict(out)
    for key in dict.fromkeys((*f.add, *f.drop)):
        now = out[key].split(",") if key in out else s.tried(key)
        values = {float(v): v for v in now if _number(v) is not None}
        for v in f.drop.get(key, []):
            values.pop(float(v), None)
        for v in f.add.get(key, []):
            values.setdefault(float(v), v)
        out[key] = ",".join(values[k] for k in sorted(values))
    out.update(f.set)
    return out


def budget(s: Sweep) -> int:
    """The most runs a next command may train: as many as this sweep trained (its reused runs are
    free and not counted, so following the commands does not grow the budget round after round).
    A sweep that only reused runs trained none: its budget is 0 and it proposes no command."""
    return s.trained


def _worse_values(s: Sweep, key: str, values: list[str], kept: set[str] = frozenset()) -> list[str]:
    """Values of ``key`` (among ``values``) whose best configuration is worse than the
    best value's beyond the noise (the two configurations' own seeds), worst first; never
    the best value, one the sweep has not tried, nor one a finding keeps (``kept``)."""
    profile: dict[str, tuple[float, tuple]] = {}
    for c in s.configs:
        m, v = s.mean(c), dict(c).get(key)
        if m and v is not None and (v not in profile or s.better(m[0], profile[v][0])):
            profile[v] = (m[0], c)
    if len(profile) < 2:
        return []
    best = min(profile, key=lambda v: profile[v][0] if s.lower else -profile[v][0])
    worse = [
        v
        for v in values
        if v in profile
        and v != best
        and v not in kept
        and s.between(profile[best][1], profile[v][1]).beyond()
    ]
    return sorted(worse, key=lambda v: profile[v][0], reverse=s.lower)


def plan(
    s: Sweep, findings: list[Finding], limit: int | None = None
) -> tuple[dict[str, str], list[Finding], list[dict[str, str]]]:
    """The keys the findings change and their new values (a comma list): grids extended or
    cut, keys fixed, seeds added — within ``limit`` runs to train (default :func:`budget`);
    the findings left out for it; and, when seeds go to the best two configurations only
    and they differ in more than one key, each one's values of those keys (the command is
    then two, one a configuration: the grid of their values would train more than two)."""
    limit = budget(s) if limit is None else limit
    kept = _kept(s, findings)
    order = sorted(
        findings, key=lambda f: PRIORITY.index(f.kind) if f.kind in PRIORITY else len(PRIORITY)
    )
    out: dict[str, str] = {}
    left: list[Finding] = []
    pair: list[dict[str, str]] = []
    for f in order:
        if not (f.add or f.drop or f.set):
            continue
        # the finding as it is; else with one new value a key (the nearest beyond the edge)
        shapes = [replace(f, pair=[])]
        shapes += (
            [replace(f, add={k: v[:1] for k, v in f.add.items()}, pair=[])]
            if any(len(v) > 1 for v in f.add.values())
            else []
        )
        if f.narrow:  # keys another finding already changed keep its change
            shapes.append(
                replace(
                    f,
                    set={**f.set, **{k: v for k, v in f.narrow.items() if k not in out}},
                    pair=[{k: v for k, v in p.items() if k not in out} for p in f.pair],
                )
            )
        # last, when nothing else is in the command yet: one seed more
        # than tried, the fewest that show a spread (a round too small for
        # three seeds of the best two would otherwise propose nothing)
        if not out and (fewer := _fewer_seeds(s, f)) is not None:
            shapes.append(replace(shapes[-1], set={**shapes[-1].set, "seed": fewer}))
        for shape in shapes:
            trial = _fit(s, _apply(s, out, shape), limit, kept)
            now = shape.pair if len(shape.pair) == 2 and len(shape.pair[0]) > 1 else pair
            if sum(_to_train(s, part) for part in parts(trial, now)) <= limit:
                out, pair = trial, now
                break
        else:
            left.append(f)
    return out, left, pair


def parts(changes: dict[str, str], pair: list[dict[str, str]]) -> list[dict[str, str]]:
    """The next command's changes, one a configuration of ``pair`` (or as they are, without one)."""
    return [{**changes, **p} for p in pair] if pair else [changes]


def _fewer_seeds(s: Sweep, f: Finding) -> str | None:
    """The seeds of ``f`` cut to one more than the sweep tried, when ``f`` adds more than one:
    a round too small for three seeds of the best two still measures a spread with two."""
    if "seed" not in f.set:
        return None
    tried = s.tried("seed") or ["0"]
    fewer = seed_list(tried, len(tried) + 1)
    return fewer if len(f.set["seed"].split(",")) > len(fewer.split(",")) else None


def _kept(s: Sweep, findings: list[Finding]) -> dict[str, set[str]]:
    """The values a command never prunes for its budget, because a finding
    keeps them: the best two configurations' (the noise finding compares them),
    and an lr a divergence left out in some slices only (elsewhere it stays)."""
    kept: dict[str, set[str]] = {}
    for c in s.ranked()[:2]:
        for k, v in c:
            kept.setdefault(k, set()).add(v)
    for f in findings:
        for _, values in f.drop_where:
            kept.setdefault("lr", set()).update(values)
    return kept


def pruned(s: Sweep, changes: dict[str, str], findings: list[Finding]) -> dict[str, list[str]]:
    """The tried values the next command leaves out that no finding dropped:
    pruned for the budget (worse beyond the noise), each key's."""
    dropped = {v for f in findings for vs in f.drop.values() for v in vs}
    out = {}
    for key in s.hyper:
        if key in changes and key not in {k for f in findings for k in f.set}:
            now = set(changes[key].split(","))
            gone = [v for v in s.tried(key) if v not in now and v not in dropped]
            if gone:
                out[key] = gone
    return out


def _fit(
    s: Sweep, trial: dict[str, str], limit: int, kept: dict[str, set[str]] | None = None
) -> dict[str, str]:
    """``trial`` with values the grid showed worse pruned, worst first, until
    it trains at most ``limit`` runs (or nothing is left to prune: a key
    keeps at least two values, and every value a finding keeps, ``kept``).

    The first key that has a worse value and more than two loses its worst ones, one after
    another, until the command fits or the key has none left to give; then the next key.
    What a value weighs (the configurations it brings, less those already FINISHED) is
    counted once a key, in one pass over the runs: pruning one value at a time with a full
    count each made a 10,000-value grid quadratic (minutes at the end of the sweep)."""
    trial = dict(trial)
    to_train = _to_train(s, trial)
    while to_train > limit:
        for key in s.hyper:
            now = trial[key].split(",") if key in trial else s.tried(key)
            worse = _worse_values(s, key, now, (kept or {}).get(key, set()))
            if worse and len(now) > 2:
                each, done, group = _weights(s, trial, key, now)
                left = Counter(group[v] for v in now)
                cut: set[str] = set()
                for value in worse:
                    if to_train <= limit or len(now) - len(cut) <= 2:
                        break
                    cut.add(value)
                    left[group[value]] -= 1
                    # its configurations go; its finished runs too,
                    # once no value left reads as the same number
                    to_train -= each - (
                        0 if left[group[value]] else len(done.get(group[value], ()))
                    )
                trial[key] = ",".join(v for v in now if v not in cut)
                break
        else:
            return trial
    return trial


def _weights(
    s: Sweep, trial: dict[str, str], key: str, values: list[str]
) -> tuple[int, dict[Any, set], dict[str, Any]]:
    """What each of ``values`` of ``key`` brings to the next command ``trial``: the
    configurations of one value (the other keys' grids multiplied), the FINISHED
    configurations of each group of values (values that read as the same number are
    one group: a run matches either, as :func:`counts` counts), and each value's group."""
    grid = _grid(s, trial) | {key: values}
    each = math.prod(len(v) for k, v in grid.items() if k != key)
    among = {k: _among(v) for k, v in grid.items()}
    group = {v: ("number", n) if (n := _number(v)) is not None else ("text", v) for v in values}
    numbers = {g[1] for g in group.values() if g[0] == "number"}
    done: dict[Any, set] = {}
    for r in s.finished:
        if all(among[k](r["params"].get(k)) for k in grid):
            value = r["params"].get(key)
            g = (
                ("number", n)
                if (n := _number(value)) is not None and n in numbers
                else ("text", str(value))
            )
            done.setdefault(g, set()).add(tuple(sorted(r["params"].items())))
    return each, done, group


def _to_train(s: Sweep, changes: dict[str, str]) -> int:
    total, done = counts(s, changes)
    return total - done


def _among(values: list[str]) -> Any:
    """Whether a run's value is one of ``values`` (as written, or as the
    same number): a test that costs O(1) a run, not O(len(values)) (a
    1,000-value grid made counting the next command's runs cubic)."""
    strings = set(values)
    numbers = {x for x in map(_number, values) if x is not None}
    return lambda value: str(value) in strings or _number(value) in numbers


def _grid(s: Sweep, changes: dict[str, str]) -> dict[str, list[str]]:
    """The next command's values per key: the sweep's, with ``changes`` (comma lists) applied."""
    return {k: s.tried(k) for k in s.keys} | {k: v.split(",") for k, v in changes.items()}


# ({other key: value}, lr values): left out in that slice only
Exclusion = tuple[dict[str, str], list[str]]


def grids(
    s: Sweep, changes: dict[str, str], exclude: list[Exclusion] = ()
) -> list[dict[str, list[str]]]:
    """The next command's grid, cut into disjoint grids that together leave out each
    exclusion's values only in its slice (one command each): for a slice {k1: a, k2:
    b}, the grid at k1≠a, then at k1=a, k2≠b, then at k1=a, k2=b without the values."""
    out = [_grid(s, changes)]
    tried = set(s.tried("lr"))
    for where, values in exclude:
        # a value the findings add at or above one that diverged there
        # would diverge too: left out with it
        low = min((x for v in values if (x := _number(v)) is not None), default=math.inf)
        new = [v for v in out[0].get("lr", []) if v not in tried and (_number(v) or 0.0) >= low]
        out = [piece for g in out for piece in _split(g, where, [*values, *new])]
    return out


def _split(
    g: dict[str, list[str]], where: dict[str, str], values: list[str]
) -> list[dict[str, list[str]]]:
    if "lr" not in g or any(
        k not in g or not any(_among([v])(x) for x in g[k]) for k, v in where.items()
    ):
        return [g]
    bad = _among(values)
    left = [x for x in g["lr"] if not bad(x)]
    if len(left) == len(g["lr"]):
        return [g]
    pieces, cur = [], dict(g)
    for k, v in where.items():
        rest = [x for x in cur[k] if not _among([v])(x)]
        if rest:
            pieces.append({**cur, k: rest})
        cur = {**cur, k: [x for x in cur[k] if _among([v])(x)]}
    if left:
        pieces.append({**cur, "lr": left})
    return pieces


def counts(s: Sweep, changes: dict[str, str], exclude: list[Exclusion] = ()) -> tuple[int, int]:
    """How many configurations the next command makes, and how many of
    them already FINISHED (resumed)."""
    total, done = 0, set()
    for grid in grids(s, changes, exclude):
        total += math.prod(len(v) for v in grid.values())
        among = {k: _among(v) for k, v in grid.items()}
        done |= {
            tuple(sorted(r["params"].items()))
            for r in s.finished
            if all(among[k](r["params"].get(k)) for k in grid)
        }
    return total, len(done)


def untried(s: Sweep, changes: dict[str, str], exclude: list[Exclusion] = ()) -> int:
    """How many of the next command's configurations no run of the sweep
    tried (FINISHED or not): what it would learn that the sweep does not
    know (a FAILED configuration trained again fails again)."""
    total, tried = 0, set()
    for grid in grids(s, changes, exclude):
        total += math.prod(len(v) for v in grid.values())
        among = {k: _among(v) for k, v in grid.items()}
        tried |= {
            tuple(str(r["params"].get(k)) for k in sorted(grid))
            for r in s.records
            if all(among[k](r["params"].get(k)) for k in grid)
        }
    return total - len(tried)


def commands(
    s: Sweep,
    argv: list[str],
    changes: dict[str, str],
    exclude: list[Exclusion] = (),
    python: bool = False,
) -> list[str]:
    """The next command(s): one, or one per grid of :func:`grids` when an
    exclusion cuts the grid; ``python``: as ``sweeper.multirun([...])`` calls."""
    parts = grids(s, changes, exclude)
    if len(parts) == 1:
        return [next_command(argv, changes, python)]
    whole = _grid(s, changes)
    return [
        next_command(
            argv,
            {k: ",".join(v) for k, v in g.items() if k in changes or v != whole.get(k)},
            python,
        )
        for g in parts
    ]


def next_command(argv: list[str], changes: dict[str, str], python: bool = False) -> str:
    """The sweep's command (``argv``: its overrides) with ``changes`` applied and ``resume=true``
    last; arguments are quoted only where a shell needs it. ``python``: the sweep came from
    :func:`sweeper.multirun`, and so does the next one (``sweeper.multirun([...])``)."""

    changes, out = dict(changes), []
    for arg in argv:
        # as the user typed it: sweeper adds the ++ itself (contract.model)
        if arg.startswith("++model."):
            arg = arg[2:]
        bare = arg.lstrip("+~")
        key = bare.partition("=")[0]
        if key in changes and not arg.startswith("~"):
            arg = f"{arg[: len(arg) - len(bare)]}{key}={changes.pop(key)}"
        out.append(arg)
    args = [*out, *(f"{k}={v}" for k, v in changes.items())]
    return python_call(args) if python else resume_command(["-m", *args])


def split_caveats(records: list[dict[str, Any]]) -> list[str]:
    """A sweep whose runs score validation on their training rows
    (``data.val_fraction=0``): its findings extrapolate from training error."""
    if not any(_number(r["params"].get("data.val_fraction")) == 0 for r in records):
        return []
    return [
        "validation = the training rows (data.val_fraction=0): every val_ metric here is "
        "training error, so these "
        "findings say which configuration fits the training rows best, not which generalises; "
        "set data.val_fraction > 0 to choose on held-out rows"
    ]


def advise(
    records: list[dict[str, Any]],
    argv: list[str] | None = None,
    curves: dict[str, Any] | None = None,
    search: bool = False,
    python: bool = False,
    caveats: list[str] | None = None,
    skipped: list[str] = (),
    baselines: dict[str, dict[str, float]] | None = None,
    foreign: bool = False,
) -> Advice:
    """The findings of a sweep: ``records`` (see :func:`record`) best first as the leaderboard ranks
    them, ``argv`` the sweep's command-line overrides, ``curves`` the loss curves of its
    top runs (run id → name → (epoch, value) pairs; or one run's name → pairs, read as the
    chosen run's). A search sweeper (``search``) chose its own values, and a sweep that
    sweeper did not make (``foreign``) has no command of sweeper's to build on: findings
    only then. ``python``: the next command as a ``sweeper.multirun([...])`` call;
    ``caveats``: what weakens the findings (an interrupted sweep); ``skipped``:
    the parent's SKIPPED jobs ("overrides: reason"); ``baselines``: the references
    fitted on the same rows (name → metrics, :mod:`sweeper.insight.baselines`)."""
    curves = curves or {}
    if any(k in CURVES for k in curves):  # one run's curves: the chosen run's
        best = next((r for r in records if r["params"] and r["status"] == "FINISHED"), None)
        curves = {best["run_id"]: curves} if best else {}
    s = Sweep(records, curves)
    caveats = [*(caveats or []), *split_caveats(records)]
    flat = no_effect(s)
    beaten, tie = reference(s, baselines or {})  # a baseline that beats the network is said first
    found = [
        *beaten,
        *devices(argv or [], skipped),
        *saturation(s),
        *noise(s),
        *ties(s),
        *divergence(s),
        *rising_loss(s),
        *overfitting(s),
        *under_training(s),
    ]
    flat = _one_subject(flat, found)
    found = _measured([*found, *flat, *edges(s, {f.tag for f in flat}), *tie], s.metric)
    model = s.noise_text
    if foreign:
        return Advice(
            found,
            None,
            s.metric,
            noise=model,
            note="this sweep was not made by sweeper (its parent run has no sweep_argv "
            "or sweep_dir tag): findings only, no command",
        )
    if search:
        return Advice(
            found,
            None,
            s.metric,
            noise=model,
            note="a search sweeper chose the values: widen its search space instead",
            caveats=caveats,
        )
    if not s.records:
        return Advice(
            found, None, s.metric, noise=model, note="no run to build on", caveats=caveats
        )
    if not s.trained:
        return Advice(
            found,
            None,
            s.metric,
            noise=model,
            note=f"this sweep trained no new run (all {len(s.records)} were reused from "
            "earlier rounds): its budget per round is 0, so no command; the command of the round "
            "that trained "
            "them stands",
            caveats=caveats,
        )
    changes, left, pair = plan(s, found)
    # values left out everywhere (and what the findings add above them), then per slice
    exclude = [
        ({}, f.drop["lr"])
        for f in found
        if f.kind == "divergence" and f not in left and f.drop.get("lr")
    ]
    exclude += [e for f in found if f not in left for e in f.drop_where]
    limit = budget(s)
    note = (
        f"budget per round: at most {limit} new run{'s' if limit != 1 else ''} (this sweep "
        f"trained {s.trained}; reused "
        "runs are free and not counted)"
    )
    seeded = [
        f
        for f in found
        if f not in left
        and "seed" in f.set
        and changes.get("seed") in (f.set["seed"], _fewer_seeds(s, f))
    ]
    narrowed = [
        f for f in seeded if f.narrow and all(changes.get(k) == v for k, v in f.narrow.items())
    ]
    if narrowed and pair:
        note += (
            "; to fit it, the seeds go to the best two configurations only, a command each: "
            + " and ".join(" ".join(f"{k}={text_cell(v)}" for k, v in p.items()) for p in pair)
        )
    elif narrowed:
        note += "; to fit it, the seeds go to the best two configurations only: " + " ".join(
            f"{k}={','.join(map(text_cell, v.split(',')))}" for k, v in narrowed[0].narrow.items()
        )
    cut = {
        k: v
        for k, v in pruned(s, changes, found).items()
        if not (narrowed and k in narrowed[0].narrow)
    }
    if cut:
        note += (
            "; to fit it, the command leaves out "
            + ", ".join(f"{k}={','.join(map(text_cell, v))}" for k, v in cut.items())
            + " (worse than the best beyond the noise)"
        )
    if seeded and changes["seed"] != seeded[0].set["seed"]:
        note += (
            f"; with seed={changes['seed']} (one seed more than this sweep tried, the fewest "
            "that show a spread)"
        )
    if left:
        note += "; left out of the next command for its budget: " + "; ".join(f.step for f in left)
    # a pair's two commands share no configuration
    each = [counts(s, part, exclude) for part in parts(changes, pair)]
    sizes = (sum(t for t, _ in each), sum(d for _, d in each))
    if sum(untried(s, part, exclude) for part in parts(changes, pair)) == 0:
        return Advice(
            found,
            None,
            s.metric,
            sizes,
            noise=model,
            note=answered(s, found, left),
            budget=limit,
            caveats=caveats or [],
        )
    said = [
        c
        for part in parts(changes, pair)
        for c in commands(s, list(argv or []), part, exclude, python)
    ]
    return Advice(
        found,
        " && ".join(said),
        s.metric,
        sizes,
        noise=model,
        note=note,
        budget=limit,
        caveats=caveats or [],
        split="one for each of the best two configurations" if pair else Advice.split,
    )


ABOUT = MappingProxyType(
    {
        "divergence": {"lr"},
        "rising_loss": {"lr"},
        "overfitting": {"epochs", "patience"},
        "under_training": {"epochs"},
    }
)  # the keys a finding of each kind is about


def _measured(found: list[Finding], metric: str) -> list[Finding]:
    """The findings with the keys another finding shows to matter (an edge beyond the
    noise, a divergence) taken out of the "not measured" one: a key is never both."""
    subjects = {k for f in found for k in (*f.add, *f.drop, *ABOUT.get(f.kind, ()))}
    out = []
    for f in found:
        keys = f.tag[len(UNMEASURED) :].split(",") if f.tag.startswith(UNMEASURED) else []
        if left := [k for k in keys if k not in subjects] if keys else None:
            out.append(f if left == keys else not_measured(left, metric))
        elif not keys:
            out.append(f)
    return out


def _one_subject(flat: list[Finding], others: list[Finding]) -> list[Finding]:
    """The no-effect findings whose key no other finding is about (a key
    is never both "did not matter" and the subject of another finding on
    the same runs: "epochs did not matter" beside overfitting)."""
    subjects = set()
    for f in others:
        subjects |= {
            *f.add,
            *f.drop,
            *(k for k in f.set if k not in ("seed", "device")),
        } | ABOUT.get(f.kind, set())
    return [f for f in flat if f.tag.split("@")[0] not in subjects]


def answered(s: Sweep, found: list[Finding], left: list[Finding]) -> str:
    """Why no command is printed: every configuration it would make was tried already."""
    top = s.ranked()
    if not top:
        return (
            "the grid answers its question: no configuration finished, and no change would "
            "train a new one"
        )
    why = (
        f"the grid answers its question: the best configuration is {_label(top[0])} ("
        f"{s.metric} {cell(s.mean(top[0])[0])})"
    )
    if any(f.kind == "saturation" for f in found):
        why += (
            "; the ties at the metric's edge are not separated by more seeds: rank them by a "
            "proper scoring rule "
            "(python -m sweeper.promote --metric val_log_loss) or hold out more validation rows "
            "(data.val_fraction)"
        )
    elif left:
        why += "; what the findings propose does not fit the budget (see above)"
    else:
        why += "; no finding proposes a configuration the sweep has not trained"
    return why


def top_runs(records: list[dict[str, Any]], n: int = TOP) -> list[str]:
    """The ids of the runs that stand for the ``n`` best configurations
    (each its first finished run), whose curves the advisor reads."""
    s = Sweep(records)
    return [r["run_id"] for c in s.ranked()[:n] if (r := s.lead(c)) is not None]


def sweep_argv(tags: dict[str, str]) -> list[str]:
    """A parent run's command-line overrides: its ``sweep_argv`` tag,
    else its ``overrides`` tag split."""
    if "sweep_argv" in tags:
        return list(json.loads(tags["sweep_argv"]))
    return tags.get("overrides", "").split()


def is_search(tags: dict[str, str]) -> bool:
    return tags.get("sweeper", BASIC_SWEEPER) != BASIC_SWEEPER


def interrupted_caveats(parent: Any, runs: list[Any]) -> list[str]:
    """A sweep that did not run to its end (KILLED: Ctrl-C, SIGTERM, a
    launcher that failed): advice on part of it."""
    if parent.info.status != "KILLED":
        return []
    tags = parent.data.tags
    ran = sum(r.info.status == "FINISHED" for r in runs)
    of = f" of {tags['n_jobs']}" if tags.get("n_jobs", "").isdigit() else ""
    why = tags.get("failure_reason", "interrupted").split(":")[0]
    return [
        f"the sweep did not finish ({why}): {ran}{of} jobs finished, so these findings read part "
        "of its grid; "
        "resume it (resume=true) before trusting them"
    ]


def made_by_sweeper(tags: dict[str, str]) -> bool:
    """Whether sweeper made the sweep of a parent run (it tags every
    parent with its sweep_argv and sweep_dir)."""
    return "sweep_argv" in tags or "sweep_dir" in tags


def publish(
    c: Any,
    parent: Any,
    runs: list[Any],
    order: list[str],
    out: Any = None,
    baselines: dict[str, dict[str, float]] | None = None,
    log: bool | None = None,
) -> Advice:
    """Advise on a parent run's children (``runs``; ``order``: their ids, best
    first), print it, and log it on the parent: ``advice.md`` and ``advice.*``
    tags (stale ones removed). A sweep that sweeper did not make gets findings
    only, and nothing is written into its parent unless ``log``."""

    # lazy: saves ~1159 ms at this module's import (measured)
    from mlflow.entities import RunTag

    # lazy: saves ~82 ms at this module's import (measured)
    from sweeper.insight.baselines import read

    out = out or sys.stdout
    by_id = {r.info.run_id: r for r in runs}
    # a row may be a reused run
    records = [record(by_id[i] if i in by_id else c.get_run(i)) for i in order]
    run_id = parent.info.run_id
    # a resumed sweep's reused runs belong to an earlier round: not counted in its budget
    for r in records:
        r["reused"] = r.get("parent") not in (None, run_id)
    s = Sweep(records)
    # the curves of the top configurations and of every
    # configuration's lead run (the edges read them too), capped
    leads = list(
        dict.fromkeys(
            [*top_runs(records), *(r["run_id"] for c in s.ranked()[:40] if (r := s.lead(c)))]
        )
    )
    curves = {
        i: {n: [(h.step, h.value) for h in c.get_metric_history(i, n)] for n in CURVES}
        for i in leads
    }
    tags = parent.data.tags

    ours = made_by_sweeper(tags)
    advice = advise(
        records,
        sweep_argv(tags),
        curves,
        is_search(tags),
        python=tags.get(SWEEP_FROM) == "python",
        caveats=interrupted_caveats(parent, runs),
        skipped=skipped_lines(tags),
        baselines=read(parent.data.metrics) if baselines is None else baselines,
        foreign=not ours,
    )
    print(advice.text(), file=out, end="")
    if not (ours if log is None else log):
        print(
            "(nothing written into the parent run: it is not sweeper's; --log writes the advice "
            "into it)",
            file=out,
        )
        return advice
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "advice.md"
        path.write_text(advice.text(markdown=True))
        c.log_artifact(run_id, str(path))
    new = advice.tags()
    for key in [k for k in tags if k.startswith(TAG) and k not in new]:
        c.delete_tag(run_id, key)
    c.log_batch(run_id, tags=[RunTag(k, v) for k, v in new.items()])
    return advice
