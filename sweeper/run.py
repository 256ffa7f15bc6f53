"""One job: validate → backend → data → model → train → score → one MLflow run and ``result.json``.

Outcomes that belong to the hyperparameters (a diverged loss) or to the machine (no GPU in a
multirun) are recorded, not raised, so Hydra still calls the end-of-multirun summary.
"""
from __future__ import annotations

import json
import logging
import math
import os
import socket
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
from omegaconf import DictConfig, OmegaConf

from sweeper import data, metrics, models, sweep, tracking, writer  # pyfunc (MLflow) only where a model is saved
from sweeper.backend import BackendUnavailable, resolve
from sweeper.config import ConfigError, fingerprint, validate
from sweeper.models.optim import Optimizer
from sweeper.models.train import diverged

log = logging.getLogger("sweeper")

RESULT_FILE = "result.json"
# Outcomes computed ahead by the batched launcher (sweeper.launch), by job number: the job's task
# records the one found here instead of training.
HANDOFF: dict[int, "Computed"] = {}
CURVES_FILE = "curves.npz"  # the loss curves, kept with result.json so a run can be uploaded later
EXPECTED = (ConfigError, BackendUnavailable, tracking.TrackingError, data.DataError)
# Per task, metrics that are finite for any finite predictions, unless their squares overflow.
DEFINED = {"regression": ("mse", "mae"), "binary": ("mse", "mae"), "multiclass": ("log_loss",)}


@dataclass
class JobContext:
    """Where a job runs: its output folder and, inside a multirun, its sweep folder and number."""

    output_dir: Path
    overrides: list[str] = field(default_factory=list)
    sweep_dir: Path | None = None
    num: int = 0

    @classmethod
    def from_hydra(cls) -> "JobContext":
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
        multirun = hc.mode == RunMode.MULTIRUN
        return cls(
            output_dir=Path(hc.runtime.output_dir),
            overrides=list(hc.overrides.task),
            sweep_dir=Path(hc.sweep.dir).absolute() if multirun else None,
            num=hc.job.num if multirun else 0,
        )


def main(cfg: DictConfig) -> dict[str, Any]:
    """The Hydra task. A single run exits 2 with one line on a bad value, a missing GPU or an unusable store,
    and 1 when it diverged (recorded as FAILED). In a multirun every outcome is recorded and the sweep goes on.
    """
    ctx = JobContext.from_hydra()
    try:
        result = run(cfg, ctx)
    except EXPECTED as e:
        if ctx.sweep_dir is not None:
            raise
        print(f"sweeper: error: {e}", file=sys.stderr)
        sys.exit(2)
    if ctx.sweep_dir is None and result.get("run_id"):  # the single run's last line: where to find it
        url = sweep.run_url(cfg.tracking.uri, result["experiment_id"], result["run_id"])
        print(f"experiment {result['experiment']}  run {result['run_id']}  output {ctx.output_dir}\n"
              f"UI: {sweep.ui_line(cfg.tracking.uri, url)}")
    if ctx.sweep_dir is None and result["status"] != "FINISHED" and not result.get("resumed_from"):
        print(f"sweeper: run {result['run_id']} {result['status']}: {result['reason']}", file=sys.stderr)
        sys.exit(1)
    return result


def objective(result: dict[str, Any]) -> float:
    """The job's primary validation metric (val_mse, or val_accuracy for a binary task), else NaN."""
    if result.get("task") is None:
        return float("nan")
    return float(result["metrics"].get(f"val_{metrics.PRIMARY[result['task']][0]}", float("nan")))


