"""Pruning: stopping a sweep's losing configurations early, at rungs, so it pays only for the
survivors. Its one strategy is successive halving inside the batched launcher
(``hydra.launcher.halving.eta=3``; off by default); this module is the one that knows it: the others
ask :func:`strategy` (the launch), :func:`check` (the plan), :func:`resume_rule` (``resume=true``)
and :func:`parent_record` (publishing) with the launcher or its config, and know a pruned run only
by its tag ``pruned_at_epoch``.

Rungs sit at ``min_epochs · eta^k`` epochs below the sweep's largest ``epochs``. At each rung every
configuration still running is trained to the rung in batched groups (of the survivors only),
scored on its validation split, and those outside the best ``1/eta`` (by the primary validation
metric, a configuration's seeds averaged and stopped together) stop there: their run is FINISHED at
the rung (tag ``pruned_at_epoch``, ``epochs_run`` the rung, metrics of its weights at the rung). A
configuration whose ``epochs`` is at or below a rung is complete there, as without halving.

Synchronous across the sweep's groups (every group trains to a rung before any is ranked), not
ASHA's asynchronous rule: the batched launcher has every configuration in hand at once, so each
rung ranks all of them, and a decision never depends on the order groups happen to train in.
Training is deterministic, so a survivor's next rung retrains it from its seed to the new rung
— exactly the state continuing would reach — in a group of survivors only: an epoch costs only
the configurations still running, and the prefix is paid again (``Σ_k n_k·r_k`` member-epochs,
against ``n·E`` for the full grid: with η = 3 and four rungs ~4/27).
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from sweeper.base.files import read_json
from sweeper.base.tags import PRUNED_AT
from sweeper.contract.config import ConfigError
from sweeper.job import metrics
from sweeper.job.compute import scored_on

__all__ = ["Halving", "check", "parent_record", "resume_rule", "rung", "run", "strategy"]

log = logging.getLogger("sweeper")

DEFAULT_RUNGS = 3  # rungs below the largest epochs when min_epochs is not given
# tag of a run stopped at a rung: the settings it was stopped under (:func:`setting`), beside
# PRUNED_AT (the rung) and the tag ``halving`` (eta and the rungs)
SETTINGS_TAG = "halving_settings"


def setting(settings: Any) -> str | None:
    """The launcher's ``halving`` settings (a mapping) as a pruned run's tag records them; None when
    halving is off. ``resume=true`` takes a pruned run as finished only under the same settings."""
    if not settings or settings.get("eta") in (None, 0):
        return None
    return f"eta={int(settings['eta'])} min_epochs={settings.get('min_epochs') or 'auto'}"


def _settings(launcher: Any) -> Any:
    """The launcher's ``halving`` settings: ``launcher`` is its config (``hydra.launcher``, a
    mapping; empty or None outside a Hydra run) or the launcher itself (its attribute)."""
    if isinstance(launcher, Mapping):
        return launcher.get("halving")
    return getattr(launcher, "halving", None)


def strategy(launcher: Any) -> "Halving | None":
    """The launcher's strategy of stopping runs early (``launcher``: its config or the launcher,
    as :func:`_settings` reads them): successive halving (a :class:`Halving`), or None (off)."""
    return Halving.of(_settings(launcher))


def resume_rule(launcher: Any) -> Callable[[dict[str, str]], str | None]:
    """How ``resume=true`` takes a FINISHED run stopped at a rung (its tag ``pruned_at_epoch``)
    under the launcher's strategy (``launcher`` as :func:`strategy` takes it), as
    :func:`sweeper.tracking.finished_run` asks it of the run's tags: None when it counts as
    finished (stopped under the same settings), else why its configuration trains again."""
    now = setting(_settings(launcher))

    def passed_over(tags: dict[str, str]) -> str | None:
        if now is not None and tags.get(SETTINGS_TAG) == now:
            return None
        return (
            f"stopped at epoch {tags[PRUNED_AT]} under halving "
            f"({tags.get(SETTINGS_TAG, 'settings not recorded')}), and this sweep's halving is "
            f"{now or 'off'}: the configuration trains again"
        )

    return passed_over


@dataclass(frozen=True)
class Halving:
    eta: int
    min_epochs: int | None = None

    @classmethod
    def of(cls, settings: Any) -> "Halving | None":
        """The launcher's ``halving`` settings (a mapping; ``eta``
        null or absent: off, as :func:`setting` says)."""
        if setting(settings) is None:
            return None
        return cls(
            int(settings["eta"]),
            None if settings.get("min_epochs") is None else int(settings["min_epochs"]),
        )

    @property
    def setting(self) -> str:
        """These settings as a pruned run's tag records them (:func:`setting`)."""
        return setting({"eta": self.eta, "min_epochs": self.min_epochs})

    def rungs(self, max_epochs: int, log_every: int) -> list[int]:
        """The rungs below ``max_epochs``: ``min_epochs · eta^k``; by default the first is
        ``max_epochs / eta^3`` rounded down to a multiple of ``log_every``, at least
        ``2 · log_every`` (a rung's run then samples its loss more than once: at ``log_every``
        itself it would be sampled once, and the trainer says so in a warning each group)."""
        first = self.min_epochs or max(
            2 * log_every, int(max_epochs / self.eta**DEFAULT_RUNGS) // log_every * log_every
        )
        # eta >= 2 and first >= 1: rung k lies at 2^k or above, so max_epochs' bit length bounds
        # the count (a counted loop: a wrong step gives wrong rungs, never a loop without end)
        return [
            r
            for k in range(int(max_epochs).bit_length())
            if (r := first * self.eta**k) < max_epochs
        ]


