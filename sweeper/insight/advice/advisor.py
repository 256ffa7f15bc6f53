"""The advisor: the findings of a sweep in order — what the score cannot tell (saturation, noise, ties) before any
trend — the plan they make within a budget and the next command, published on the parent run."""
from __future__ import annotations

import json
import math
import sys
from collections import Counter
from dataclasses import replace
from typing import Any

from sweeper.insight.advice.curves import overfitting, under_training
from sweeper.insight.advice.evidence import TOP, Advice, CURVES, Finding, Sweep, TAG, _number, record
from sweeper.insight.advice.findings import divergence, edges, no_effect, noise, saturation, ties

# The next command trains at most as many runs as the sweep that produced it (at least MIN_BUDGET: three seeds of two): the findings'
# changes join in order of PRIORITY; past the budget, values of a key that scored worse than its best beyond the
# noise leave the grid first, then a change that still does not fit is left out (and said).
MIN_BUDGET = 6
PRIORITY = ("divergence", "no_effect", "overfitting", "under_training", "edge", "noise")


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
    """The most runs a next command may train: as many as the sweep made, at least MIN_BUDGET."""
    return max(len(s.records), MIN_BUDGET)


def _worse_values(s: Sweep, key: str, values: list[str]) -> list[str]:
    """Values of ``key`` (among ``values``) whose best mean over the other keys is worse than the best value's beyond
    the noise, worst first; never the best value nor one the sweep has not tried."""
    profile: dict[str, tuple[float, int]] = {}
    for c in s.configs:
        m, v = s.mean(c), dict(c).get(key)
        if m and v is not None and (v not in profile or s.better(m[0], profile[v][0])):
            profile[v] = m
    if len(profile) < 2:
        return []
    best = min(profile, key=lambda v: profile[v][0] if s.lower else -profile[v][0])
    a, na = profile[best]
    worse = [v for v in values if v in profile and v != best and not s.same(a, profile[v][0], na, profile[v][1])]
    return sorted(worse, key=lambda v: profile[v][0], reverse=s.lower)


def plan(s: Sweep, findings: list[Finding], limit: int | None = None) -> tuple[dict[str, str], list[Finding]]:
    """The keys the findings change and their new values (a comma list): grids extended or cut, keys fixed, seeds
    added — within ``limit`` runs to train (default :func:`budget`); and the findings left out for it."""
    limit = budget(s) if limit is None else limit
    order = sorted(findings, key=lambda f: PRIORITY.index(f.kind) if f.kind in PRIORITY else len(PRIORITY))
    out: dict[str, str] = {}
    left: list[Finding] = []
    for f in order:
        if not (f.add or f.drop or f.set):
            continue
        # the finding as it is; else with one new value a key (the nearest beyond the edge)
        shapes = [f] + ([replace(f, add={k: v[:1] for k, v in f.add.items()})] if any(len(v) > 1 for v in f.add.values()) else [])
        for shape in shapes:
            trial = _fit(s, _apply(s, out, shape), limit)
            if _to_train(s, trial) <= limit:
                out = trial
                break
        else:
            left.append(f)
    return out, left


def _fit(s: Sweep, trial: dict[str, str], limit: int) -> dict[str, str]:
    """``trial`` with values the grid showed worse pruned, worst first, until it trains at most ``limit`` runs (or
    nothing is left to prune: a key keeps at least two values).

    The first key that has a worse value and more than two loses its worst ones, one after another, until the
    command fits or the key has none left to give; then the next key. What a value weighs (the configurations it
    brings, less those already FINISHED) is counted once a key, in one pass over the runs: pruning one value at a
    time with a full count each made a 10,000-value grid quadratic (minutes at the end of the sweep)."""
    trial = dict(trial)
    to_train = _to_train(s, trial)
    while to_train > limit:
        for key in s.hyper:
            now = trial[key].split(",") if key in trial else s.tried(key)
            worse = _worse_values(s, key, now)
            if worse and len(now) > 2:
                each, done, group = _weights(s, trial, key, now)
                left = Counter(group[v] for v in now)
                cut: set[str] = set()
                for value in worse:
                    if to_train <= limit or len(now) - len(cut) <= 2:
                        break
                    cut.add(value)
                    left[group[value]] -= 1
                    # its configurations go; its finished runs too, once no value left reads as the same number
                    to_train -= each - (0 if left[group[value]] else len(done.get(group[value], ())))
                trial[key] = ",".join(v for v in now if v not in cut)
                break
        else:
            return trial
    return trial


