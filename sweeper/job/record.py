"""A job's record half: one MLflow run and ``result.json`` for one
configuration, around its compute half.

``run(cfg, ctx)`` is the whole job: check the config, read the data, open the run
(:class:`TrackedRun`), compute (:func:`sweeper.job.compute.train_and_score`, or take the
outcome a batched launcher handed over: :func:`sweeper.job.context.handed`), then record
it. Outcomes that belong to the hyperparameters (a diverged loss) or to the machine (no
GPU in a multirun) are recorded, not raised, so Hydra still calls the end-of-multirun
summary; tracking failures, Ctrl-C and the writer hand-over live here, never in the math.
"""

from __future__ import annotations

import contextlib

import logging
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf, read_write

from sweeper import data, tracking
from sweeper.base import process, state, stop, yamltext
from sweeper.base.backend import BackendUnavailable, resolve
from sweeper.base.tags import (
    CONFIG_FINGERPRINT,
    DATA_SHA256,
    GROUP_SIZE,
    HOST,
    PRUNED_AT,
    TRAJECTORY,
)
from sweeper.base.files import CURVES_FILE, ERROR_FILE, RESULT_FILE
from sweeper.base.fmt import label
from sweeper.base.output import one_line
from sweeper.contract.config import ConfigError, resolve_experiment, validate
from sweeper.contract.fingerprint import content_tags, fingerprint
from sweeper.contract.model import gradient_check, where_tags
from sweeper.job import artifacts, crossval, sweepdir
from sweeper.job.compute import Computed, Outcome, memory_problem, scored_on, train_and_score
from sweeper.job.context import JobContext, handed
from sweeper.models.interface import kind
from sweeper.models.usercode import call_user, user_line, user_traceback
from sweeper.tracking import writer
from sweeper.tracking.run import TrackedRun

__all__ = ["run", "start_many"]

log = logging.getLogger("sweeper")
# what a single run reports as bad input (one line, exit 2:
# sweeper.job.task), raised on from its compute half
REFUSALS = (ConfigError, BackendUnavailable, tracking.TrackingError, data.DataError)