def run(cfg: DictConfig, ctx: JobContext) -> dict[str, Any]:
    """Train and evaluate one configuration, log it to MLflow and write ``result.json``; return that dict.

    Inside a multirun, a tracking server that fails (after MLflow's bounded retries) does not lose the
    job: it trains anyway, keeps everything in its folder and marks ``pending_upload``, for
    ``python -m sweeper.upload``.
    """
    t_start = time.perf_counter()
    plain = OmegaConf.to_container(cfg, resolve=True)
    validate(plain)
    computed = HANDOFF.get(ctx.num) if ctx.sweep_dir is not None else None
    # before the store: a bad file must leave no store or experiment behind
    dataset = computed.dataset if computed else data.load(cfg.data, cfg.seed)
    if dataset.positive_class is not None and "positive_class" in plain["data"]:  # which value is 1: a param (data=csv|text)
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
    }
    if computed:
        result["batch_size"] = int(computed.tags["batch_size"])
    ctx.output_dir.mkdir(parents=True, exist_ok=True)
    try:
        backend = resolve(cfg.device)
    except BackendUnavailable as e:
        if ctx.sweep_dir is None:
            raise
        return _finish(ctx, {**result, "status": "SKIPPED", "reason": str(e)})

    uri = cfg.tracking.uri
    client = tracking.open_store(uri) if ctx.sweep_dir is None else tracking.client(uri)
    run_id, tracking_error = None, None
    try:
        experiment = tracking.experiment_id(client, cfg.tracking.experiment, uri, in_sweep=ctx.sweep_dir is not None)
        if cfg.resume:
            done = tracking.finished_run(client, experiment, result["fingerprint"], cfg.device)
            if done is not None:
                reason = f"resume: this configuration already FINISHED as run {done}"
                return _finish(ctx, {**result, "status": "SKIPPED", "reason": reason, "resumed_from": done})
    except tracking.UNREACHABLE as e:
        tracking_error = _tracking_failed(e, ctx, uri, "at the start")
    if tracking_error is None:
        try:
            tags = _tags(ctx, cfg, result, backend) | (computed.tags if computed else {})
            run_id = tracking.start_run(client, experiment, _name(ctx, cfg), tags,
                                        parent_run_id=_parent(ctx, cfg))  # params come with the final batch
        except tracking.UNREACHABLE as e:
            tracking_error = _tracking_failed(e, ctx, uri, "at the start")
    result["run_id"] = run_id
    result["experiment_id"] = experiment if run_id else None

    config_file = ctx.output_dir / "config_resolved.yaml"
    config_file.write_text(OmegaConf.to_yaml(plain))
    sample = run_id and cfg.tracking.system_metrics and not computed  # a batched group trained before this job
    monitor = tracking.system_monitor(client, run_id, uri) if sample else None
    try:
        out = computed.outcome if computed else train_and_score(cfg, dataset, backend)
    except KeyboardInterrupt:  # Ctrl-C: this run is KILLED (its sweep: by the launching process, sweep.interrupted)
        from sweeper.report import INTERRUPTED

        _kill(client, run_id, tracking.flatten(plain), tracking.stop(monitor))
        _finish(ctx, {**result, "status": "KILLED", "reason": INTERRUPTED})
        raise
    except Exception as e:  # a bug or an exhausted device: the run is FAILED with the reason, not lost
        reason = f"{type(e).__name__}: {e}"
        system = tracking.stop(monitor)
        if run_id:
            try:
                tracking.finish_run(client, run_id, {}, tags={"failure_reason": reason}, status="FAILED",
                                    system=system, params=tracking.flatten(plain))
            except tracking.UNREACHABLE as te:  # the failure itself is what result.json must keep
                log.error("tracking.uri=%s failed at the end: %s", uri, tracking.first_line(te))
        _finish(ctx, {**result, "status": "FAILED", "reason": reason, "error": True})
        if ctx.sweep_dir is None:
            raise
        log.exception("run %s failed", run_id)
        return result
    out.scores["wall_time_s"] = computed.wall_time_s if computed else time.perf_counter() - t_start
    if dataset.vectorizer is not None:  # text data: the fitted vocabulary's size (the hashing width)
        out.scores["vocabulary_size"] = data.vocabulary_size(dataset.vectorizer)
    system = tracking.stop(monitor)

    status = "FAILED" if out.reason else "FINISHED"
    np.savez(ctx.output_dir / CURVES_FILE, **{f"{name}_{part}": array for name, (steps, values) in out.curves.items()
                                              for part, array in (("steps", steps), ("values", values))})
    files, models = [config_file, ctx.output_dir / CURVES_FILE], {}  # MLflow gets the whole curves too
    if out.reason is None:
        files.append(_predictions_csv(ctx.output_dir, dataset, out.test_pred))
        if dataset.task == "multiclass":
            files.append(_confusion_csv(ctx.output_dir, dataset, out.test_pred))
        if cfg.tracking.log_model:
            from sweeper import pyfunc

            models["model"] = pyfunc.save(ctx.output_dir / "model" / "model", out.params, dataset, cfg.activation,
                                          dataset.test_inputs(), out.test_pred, plain["data"])
    result |= {"status": status, "reason": out.reason, "metrics": out.scores, "task": dataset.task,
               "artifacts": {"files": [f.name for f in files], "models": {k: str(v.relative_to(ctx.output_dir))
                                                                           for k, v in models.items()}}}
    if run_id:
        end = dict(metrics=out.scores, curves=out.curves, artifacts=files, models=models,
                   tags={"failure_reason": out.reason} if out.reason else None, status=status,
                   curve_points=cfg.tracking.curve_points, system=system, params=tracking.flatten(plain),
                   datasets=inputs(cfg, dataset))
        if ctx.sweep_dir is not None and writer.WRITER is not None:  # the writer process ends the run
            _finish(ctx, result, {"pending_upload": True, writer.RECORDING: writer.WRITER.proc.pid})
            writer.WRITER.submit(uri, run_id, tracking._runs.pop(run_id, None), end, ctx.output_dir / RESULT_FILE)
            return result
        try:
            tracking.finish_run(client, run_id, **end)
        except tracking.UNREACHABLE as e:
            tracking_error = _tracking_failed(e, ctx, uri, "at the end")
    if tracking_error:
        log.error("%s; the result is kept in %s: upload it with python -m sweeper.upload %s",
                  tracking_error, ctx.output_dir, ctx.sweep_dir)
        result |= {"pending_upload": True, "tracking_error": tracking_error}
    return _finish(ctx, result)