def _weights(s: Sweep, trial: dict[str, str], key: str, values: list[str]) -> tuple[int, dict[Any, set], dict[str, Any]]:
    """What each of ``values`` of ``key`` brings to the next command ``trial``: the configurations of one value (the
    other keys' grids multiplied), the FINISHED configurations of each group of values (values that read as the same
    number are one group: a run matches either, as :func:`counts` counts), and each value's group."""
    grid = _grid(s, trial) | {key: values}
    each = math.prod(len(v) for k, v in grid.items() if k != key)
    among = {k: _among(v) for k, v in grid.items()}
    group = {v: ("number", n) if (n := _number(v)) is not None else ("text", v) for v in values}
    numbers = {g[1] for g in group.values() if g[0] == "number"}
    done: dict[Any, set] = {}
    for r in s.finished:
        if all(among[k](r["params"].get(k)) for k in grid):
            value = r["params"].get(key)
            g = ("number", n) if (n := _number(value)) is not None and n in numbers else ("text", str(value))
            done.setdefault(g, set()).add(tuple(sorted(r["params"].items())))
    return each, done, group


def _to_train(s: Sweep, changes: dict[str, str]) -> int:
    total, done = counts(s, changes)
    return total - done


def _among(values: list[str]) -> Any:
    """Whether a run's value is one of ``values`` (as written, or as the same number): a test that costs O(1) a run,
    not O(len(values)) (a 1,000-value grid made counting the next command's runs cubic)."""
    strings = set(values)
    numbers = {x for x in map(_number, values) if x is not None}
    return lambda value: str(value) in strings or _number(value) in numbers



def _grid(s: Sweep, changes: dict[str, str]) -> dict[str, list[str]]:
    """The next command's values per key: the sweep's, with ``changes`` (comma lists) applied."""
    return {k: s.tried(k) for k in s.keys} | {k: v.split(",") for k, v in changes.items()}


def counts(s: Sweep, changes: dict[str, str]) -> tuple[int, int]:
    """How many configurations the next command makes, and how many of them already FINISHED (resumed)."""
    grid = _grid(s, changes)
    total = math.prod(len(v) for v in grid.values())
    among = {k: _among(v) for k, v in grid.items()}
    done = {tuple(sorted(r["params"].items())) for r in s.finished
            if all(among[k](r["params"].get(k)) for k in grid)}
    return total, len(done)



def next_command(argv: list[str], changes: dict[str, str], python: bool = False) -> str:
    """The sweep's command (``argv``: its overrides) with ``changes`` applied and ``resume=true`` last;
    arguments are quoted only where a shell needs it. ``python``: the sweep came from :func:`sweeper.multirun`,
    and so does the next one (``sweeper.multirun([...])``)."""
    from sweeper.base.names import python_call, resume_command  # both drop any resume= and append resume=true

    changes, out = dict(changes), []
    for arg in argv:
        if arg.startswith("++model."):  # as the user typed it: sweeper adds the ++ itself (contract.model)
            arg = arg[2:]
        bare = arg.lstrip("+~")
        key = bare.partition("=")[0]
        if key in changes and not arg.startswith("~"):
            arg = f"{arg[: len(arg) - len(bare)]}{key}={changes.pop(key)}"
        out.append(arg)
    args = [*out, *(f"{k}={v}" for k, v in changes.items())]
    return python_call(args) if python else resume_command(["-m", *args])



def split_caveats(records: list[dict[str, Any]]) -> list[str]:
    """A sweep whose runs score validation on their training rows (``data.val_fraction=0``): its findings extrapolate
    from training error."""
    if not any(_number(r["params"].get("data.val_fraction")) == 0 for r in records):
        return []
    return ["validation = the training rows (data.val_fraction=0): every val_ metric here is training error, so these "
            "findings say which configuration fits the training rows best, not which generalises; "
            "set data.val_fraction > 0 to choose on held-out rows"]