def run(cfg: DictConfig, ctx: JobContext) -> dict[str, Any]:
    """Train and evaluate one configuration, log it to MLflow and
    write ``result.json``; return that dict.

    Inside a multirun, a tracking server that fails (after MLflow's bounded retries) does not
    lose the job: it trains anyway, keeps everything in its folder and marks ``pending_upload``,
    for ``python -m sweeper.upload``. The steps: :func:`_prepare` (config, data, the result's
    first fields), the device, :func:`_open` (the run), the compute half, :func:`_record`.
    """
    t_start = time.perf_counter()
    plain, computed, dataset, result = _prepare(cfg, ctx)
    ctx.output_dir.mkdir(parents=True, exist_ok=True)
    backend, skipped = _device_or_skip(cfg, ctx, plain, computed, dataset)
    if skipped:
        return _finish(ctx, {**result, "status": "SKIPPED", "reason": skipped})

    opened = _open(cfg, ctx, plain, dataset, computed, result, backend)
    if opened.resumed is not None:
        return opened.resumed
    tracked = opened.tracked
    config_file = ctx.output_dir / "config_resolved.yaml"
    # its folder deleted under the sweep: _keep says it, the run ends FAILED
    with contextlib.suppress(OSError):
        config_file.write_text(yamltext.dump(plain))
    # a batched group trained before this job
    if tracked and cfg.tracking.system_metrics and not computed:
        tracked.sample_system(min_s=cfg.tracking.system_metrics_min_s)
    try:
        # the user's code (a model's methods, a trainer) ends no process: sys.exit, os._exit,
        # its own KeyboardInterrupt are this run's failure (sweeper.models.usercode.call_user)
        out = computed.outcome if computed else call_user(_compute, cfg, dataset, backend)
    # Ctrl-C or SIGTERM (stop.Terminated): this run is KILLED
    # (its sweep: by the launching process, sweep.life.interrupted)
    except KeyboardInterrupt:
        _killed(ctx, tracked, opened, result)
        raise
    # a bug, an exhausted device, the user's code: the run is FAILED with the reason, not lost
    except Exception as e:
        # an error a Ctrl-C caused on its way through a library: the run is KILLED, not FAILED
        if (signalled := stop.masked(e)) is not None:
            _killed(ctx, tracked, opened, result)
            raise signalled from e
        # a single run's refusal: one line, exit 2
        if ctx.sweep_dir is None and isinstance(e, REFUSALS):
            _end_early(tracked, user_line(e), opened.params, "FAILED")
            raise
        reason = user_line(e)
        error_file = _error_file(ctx, reason, user_traceback(e))
        _end_early(tracked, reason, opened.params, "FAILED", [error_file] if error_file else [])
        return _finish(ctx, {**result, "status": "FAILED", "reason": reason, "error": True})
    out.scores["wall_time_s"] = computed.wall_time_s if computed else time.perf_counter() - t_start
    # text data: the fitted vocabulary's size (the hashing width)
    if dataset.vectorizer is not None:
        out.scores["vocabulary_size"] = data.vocabulary_size(dataset.vectorizer)
    system = (
        (computed.system if computed and computed.run is not None else tracked.system_samples())
        if tracked
        else []
    )
    try:
        # a Ctrl-C lands once the run is kept and recorded, not inside pandas'
        # writing of the model's example (it raised ValueError in its place:
        # the run FAILED with a traceback, exit 1) or MLflow's calls
        with stop.deferred():
            return _record(cfg, ctx, (plain, dataset, out, config_file), result, opened, system)
    # its folder gone (deleted under the sweep), a full disk: the run
    # is FAILED with why, not RUNNING
    except OSError as e:
        reason = f"its results could not be kept ({type(e).__name__}: {e.strerror or e}"
        reason += f": {e.filename})" if e.filename else ")"
        _end_early(tracked, reason, opened.params, "FAILED")
        with contextlib.suppress(OSError):
            ctx.output_dir.mkdir(parents=True, exist_ok=True)
            _finish(ctx, {**result, "status": "FAILED", "reason": reason, "error": True})
        if ctx.sweep_dir is None:
            raise ConfigError(
                f"hydra.run.dir={ctx.output_dir}: {reason}; choose a writable folder"
            ) from None
        log.error("run %s FAILED: %s", result["run_id"], reason)
        return {**result, "status": "FAILED", "reason": reason, "error": True}


def _device_or_skip(
    cfg: DictConfig,
    ctx: JobContext,
    plain: dict[str, Any],
    computed: Computed | None,
    dataset: data.Dataset,
) -> tuple[Any, str | None]:
    """The job's backend, and why it trains nothing (None: it trains), found before the store,
    so nothing is recorded: no GPU, a model whose gradients fail the check, a job too big for
    the device. A single run raises its one line; a sweep's job is SKIPPED with the reason."""
    try:
        backend = resolve(cfg.device)
    except BackendUnavailable as e:
        if ctx.sweep_dir is None:
            raise
        return None, str(e)
    # a model of yours whose gradients fail the check (in a sweep: a job its launching
    # process could not check ahead, a search's trial), then the device's memory
    why = _gradients_refused(plain, dataset) or (
        None if computed else memory_problem(cfg, dataset, backend)
    )
    if why and ctx.sweep_dir is None:
        raise ConfigError(why)
    return backend, why


