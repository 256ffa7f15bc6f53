"""The advisor: the findings of a sweep in order, the plan they make and the next command, published on the parent run."""
from __future__ import annotations

import json
import math
import sys
from typing import Any

from sweeper.insight.advice.evidence import Advice, CURVES, Finding, Sweep, TAG, _number, record
from sweeper.insight.advice.findings import divergence, edges, no_effect, noise, ties, training


def plan(s: Sweep, findings: list[Finding]) -> dict[str, str]:
    """The keys the findings change and their new values (a comma list): grids extended or cut, keys
    fixed, seeds added."""
    out: dict[str, str] = {}
    for key in dict.fromkeys(k for f in findings for k in (*f.add, *f.drop)):
        values = {float(v): v for v in s.tried(key) if _number(v) is not None}
        for f in findings:
            for v in f.drop.get(key, []):
                values.pop(float(v), None)
            for v in f.add.get(key, []):
                values.setdefault(float(v), v)
        out[key] = ",".join(values[k] for k in sorted(values))
    for f in findings:
        out.update(f.set)
    return out



def _among(value: Any, values: list[str]) -> bool:
    x = _number(value)
    return any(v == str(value) or (x is not None and _number(v) == x) for v in values)



def counts(s: Sweep, changes: dict[str, str]) -> tuple[int, int]:
    """How many configurations the next command makes, and how many of them already FINISHED (resumed)."""
    grid = {k: s.tried(k) for k in s.keys} | {k: v.split(",") for k, v in changes.items()}
    total = math.prod(len(v) for v in grid.values())
    done = {tuple(sorted(r["params"].items())) for r in s.finished
            if all(_among(r["params"].get(k), v) for k, v in grid.items())}
    return total, len(done)



def next_command(argv: list[str], changes: dict[str, str]) -> str:
    """The sweep's command (``argv``: its overrides) with ``changes`` applied and ``resume=true`` last;
    arguments are quoted only where a shell needs it."""
    from sweeper.base.names import resume_command  # drops any resume=, appends resume=true, quotes as a shell needs

    changes, out = dict(changes), []
    for arg in argv:
        bare = arg.lstrip("+~")
        key = bare.partition("=")[0]
        if key in changes and not arg.startswith("~"):
            arg = f"{arg[: len(arg) - len(bare)]}{key}={changes.pop(key)}"
        out.append(arg)
    return resume_command(["-m", *out, *(f"{k}={v}" for k, v in changes.items())])



def advise(records: list[dict[str, Any]], argv: list[str] | None = None,
           curves: dict[str, list[tuple[int, float]]] | None = None, search: bool = False) -> Advice:
    """The findings of a sweep: ``records`` (see :func:`record`) best first as the leaderboard ranks
    them, ``argv`` the sweep's command-line overrides, ``curves`` the chosen run's loss curves (name →
    (epoch, value) pairs). A search sweeper (``search``) chose its own values: no next command then."""
    s = Sweep(records)
    flat = no_effect(s)
    found = [*edges(s, {f.tag for f in flat}), *training(s, curves or {}), *divergence(s), *flat, *noise(s), *ties(s)]
    if search:
        return Advice(found, None, s.metric, note="a search sweeper chose the values: widen its search space instead")
    if not s.records:
        return Advice(found, None, s.metric, note="no run to build on")
    changes = plan(s, found)
    return Advice(found, next_command(list(argv or []), changes), s.metric, counts(s, changes))



def sweep_argv(tags: dict[str, str]) -> list[str]:
    """A parent run's command-line overrides: its ``sweep_argv`` tag, else its ``overrides`` tag split."""
    if "sweep_argv" in tags:
        return list(json.loads(tags["sweep_argv"]))
    return tags.get("overrides", "").split()



def is_search(tags: dict[str, str]) -> bool:
    from sweeper.base.names import BASIC_SWEEPER

    return tags.get("sweeper", BASIC_SWEEPER) != BASIC_SWEEPER



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
    curves: dict[str, list[tuple[int, float]]] = {}
    if s.best is not None:
        curves = {n: [(h.step, h.value) for h in c.get_metric_history(s.best["run_id"], n)] for n in CURVES}
    tags = parent.data.tags
    advice = advise(records, sweep_argv(tags), curves, is_search(tags))
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