def advise(records: list[dict[str, Any]], argv: list[str] | None = None,
           curves: dict[str, Any] | None = None, search: bool = False, python: bool = False,
           caveats: list[str] | None = None) -> Advice:
    """The findings of a sweep: ``records`` (see :func:`record`) best first as the leaderboard ranks
    them, ``argv`` the sweep's command-line overrides, ``curves`` the loss curves of its top runs (run id →
    name → (epoch, value) pairs; or one run's name → pairs, read as the chosen run's). A search sweeper
    (``search``) chose its own values: no next command then. ``python``: the next command as a
    ``sweeper.multirun([...])`` call."""
    curves = curves or {}
    if any(k in CURVES for k in curves):  # one run's curves: the chosen run's
        best = next((r for r in records if r["params"] and r["status"] == "FINISHED"), None)
        curves = {best["run_id"]: curves} if best else {}
    s = Sweep(records, curves)
    caveats = [*(caveats or []), *split_caveats(records)]
    flat = no_effect(s)
    found = [*saturation(s), *noise(s), *ties(s), *divergence(s), *overfitting(s), *under_training(s), *flat,
             *edges(s, {f.tag for f in flat})]
    if search:
        return Advice(found, None, s.metric, note="a search sweeper chose the values: widen its search space instead", caveats=caveats)
    if not s.records:
        return Advice(found, None, s.metric, note="no run to build on", caveats=caveats)
    changes, left = plan(s, found)
    note = ""
    if left:
        note = (f"left out of the next command for its budget ({budget(s)} runs to train, the sweep's size): "
                + "; ".join(f.step for f in left))
    return Advice(found, next_command(list(argv or []), changes, python), s.metric, counts(s, changes), note=note,
                  caveats=caveats)


def top_runs(records: list[dict[str, Any]], n: int = TOP) -> list[str]:
    """The ids of the runs that stand for the ``n`` best configurations (each its first finished run), whose curves
    the advisor reads."""
    s = Sweep(records)
    return [r["run_id"] for c in s.ranked()[:n] if (r := s.lead(c)) is not None]


def sweep_argv(tags: dict[str, str]) -> list[str]:
    """A parent run's command-line overrides: its ``sweep_argv`` tag, else its ``overrides`` tag split."""
    if "sweep_argv" in tags:
        return list(json.loads(tags["sweep_argv"]))
    return tags.get("overrides", "").split()



def is_search(tags: dict[str, str]) -> bool:
    from sweeper.base.names import BASIC_SWEEPER

    return tags.get("sweeper", BASIC_SWEEPER) != BASIC_SWEEPER



def interrupted_caveats(parent: Any, runs: list[Any]) -> list[str]:
    """A sweep that did not run to its end (KILLED: Ctrl-C, SIGTERM, a launcher that failed): advice on part of it."""
    if parent.info.status != "KILLED":
        return []
    tags = parent.data.tags
    ran = sum(r.info.status == "FINISHED" for r in runs)
    of = f" of {tags['n_jobs']}" if tags.get("n_jobs", "").isdigit() else ""
    why = tags.get("failure_reason", "interrupted").split(":")[0]
    return [f"the sweep did not finish ({why}): {ran}{of} jobs finished, so these findings read part of its grid; "
            "resume it (resume=true) before trusting them"]


def publish(c: Any, parent: Any, runs: list[Any], order: list[str], out: Any = None) -> Advice:
    """Advise on a parent run's children (``runs``; ``order``: their ids, best first), print it, and log
    it on the parent: ``advice.md`` and ``advice.*`` tags (stale ones removed)."""
    import tempfile
    from pathlib import Path

    from mlflow.entities import RunTag

    out = out or sys.stdout
    by_id = {r.info.run_id: r for r in runs}
    records = [record(by_id[i] if i in by_id else c.get_run(i)) for i in order]  # a row may be a reused run
    s = Sweep(records)
    # the curves of the top configurations and of every configuration's lead run (the edges read them too), capped
    leads = list(dict.fromkeys([*top_runs(records), *(r["run_id"] for c in s.ranked()[:40] if (r := s.lead(c)))]))
    curves = {i: {n: [(h.step, h.value) for h in c.get_metric_history(i, n)] for n in CURVES} for i in leads}
    tags = parent.data.tags
    from sweeper.base.names import SWEEP_FROM

    advice = advise(records, sweep_argv(tags), curves, is_search(tags), tags.get(SWEEP_FROM) == "python",
                    caveats=interrupted_caveats(parent, runs))
    print(advice.text(), file=out, end="")
    run_id = parent.info.run_id
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "advice.md"
        path.write_text(advice.text(markdown=True))
        c.log_artifact(run_id, str(path))
    new = advice.tags()
    for key in [k for k in tags if k.startswith(TAG) and k not in new]:
        c.delete_tag(run_id, key)
    c.log_batch(run_id, tags=[RunTag(k, v) for k, v in new.items()])
    return advice