def _prepare(
    cfg: DictConfig, ctx: JobContext
) -> tuple[dict[str, Any], Computed | None, data.Dataset, dict[str, Any]]:
    """The job's config resolved and checked, what a batched launcher handed
    over (None outside one), its data (read and reported: a bad file leaves
    no store or experiment behind), and the result's first fields."""
    # the job's own copy resolved once, in place: each later read of an interpolated key
    # (tracking.uri, tracking.experiment: ~0.5 and ~2.5 ms) would parse and resolve it again
    with read_write(cfg):
        resolve_experiment(cfg)
        OmegaConf.resolve(cfg)
    plain = OmegaConf.to_container(cfg)
    validate(plain)
    computed: Computed | None = handed() if ctx.sweep_dir is not None else None
    # the split (and fold) it was scored on, wherever it was computed
    dataset = scored_on(plain["data"])
    # what a user file was read as: the single run's (a sweep's) first line
    if dataset.decisions and ctx.num == 0:
        task = dataset.decisions.get("task", "")
        guessed = (
            data.ASK_REGRESSION in task or data.ASK_CLASSES in task or "split" in dataset.decisions
        )
        # the file's own values (a category, a column's name) quoted:
        # a line break in one starts no line of its own
        log.log(
            logging.WARNING if guessed else logging.INFO,
            "data: %s",
            one_line(data.describe(dataset)),
        )
        # a table's column report: a line per column, a leak as a warning
        for line in data.column_lines(dataset):
            log.log(
                logging.WARNING if "LEAK?" in line else logging.INFO,
                "data: column %s",
                one_line(line),
            )
    # which value is 1: a param (data=csv|text)
    if dataset.positive_class is not None and "positive_class" in plain["data"]:
        plain["data"]["positive_class"] = dataset.positive_class
    result: dict[str, Any] = {
        "status": None,
        "fingerprint": fingerprint(plain),
        "device": cfg.device,
        "overrides": ctx.overrides,
        "run_id": None,
        "tracking_uri": cfg.tracking.uri,
        "experiment": cfg.tracking.experiment,
        "metrics": {},
        "config": plain,
        **content_tags(plain),
    }  # a data file's content: data_sha256, config_fingerprint
    if computed:
        result["batch_size"] = int(computed.tags[GROUP_SIZE])
        result["trajectory"] = computed.tags.get(TRAJECTORY)
        # stopped early at a rung (sweeper.sweep.pruning)
        if computed.tags.get(PRUNED_AT):
            result[PRUNED_AT] = int(computed.tags[PRUNED_AT])
    return plain, computed, dataset, result


@dataclass
class _Opened:
    """The job's run as :func:`_open` left it."""

    params: dict[str, Any]  # the run's params
    tracked: TrackedRun | None = None  # None when the store could not be reached
    # why the store could not be reached (the job then trains and keeps its files)
    error: str | None = None
    late_tags: dict[str, str] = field(default_factory=dict)  # tags for a run the launcher created
    # the job's result when resume=true found it FINISHED: nothing to do
    resumed: dict[str, Any] | None = None


def _open(
    cfg: DictConfig,
    ctx: JobContext,
    plain: dict[str, Any],
    dataset: data.Dataset,
    computed: Computed | None,
    result: dict[str, Any],
    backend: Any,
) -> _Opened:
    """The job's run: a FINISHED one under resume=true (then nothing more
    to do), the one the launcher created when the group started, or a new
    one; the store's failure is kept, not raised (the job trains on)."""
    params, config_tags = tracking.split_params(plain)
    # what the data were read as (decided.*), the settings that are no
    # hyperparameters (config.*), the task
    known = (
        data.decision_tags(dataset)
        | config_tags
        | {"task": dataset.task}
        | _model_tags(plain, dataset, computed, backend)
    )
    known |= crossval.run_tags(plain["data"])
    uri = cfg.tracking.uri
    if ctx.sweep_dir is None:
        # refused before a store is made for it
        tracking.check_new_default(uri, cfg.tracking.experiment)
    client = tracking.open_store(uri) if ctx.sweep_dir is None else tracking.client(uri)
    opened = _Opened(params)
    try:
        experiment = tracking.experiment_id(
            client, cfg.tracking.experiment, uri, in_sweep=ctx.sweep_dir is not None
        )
        if cfg.resume:
            done = tracking.finished_run(
                client, experiment, result["fingerprint"], cfg.device, _pruned(), say=True
            )
            if done is not None:
                reason = f"resume: this configuration already FINISHED as run {done}"
                opened.resumed = _finish(
                    ctx, {**result, "status": "SKIPPED", "reason": reason, "resumed_from": done}
                )
                return opened
            # runs of the configuration on another version of its data file
            if CONFIG_FINGERPRINT in result:
                result["not_reused"] = _other_versions(client, experiment, cfg, result)
        if computed and computed.run is not None:  # the launcher created it when the group started
            opened.tracked, opened.late_tags = computed.run, known
        else:
            tags = _tags(ctx, plain, result, backend) | (computed.tags if computed else {}) | known
            opened.tracked = TrackedRun.start(
                uri, client, experiment, _name(ctx, plain), tags, parent_run_id=_parent(ctx, plain)
            )
    except tracking.UNREACHABLE as e:
        opened.error = _tracking_failed(e, ctx, uri, "at the start")
    result["run_id"] = opened.tracked and opened.tracked.run_id
    result["experiment_id"] = opened.tracked and opened.tracked.experiment_id
    return opened


