"""The sweep advisor: what a finished sweep says to try next, each finding with its evidence and a next step.

The end of every multirun prints the findings after the leaderboard and logs them on the parent run
(``advice.md``, and tags ``advice.*`` a program can read); ``python -m sweeper.advise`` rebuilds them
from the store alone:

    python -m sweeper.advise --experiment diabetes          # the latest sweep of the experiment
    python -m sweeper.advise --parent RUN_ID [--tracking-uri URI]

Only validation metrics drive the findings: the test split is reported in the leaderboard, never used
to choose. The last line is a command that applies the findings; with ``resume=true`` it trains only
the configurations that have not finished yet.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable

from sweeper.report import cell, text_cell  # how every number is printed (4 significant digits)

# Params that say where or how a run was made, not what it computes: never a swept key (a resumed
# sweep's leaderboard holds runs of resume=false and resume=true of one configuration).
IGNORED = ("tracking.", "pinned.", "hydra.", "resume", "sync_every_epoch")
# Swept keys that do not change the model by design, or that the noise finding handles (seed).
NOT_HYPERPARAMETERS = ("seed", "device", "log_every")
LOG_SPACED = ("lr",)  # extended by the grid's ratio whatever its values
STEPPED = ("depth",)  # extended by the grid's step
MAX_RATIO = 10.0  # a log-spaced extension steps by at most a decade
# Without a seed sweep there is no noise estimate: two validation scores count as the same only
# when they differ by less than this fraction (training is deterministic, so that is "no effect").
SAME = 1e-3
ALPHA = 0.05  # significance level of the best-against-runner-up test over seeds
OVERFIT_AT = 0.5  # overfitting: the best epoch is in the first half of the run ...
RISE = 0.01  # ... the validation loss ended > 1% above its minimum, the training loss > 1% below where it was then
LATE = 0.9  # under-training: the best epoch is in the last 10% of the run ...
STILL_FALLING = 0.005  # ... and the validation loss fell > 0.5% over the last quarter of the run
CURVES = ("train_loss", "val_loss")
TAG = "advice."


@dataclass
class Finding:
    """One finding: what it is, the numbers behind it, what to do; and how the next command changes."""

    kind: str  # edge | overfitting | under_training | divergence | no_effect | noise | ties
    title: str
    summary: str
    evidence: list[str]
    step: str
    tag: str  # the value of the parent's advice.<kind> tag
    add: dict[str, list[str]] = field(default_factory=dict)  # values to add to a key's grid
    drop: dict[str, list[str]] = field(default_factory=dict)  # values to take out of it
    set: dict[str, str] = field(default_factory=dict)  # a key's new value (or comma list)


@dataclass
class Advice:
    findings: list[Finding]
    command: str | None
    metric: str  # e.g. "val_mse"
    sizes: tuple[int, int] = (0, 0)  # the next command's configurations, and how many of them FINISHED already
    note: str = ""  # why there is no command

    def text(self, markdown: bool = False) -> str:
        n = len(self.findings)
        head = f"{n} finding{'s' * (n != 1)}, from validation metrics only (the test split is reported, never used to choose)"
        lines = ["# Sweep advice", "", head + "."] if markdown else [f"Advice: {head}:"]
        for i, f in enumerate(self.findings, 1):
            if markdown:
                lines += ["", f"## {i}. {f.title}", "", f.summary, ""]
                lines += [f"- {e}" for e in f.evidence] + [f"- **Next:** {f.step}"]
            else:
                lines += [f"{i:2d}. {f.title}: {f.summary}"]
                lines += [f"    {e}" for e in f.evidence] + [f"    next: {f.step}"]
        if not self.findings:
            lines += ["", "Nothing to report."] if markdown else ["    nothing to report"]
        if self.command:
            total, done = self.sizes
            what = (f"Next command ({total} configuration{'s' * (total != 1)}: {done} finished already, reused; "
                    f"{total - done} to train)")
            lines += ["", f"## {what}", "", "```bash", self.command, "```"] if markdown else [f"{what}:", f"  {self.command}"]
        elif self.note:
            lines += ["", self.note] if markdown else [f"next command: none ({self.note})"]
        return "\n".join(lines) + "\n"

    def tags(self) -> dict[str, str]:
        out: dict[str, list[str]] = {}
        for f in self.findings:
            out.setdefault(f.kind, []).append(f.tag)
        tags = {f"{TAG}{k}": ",".join(v) for k, v in out.items()}
        tags[f"{TAG}count"] = str(len(self.findings))
        if self.command:
            tags[f"{TAG}next_command"] = self.command
            tags[f"{TAG}next_configs"], tags[f"{TAG}next_to_train"] = str(self.sizes[0]), str(self.sizes[0] - self.sizes[1])
        return tags


def record(run: Any) -> dict[str, Any]:
    """What the advisor reads of an MLflow run."""
    return {"run": run.info.run_name, "run_id": run.info.run_id, "status": run.info.status,
            "reason": run.data.tags.get("failure_reason"), "params": dict(run.data.params),
            "metrics": dict(run.data.metrics)}


def _number(text: Any) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _pct(x: float) -> str:
    return f"{'-' if x < 0 else '+'}{cell(abs(100 * x))}%"


def nice(x: float) -> float:
    """``x`` to one significant figure when that is within 15% of it, else to two (0.0316 → 0.03)."""
    for digits in (0, 1):
        r = float(f"{x:.{digits}e}")
        if abs(r - x) <= 0.15 * abs(x):
            return r
    return r


def _nice_int(x: float) -> int:
    """A round count near ``x``: 1, 2 or 5 times a power of ten (65 → 50)."""
    if x < 1:
        return 1
    power = 10 ** math.floor(math.log10(x))
    return int(max(m * power for m in (1, 2, 5) if m * power <= x))


class Sweep:
    """The runs of one sweep, best first (the leaderboard's order), and what the findings share."""

    def __init__(self, records: list[dict[str, Any]]):
        from sweeper.metrics import PRIMARY

        self.records = [r for r in records if r["params"]]  # a run killed before its end has no params
        task = "binary" if any("val_accuracy" in r["metrics"] for r in self.records) else "regression"
        name, self.lower = PRIMARY[task]
        self.task, self.metric = task, f"val_{name}"
        names = sorted({k for r in self.records for k in r["params"] if not k.startswith(IGNORED)})
        self.keys = [k for k in names if len({r["params"].get(k) for r in self.records}) > 1]
        self.hyper = [k for k in self.keys if "." not in k and k not in NOT_HYPERPARAMETERS]
        self.finished = [r for r in self.records if r["status"] == "FINISHED" and self.value(r) is not None]
        self.best = self.finished[0] if self.finished else None
        self._done = {id(r) for r in self.finished}
        self.configs: dict[tuple, list[dict[str, Any]]] = {}
        for r in self.records:
            self.configs.setdefault(self.config(r), []).append(r)
        # a binary task's accuracy moves in steps of one validation row: a key that did not move it may
        # still have changed the model, which its log loss shows
        self.measures = (self.metric, "val_log_loss") if task == "binary" else (self.metric,)
        self.seeded = "seed" in self.keys
        self.stats = {m: self._stats(m) for m in self.measures}
        self.scores, self.noise, _ = self.stats[self.metric]

    def _stats(self, metric: str) -> tuple[dict[tuple, list[float]], float | None, int]:
        """Each configuration's finished scores on ``metric``, the seed-to-seed std pooled over the
        configurations (None without a seed sweep) and its degrees of freedom."""
        scores = {c: [v for r in rs if id(r) in self._done and (v := _number(r["metrics"].get(metric))) is not None]
                  for c, rs in self.configs.items()}
        spread = [(len(v) - 1, statistics.variance(v)) for v in scores.values() if len(v) > 1]
        dof = sum(d for d, _ in spread)
        return scores, (math.sqrt(sum(d * var for d, var in spread) / dof) if self.seeded and dof else None), dof

    def value(self, r: dict[str, Any]) -> float | None:
        return _number(r["metrics"].get(self.metric))

    def config(self, r: dict[str, Any]) -> tuple:
        """A configuration: the swept values but the seed."""
        return tuple((k, r["params"].get(k)) for k in self.keys if k != "seed")

    def mean(self, config: tuple, metric: str | None = None) -> tuple[float, int] | None:
        """The configuration's mean validation score over its finished seeds, and how many; None if none finished."""
        v = self.stats[metric or self.metric][0].get(config) or []
        return (statistics.fmean(v), len(v)) if v else None

    def better(self, a: float, b: float) -> bool:
        return a < b if self.lower else a > b

    def same(self, a: float, b: float, na: int = 1, nb: int = 1, metric: str | None = None, among: int = 2,
             tests: int = 1) -> bool:
        """Whether the lowest and highest of ``among`` mean scores (a and b, of na and nb seeds) differ by no
        more than the noise of ``metric``: Tukey's range test at ALPHA (split over ``tests`` such
        comparisons); for two means, a two-sided t-test. Without seeds: within SAME of each other."""
        _, noise, dof = self.stats[metric or self.metric]
        if noise is not None:
            return abs(a - b) <= _range_quantile(among, dof, ALPHA / tests) * noise * math.sqrt((1 / na + 1 / nb) / 2)
        return abs(a - b) <= SAME * max(abs(a), abs(b)) + 1e-12

    @property
    def noise_text(self) -> str:
        if self.noise is not None:
            dof = self.stats[self.metric][2]
            return (f"noise: seed-to-seed std {cell(self.noise)} of {self.metric} (pooled, {dof} degrees of freedom); "
                    f"within it: not significant at {ALPHA:.0%}")
        return f"no seed sweep: scores within {SAME:.1%} count as the same"

    def tried(self, key: str) -> list[str]:
        """The values of ``key`` the sweep tried (every run, failed ones too), as its params show them, in order."""
        values = {r["params"][key] for r in self.records if key in r["params"]}
        return sorted(values, key=lambda v: (_number(v) is None, _number(v) or 0.0, v))

    def param(self, r: dict[str, Any], key: str, default: float = 0.0) -> float:
        v = _number(r["params"].get(key))
        return default if v is None else v


@lru_cache(maxsize=64)
def _range_quantile(among: int, dof: int, alpha: float) -> float:
    """The studentized range's 1 - alpha quantile for ``among`` means and ``dof`` degrees of freedom."""
    from scipy import stats

    return float(stats.studentized_range.ppf(1 - alpha, among, dof))


def _label(config: Iterable[tuple[str, Any]]) -> str:
    return ",".join(f"{k}={text_cell(v)}" for k, v in config) or "all runs"


def _format(key: str, x: float, integer: bool) -> str | None:
    """A new value of ``key`` as an override writes it, or None if the key does not allow it."""
    from sweeper.config import TOP_LEVEL

    value: int | float = int(round(x)) if integer else nice(x)
    rule = TOP_LEVEL.get(key)
    if (rule is not None and not rule.check(value)) or (rule is None and x <= 0):
        return None
    return str(value) if integer else repr(float(value))


def extend(key: str, values: list[str], up: bool, count: int = 2) -> tuple[list[str], str]:
    """``count`` new values of a numeric key beyond the grid's edge, spaced like the grid: by its mean
    ratio (at most a decade) when log-spaced (always for lr), else by its mean step; and that spacing in
    words. Values the key does not allow are left out."""
    nums = sorted(float(v) for v in values)
    integer = key not in LOG_SPACED and all(_number(v) is not None and float(v).is_integer() and "." not in v
                                            and "e" not in v.lower() for v in values)
    edge, inner = (nums[-1], nums[-2]) if up else (nums[0], nums[1])
    log = nums[0] > 0 and (key in LOG_SPACED or (key not in STEPPED and max(edge, inner) / min(edge, inner) >= 1.5))
    ratio = min((nums[-1] / nums[0]) ** (1 / (len(nums) - 1)), MAX_RATIO) if log else 1.0
    step = (nums[-1] - nums[0]) / (len(nums) - 1)
    out: list[str] = []
    for i in range(1, count + 1):
        if log:
            x = edge * ratio**i if up else edge / ratio**i
        else:
            x = edge + i * step if up else edge - i * step
        text = _format(key, x, integer)
        if text is not None and all(float(text) != n for n in nums) and text not in out:
            out.append(text)
    return out, (f"log-spaced, ×{ratio:.3g} a step" if log else f"a step of {cell(step)}")


def _slices(s: Sweep, key: str, metric: str | None = None) -> dict[tuple, dict[str, tuple[float, int] | None]]:
    """Configurations grouped by every swept key but ``key`` (and seed): each slice maps key's values to
    their mean score on ``metric`` and seed count (None where nothing finished)."""
    out: dict[tuple, dict[str, tuple[float, int] | None]] = {}
    for config in s.configs:
        other = tuple(kv for kv in config if kv[0] != key)
        out.setdefault(other, {})[dict(config)[key]] = s.mean(config, metric)
    return {k: v for k, v in out.items() if len(v) > 1}


def _flat(s: Sweep, by_value: dict[str, tuple[float, int] | None], metric: str, tests: int) -> bool | None:
    """Whether a slice's scores stay within the noise, one of ``tests`` slices (a value that failed
    where another finished moved it); None when nothing in it finished (no evidence either way)."""
    scores = list(by_value.values())
    if all(v is None for v in scores):
        return None
    if any(v is None for v in scores):
        return False
    lo, hi = min(scores), max(scores)
    return s.same(lo[0], hi[0], lo[1], hi[1], metric, among=len(scores), tests=tests)


def no_effect(s: Sweep) -> list[Finding]:
    """Keys across whose values the score moved no more than the noise (in every slice of the other keys,
    or in every slice where another key has one value: width at depth=0)."""
    found = []
    for key in s.hyper:
        flat, moved = [], []
        slices = {m: _slices(s, key, m) for m in s.measures}
        tests = len(slices[s.metric]) * len(s.measures)
        for other in slices[s.metric]:
            verdicts = [_flat(s, slices[m][other], m, tests) for m in s.measures]
            if None not in verdicts:
                (flat if all(verdicts) else moved).append(other)
        if not flat:
            continue
        slices = slices[s.metric]

        def spread(other: tuple) -> float:
            return max(m[0] for m in slices[other].values()) - min(m[0] for m in slices[other].values())

        flat.sort(key=spread, reverse=True)  # the evidence shows the largest spreads

        def shown(other: tuple) -> str:
            values = ", ".join(f"{text_cell(v)}: {cell(m[0])}" for v, m in sorted(slices[other].items(), key=lambda kv: _number(kv[0]) or 0))
            return f"{s.metric} by {key}" + (f" at {_label(other)}" if other else "") + f": {values}"

        also = [f"{', '.join(s.measures[1:])} did not move either"] if len(s.measures) > 1 else []
        if not moved:
            chosen = s.best["params"].get(key) if s.best else None
            found.append(Finding(
                "no_effect", f"{key} did not matter",
                f"the spread of {s.metric} across {key}'s values (at most {cell(spread(flat[0]))}) is within the noise",
                [shown(o) for o in flat[:4]] + [s.noise_text] + also,
                f"fix {key}={text_cell(chosen)} (the chosen run's value) and spend the runs on other keys" if chosen else
                f"fix {key} to one value", key, set={key: chosen} if chosen else {}))
            continue
        for other_key in sorted({k for o in flat for k, _ in o}):
            for value in sorted({dict(o)[other_key] for o in flat}):
                if all(dict(o).get(other_key) == value for o in flat) and not any(dict(o).get(other_key) == value for o in moved):
                    found.append(Finding(
                        "no_effect", f"{key} did not matter at {other_key}={text_cell(value)}",
                        f"at {other_key}={text_cell(value)} the spread of {s.metric} across {key}'s values is within the noise; "
                        f"elsewhere {key} matters",
                        [shown(o) for o in flat[:4]] + [s.noise_text] + also,
                        f"sweep {key} only where {other_key}≠{text_cell(value)}", f"{key}@{other_key}={value}"))
    return found


def edges(s: Sweep, flat: set[str]) -> list[Finding]:
    """Numeric keys whose best value is the smallest or largest tried, the score improving toward it."""
    found = []
    for key in s.hyper:
        tried = s.tried(key)
        if key in flat or len(tried) < 2 or any(_number(v) is None for v in tried):
            continue
        profile: dict[str, tuple[float, int]] = {}  # each value's best mean score over the other keys
        for config in s.configs:
            m, v = s.mean(config), dict(config)[key]
            if m is not None and (v not in profile or s.better(m[0], profile[v][0])):
                profile[v] = m
        done = [v for v in tried if v in profile]
        if len(done) < 2:
            continue
        best = min(done, key=lambda v: profile[v][0] if s.lower else -profile[v][0])
        if best not in (tried[0], tried[-1]):
            continue
        up = best == tried[-1] and best != tried[0]
        inner = done[-2] if up else done[1]
        (a, na), (b, nb) = profile[best], profile[inner]
        if s.same(a, b, na, nb) or not s.better(a, b):
            continue
        new, spacing = extend(key, tried, up)
        if not new:
            continue
        way = "upward" if up else "downward"
        how = [w for w, on in (("mean over seeds", s.seeded), ("best over the other keys", len(s.hyper) > 1)) if on]
        by = f"per {key}" + (f" ({', '.join(how)})" if how else "")
        found.append(Finding(
            "edge", f"edge of the grid: {key}",
            f"the best {key} ({text_cell(best)}) is the {'largest' if up else 'smallest'} tried and {s.metric} improves "
            f"toward it ({cell(b)} at {key}={text_cell(inner)} → {cell(a)} at {key}={text_cell(best)})",
            [f"{s.metric} {by}: " + ", ".join(f"{text_cell(v)}: {cell(profile[v][0])}" for v in done), s.noise_text],
            f"extend {key} {way} ({spacing}): add {', '.join(new)}",
            f"{key}:{'up' if up else 'down'}", add={key: new}))
    return found


def divergence(s: Sweep) -> list[Finding]:
    """The smallest lr that diverged (or exploded) and the largest that did not."""
    diverged = [r for r in s.records if r["status"] == "FAILED" and (r["reason"] or "").startswith("diverged")]
    if not diverged or any("lr" not in r["params"] for r in diverged):
        return []
    first = min(diverged, key=lambda r: s.param(r, "lr"))
    d = s.param(first, "lr")
    ok = s.finished
    evidence = ["diverged: " + ", ".join(f"{r['run']} ({r['reason']})" for r in diverged[:5])
                + (f" and {len(diverged) - 5} more" if len(diverged) > 5 else "")]
    lrs = s.tried("lr")
    chosen = s.best["params"]["lr"] if s.best else None
    drop = [v for v in dict.fromkeys(r["params"]["lr"] for r in diverged) if v != chosen and len(lrs) > 1]
    add: list[str] = []
    if not ok:
        summary = f"every run diverged; the smallest lr tried was {text_cell(first['params']['lr'])}"
        add = extend("lr", lrs, up=False)[0] if len(lrs) > 1 else [_format("lr", float(lrs[0]) / 10, integer=False) or ""]
        add = [a for a in add if a]
        step = f"lower lr: try {', '.join(add)}" if add else "lower lr"
        tag = f"lr:..{first['params']['lr']}"
    else:
        top = max(ok, key=lambda r: s.param(r, "lr"))
        f = s.param(top, "lr")
        evidence.append(f"largest lr that did not diverge: {text_cell(top['params']['lr'])} ({top['run']}, "
                        f"{s.metric}={cell(s.value(top))})")
        tag = f"lr:{top['params']['lr']}..{first['params']['lr']}"
        if f < d:
            summary = (f"runs diverge from lr={text_cell(first['params']['lr'])} on; lr={text_cell(top['params']['lr'])} "
                       "is the largest that did not")
        else:
            summary = (f"lr={text_cell(first['params']['lr'])} diverged ({first['run']}) while lr up to "
                       f"{text_cell(top['params']['lr'])} "
                       f"did not elsewhere: the boundary depends on the other keys")
            evidence += _boundaries(s, diverged)
        step = f"keep lr below {text_cell(first['params']['lr'])}"
        if chosen is not None and s.param(s.best, "lr") == f and f < d:
            mid = _format("lr", math.sqrt(f * d), integer=False)
            if mid is not None and all(float(mid) != float(v) for v in lrs):
                add = [mid]
                step += f"; the chosen lr ({text_cell(chosen)}) is the largest that did not diverge: try lr={mid} between them"
    if drop:
        step += f"; the next command leaves out lr={','.join(map(text_cell, drop))} (it would diverge again)"
    return [Finding("divergence", "divergence boundary", summary, evidence, step, tag,
                    add={"lr": add} if add else {}, drop={"lr": drop} if drop else {})]


def _boundaries(s: Sweep, diverged: list[dict[str, Any]]) -> list[str]:
    """Per slice of the other keys that had a run diverge: the smallest lr that diverged there and the
    largest that finished."""
    def other(r: dict[str, Any]) -> tuple:
        return tuple(kv for kv in s.config(r) if kv[0] != "lr")

    out = []
    for o in list(dict.fromkeys(other(r) for r in diverged))[:4]:
        bad = min(s.param(r, "lr") for r in diverged if other(r) == o)
        good = [s.param(r, "lr") for r in s.finished if other(r) == o]
        out.append(f"{_label(o)}: diverged from lr={cell(bad)}, "
                   + (f"finished up to lr={cell(max(good))}" if good else "nothing finished"))
    return out


def _at(curve: list[tuple[int, float]], step: float) -> tuple[int, float]:
    """The sample of ``curve`` nearest ``step``."""
    return min(curve, key=lambda p: abs(p[0] - step))


def training(s: Sweep, curves: dict[str, list[tuple[int, float]]]) -> list[Finding]:
    """Overfitting or under-training of the chosen run, from its loss curves."""
    b = s.best
    train, val = sorted(curves.get("train_loss") or []), sorted(curves.get("val_loss") or [])
    if b is None or not train or not val:
        return []
    best_epoch, run = b["metrics"].get("best_epoch"), b["metrics"].get("epochs_run")
    epochs, patience = s.param(b, "epochs"), s.param(b, "patience")
    if best_epoch is None or run is None or (patience and run < epochs):
        return []  # early stopping ended it and kept its best weights
    best_epoch, run = int(best_epoch), int(run)
    last_step, v_last = val[-1]
    t_last = train[-1][1]
    min_step, v_min = min(val, key=lambda p: p[1])
    t_step, t_best = _at(train, best_epoch)
    name = b["run"]
    if best_epoch <= OVERFIT_AT * run and v_last > v_min * (1 + RISE) and t_last < t_best * (1 - RISE):
        p = max(_nice_int(best_epoch / 4), int(s.param(b, "log_every", 1)))
        stop = _nice_int(best_epoch) if _nice_int(best_epoch) >= 0.8 * best_epoch else best_epoch
        return [Finding(
            "overfitting", "overfitting",
            f"the chosen run ({name}) was best at epoch {best_epoch} of {run}; its validation loss then rose while "
            f"the training loss kept falling",
            [f"val_loss: {cell(v_min)} (its minimum, epoch {min_step}) → {cell(v_last)} at epoch {last_step} ({_pct(v_last / v_min - 1)})",
             f"train_loss: {cell(t_best)} at epoch {t_step} → {cell(t_last)} at epoch {train[-1][0]} ({_pct(t_last / t_best - 1)})",
             f"{s.metric}={cell(s.value(b))} is of the last epoch's weights (patience={int(patience)})"],
            f"stop early: patience={p} (keeps the best weights), or epochs≈{stop}",
            f"best_epoch={best_epoch}/{run}", set={"patience": str(p)})]
    ref_step, v_ref = _at(val, last_step - 0.25 * run)
    fell = (v_ref - v_last) / v_ref if v_ref else 0.0
    if best_epoch >= LATE * last_step and run >= epochs and fell > STILL_FALLING:
        if "epochs" in s.keys:  # twice the grid's largest
            more = str(2 * int(max(float(v) for v in s.tried("epochs"))))
            change: dict[str, Any] = {"add": {"epochs": [more]}}
        else:
            more = str(2 * int(epochs))
            change = {"set": {"epochs": more}}
        return [Finding(
            "under_training", "under-training",
            f"the chosen run ({name}) was still improving when it stopped: its best epoch is its last ({best_epoch} of {run})",
            [f"val_loss still falling: {cell(v_ref)} at epoch {ref_step} → {cell(v_last)} at epoch {last_step} ({_pct(-fell)})"],
            f"train longer: epochs={more}" + (" (added to the epochs grid)" if "epochs" in s.keys else ""),
            f"epochs_run={run}", **change)]
    return []


def _seeds(values: Iterable[str], count: int) -> str:
    """``count`` seeds: those given, then the next ones."""
    have = sorted({int(float(v)) for v in values})
    extra = [have[-1] + i for i in range(1, count - len(have) + 1)]
    return ",".join(str(v) for v in have + extra)


def noise(s: Sweep) -> list[Finding]:
    """Mean ± std per configuration over seeds and whether the best beats the runner-up; or that there
    is no noise estimate, and the seeds to add."""
    if not s.finished:
        return []
    if not s.seeded:
        seeds = s.tried("seed") or ["0"]
        new = _seeds(seeds, 3)
        ranked = s.finished[:2]
        gap = (f"; the best ({ranked[0]['run']}, {cell(s.value(ranked[0]))}) and the runner-up ({ranked[1]['run']}, "
               f"{cell(s.value(ranked[1]))}) differ by {cell(abs(s.value(ranked[0]) - s.value(ranked[1])))}") if len(ranked) > 1 else ""
        return [Finding(
            "noise", "noise and significance",
            f"the ranking has no noise estimate: every configuration ran with one seed (seed={','.join(seeds)})",
            [f"the seed draws the weights and the train/validation split, so seed-to-seed variation is unknown{gap}"],
            f"add seeds: seed={new} (seed {seeds[0]} is reused)", "none", set={"seed": new})]
    ranked = sorted((c for c in s.configs if s.mean(c)), key=lambda c: s.mean(c)[0] if s.lower else -s.mean(c)[0])
    evidence = []
    for c in ranked[:5]:
        v = s.scores[c]
        sd = f" ± {cell(statistics.stdev(v))}" if len(v) > 1 else ""
        evidence.append(f"{_label(c)}: {s.metric} {cell(statistics.fmean(v))}{sd} (n={len(v)})")
    if len(ranked) < 2:
        return [Finding("noise", "noise and significance", "one configuration: nothing to compare it with",
                        evidence, "sweep another key", "single")]
    first, second = ranked[:2]
    p, how = _p_value(s, first, second)
    a, b = statistics.fmean(s.scores[first]), statistics.fmean(s.scores[second])
    evidence.append(f"best against runner-up: difference {cell(abs(a - b))}, {how}")
    if s.config(s.best) != first:
        evidence.append(f"the leaderboard's best single run ({s.best['run']}) is not of the best configuration on average")
    if p is not None and p < ALPHA:
        return [Finding("noise", "noise and significance",
                        f"the best ({_label(first)}) is distinguishable from the runner-up ({_label(second)}): p={p:.2g}",
                        evidence, f"keep {_label(first)}", "distinct")]
    new = _seeds(s.tried("seed"), 2 * len(s.tried("seed")))
    return [Finding("noise", "noise and significance",
                    f"the best ({_label(first)}) and the runner-up ({_label(second)}) overlap: not distinguishable "
                    + (f"(p={p:.2g} ≥ {ALPHA})" if p is not None else "(too few seeds for a test)"),
                    evidence, f"add seeds: seed={new}, or treat them as equivalent (prefer the cheaper)", "overlap",
                    set={"seed": new})]


def _p_value(s: Sweep, first: tuple, second: tuple) -> tuple[float | None, str]:
    """A two-sided t-test of the two configurations' scores: paired by seed (same split and initial
    weights) when they share at least two seeds, else Welch's."""
    from scipy import stats

    by_seed = [{r["params"].get("seed"): s.value(r) for r in s.configs[c] if id(r) in s._done} for c in (first, second)]
    common = sorted(set(by_seed[0]) & set(by_seed[1]))
    if len(common) >= 2:
        diffs = [by_seed[0][k] - by_seed[1][k] for k in common]
        if statistics.pstdev(diffs) == 0:
            p = 0.0 if diffs[0] else 1.0
        else:
            p = float(stats.ttest_rel([by_seed[0][k] for k in common], [by_seed[1][k] for k in common]).pvalue)
        return p, f"paired t-test over {len(common)} seeds: p={p:.2g}"
    a, b = s.scores[first], s.scores[second]
    if len(a) < 2 or len(b) < 2:
        return None, "too few seeds for a test"
    p = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
    return (p if math.isfinite(p) else 1.0), f"Welch t-test: p={p:.2g}"


def ties(s: Sweep) -> list[Finding]:
    """Runs that tie with the best on the primary metric, and how the leaderboard ordered them."""
    if len(s.finished) < 2:
        return []
    top = s.value(s.finished[0])
    tied = [r for r in s.finished if abs(s.value(r) - top) <= 1e-12 * max(1.0, abs(top))]
    if len(tied) < 2:
        return []
    second = "val_log_loss" if s.task == "binary" else "val_mae"
    values = [_number(r["metrics"].get(second)) for r in tied]
    order = [r["run_id"] for r in tied]
    evidence = [f"{len(tied)} runs at {s.metric}={cell(top)}: "
                + ", ".join(f"{r['run']} ({second}={cell(v)})" if v is not None else r["run"] for r, v in zip(tied, values))]
    have = None not in values
    if have and order == [r["run_id"] for _, r in sorted(zip(values, tied), key=lambda p: p[0])] and len(set(values)) > 1:
        how = f"by {second} (lower first)"
    elif order == [r["run_id"] for r in sorted(tied, key=lambda r: r["run"] or "")]:
        how = "by run name, which says nothing about the models"
    else:
        how = "in the leaderboard's order"
    if have and len(set(values)) == 1:
        step = f"the tied runs have the same {second} too: the same model in effect; any of them (prefer the cheapest)"
    elif have and not how.startswith("by val"):
        pick = tied[min(range(len(tied)), key=lambda i: values[i])]
        step = f"prefer {pick['run']}: the lowest {second} of the tied runs"
    else:
        step = "the tie-break is a finer metric, not a better score"
    if not s.seeded and not (have and len(set(values)) == 1):
        step += "; seeds (see noise) would tell whether the tie is real"
    return [Finding("ties", "ties", f"{len(tied)} runs tie with the best on {s.metric}; the leaderboard ordered them {how}",
                    evidence, step, str(len(tied)))]


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
    from sweeper.sweep import resume_command  # drops any resume=, appends resume=true, quotes as a shell needs

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
    from sweeper.sweep import BASIC_SWEEPER

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sweeper.advise", description=__doc__.splitlines()[0])
    ap.add_argument("--experiment", help="advise on the latest sweep of this experiment")
    ap.add_argument("--parent", help="advise on the sweep with this parent run id (of --experiment, if given too)")
    ap.add_argument("--tracking-uri", help="default: the embedded store, mlruns/mlflow.db in the repository")
    args = ap.parse_args(argv)
    if not (args.experiment or args.parent):
        ap.error("one of --experiment or --parent is required")
    from sweeper import report, tracking  # MLflow: after the arguments, so --help and a usage error stay fast

    uri = args.tracking_uri or tracking.DEFAULT_URI
    c = tracking.client(uri)
    try:
        if args.parent:
            parent = c.get_run(args.parent)
            if args.experiment and tracking.named_experiment(c, args.experiment, uri).experiment_id \
                    != parent.info.experiment_id:
                raise tracking.TrackingError(f"--parent={args.parent} is not a run of --experiment={args.experiment}")
        else:
            parent = report.latest_parent(c, args.experiment, uri)
    except Exception as e:
        print(f"sweeper: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    runs = report.children(c, parent)
    print(f"Sweep {parent.info.run_name} (parent run {parent.info.run_id})")
    publish(c, parent, runs, [row["run_id"] for row in report.build(runs).rows])
    return 0


if __name__ == "__main__":
    from sweeper import main_exit

    main_exit(main)
