"""The search's work: a study over Optuna >= 4's ask-and-tell
interface, asked ``batch`` trials per round.

Each round's trials go to the launcher in one ``launch()`` call, so the batched launcher trains
those of one shape as one group; then each trial gets its validation curve (intermediate values)
and its value, or FAIL (diverged, skipped, crashed). The direction comes from the task: the primary
validation metric of :data:`sweeper.job.metrics.PRIMARY` (``val_accuracy`` maximised, ``val_mse``
minimised). The study lives in an Optuna storage (default: ``optuna.db`` beside the MLflow store)
and is loaded when it exists, so a second command continues it and several processes can share it.

Jobs learn their trial number, study and round from ``sweep.json``
(``jobs``: tags by job number), which every job of the sweep reads anyway
(the parent run's id): new Hydra keys would change the fingerprints.
"""

from __future__ import annotations

import json
import logging
import math
import os
import warnings
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from sweeper import data, tracking
from sweeper.base.files import CURVES_FILE, RESULT_FILE, SWEEP_FILE, read_json
from sweeper.base.fmt import number, text_cell
from sweeper.base.tags import PRUNED_AT
from sweeper.contract.compose import plain
from sweeper.contract.config import ConfigError
from sweeper.job import metrics

from hydra_plugins.sweeper_batched_launcher.config import first_problem

from . import _study
from ._space import Space, parse
from ._study import one_line, open_study, quiet, report, shown, storage_url
from .config import PREFIX, OptunaSweeperConf
from hydra.core.utils import JobStatus
from hydra.errors import HydraException
from hydra.utils import instantiate
from sweeper.base import stop as ending
from sweeper.insight import plots
from sweeper.tracking import writer

__all__ = ["RESULTS_FILE", "ask", "check", "cut_short", "sampler", "sweep"]

log = logging.getLogger("sweeper")

RESULTS_FILE = "optimization_results.yaml"


def sweep(sweeper: Any, arguments: list[str]) -> dict[str, Any]:
    config = sweeper.config
    sweep_dir = Path(str(config.hydra.sweep.dir)).absolute()
    try:
        plan = prepare(sweeper, arguments)
        with quiet():
            study = open_study(plan)
    # bad input (the data a search reads for its task included): one line, exit 2
    except (ConfigError, data.DataError) as e:
        refuse(sweep_dir, str(e))
    log.info(
        "optuna: %s %s (%s) in study '%s' at %s: %d trial(s) in rounds of %d",
        plan["verb"],
        plan["metric"],
        plan["task"],
        study.study_name,
        plan["shown_storage"],
        sweeper.n_trials,
        min(sweeper.batch, sweeper.n_trials),
    )
    record_parents(sweep_dir, plan)
    space: Space = plan["space"]
    numbers: list[int] = []
    job_idx, round_no = 0, 0
    while job_idx < sweeper.n_trials:
        k = min(sweeper.batch, sweeper.n_trials - job_idx)
        trials = ask(study, space, plan, k)
        round_id = str(round_no)
        note_jobs(
            sweep_dir,
            space,
            {
                job_idx + i: {
                    "optuna.trial_number": str(t.number),
                    "optuna.study_name": study.study_name,
                    "optuna.round": round_id,
                }
                for i, t in enumerate(trials)
            },
        )
        launched = False
        try:
            returns = sweeper.launcher.launch(
                [space.overrides(t.params) for t in trials], initial_job_idx=job_idx
            )
            launched = True
        finally:
            # Ctrl-C, a launcher failed as a whole (guard: exit 2), raised on: the round's trials
            # that FINISHED are told their values (their runs are recorded), the others FAIL, not
            # RUNNING for ever
            if not launched:
                cut_short(
                    study,
                    trials,
                    [_job_folder(config, sweep_dir, job_idx + i) for i in range(k)],
                    plan["metric"],
                )
        tell(study, trials, returns, plan["metric"])
        numbers += [t.number for t in trials]
        job_idx += k
        round_no += 1
    return finish(sweep_dir, study, plan, numbers)