def _tracking_failed(e: BaseException, ctx: JobContext, uri: str, when: str) -> str:
    """A single run stops on a tracking failure (TrackingError, one line); a multirun job keeps going
    and gets the reason back, for its result.json."""
    if ctx.sweep_dir is None:
        raise tracking.TrackingError(f"tracking.uri={uri} failed: {tracking.first_line(e)}") from e
    return f"tracking.uri={uri} failed {when}: {tracking.first_line(e)}"


def _name(ctx: JobContext, cfg: DictConfig) -> str:
    return sweep.label(ctx.overrides, cfg.device, sweep.swept(ctx.sweep_dir))


def _parent(ctx: JobContext, cfg: DictConfig) -> str | None:
    if ctx.sweep_dir is None:
        return None
    return sweep.parent_run_id(ctx.sweep_dir, cfg.tracking.uri, cfg.tracking.experiment)


def _tags(ctx: JobContext, cfg: DictConfig, result: dict[str, Any], backend: Any) -> dict[str, str]:
    """Run tags; host and pid let the report tell a killed job's run (RUNNING forever) from a live one."""
    tags = {"device": cfg.device, "fingerprint": result["fingerprint"], "overrides": " ".join(ctx.overrides),
            "host": socket.gethostname(), "pid": str(os.getpid())}
    if backend.fake:
        tags["fake_gpu"] = "true"
    if ctx.sweep_dir is not None:  # what a search sweeper tells this job (optuna.trial_number, ...): sweep.json
        tags |= sweep.job_tags(ctx.sweep_dir, ctx.num)
    return tags


def _kill(client: Any, run_id: str | None, params: dict[str, Any], system: list[Any]) -> None:
    """Close an interrupted job's run KILLED with its params and system metrics. Its sweep's parent is closed
    by the launching process (sweeper.sweep.interrupted), which Ctrl-C reaches before the first job, too."""
    from sweeper.report import INTERRUPTED

    try:
        if run_id:
            tracking.finish_run(client, run_id, {}, tags={"failure_reason": INTERRUPTED}, status="KILLED",
                                params=params, system=system)
    except tracking.UNREACHABLE as e:  # result.json still says KILLED; the report marks orphans later
        log.error("tracking failed while recording the interruption: %s", tracking.first_line(e))


