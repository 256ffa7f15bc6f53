"""The sweeper that Hydra runs for a basic-sweeper multirun: Hydra's
``BasicSweeper`` with two duties that only a sweeper can take on,
since it alone stands between the list of jobs and the launcher.

- ``resume=true`` under a launcher that starts one job per configuration (``joblib``,
  ``submitit_*``, ``ray``): the configurations that already FINISHED are left out of each
  batch *before* the launcher gets it (on SLURM each would cost a queued job just to say
  "already done"); each gets its ``result.json`` (SKIPPED, with the run it reused) in a
  ``resumed_<n>`` folder and its ``skipped.``/``reused.`` tags on the parent, as a job
  that skipped itself would. The batched launcher sorts them out itself, in process.
- A launcher that cannot start or fails as a whole (Ray refusing to connect, a
  submitit error) closes the parent run(s) KILLED with the reason and ends the command
  in one line, exit 2, instead of a traceback and a RUNNING parent with no children.

:func:`sweeper.sweep.callbacks.SweepCallback.on_multirun_start` puts it in place of
``BasicSweeper`` (Hydra instantiates the sweeper after that callback, from the same config);
the class is ``hydra_plugins.sweeper_batched_launcher.guarded_sweeper.GuardedSweeper``
(Hydra takes plugins only from there).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from omegaconf import open_dict, read_write
from sweeper import tracking
from sweeper.base import stop
from sweeper.base.hydra_internals import BASIC_SWEEPER
from sweeper.contract.compose import Once, plain as compose_plain
from sweeper.sweep import life

__all__ = ["put_in_place", "setup", "validate"]

log = logging.getLogger("sweeper")

TARGET = "hydra_plugins.sweeper_batched_launcher.guarded_sweeper.GuardedSweeper"


def setup(
    sweeper: Any,
    base_setup: Any,
    *,
    hydra_context: Any,
    task_function: Any,
    config: Any,
    leave_out: bool = True,
) -> None:
    """The sweeper's setup: Hydra's (``base_setup``: it instantiates the launcher),
    then the launcher's ``launch`` wrapped: finished configurations left out
    (``resume=true``; not when ``leave_out`` is false: a search needs one return
    per trial, and its jobs skip themselves), a failure as a whole in one line."""
    with _failing_whole(config):  # the launcher's own start
        base_setup(hydra_context=hydra_context, task_function=task_function, config=config)
    inner = sweeper.launcher.launch
    batched = "sweeper_batched_launcher" in str(config.hydra.launcher.get("_target_", ""))
    resumed = [0]

    def launch(batch: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
        kept = batch if batched or not leave_out else _unfinished(sweeper, batch, resumed)
        if not kept:
            return []
        with _failing_whole(config):  # jobs' own failures come back in their JobReturn
            return inner(kept, initial_job_idx=initial_job_idx)

    sweeper.launcher.launch = launch


def validate(sweeper: Any, batch: Sequence[Sequence[str]], base_validate: Any) -> None:
    """The sweeper's check that each job of ``batch`` composes: through the loader's composed-once
    check (:meth:`sweeper.contract.compose.Once.check`: its shape's template, nothing composed or
    kept) when the sweep made one, else Hydra's own (``base_validate``)."""

    load = sweeper.hydra_context.config_loader.load_sweep_config
    if not isinstance(load, Once):
        return base_validate(batch)
    for overrides in batch:
        load.check(sweeper.config, list(overrides))


def _unfinished(
    sweeper: Any, batch: Sequence[Sequence[str]], resumed: list[int]
) -> list[Sequence[str]]:
    """The jobs of ``batch`` to launch: under ``resume=true``, those
    whose configuration has not FINISHED."""
    # lazy: saves ~231 ms at this module's import (measured)
    from sweeper.contract.fingerprint import fingerprint
    from sweeper.sweep import life, pruning

    kept = []
    sweep_dir = Path(str(sweeper.config.hydra.sweep.dir)).absolute()
    # how a run stopped at a rung counts (the launcher's strategy)
    pruned = pruning.resume_rule(sweeper.config.hydra.launcher)
    for overrides in batch:
        plain = compose_plain(
            sweeper.hydra_context.config_loader.load_sweep_config(sweeper.config, list(overrides))
        )
        done = None
        if plain.get("resume"):
            try:
                c = tracking.client(plain["tracking"]["uri"])
                exp = c.get_experiment_by_name(plain["tracking"]["experiment"])
                done = exp and tracking.finished_run(
                    c,
                    exp.experiment_id,
                    fingerprint(plain),
                    plain["device"],
                    pruned,
                )
            except tracking.UNREACHABLE:
                done = None  # the job itself finds out, and says so
        if not done:
            kept.append(overrides)
            continue
        resumed[0] += 1
        life.reused_job(sweep_dir, f"resumed_{resumed[0]}", list(overrides), plain, done)
    if len(kept) < len(batch):
        log.info(
            "resume: %d configuration(s) already FINISHED are not launched", len(batch) - len(kept)
        )
    return kept


@contextmanager
def _failing_whole(config: Any) -> Iterator[None]:
    """The launcher's boundary: an error inside is the launcher failed as a whole: the parent
    run(s) KILLED with the reason, one line, exit 2. Not when a signal came: a library's cleanup
    that failed as the KeyboardInterrupt went through it (OmegaConf's "'NoneType' object has no
    attribute '_invalidate_flags_cache'") is the interruption, not a failure."""
    try:
        yield
    except Exception as e:  # noqa: BLE001  (the one place a launcher's failure is decided)
        stop.raise_signalled(e)
        stop.refuse(
            life.launcher_failed(Path(str(config.hydra.sweep.dir)).absolute(), e).removeprefix(
                "sweeper: error: "
            )
        )


def put_in_place(config: Any) -> None:
    """Make Hydra's basic sweeper this one (Hydra instantiates the
    sweeper after ``on_multirun_start``)."""

    if config.hydra.sweeper.get("_target_") == BASIC_SWEEPER:
        with read_write(config.hydra.sweeper), open_dict(config.hydra.sweeper):
            config.hydra.sweeper._target_ = TARGET