def ask(study: Any, space: Space, plan: dict[str, Any], k: int) -> list[Any]:
    """``k`` new trials with their values.

    The values are drawn in memory, from a copy of the study's trials (those of other
    processes included, so a constant liar sees their running ones), each of the round's
    trials seeing the ones drawn before it; the stored study then gets them (reading its
    running trials from the database for every value would cost ~4 s a round of 16). The
    sampler of each draw is seeded from (``seed``, the trial's number): a search is
    reproducible, and a continued study or a second process on it draws new values."""
    # lazy: saves ~97 ms at this module's import (measured)
    import optuna

    with quiet():
        mirror = optuna.create_study(direction=plan["direction"], sampler=plan["sampler"])
    mirror.add_trials(
        [t for t in study.get_trials(deepcopy=False) if t.state != optuna.trial.TrialState.WAITING]
    )
    trials = [study.ask() for _ in range(k)]  # numbers first: unique across processes
    chosen: dict[int, dict[str, Any]] = {}
    for trial in trials:
        if plan["seed"] is not None:
            seed = int(np.random.SeedSequence([plan["seed"], trial.number]).generate_state(1)[0])
            mirror.sampler = plan["make"](seed)
        drawn = mirror.ask()
        chosen[trial.number] = {
            name: _suggest(drawn, name, d) for name, d in space.distributions.items()
        }
    study.sampler = _Given(chosen)
    for trial in trials:
        for name, d in space.distributions.items():
            _suggest(trial, name, d)
    study.sampler = plan["sampler"]
    return trials


def _suggest(trial: Any, name: str, d: Any) -> Any:
    # lazy: saves ~97 ms at this module's import (measured)
    import optuna

    if isinstance(d, optuna.distributions.CategoricalDistribution):
        return trial.suggest_categorical(name, d.choices)
    if isinstance(d, optuna.distributions.IntDistribution):
        return trial.suggest_int(name, d.low, d.high, step=d.step, log=d.log)
    return trial.suggest_float(name, d.low, d.high, step=d.step, log=d.log)


def _given() -> type:
    # lazy: saves ~97 ms at this module's import (measured)
    import optuna

    class Given(optuna.samplers.BaseSampler):
        """Hands the stored trials the values drawn for them in memory."""

        def __init__(self, values: dict[int, dict[str, Any]]) -> None:
            self.values = values

        def infer_relative_search_space(self, study: Any, trial: Any) -> dict[str, Any]:
            return {}

        def sample_relative(
            self, study: Any, trial: Any, search_space: dict[str, Any]
        ) -> dict[str, Any]:
            return {}

        def sample_independent(self, study: Any, trial: Any, name: str, distribution: Any) -> Any:
            return self.values[trial.number][name]

    return Given


# a class made on first use: optuna is lazy
def _Given(values: dict[int, dict[str, Any]]) -> Any:  # noqa: N802
    return _given()(values)


def prepare(sweeper: Any, arguments: list[str]) -> dict[str, Any]:
    """Check the sweeper's settings and the space; find the task, its
    metric and direction, the storage, the study's name and the
    sampler. Raises :class:`ConfigError` (one line) on bad input."""
    space = _settings(sweeper, arguments)
    loader = sweeper.hydra_context.config_loader
    base = plain(loader.load_sweep_config(sweeper.config, list(space.fixed)))
    tasks = {_task(base)}
    # a search over data sets ranks one metric: their tasks must agree
    if "data" in space.distributions:
        for name in space.distributions["data"].choices:
            tasks.add(
                _task(
                    plain(loader.load_sweep_config(sweeper.config, [*space.fixed, f"data={name}"]))
                )
            )
        if len(tasks) > 1:
            raise ConfigError(
                f"hydra.sweeper.params.data={space.written['data']} is not allowed: the data sets' "
                f"tasks differ ({', '.join(sorted(tasks))}): a search optimises one metric"
            )
    (task,) = tasks
    name, lower = metrics.PRIMARY[task]
    url = storage_url(sweeper.storage, base["tracking"]["uri"])
    return {
        "space": space,
        "task": task,
        "metric": f"val_{name}",
        "direction": "minimize" if lower else "maximize",
        "verb": "minimising" if lower else "maximising",
        "storage": url,
        "shown_storage": shown(url),
        "study_name": str(sweeper.study_name or base["tracking"]["experiment"]),
        **sampler(sweeper.sampler),
    }