def _other_versions(
    client: Any, experiment: str, cfg: DictConfig, result: dict[str, Any]
) -> str | None:
    """Why ``resume=true`` reuses none of this configuration's FINISHED runs, when they
    read another version of its data file (a line, a warning); None when it has none."""
    runs = tracking.other_versions(
        client, experiment, result[CONFIG_FINGERPRINT], cfg.device, result[DATA_SHA256]
    )
    if not runs:
        return None
    theirs = sorted(
        {
            r.data.tags[DATA_SHA256][:12] if DATA_SHA256 in r.data.tags else "not recorded"
            for r in runs
        }
    )
    why = (
        f"resume: {len(runs)} FINISHED run(s) of this configuration ("
        f"{', '.join(r.info.run_id for r in runs[:3])}) "
        f"read another version of data.path={cfg.data.path} (sha256 {', '.join(theirs)}; now "
        f"{result[DATA_SHA256][:12]}): not reused, it trains again"
    )
    log.warning(why)
    return why


def _pruned() -> Any:
    """How ``resume`` takes a run stopped at a rung, under the launcher this job runs under
    (:func:`sweeper.sweep.pruning.resume_rule`; its config empty: no Hydra run)."""
    # lazy: saves ~60 ms at this module's import (measured)
    from hydra.core.hydra_config import HydraConfig

    # lazy: saves ~6.4 ms at this module's import (measured)
    from sweeper.sweep import pruning

    launcher = HydraConfig.get().launcher if HydraConfig.initialized() else {}
    return pruning.resume_rule(launcher)


def _record(
    cfg: DictConfig,
    ctx: JobContext,
    done: tuple[dict[str, Any], data.Dataset, Outcome, Path],
    result: dict[str, Any],
    opened: _Opened,
    system: list,
) -> dict[str, Any]:
    """The outcome kept in the job's folder and recorded: handed to the writer process in a sweep,
    else ended here; a store that fails keeps the result for ``python -m sweeper.upload``."""
    # the job's config, data, outcome and resolved-config file
    plain, dataset, out, config_file = done
    tracked, tracking_error = opened.tracked, opened.error
    files, models = _keep(ctx, cfg, plain, dataset, out, config_file)
    status = "FAILED" if out.reason else "FINISHED"
    result |= {
        "status": status,
        "reason": out.reason,
        "metrics": out.scores,
        "task": dataset.task,
        "artifacts": {
            "files": [f.name for f in files],
            "models": {k: str(v.relative_to(ctx.output_dir)) for k, v in models.items()},
        },
    }
    if tracked:
        end = dict(
            metrics=out.scores,
            curves=out.curves,
            artifacts=files,
            models=models,
            tags=opened.late_tags
            | out.tags
            | ({"failure_reason": out.reason} if out.reason else {})
            or None,
            status=status,
            curve_points=cfg.tracking.curve_points,
            system=system,
            params=opened.params,
            datasets=artifacts.inputs(cfg, dataset),
        )
        w = writer.current()
        if ctx.sweep_dir is not None and w is not None:  # the writer process ends the run
            w.make_room()  # waits while MAX_PENDING runs wait (not once a Ctrl-C came)
            # printed FINISHED and
            _finish(ctx, result, {"pending_upload": True, writer.RECORDING: w.pid})
            # handed to the writer: both (run() defers a signal)
            tracked.hand_to(w, end, ctx.output_dir / RESULT_FILE)
            return result
        try:
            tracked.finish(**end)
        except tracking.UNREACHABLE as e:
            tracking_error = _tracking_failed(e, ctx, cfg.tracking.uri, "at the end")
    if tracking_error:
        log.error(
            "%s; the result is kept in %s: upload it with python -m sweeper.upload %s",
            tracking_error,
            ctx.output_dir,
            ctx.sweep_dir,
        )
        result |= {"pending_upload": True, "tracking_error": tracking_error}
    return _finish(ctx, result)