def inputs(cfg: DictConfig, dataset: data.Dataset) -> list[Any]:
    """The run's three splits as MLflow dataset inputs, named as the data set's default experiment is, from
    its file (``data.path``) or the bundled data set's name."""
    from sweeper.config import experiment_name

    path = cfg.data.get("path") or ""
    splits = {"training": (dataset.X_train, dataset.y_train), "validation": (dataset.X_val, dataset.y_val),
              "test": (dataset.X_test, dataset.y_test)}
    return tracking.dataset_inputs(experiment_name(cfg.data.name, path), path or cfg.data.name, splits)


def _predictions_csv(folder: Path, dataset: data.Dataset, pred: np.ndarray) -> Path:
    """The test split's targets and predictions (target units, or P(y = 1); for k classes the predicted
    class index and the k probabilities ``p_<class>``), logged beside the model."""
    path = folder / "test_predictions.csv"
    y = dataset.to_original(dataset.y_test).ravel()
    if dataset.task == "multiclass":
        columns, header = [y, pred.argmax(axis=1), pred], ",".join(["y_true", "y_pred", *(f"p_{c}" for c in dataset.classes)])
    else:
        columns, header = [y, pred.ravel()], "y_true,y_pred"
    np.savetxt(path, np.column_stack(columns), delimiter=",", header=header, comments="", fmt="%.17g")
    return path


def _confusion_csv(folder: Path, dataset: data.Dataset, prob: np.ndarray) -> Path:
    """The test split's confusion matrix: a row per true class, a column per predicted class, with names."""
    path = folder / "confusion_matrix.csv"
    counts = metrics.confusion(dataset.y_test, prob)
    lines = [",".join(["true\\predicted", *dataset.classes])]
    lines += [",".join([c, *map(str, row)]) for c, row in zip(dataset.classes, counts.tolist())]
    path.write_text("\n".join(lines) + "\n")
    return path


@contextmanager
def progress_bar(epochs: int, unit: str = "epoch") -> Iterator[Callable[[int, float, float], None] | None]:
    """A tqdm bar over epochs (a batched group's: member-epochs) on a terminal (stderr), advanced where
    training already syncs; else nothing."""
    if not sys.stderr.isatty():
        yield None
        return
    from tqdm import tqdm

    with tqdm(total=epochs, unit=unit, leave=False, dynamic_ncols=True) as bar:

        def update(epoch: int, train_loss: float, val_loss: float) -> None:
            bar.update(epoch - bar.n)
            if math.isfinite(train_loss):
                bar.set_postfix(loss=f"{train_loss:.4g}", val_loss=f"{val_loss:.4g}", refresh=False)

        yield update


@dataclass
class Outcome:
    """What a trained configuration leaves on the host."""

    scores: dict[str, float]
    curves: dict[str, tuple[np.ndarray, np.ndarray]]
    reason: str | None  # why it failed (diverged), or None
    params: list[np.ndarray] = field(default_factory=list)  # the trained weights
    test_pred: np.ndarray | None = None  # (n_test,) in target units, or P(y = 1); (n_test, k) class probabilities


@dataclass
class Computed:
    """A job's compute half done ahead (by a batched group): what its record half needs."""

    outcome: Outcome
    dataset: data.Dataset
    tags: dict[str, str]  # launcher, batch_group, batch_size
    wall_time_s: float = 0.0  # the group's wall time (data, training, scoring) per member