def _settings(settings: Any, arguments: list[str]) -> Space:
    """The search's counts checked and its space parsed (``settings``:
    the sweeper, or its config node)."""
    # n_trials, batch: what each allows is declared beside its field
    checked = [f.name for f in fields(OptunaSweeperConf) if "allowed" in f.metadata]
    line = first_problem({k: getattr(settings, k) for k in checked}, OptunaSweeperConf, PREFIX)
    if line:
        raise ConfigError(line)
    params = (
        OmegaConf.to_container(settings.params, resolve=True) if settings.params is not None else {}
    )
    return parse(params or {}, list(arguments))


def check(config: Any) -> None:
    """The search's own settings (counts, space, sampler, the storage's address),
    checked by the sweep's start (:func:`sweeper.sweep.life.start`) before any
    store or parent run is touched: a refused setting is one line, exit 2, and
    writes nothing (before, the parent run was created first and ended FAILED)."""
    settings = config.hydra.sweeper
    space = _settings(settings, list(config.hydra.overrides.task))
    sampler(settings.sampler)
    url = storage_url(settings.storage, str(OmegaConf.select(config, "tracking.uri", default="")))
    if url is not None:
        # lazy: saves ~216 ms at this module's import (measured)
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            make_url(url).get_dialect()  # a URL no installed driver reads
        # a URL it cannot parse, no such dialect or driver (NoSuchModuleError), a port no number
        except (ArgumentError, ValueError) as e:
            raise ConfigError(
                f"hydra.sweeper.storage={shown(url)} cannot be used: {one_line(e)}"
            ) from None
    if (
        url is not None
        and url.startswith("sqlite:///")
        and Path(url[len("sqlite:///") :]).is_file()
    ):
        _continued_space(
            url, str(settings.study_name or OmegaConf.select(config, "tracking.experiment")), space
        )


def _continued_space(url: str, name: str, space: Space) -> None:
    """A study this sweep continues (a SQLite file that exists) drew its keys from the same
    kinds of distribution (:func:`._study._same_space`), checked before the store is touched."""
    # lazy: saves ~97 ms at this module's import (measured)
    import optuna

    with quiet():
        try:
            study = optuna.load_study(study_name=name, storage=url)
        # no such study yet, or a file the sweep's own open will name
        except Exception:  # noqa: BLE001
            return
    _study._same_space(study, {"space": space})


def _task(plain: dict[str, Any]) -> str:
    """The task of a configuration's data (DataError, one line: :func:`sweep` refuses it)."""
    return data.load_plain(plain["data"], plain["seed"]).task


def sampler(cfg: Any) -> dict[str, Any]:
    """The sampler built from its config (``_target_`` and keyword
    arguments), and how to name it."""
    # lazy: saves ~97 ms at this module's import (measured)
    import optuna

    kwargs = (
        OmegaConf.to_container(cfg, resolve=True)
        if cfg is not None
        else {"_target_": "optuna.samplers.TPESampler"}
    )
    target = str(kwargs.pop("_target_", ""))
    text = f"{target.rsplit('.', 1)[-1]}({', '.join(f'{k}={v}' for k, v in kwargs.items())})"
    seed = kwargs.get("seed") if isinstance(kwargs.get("seed"), int) else None

    def make(seed: int | None = seed) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return instantiate(
                {"_target_": target, **kwargs, **({"seed": seed} if seed is not None else {})}
            )

    try:
        built = make()
    # an unknown class or argument, the class's own refusal: Hydra's InstantiationException
    except HydraException as e:
        cause = e.__cause__ or e
        raise ConfigError(
            f"hydra.sweeper.sampler={text} cannot be built: {one_line(cause)}"
        ) from None
    if not isinstance(built, optuna.samplers.BaseSampler):
        raise ConfigError(
            f"hydra.sweeper.sampler={text} is not allowed: expected an Optuna sampler "
            "(hydra/sweeper/sampler=tpe|random, or an optuna.samplers class as _target_)"
        )
    return {"sampler": built, "sampler_text": text, "make": make, "seed": seed}


