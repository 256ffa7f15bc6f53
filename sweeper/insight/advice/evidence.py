"""What the advisor reads of a sweep: its runs as records, their grid (:class:`Sweep`), the
findings' form (:class:`Finding`, :class:`Advice`) and how a grid's values are extended."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable

# how every number is printed (4 significant digits) and read back (_number: finite, or None)
from sweeper.base.fmt import cell, text_cell
from sweeper.base.fmt import finite as _number
from sweeper.base.tags import PRUNED_AT
from sweeper.insight.advice import noise as _noise
from sweeper.insight.advice.noise import ALPHA, SAME, Diff, range_quantile
from sweeper.job import crossval

__all__ = [
    "Advice",
    "CURVES",
    "FLOOR",
    "Finding",
    "LATE",
    "OVERFIT_AT",
    "RISE",
    "SAME",
    "SEEDS",
    "STILL_FALLING",
    "Sweep",
    "TAG",
    "TOP",
    "extend",
    "nice",
    "record",
]

# Params that say where or how a run was made, not what it computes: never a swept key (a resumed
# sweep's leaderboard holds runs of resume=false and resume=true of one configuration).
# baselines: a run param before it became a tag; its values are one grid to the advisor.
IGNORED = ("tracking.", "pinned.", "hydra.", "resume", "sync_every_epoch", "baselines")
# Swept keys that do not change the model by design, or that the noise
# finding handles (seed; data.split_seed is left out as a dotted key).
NOT_HYPERPARAMETERS = ("seed", "device", "log_every")
SEEDS = ("seed", "data.split_seed")  # noise, not a configuration: the initial weights; the split
LOG_SPACED = ("lr",)  # extended by the grid's ratio whatever its values
STEPPED = ("depth",)  # extended by the grid's step
MAX_RATIO = 10.0  # a log-spaced extension steps by at most a decade
FLOOR = 1e-3  # a loss below this is at its floor: its relative changes are not evidence
TOP = 3  # the configurations whose curves the training findings read
OVERFIT_AT = 0.5  # overfitting: the best epoch is in the first half of the run ...
# ... the validation loss ended > 1% above its minimum, the training
# loss > 1% below where it was then
RISE = 0.01
LATE = 0.9  # under-training: the best epoch is in the last 10% of the run ...
STILL_FALLING = 0.005  # ... and the validation loss fell > 0.5% over the last quarter of the run
CURVES = ("train_loss", "val_loss")
Bounds = tuple  # (integer: bool | None, lowest: float | None, strict: bool): Sweep.bounds
TAG = "advice."


@dataclass
class Finding:
    """One finding: what it is, the numbers behind it, what to do; and
    how the next command changes."""

    # saturation | noise | ties | divergence | rising_loss |
    # overfitting | under_training | no_effect | edge
    kind: str
    title: str
    summary: str
    evidence: list[str]
    step: str
    tag: str  # the value of the parent's advice.<kind> tag
    add: dict[str, list[str]] = field(default_factory=dict)  # values to add to a key's grid
    drop: dict[str, list[str]] = field(default_factory=dict)  # values to take out of it
    set: dict[str, str] = field(default_factory=dict)  # a key's new value (or comma list)
    # values of a key left out in one slice only: ({other key: value},
    # [lr values]) — the next command splits there
    drop_where: list[tuple[dict[str, str], list[str]]] = field(default_factory=list)
    # a narrower change to try when ``set`` does not fit the budget:
    # e.g. seeds for the best two configurations only
    narrow: dict[str, str] = field(default_factory=dict)
    # with ``narrow``: the two configurations' own values of the keys
    # they differ in (more than one key: two commands)
    pair: list[dict[str, str]] = field(default_factory=list)


@dataclass
class Advice:
    findings: list[Finding]
    command: str | None
    metric: str  # e.g. "val_mse"
    sizes: tuple[int, int] = (
        0,
        0,
    )  # the next command's configurations, and how many of them FINISHED already
    # why there is no command, or the budget per round and what the command left out for it
    note: str = ""
    # what the findings stand on that weakens them (said first)
    caveats: list[str] = field(default_factory=list)
    budget: int = 0  # the most new runs the command may train (a round's budget)
    # why several commands, when they are
    split: str = "the grid without the values left out in some slices only"
    noise: str = ""  # the one noise model every finding uses, said once at the top

    @property
    def commands(self) -> list[str]:
        """The next command, or several when a divergence left values out in some slices only."""
        return self.command.split(" && ") if self.command else []

    def text(self, markdown: bool = False) -> str:
        n = len(self.findings)
        head = (
            f"{n} finding{'s' * (n != 1)}, from validation metrics only (the test split is "
            "reported, never used to choose)"
        )
        lines = ["# Sweep advice", "", head + "."] if markdown else [f"Advice: {head}:"]
        if self.noise:
            lines += ["", f"*{self.noise}*"] if markdown else [f"  {self.noise}"]
        lines += [f"**Caveat:** {c}" if markdown else f"  caveat: {c}" for c in self.caveats]
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
            what = (
                f"Next command ({total} configuration{'s' * (total != 1)}: {done} finished "
                "already, reused; "
                f"{total - done} to train)"
            )
            if len(self.commands) > 1:
                what += f", in {len(self.commands)} commands: {self.split}"
            body = "\n".join(self.commands)
            lines += (
                ["", f"## {what}", "", "```bash", body, "```"]
                if markdown
                else [f"{what}:", *(f"  {c}" for c in self.commands)]
            )
            if self.note:
                lines += ["", self.note] if markdown else [f"  ({self.note})"]
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
            tags[f"{TAG}next_configs"], tags[f"{TAG}next_to_train"] = (
                str(self.sizes[0]),
                str(self.sizes[0] - self.sizes[1]),
            )
            tags[f"{TAG}next_budget"] = str(self.budget)
        return tags


def record(run: Any) -> dict[str, Any]:
    """What the advisor reads of an MLflow run."""
    return {
        "run": run.info.run_name,
        "run_id": run.info.run_id,
        "status": run.info.status,
        "reason": run.data.tags.get("failure_reason"),
        "params": dict(run.data.params),
        "metrics": dict(run.data.metrics),
        "parent": run.data.tags.get("mlflow.parentRunId"),
        "pruned_at": run.data.tags.get(PRUNED_AT),
        # which model trained it: a function trainer (its own loop), a
        # class of yours (its gradient check)
        "model_kind": run.data.tags.get("model_kind"),
        "gradient_check": run.data.tags.get("gradient_check"),
    }


def _pct(x: float) -> str:
    return f"{'-' if x < 0 else '+'}{cell(abs(100 * x))}%"


def nice(x: float) -> float:
    """``x`` to one significant figure when that is within 15% of it,
    else to two (0.0316 → 0.03)."""
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

    def __init__(
        self,
        records: list[dict[str, Any]],
        curves: dict[str, dict[str, list[tuple[int, float]]]] | None = None,
    ):
        # lazy: saves ~72 ms at this module's import (measured)
        from sweeper.job.metrics import PRIMARY

        # a run killed before its end has no params
        self.records = [r for r in records if r["params"]]
        task = (
            "binary" if any("val_accuracy" in r["metrics"] for r in self.records) else "regression"
        )
        name, self.lower = PRIMARY[task]
        self.task, self.metric = task, f"val_{name}"
        names = sorted({k for r in self.records for k in r["params"] if not k.startswith(IGNORED)})
        self.keys = [k for k in names if len({r["params"].get(k) for r in self.records}) > 1]
        # a model of the interface's own hyperparameters
        # (model.<name>) are hyperparameters as the MLP's keys are
        self.hyper = [
            k
            for k in self.keys
            if ("." not in k or k.startswith("model."))
            and k != "model._target_"
            and k not in NOT_HYPERPARAMETERS
        ]
        # a run successive halving stopped at a rung is evidence of
        # its rung only: no finding rests on it
        self.finished = [
            r
            for r in self.records
            if r["status"] == "FINISHED" and self.value(r) is not None and not r.get("pruned_at")
        ]
        self.best = self.finished[0] if self.finished else None
        self._done = {id(r) for r in self.finished}
        self._tried: dict[str, list[str]] = {}
        self.configs: dict[tuple, list[dict[str, Any]]] = {}
        for r in self.records:
            self.configs.setdefault(self.config(r), []).append(r)
        # a binary task's accuracy moves in steps of one validation row: a key that
        # did not move it may still have changed the model, which its log loss shows
        self.measures = (self.metric, "val_log_loss") if task == "binary" else (self.metric,)
        self.seeded = any(k in self.keys for k in SEEDS)
        # a model that draws nothing from seed (a closed form, a
        # function trainer of its own): seed is no noise there
        self.deterministic = self._same_for_every_seed()
        if self.deterministic and "data.split_seed" not in self.keys:
            self.seeded = False
        # cross-validated runs without seeds (data.folds=k, one split seed:
        # the same folds for every configuration): the noise is the folds' (a
        # configuration × fold residual), measured, not the stated default
        self.folded = not self.seeded and len(self.fold_scores(self.best)) >= 2
        self.curves = curves or {}  # run id → {"train_loss": [(epoch, value)], "val_loss": [...]}
        self.stats = {m: self._stats(m) for m in self.measures}
        self.scores = self.stats[self.metric]
        # the runs this sweep trained (a resumed sweep's reused runs are another round's)
        # and each configuration's FAILED runs (a diverged seed counts against it)
        self.trained = sum(not r.get("reused") for r in self.records)
        self.failed = {
            c: sum(r["status"] == "FAILED" for r in rs) for c, rs in self.configs.items()
        }
        self._ranked: list[tuple] | None = None  # ranked()'s, once asked

    def _same_for_every_seed(self) -> bool:
        """Whether ``seed`` was swept and every configuration (on each
        split) scored the same, to 1e-9, on every measure for every
        seed it finished: the model is deterministic in ``seed``."""
        if "seed" not in self.keys:
            return False
        by: dict[tuple, list[dict[str, Any]]] = {}
        for r in self.finished:
            by.setdefault((self.config(r), r["params"].get("data.split_seed")), []).append(r)
        repeated = [rs for rs in by.values() if len({r["params"].get("seed") for r in rs}) > 1]
        return bool(repeated) and all(
            max(vs) - min(vs) <= 1e-9 * max(1.0, max(abs(v) for v in vs))
            for rs in repeated
            for m in self.measures
            if len(vs := [v for r in rs if (v := _number(r["metrics"].get(m))) is not None]) > 1
        )

    def _stats(self, metric: str) -> dict[tuple, list[float]]:
        """Each configuration's finished scores on ``metric`` (no spread pooled over the grid:
        each comparison reads its configurations' own, :mod:`sweeper.insight.advice.noise`)."""
        return {
            c: [
                v
                for r in rs
                if id(r) in self._done and (v := _number(r["metrics"].get(metric))) is not None
            ]
            for c, rs in self.configs.items()
        }

    def samples(self, config: tuple, metric: str | None = None) -> tuple[dict[Any, float], str]:
        """A configuration's own scores by unit, and the unit: by seed
        (``seed``, ``data.split_seed``), or without seeds when cross-validated
        by fold (its lead run's ``val_<metric>_fold<i>``); a model deterministic
        in seed has one score a configuration (its lead run's)."""
        metric = metric or self.metric
        if self.folded and (by_fold := self.fold_scores(self.lead(config), metric)):
            return dict(enumerate(by_fold)), crossval.UNIT
        # its seeds repeat one score: one score, not a spread of 0
        if self.deterministic and not self.seeded:
            lead = self.lead(config)
            v = _number(lead["metrics"].get(metric)) if lead else None
            return (
                {tuple(lead["params"].get(k) for k in SEEDS): v} if v is not None else {}
            ), "seeds"
        return (
            {
                tuple(r["params"].get(k) for k in SEEDS): v
                for r in self.configs.get(config, [])
                if id(r) in self._done and (v := _number(r["metrics"].get(metric))) is not None
            },
            "seeds",
        )

    def between(self, a: tuple, b: tuple, metric: str | None = None) -> Diff:
        """Configuration ``a`` against ``b`` by their own seeds or folds (paired where shared)."""
        (sa, unit), (sb, _) = self.samples(a, metric), self.samples(b, metric)
        return _noise.between(sa, sb, unit)

    def against(self, a: tuple, value: float, metric: str | None = None) -> Diff:
        """Configuration ``a`` against a constant (a baseline) by its own seeds or folds."""
        sa, unit = self.samples(a, metric)
        return _noise.against(list(sa.values()), value, unit)

    def fold_scores(self, r: dict[str, Any] | None, metric: str | None = None) -> list[float]:
        """A cross-validated run's per-fold scores (:func:`sweeper.job.crossval.scores`,
        data.folds=k) in fold order; [] otherwise."""
        return crossval.scores(r["metrics"], metric or self.metric) if r is not None else []

    def fold_noise(
        self, configs: Iterable[tuple], metric: str | None = None
    ) -> tuple[float, int] | None:
        """The noise of a fold mean among ``configs`` and its degrees of
        freedom; None with fewer than two configurations of k folds each.

        Every configuration is scored on the same k folds, and a fold's difficulty is shared
        by all of them, so the noise is what is left of the scores once each configuration's
        mean and each fold's are taken out (the residual of the additive configuration ×
        fold model, (n-1)(k-1) degrees of freedom): a paired comparison, as the noise
        finding's t-test is. A fold mean's std is that residual std over sqrt(k)."""
        # each of at least two folds (crossval.scores); those of another k than the first's left out
        rows = [v for c in configs if (v := self.fold_scores(self.lead(c), metric))]
        rows = [v for v in rows if len(v) == len(rows[0])]
        if len(rows) < 2:
            return None
        n, k = len(rows), len(rows[0])
        grand = statistics.fmean(x for v in rows for x in v)
        by_row = [statistics.fmean(v) for v in rows]
        by_fold = [statistics.fmean(v[j] for v in rows) for j in range(k)]
        ss = sum(
            (v[j] - by_row[i] - by_fold[j] + grand) ** 2
            for i, v in enumerate(rows)
            for j in range(k)
        )
        dof = (n - 1) * (k - 1)
        return math.sqrt(ss / dof / k), dof

    def value(self, r: dict[str, Any]) -> float | None:
        return _number(r["metrics"].get(self.metric))

    def config(self, r: dict[str, Any]) -> tuple:
        """A configuration: the swept values but the seeds (``seed``, ``data.split_seed``)."""
        return tuple((k, r["params"].get(k)) for k in self.keys if k not in SEEDS)

    def ranked(self) -> list[tuple]:
        """The configurations with a finished run, best mean first; one with a
        FAILED seed never ahead of a fully finished one whose mean is within the
        noise of its own (:func:`sweeper.insight.leaderboard.behind_finished`)."""
        if self._ranked is None:
            # lazy: saves ~92 ms at this module's import (measured)
            from sweeper.insight.leaderboard import behind_finished

            done = sorted(
                (c for c in self.configs if self.mean(c)),
                key=lambda c: self.mean(c)[0] if self.lower else -self.mean(c)[0],
            )
            if any(self.failed.get(c) for c in done):
                done = behind_finished(
                    done,
                    lambda c: bool(self.failed.get(c)),
                    lambda a, b: not self.between(a, b).beyond(),
                )
            self._ranked = done
        return list(self._ranked)

    def n_text(self, config: tuple) -> str:
        """``n`` of a configuration as the leaderboard shows it:
        finished, or finished/total and a mark."""
        n, bad = (self.mean(config) or (0.0, 0))[1], self.failed.get(config, 0)
        return f"n={n}/{n + bad} ✗ (a seed FAILED)" if bad else f"n={n}"

    def slice_noise(
        self, configs: Iterable[tuple], metric: str | None = None
    ) -> tuple[float, int] | None:
        """The seed-to-seed std pooled over ``configs`` only (a slice's own
        noise, not inflated by noisy configurations elsewhere in the grid)
        and its degrees of freedom; None without repeated seeds there."""
        if self.folded:
            return self.fold_noise(configs, metric)
        scores = self.stats[metric or self.metric]
        return _noise.pooled([scores.get(c) or [] for c in configs])

    def lead(self, config: tuple) -> dict[str, Any] | None:
        """The run that stands for a configuration: its first finished record (the
        leaderboard puts the run closest to the configuration's mean first)."""
        return next((r for r in self.configs.get(config, []) if id(r) in self._done), None)

    def curve(self, r: dict[str, Any] | None, name: str = "val_loss") -> list[tuple[int, float]]:
        return sorted((self.curves.get(r["run_id"]) or {}).get(name) or []) if r else []

    def rel_noise(self) -> float:
        """The best configuration's own noise as a fraction of its mean: the std of a score over
        its seeds (of a fold mean, over its folds), else the stated default :data:`SAME`."""
        if self.best is None:
            return SAME
        scores, unit = self.samples(self.config(self.best))
        v = list(scores.values())
        if len(v) < 2:
            return SAME
        sd = statistics.stdev(v) / (math.sqrt(len(v)) if unit == crossval.UNIT else 1.0)
        return max(sd / (abs(statistics.fmean(v)) or 1.0), 1e-6)

    def mean(self, config: tuple, metric: str | None = None) -> tuple[float, int] | None:
        """The configuration's mean validation score over its finished
        seeds, and how many; None if none finished."""
        v = self.stats[metric or self.metric].get(config) or []
        return (statistics.fmean(v), len(v)) if v else None

    def better(self, a: float, b: float) -> bool:
        return a < b if self.lower else a > b

    def same(
        self,
        a: float,
        b: float,
        na: int = 1,
        nb: int = 1,
        metric: str | None = None,
        among: int = 2,
        tests: int = 1,
        noise: tuple[float, int] | None = None,
    ) -> bool:
        """Whether the lowest and highest of ``among`` mean scores (a and b, of na and nb seeds)
        differ by no more than ``noise`` ((std, dof) of the compared configurations' own scores):
        Tukey's range test at ALPHA (split over ``tests`` such comparisons); for two means,
        a two-sided t-test. Without a noise: within SAME of each other (the stated default)."""
        if (metric or self.metric) == "val_log_loss" and max(abs(a), abs(b)) < FLOOR:
            return True  # both at the loss's floor: a relative change there is not evidence
        if noise is not None:
            std, dof = noise
            return abs(a - b) <= range_quantile(among, dof, ALPHA / tests) * std * math.sqrt(
                (1 / na + 1 / nb) / 2
            )
        return abs(a - b) <= SAME * max(abs(a), abs(b)) + 1e-12

    @property
    def noise_text(self) -> str:
        """The one noise model every finding uses, in one line (said
        once, at the top of the advice)."""
        if self.deterministic and not self.seeded:
            return _noise.model_text(
                None,
                f"the model is deterministic in seed (every configuration scored the same for "
                f"seed={','.join(self.tried('seed'))}): the noise left is the split's, "
                "data.split_seed=0,1,2 measures it",
            )
        return _noise.model_text(crossval.UNIT if self.folded else "seeds" if self.seeded else None)

    def tried(self, key: str) -> list[str]:
        """The values of ``key`` the sweep tried (every run, failed ones
        too), as its params show them, in order (a new list each call:
        the records never change, so it is worked out once a key)."""
        if key not in self._tried:
            values = {r["params"][key] for r in self.records if key in r["params"]}
            self._tried[key] = sorted(
                values, key=lambda v: (_number(v) is None, _number(v) or 0.0, v)
            )
        return list(self._tried[key])

    def bounds(self, key: str) -> "Bounds | None":
        """What a new value of a model's own hyperparameter (``model.<name>``) must respect:
        its type and lower bound as the model's constructor declares them
        (:func:`sweeper.models.interface.domain`); without a declared bound, a grid of
        positive values stays positive and one of positive integers at 1 or more (an integer
        hidden size never goes to 0). None for sweeper's keys (their rules decide)."""
        if not key.startswith("model.") or key == "model._target_":
            return None
        # lazy: saves ~89 ms at this module's import (measured)
        from sweeper.models.interface import domain, loaded

        kind, low, strict = None, None, False
        path = next(
            (
                r["params"].get("model._target_")
                for r in self.records
                if r["params"].get("model._target_")
            ),
            None,
        )
        # (not importable here: the values say what they can)
        if path and (found := loaded(path))[1] is None:
            kind, low, strict = domain(found[0], key.removeprefix("model."))
        nums = [n for v in self.tried(key) if (n := _number(v)) is not None]
        integer = (kind is int) if kind in (int, float) else None
        if low is None and nums and min(nums) > 0:
            whole = integer if integer is not None else all(n.is_integer() for n in nums)
            low, strict = (1.0, False) if whole else (0.0, True)
        return integer, low, strict

    def param(self, r: dict[str, Any], key: str, default: float = 0.0) -> float:
        v = _number(r["params"].get(key))
        return default if v is None else v