def check(launcher: Any, plains: list[dict[str, Any]]) -> None:
    """The launcher's strategy (``launcher`` as :func:`strategy` takes it) checked against the
    sweep's configurations, before any store. Halving settings that would do nothing: ConfigError
    when no rung
    lies below the sweep's largest ``epochs`` (``min_epochs`` at or above it); said in a
    line when one configuration is swept (nothing to rank it against). A function trainer
    is halved too: its ``report`` answers stop at a rung (:func:`_trainers_too`)."""

    halving = strategy(launcher)
    if halving is None or not plains:
        return
    key = "hydra.launcher.halving"
    top, every = max(int(p["epochs"]) for p in plains), min(int(p["log_every"]) for p in plains)
    if not halving.rungs(top, every) and halving.min_epochs is not None:
        raise ConfigError(
            f"{key}.min_epochs={halving.min_epochs} is not allowed: expected below the sweep's "
            "largest "
            f"epochs ({top}), where the first rung must lie; lower it, or drop {key}"
        )
    if not halving.rungs(top, every):
        raise ConfigError(
            f"{key}.eta={halving.eta} is not allowed here: its first rung (at least 2 x "
            "log_every = "
            f"{2 * every} epochs) is not below the sweep's largest epochs ({top}), so no run "
            "would stop "
            f"early; raise epochs, lower log_every or set {key}.min_epochs, or drop {key}"
        )
    if len({_config_key(p) for p in plains}) < 2:
        log.warning(
            "halving: one configuration is swept, so there is none to rank it against at a rung: "
            "it trains its "
            "full epochs (%s=... does nothing here)",
            key,
        )


def _capped(job: Any, epochs: int) -> Any:
    # lazy: saves ~19 ms at this module's import (measured)
    from sweeper.sweep.groups import Job

    return Job(
        job.idx,
        job.overrides,
        job.config,
        {**job.plain, "epochs": min(job.plain["epochs"], epochs)},
    )


def _config_key(plain: dict[str, Any]) -> str:
    """A configuration without its seeds: the seeds of one
    configuration are ranked (averaged) and stop together."""
    config = {k: v for k, v in plain.items() if k not in ("seed", "tracking")}
    config["data"] = {k: v for k, v in plain["data"].items() if k != "split_seed"}
    return json.dumps(config, sort_keys=True, default=str)


def _score(computed: Any, job: Any) -> float:
    """The primary validation metric, as a loss (lower is better); a failed member is the worst."""
    out = computed.outcome
    task = scored_on(job.plain["data"]).task
    name, lower = metrics.PRIMARY[task]
    v = out.scores.get(f"val_{name}")
    if out.reason is not None or v is None or not math.isfinite(v):
        return math.inf
    return v if lower else -v