def refuse(sweep_dir: Path, message: str) -> None:
    """Bad input found once the sweep's parent runs exist: they end
    FAILED with the reason; one line, exit 2."""

    for parent in _state(sweep_dir).get("parents", []):
        if failure := tracking.mark_ended(parent["uri"], parent["run_id"], "FAILED", message):
            log.error("parent run %s not closed: %s", parent["run_id"], failure)
    # as the sweep's own end stops them (sweeper.sweep.life.finish): each closes what it
    # can and raises nothing a closed pipe or a gone process causes (Painter.close, Writer.close)
    plots.stop()
    writer.stop()
    ending.refuse(message)


def _state(sweep_dir: Path) -> dict[str, Any]:
    path = sweep_dir / SWEEP_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def note_jobs(sweep_dir: Path, space: Space, tags: dict[int, dict[str, str]]) -> None:
    """Give the next jobs their tags (``jobs`` in sweep.json, read by
    each job) and name the swept keys (run names show them), replacing
    the file in one step (jobs in other processes may be reading it)."""
    state = _state(sweep_dir)
    state["swept"] = list(space.distributions)
    state.setdefault("jobs", {}).update({str(k): v for k, v in tags.items()})
    path = sweep_dir / SWEEP_FILE
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(state, indent=2))
    os.replace(tmp, path)


def record_parents(sweep_dir: Path, plan: dict[str, Any]) -> None:
    """The parent run(s) record the search: ``search.<key>`` (the space as written)
    and ``optuna.sampler`` as params; study, storage, direction, metric as tags."""
    # lazy: saves ~1213 ms at this module's import (measured)
    from mlflow.entities import Param, RunTag

    params = [Param(f"search.{k}", v) for k, v in plan["space"].written.items()]
    params.append(Param("optuna.sampler", plan["sampler_text"]))
    tags = {
        "optuna.study_name": plan["study_name"],
        "optuna.storage": plan["shown_storage"],
        "optuna.direction": plan["direction"],
        "optuna.metric": plan["metric"],
        "optuna.task": plan["task"],
    }
    for parent in _state(sweep_dir).get("parents", []):
        try:
            tracking.client(parent["uri"]).log_batch(
                parent["run_id"], params=params, tags=[RunTag(k, v) for k, v in tags.items()]
            )
        except tracking.UNREACHABLE as e:
            log.error(
                "the search space was not recorded on parent run %s: %s",
                parent["run_id"],
                tracking.first_line(e),
            )


def tell(study: Any, trials: list[Any], returns: list[Any], metric: str) -> None:
    """Report each trial's validation curve and tell its value; FAIL for a run without one
    (diverged, skipped, crashed: NaN). A trial that ``resume=true`` skipped because its
    configuration already FINISHED is told that run's ``metric`` (and gets its ``run_id``): the
    search learns from the work done, not a failure. A trial that successive halving stopped at
    a rung (``hydra.launcher.halving``: its run's ``pruned_at_epoch``) is told PRUNED, its
    curve up to the rung its intermediate values, as Optuna's own pruners leave a trial."""
    # lazy: saves ~97 ms at this module's import (measured)
    import optuna

    done = []
    for trial, ret in zip(trials, returns):
        value = number(ret.return_value) if ret.status == JobStatus.COMPLETED else None
        value = math.nan if value is None else value
        folder = (
            Path(str(ret.hydra_cfg.hydra.runtime.output_dir)) if ret.hydra_cfg is not None else None
        )
        done.append((trial, value, folder))
    report([(t, *_curve(f)) for t, _, f in done if f is not None], study)
    for trial, value, folder in done:
        result = _result(folder)
        if not math.isfinite(value) and result.get("resumed_from"):
            value, pruned_at = _reused_value(result, metric)
            result = {**result, "run_id": result["resumed_from"], PRUNED_AT: pruned_at}
        for key in ("run_id", "status", "reason", PRUNED_AT):
            if result.get(key):
                study._storage.set_trial_user_attr(trial._trial_id, key, str(result[key]))
        if result.get(PRUNED_AT) and math.isfinite(value):
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        elif math.isfinite(value):
            study.tell(trial, value)
        else:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)