def _label(config: Iterable[tuple[str, Any]]) -> str:
    return ",".join(f"{k}={text_cell(v)}" for k, v in config) or "all runs"


def _format(key: str, x: float, integer: bool, bounds: "Bounds | None" = None) -> str | None:
    """A new value of ``key`` as an override writes it, or None if the key does not allow it
    (its rule, or the ``bounds`` its model declares; a key with neither stays positive)."""
    # lazy: saves ~58 ms at this module's import (measured)
    from sweeper.contract.config import TOP_LEVEL

    value: int | float = int(round(x)) if integer else nice(x)
    rule = TOP_LEVEL.get(key)
    low, strict = bounds[1:] if bounds else (None, False)
    if rule is None and low is None:
        low, strict = 0.0, True
    if (rule is not None and not rule.check(value)) or (
        low is not None and (value <= low if strict else value < low)
    ):
        return None
    return str(value) if integer else repr(float(value))


def extend(
    key: str, values: list[str], up: bool, count: int = 2, bounds: "Bounds | None" = None
) -> tuple[list[str], str]:
    """``count`` new values of a numeric key beyond the grid's edge, spaced like the grid: by its
    mean ratio (at most a decade) when log-spaced (always for lr), else by its mean step; and that
    spacing in words. Values the key does not allow (its rule; for a model's own hyperparameter
    the ``bounds`` its constructor declares, :meth:`Sweep.bounds`) are left out."""
    nums = sorted(float(v) for v in values)
    integer = key not in LOG_SPACED and all(
        _number(v) is not None and float(v).is_integer() and "." not in v and "e" not in v.lower()
        for v in values
    )
    if bounds is not None and bounds[0] is not None:
        integer = bounds[0]
    edge, inner = (nums[-1], nums[-2]) if up else (nums[0], nums[1])
    log = nums[0] > 0 and (
        key in LOG_SPACED or (key not in STEPPED and max(edge, inner) / min(edge, inner) >= 1.5)
    )
    ratio = min((nums[-1] / nums[0]) ** (1 / (len(nums) - 1)), MAX_RATIO) if log else 1.0
    step = (nums[-1] - nums[0]) / (len(nums) - 1)
    out: list[str] = []
    for i in range(1, count + 1):
        if log:
            x = edge * ratio**i if up else edge / ratio**i
        else:
            x = edge + i * step if up else edge - i * step
        text = _format(key, x, integer, bounds)
        if text is not None and all(float(text) != n for n in nums) and text not in out:
            out.append(text)
    return out, (f"log-spaced, ×{ratio:.3g} a step" if log else f"a step of {cell(step)}")