def run(
    groups: list[list[Any]],
    halving: Halving,
    compute: Callable[[list[list[Any]]], dict[int, Any]],
    regroup: Callable[[list[Any]], list[list[Any]]],
    sweep_dir: Path,
) -> dict[int, Any]:
    """Train ``groups`` rung by rung; ``{job idx: Computed}`` with each job's final outcome
    (complete, or pruned at a rung: tags ``pruned_at_epoch``). ``compute(groups)`` trains a
    rung's groups (``{job idx: Computed}``; a group that failed as a whole is missing);
    ``regroup(jobs)`` plans the survivors into groups (of their capped configs)."""
    jobs = [j for g in groups for j in g]
    compute = _trainers_too(compute, jobs)
    E = max(j.plain["epochs"] for j in jobs)
    rungs = halving.rungs(E, min(j.plain["log_every"] for j in jobs))
    final: dict[int, Any] = {}
    active, spent, counts, seconds = list(jobs), 0, [], 0.0
    full = sum(_trajectory_epochs(g) for g in groups)
    for r in [
        *rungs,
        E,
    ]:  # active is never empty here: a rung that leaves none going on ends the loop below
        capped = [_capped(j, r) for j in active]
        rung_groups = regroup(capped)
        spent += sum(map(_trajectory_epochs, rung_groups))
        t0 = time.perf_counter()
        got = compute(rung_groups)
        seconds += time.perf_counter() - t0
        missing = [j for j in active if j.idx not in got]
        # a group that failed as a whole: its jobs train alone, in full, through the one-job path
        for j in missing:
            active.remove(j)
        done = [j for j in active if j.plain["epochs"] <= r]
        for j in done:
            final[j.idx] = got[j.idx]
        going = [j for j in active if j.plain["epochs"] > r]
        if r == E or not going:
            break
        by_config: dict[str, list[Any]] = {}
        for j in going:
            by_config.setdefault(_config_key(j.plain), []).append(j)
        ranked = sorted(
            by_config.values(), key=lambda js: sum(_score(got[j.idx], j) for j in js) / len(js)
        )
        keep = math.ceil(len(ranked) / halving.eta)
        for js in ranked[keep:]:
            for j in js:
                c = got[j.idx]
                c.tags = {
                    **c.tags,
                    PRUNED_AT: str(r),
                    "halving": f"eta={halving.eta} rungs={','.join(map(str, rungs))}",
                    SETTINGS_TAG: halving.setting,
                }
                final[j.idx] = c
        counts.append(
            {
                "rung": r,
                "reached": len(ranked),
                "kept": min(keep, len(ranked)),
                "pruned": len(ranked) - min(keep, len(ranked)),
            }
        )
        log.info(
            "halving: rung %d epochs: %d configurations reached it, %d go on, %d stop there",
            r,
            len(ranked),
            min(keep, len(ranked)),
            len(ranked) - min(keep, len(ranked)),
        )
        active = [j for js in ranked[:keep] for j in js]
    summary = {
        "eta": halving.eta,
        "rungs": rungs,
        "per_rung": counts,
        "member_epochs": spent,
        "full_grid_member_epochs": full,
        "compute_s": round(seconds, 3),
    }
    log.info(
        "halving: %d member-epochs trained of the full grid's %d (%.0f%%), in %.1f s",
        spent,
        full,
        100 * spent / max(full, 1),
        seconds,
    )
    (sweep_dir / "halving.json").write_text(json.dumps(summary))
    return final


def parent_record(parent: Any, runs: list[Any]) -> tuple[dict[str, float], dict[str, str]]:
    """What successive halving did, as the sweep's parent run records it (metrics, tags;
    :func:`sweeper.insight.publish.publish` asks): ``n_pruned`` (runs stopped at a rung, from their
    ``pruned_at_epoch`` tags) and, from the sweep folder's halving.json (:func:`run`), the
    member-epochs trained against the full grid's and each rung's counts. Nothing for a sweep
    without halving."""
    pruned = sum(1 for r in runs if r.data.tags.get(PRUNED_AT))
    where = parent.data.tags.get("sweep_dir")
    # no halving, or a file that is gone or cut short: None
    summary = read_json(Path(where) / "halving.json") if where else None
    if not pruned and summary is None:
        return {}, {}
    metrics: dict[str, float] = {"n_pruned": float(pruned)}
    tags = {"n_pruned": str(pruned)}
    if summary is not None:
        metrics |= {
            "halving_member_epochs": float(summary["member_epochs"]),
            "halving_full_grid_member_epochs": float(summary["full_grid_member_epochs"]),
        }
        tags |= {
            "halving": f"eta={summary['eta']} rungs={','.join(map(str, summary['rungs']))}",
            "halving_per_rung": " ".join(
                f"{c['rung']}:{c['reached']}->{c['kept']}" for c in summary["per_rung"]
            ),
        }
    return metrics, tags


def _trainers_too(
    compute: Callable[[list[list[Any]]], dict[int, Any]], jobs: list[Any]
) -> Callable:
    """``compute``, with each function trainer's job (a group of one) trained
    by its own loop: ``report`` answers stop at the rung its capped job reaches
    (:func:`sweeper.job.trainer.computed`), its own ``epochs`` kept."""
    # lazy: saves ~19 ms at this module's import (measured)
    from sweeper.job import trainer
    from sweeper.sweep.groups import runs_own_loop

    full = {j.idx: j.plain for j in jobs}

    def both(groups: list[list[Any]]) -> dict[int, Any]:
        own = [g for g in groups if runs_own_loop(g[0].plain)]
        got = compute([g for g in groups if g not in own]) if len(own) < len(groups) else {}
        for j in (j for g in own for j in g):
            capped = j.plain["epochs"] < full[j.idx]["epochs"]
            c = trainer.computed(full[j.idx], rung(j.plain["epochs"]) if capped else None)
            if c is not None:
                got[j.idx] = c
        return got

    return both


def rung(epochs: int) -> tuple[int, str]:
    """A rung as a function trainer's ``report`` stops at it: its epochs, and
    the run's ``stopped_by`` tag (:class:`sweeper.job.trainer.Stop`)."""
    return epochs, f"successive halving: the rung at {epochs} epochs"


def _trajectory_epochs(members: list[Any]) -> int:
    """Member-epochs a group trains: each trajectory to its longest configuration."""
    # lazy: saves ~19 ms at this module's import (measured)
    from sweeper.sweep.groups import trajectories

    return sum(max(j.plain["epochs"] for j in t) for t in trajectories(members))