def _reused_value(result: dict[str, Any], metric: str) -> tuple[float, str | None]:
    """``metric`` of the FINISHED run a resumed job reused (NaN when the store cannot
    say), and the rung it was pruned at (None: it trained its full epochs)."""
    try:
        uri = result["config"]["tracking"]["uri"]
        run = tracking.client(uri).get_run(result["resumed_from"])
        return float(run.data.metrics.get(metric, math.nan)), run.data.tags.get(PRUNED_AT)
    except (KeyError, TypeError, ValueError, *tracking.UNREACHABLE) as e:
        log.warning(
            "optuna: the value of reused run %s could not be read (%s): its trial is told FAILED",
            result.get("resumed_from"),
            tracking.first_line(e),
        )
        return math.nan, None


def _curve(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """The job's validation-loss curve (curves.npz: epochs and values), or nothing."""

    try:
        with np.load(folder / CURVES_FILE) as z:
            return z["val_loss_steps"], z["val_loss_values"]
    except (OSError, KeyError, ValueError):
        return np.zeros(0), np.zeros(0)


def _job_folder(config: Any, sweep_dir: Path, num: int) -> Path | None:
    """Job ``num``'s folder, when ``hydra.sweep.subdir`` is Hydra's
    default (the job's number); else None."""
    subdir = OmegaConf.to_container(config.hydra.sweep, resolve=False).get("subdir")
    return sweep_dir / str(num) if subdir == "${hydra.job.num}" else None


def cut_short(study: Any, trials: list[Any], folders: list[Path | None], metric: str) -> None:
    """A round interrupted: each trial whose job FINISHED (its result.json)
    is told its value and run, the rest FAIL. Before, all the round's
    trials were told FAIL, and a resumed search trained them again."""
    # lazy: saves ~97 ms at this module's import (measured)
    import optuna

    for trial, folder in zip(trials, folders):
        result = _result(folder)
        value = (
            result.get("metrics", {}).get(metric) if result.get("status") == "FINISHED" else None
        )
        if isinstance(value, (int, float)) and math.isfinite(value):
            if result.get("run_id"):
                study._storage.set_trial_user_attr(trial._trial_id, "run_id", str(result["run_id"]))
            study.tell(trial, float(value))
        else:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)


def _result(folder: Path | None) -> dict[str, Any]:
    """The job's result.json; {} where none is whole (no folder, a job that never wrote it)."""
    return (read_json(folder / RESULT_FILE) if folder is not None else None) or {}


def finish(sweep_dir: Path, study: Any, plan: dict[str, Any], numbers: list[int]) -> dict[str, Any]:
    """Say what the study found (its best trial, over every command that worked on it) and write
    ``optimization_results.yaml`` into the sweep folder."""
    # lazy: saves ~97 ms at this module's import (measured)
    import optuna

    states = [t.state for t in study.get_trials(deepcopy=False)]
    finished = states.count(optuna.trial.TrialState.COMPLETE)
    pruned = states.count(optuna.trial.TrialState.PRUNED)
    out: dict[str, Any] = {
        "name": "optuna",
        "study_name": study.study_name,
        "storage": plan["shown_storage"],
        "direction": plan["direction"],
        "metric": plan["metric"],
        "task": plan["task"],
        "trials": numbers,
        "study_trials": len(states),
        "study_finished": finished,
        "study_pruned": pruned,
    }
    line = (
        f"optuna: study '{study.study_name}': trials {_span(numbers)} run here; "
        f"{finished} of {len(states)} finished in the study"
        + (f", {pruned} pruned" if pruned else "")
    )
    if finished:
        best = study.best_trial
        out |= {"best_trial": best.number, "best_value": best.value, "best_params": best.params}
        shown_params = ", ".join(
            f"{k}={text_cell(v) if isinstance(v, float) else v}" for k, v in best.params.items()
        )
        line += (
            f"; best trial {best.number}: {plan['metric']}={best.value:.6g} ("
            f"{plan['verb'][:-3]}ed)  {shown_params}"
        )
    log.info(line)
    (sweep_dir / RESULTS_FILE).write_text(OmegaConf.to_yaml(OmegaConf.create(out)))
    return out


def _span(numbers: list[int]) -> str:
    if not numbers:
        return "none"
    if numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"{numbers[0]}-{numbers[-1]}" if len(numbers) > 1 else str(numbers[0])
    return ",".join(map(str, numbers))