def start_many(
    jobs: list[tuple[dict[str, Any], JobContext, dict[str, str]]], start_time: int | None = None
) -> list[TrackedRun]:
    """Create jobs' runs RUNNING before their compute half, as :func:`run` would (each job's
    ``(plain, ctx, tags)``: its name, its tags plus ``tags``, parent and params): the batched
    launcher opens its members' runs when their group starts training, so they show while it
    trains, and hands each to its job (:class:`~sweeper.job.compute.Computed` ``run``); they
    start at ``start_time`` (ms) when given: when the group began to train. One store
    transaction for the runs of one store and experiment (:meth:`TrackedRun.start_many`)."""
    by_store: dict[tuple[str, str], list[int]] = {}
    for i, (plain, _, _) in enumerate(jobs):
        by_store.setdefault((plain["tracking"]["uri"], plain["tracking"]["experiment"]), []).append(
            i
        )
    out: list[TrackedRun | None] = [None] * len(jobs)
    for (uri, name), idx in by_store.items():
        client = tracking.client(uri)
        experiment = tracking.experiment_id(client, name, uri, in_sweep=True)
        specs = []
        for i in idx:
            plain, ctx, tags = jobs[i]
            base = _tags(
                ctx,
                plain,
                {"fingerprint": fingerprint(plain), **content_tags(plain)},
                resolve(plain["device"]),
            )
            # data.positive_class is what the data were read as: the job logs it with its last batch
            params = {
                k: v
                for k, v in tracking.split_params(plain)[0].items()
                if k != "data.positive_class"
            }
            specs.append(
                {
                    "name": _name(ctx, plain),
                    "tags": base | tags,
                    "parent_run_id": _parent(ctx, plain),
                    "params": params,
                    "start_time": start_time,
                }
            )
        for i, run in zip(idx, TrackedRun.start_many(uri, client, experiment, specs)):
            out[i] = run
    return [r for r in out if r is not None]


def _keep(
    ctx: JobContext,
    cfg: DictConfig,
    plain: dict[str, Any],
    dataset: data.Dataset,
    out: Outcome,
    config_file: Path,
) -> tuple[list[Path], dict[str, Path]]:
    """The run's files in its job folder: the whole curves, and for a
    trained model its test predictions, its confusion matrix (classes)
    and the model itself; return (files, models) for MLflow."""
    # written as the run opened, unless its folder was deleted since (then: OSError)
    if not config_file.exists():
        config_file.write_text(yamltext.dump(plain))
    np.savez(
        ctx.output_dir / CURVES_FILE,
        **{
            f"{name}_{part}": array
            for name, (steps, values) in (out.curves | out.fold_curves).items()
            for part, array in (("steps", steps), ("values", values))
        },
    )
    files, models = (
        [config_file, ctx.output_dir / CURVES_FILE],
        {},
    )  # MLflow gets the whole curves too
    if dataset.report:  # a table's column report (docs/guide/tables.md)
        files.append(artifacts.columns_json(ctx.output_dir, dataset))
    # a failure's traceback (a function trainer's, a group's that its user code ended)
    if out.error:
        files += [f for f in [_error_file(ctx, out.reason or "", out.error)] if f]
    if out.reason is None:
        files.append(artifacts.predictions_csv(ctx.output_dir, dataset, out.test_pred))
        if dataset.task == "multiclass":
            files.append(artifacts.confusion_csv(ctx.output_dir, dataset, out.test_pred))
        elif dataset.task == "binary":  # confusion matrix, ROC and PR curves
            files += artifacts.binary_csvs(ctx.output_dir, dataset, out.test_pred)
        if cfg.tracking.log_model and (out.params or out.param_names or out.predict is not None):
            # lazy: saves ~1194 ms at this module's import (measured)
            from sweeper.tracking import pyfunc

            from sweeper.models.interface import offer

            # sweeper's own portable model
            user = None if offer(plain.get("model")).fast_path else plain["model"]
            try:
                models["model"] = pyfunc.save(
                    ctx.output_dir / "model" / "model",
                    out.params,
                    dataset,
                    cfg.activation,
                    dataset.test_inputs(),
                    out.test_pred,
                    plain["data"],
                    user,
                    out.param_names,
                    out.predict,
                )
            # a trainer's predict that cannot be pickled: FAILED, its metrics kept
            except pyfunc.NotSaved as e:
                out.reason = str(e)
    return files, models