def train_and_score(cfg: DictConfig, dataset: data.Dataset, backend: Any) -> Outcome:
    """Train on the device and score on the host."""
    dtype = cfg.dtype
    host = [a.astype(dtype) for a in (dataset.X_train, dataset.y_train, dataset.X_val, dataset.y_val)]
    t_h2d = backend.clock()
    X, y, Xv, yv = (backend.to_device(a) for a in host)
    model = models.build(cfg, dataset.n_features, dataset.task, backend, dataset.n_outputs)
    h2d_time_s = backend.clock() - t_h2d
    with progress_bar(cfg.epochs) as progress:
        fit = models.train(
            backend, model, X, y, Xv, yv, lr=cfg.lr, epochs=cfg.epochs, log_every=cfg.log_every,
            patience=cfg.patience, sync_every_epoch=cfg.sync_every_epoch, progress=progress,
            opt=Optimizer.from_config(cfg), batch_size=cfg.batch_size, seed=cfg.seed,
        )
    return evaluate(dataset, backend, model, fit, dtype, h2d_time_s)


def evaluate(dataset: data.Dataset, backend: Any, model: models.MLP, fit: models.TrainResult, dtype: str,
             h2d_time_s: float) -> Outcome:
    """Score a trained model on the host: the second half of :func:`train_and_score`, shared with the
    batched launcher (one call per member)."""
    # the curves in the metrics' units: a regression loss is an MSE of the standardised target, so y_scale²
    # turns it into the target's units² (what val_mse is in); cross-entropy has no unit
    unit = dataset.y_scale ** 2 if dataset.task == "regression" else 1.0
    curves = {"train_loss": (fit.steps, fit.train_loss * unit), "val_loss": (fit.steps, fit.val_loss * unit)}
    scores = {
        "train_time_s": fit.train_time_s,
        "warmup_time_s": fit.warmup_time_s,
        "h2d_time_s": h2d_time_s,
        "epochs_per_s": fit.epochs_run / fit.train_time_s if fit.train_time_s > 0 else 0.0,
        "best_epoch": fit.best_epoch,
        "epochs_run": fit.epochs_run,
    }
    if fit.diverged_at is not None:
        return Outcome(scores, curves, f"diverged at epoch {fit.diverged_at}")

    # Validation and test rows go through the model together and leave the device in one copy.
    X_eval = backend.to_device(data.stack_rows(dataset.X_val, dataset.X_test).astype(dtype))
    pred = backend.to_numpy(model.predict(X_eval)).astype("float64")
    if not np.isfinite(pred).all():
        return Outcome(scores, curves, f"diverged at epoch {fit.epochs_run} (non-finite predictions)")
    n_val = dataset.X_val.shape[0]
    if dataset.task == "regression":
        pred = dataset.to_original(pred)
    truth = {"val": dataset.to_original(dataset.y_val), "test": dataset.to_original(dataset.y_test)}
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported as a divergence
        quality = metrics.score(dataset.task, truth["val"], pred[:n_val], "val")
        quality |= metrics.score(dataset.task, truth["test"], pred[n_val:], "test")
    lost = [f"{split}_{m}" for split in ("val", "test") for m in DEFINED[dataset.task] if f"{split}_{m}" not in quality]
    if lost:  # score() leaves out non-finite values: these overflowed
        return Outcome(scores, curves, f"diverged at epoch {fit.epochs_run} (non-finite {lost[0]})")
    final = backend.to_numpy(model.loss(X_eval[:n_val], backend.to_device(dataset.y_val.astype(dtype)))).reshape(1)
    if diverged(final, final, fit.train_loss[0]) is not None:  # the loss exploded after the last sample
        return Outcome(scores, curves, f"diverged at epoch {fit.epochs_run}")
    scores |= quality
    params = [backend.to_numpy(p) for p in model.params]
    test_pred = pred[n_val:] if dataset.task == "multiclass" else pred[n_val:].ravel()
    return Outcome(scores, curves, None, params, test_pred)


def _finish(ctx: JobContext, result: dict[str, Any], flags: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write ``result.json`` (with ``flags``, e.g. the writer's) into the job's folder and print the job's
    one-line outcome."""
    writer.write_result(ctx.output_dir / RESULT_FILE, {**result, **(flags or {})})
    log.info(sweep.job_line(result, ctx.num, sweep.job_count(ctx.sweep_dir), sweep.swept(ctx.sweep_dir)))
    return result