def _end_early(
    tracked: TrackedRun | None,
    reason: str,
    params: dict[str, Any],
    status: str,
    files: list[Path] | None = None,
) -> None:
    """End a run that did not get to score (interrupted: KILLED; a bug: FAILED)
    with its params and system metrics (and ``files``: its error file). A sweep's
    parent is closed by the launching process (sweeper.sweep.life.interrupted)."""
    if tracked is None:
        return
    try:
        tracked.fail(reason, params, status, files or [])
    except tracking.UNREACHABLE as e:  # result.json still says why; the report marks orphans later
        log.error("tracking.uri=%s failed at the end: %s", tracked.uri, tracking.first_line(e))


def _killed(ctx: JobContext, tracked: Any, opened: Any, result: dict[str, Any]) -> None:
    """The run interrupted (Ctrl-C, SIGTERM): KILLED in the store and in its result.json."""
    _end_early(tracked, stop.reason(), opened.params, "KILLED")
    _finish(ctx, {**result, "status": "KILLED", "reason": stop.reason()})


def _error_file(ctx: JobContext, reason: str, detail: str) -> Path | None:
    """A failed run's whole traceback: in its folder's error file (an artifact
    of the run), and on the terminal once per distinct error a sweep (a grid
    of 20 runs that fail alike prints one traceback, and 20 job lines)."""
    said = state.current().errors_said
    if reason not in said:
        said.add(reason)
        log.error(
            "%s; its traceback (printed once; each run that failed so keeps it in its %s):\n%s",
            reason,
            ERROR_FILE,
            detail.rstrip(),
        )
    path = ctx.output_dir / ERROR_FILE
    try:
        path.write_text(detail)
    except OSError:  # its folder gone: the run's line says why it failed all the same
        return None
    return path


def _tracking_failed(e: BaseException, ctx: JobContext, uri: str, when: str) -> str:
    """A single run stops on a tracking failure (TrackingError, one line); a
    multirun job keeps going and gets the reason back, for its result.json."""
    if ctx.sweep_dir is None:
        raise tracking.TrackingError(f"tracking.uri={uri} failed: {tracking.first_line(e)}") from e
    return f"tracking.uri={uri} failed {when}: {tracking.first_line(e)}"


def _name(ctx: JobContext, plain: dict[str, Any]) -> str:
    return label(ctx.overrides, plain["device"], sweepdir.swept(ctx.sweep_dir))


def _parent(ctx: JobContext, plain: dict[str, Any]) -> str | None:
    if ctx.sweep_dir is None:
        return None
    return sweepdir.parent_run_id(
        ctx.sweep_dir, plain["tracking"]["uri"], plain["tracking"]["experiment"]
    )


def _compute(cfg: DictConfig, dataset: data.Dataset, backend: Any) -> Outcome:
    """The compute half of a job alone: sweeper's loop on a model, or the user's
    own function trainer; with ``data.folds=k`` each fold in turn (``dataset``
    is fold 0's), combined into one outcome (:mod:`sweeper.job.crossval`)."""

    if kind(cfg.get("model")) == "trainer":
        # lazy: saves ~12 ms at this module's import (measured)
        from sweeper.job import trainer

        one = trainer.train_and_score
    else:
        one = train_and_score
    return crossval.train(cfg, backend, one, dataset, lambda i: data.load(cfg.data, fold=i))


def _gradients_refused(plain: dict[str, Any], dataset: data.Dataset) -> str | None:
    return gradient_check(plain.get("model"), dataset.n_features, dataset.n_outputs, dataset.task)[
        0
    ]


def _model_tags(
    plain: dict[str, Any], dataset: data.Dataset, computed: Computed | None, backend: Any
) -> dict[str, str]:
    """sweeper's MLP: the form its activation was computed in (:mod:`sweeper.models.forms`;
    a group's, as the process that trained it chose). A model of the interface: its import
    path, and whether it trained stacked in a group (or why not)."""
    # lazy: saves ~10 ms at this module's import (measured)
    from sweeper.models import stacked
    from sweeper.models.group import form_tags

    what = kind(plain.get("model"))
    # the activation's form: a group's as the process that trained it chose, else this one's
    if what == "mlp":
        own = form_tags(backend, plain)
        return own | {k: computed.tags[k] for k in own if computed and k in computed.tags}

    if what == "trainer":
        return {
            "model": str(plain["model"]["_target_"]),
            "model_kind": "function trainer",
            **where_tags(plain["model"]),
            "model_batched": (
                "false: a function trainer runs its own loop, one configuration a call"
            ),
            **(
                {}
                if plain["device"] == "cpu"
                else {
                    "model_logged": (
                        "false: a GPU run's predict holds device arrays (a CPU run's is logged)"
                    )
                }
            ),
        }
    if computed is not None:  # a group's member (one that failed as a whole says so)
        batched = (
            computed.tags.get("model_batched")
            or "true: stacked with its group (proven by broadcasting)"
        )
    else:
        reason = stacked.why_not(plain) or stacked.verdicts().get(
            stacked.shape_key(plain["model"], dataset.n_features, dataset.n_outputs, dataset.task)
        )
        batched = (
            f"false: {reason}"
            if reason
            else "false: trained alone (a one-job launcher, or no other configuration of its shape)"
        )
    checked = gradient_check(plain["model"], dataset.n_features, dataset.n_outputs, dataset.task)[1]
    return {
        "model": str(plain["model"]["_target_"]),
        "model_batched": batched,
        **checked,
        **where_tags(plain["model"]),
    }


def _tags(
    ctx: JobContext, plain: dict[str, Any], result: dict[str, Any], backend: Any
) -> dict[str, str]:
    """Run tags; host and pid let the report tell a killed job's run
    (RUNNING forever) from a live one."""
    tags = {
        "device": plain["device"],
        "fingerprint": result["fingerprint"],
        "overrides": " ".join(ctx.overrides),
        HOST: socket.gethostname(),
        **process.identity(),
        "hydra.job_dir": str(ctx.output_dir.resolve()),
        **{k: result[k] for k in (DATA_SHA256, CONFIG_FINGERPRINT) if k in result},
    }
    # the command that re-runs it
    tags |= tracking.source_tags(["python", "-m", "sweeper", *ctx.overrides])
    if backend.fake:
        tags["fake_gpu"] = "true"
    # what a search sweeper tells this job (optuna.trial_number, ...): sweep.json
    if ctx.sweep_dir is not None:
        tags |= sweepdir.job_tags(ctx.sweep_dir, ctx.num)
    return tags


def _finish(
    ctx: JobContext, result: dict[str, Any], flags: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Write ``result.json`` (with ``flags``, e.g. the writer's) into
    the job's folder and print the job's one-line outcome."""
    writer.write_result(ctx.output_dir / RESULT_FILE, {**result, **(flags or {})})
    log.info(
        sweepdir.job_line(
            result, ctx.num, sweepdir.job_count(ctx.sweep_dir), sweepdir.swept(ctx.sweep_dir)
        )
    )
    return result
