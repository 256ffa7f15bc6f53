"""A multirun's jobs before any runs: each job's composed config and
overrides, the swept keys, the command line."""

from __future__ import annotations

import json
import logging
from typing import Any

import yaml
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from sweeper import data
from sweeper.base.hydra_internals import BASIC_SWEEPER, basic_sweeper
from sweeper.contract.compose import compose_once, resolvable
from sweeper.contract.config import ConfigError
from sweeper.job import crossval
from sweeper.models.interface import ModelError, kind, split

__all__ = [
    "check_sweep_gradients",
    "command_overrides",
    "is_sweeper_config",
    "job_configs",
    "swept_keys",
]

log = logging.getLogger("sweeper")


# A sweep this large says so before it composes its jobs (the first
# job's line comes after all are checked).
ANNOUNCE = 500


def is_sweeper_config(cfg: Any) -> bool:
    """Whether a composed config is one of sweeper's (its keys), rather than another app's
    that only uses the batched launcher: those the launcher hands to ``run_job`` untouched."""
    return all(k in cfg for k in SWEEPER_KEYS)


SWEEPER_KEYS = ("data", "tracking", "lr", "epochs", "seed", "device", "log_every")


def job_configs(config: DictConfig) -> list[tuple[list[str], dict[str, Any] | None]]:
    """Every job of the multirun as (overrides, resolved config), composed as the basic
    sweeper will; the config is None for a job that can be resolved only inside its job
    (:func:`sweeper.contract.compose.resolvable`). Each shape of overrides is composed once;
    the other jobs' configs are its values set (O(1) a job) and no composed config is kept.

    Other sweepers (e.g. Optuna) choose their jobs while running; for
    them only the base config is returned.
    """
    if config.hydra.sweeper.get("_target_") != BASIC_SWEEPER:
        return [([], resolvable(config))] * int(config.hydra.sweeper.get("n_trials") or 1)
    # lazy: saves ~58 ms at this module's import (measured)
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    # lazy: saves ~56 ms at this module's import (measured)
    from hydra.errors import HydraException

    params = config.hydra.sweeper.get("params") or {}
    args = [f"{k}={v}" for k, v in params.items()] + list(config.hydra.overrides.task)
    loader = GlobalHydra.instance().config_loader()
    # with the loader, as the basic sweeper parses them: glob() lists a group's options through it
    try:
        batches = basic_sweeper().split_arguments(
            OverridesParser.create(config_loader=loader).parse_overrides(args), None
        )
    # e.g. interval() given to the grid sweeper by a sweep config's params
    except HydraException as e:
        raise ConfigError(f"{' '.join(args)[:200]}: {str(e).splitlines()[0]}") from None

    if len(batches[0]) >= ANNOUNCE:
        log.info("composing %s configurations…", f"{len(batches[0]):,}")
    # each shape composed once; the sweeper's check and the launcher reuse it
    once = compose_once(loader)
    jobs = []
    for overrides in batches[0]:
        try:
            cfg = once.plain(config, list(overrides))
        # a composition error: Hydra's (a group choice that does not exist), OmegaConf's, a
        # config file that is no YAML or cannot be read. Anything else (one that a Ctrl-C caused
        # on its way through OmegaConf, a bug) goes to the sweep's start, which says which
        # (sweeper.sweep.callbacks.start_failed)
        except (HydraException, OmegaConfBaseException, yaml.YAMLError, OSError) as e:
            raise ConfigError(f"job {' '.join(overrides)}: {str(e).splitlines()[0]}") from e
        jobs.append((list(overrides), cfg))
    one_protocol(jobs)
    if "sweeper_batched_launcher" in str(config.hydra.launcher.get("_target_", "")):
        # lazy: saves ~111 ms at this module's import (measured)
        from sweeper.sweep import pruning

        pruning.check(config.hydra.launcher, [cfg for _, cfg in jobs if cfg is not None])
    return jobs


def one_protocol(jobs: list[tuple[list[str], dict[str, Any] | None]]) -> None:
    """ConfigError unless the jobs of one experiment share ``data.folds``
    (:func:`sweeper.job.crossval.mixed` says why not)."""
    if why := crossval.mixed(jobs):
        raise ConfigError(why)


def swept_keys(jobs: list[tuple[list[str], Any]], config: DictConfig) -> list[str]:
    """The keys whose override value differs between jobs, in command order: what run names show.

    A search sweeper (Optuna) chooses values as it goes: its search space names the keys."""
    if config.hydra.sweeper.get("_target_") != BASIC_SWEEPER:
        return list(config.hydra.sweeper.get("params") or {})
    values: dict[str, set[str]] = {}
    for overrides, _ in jobs:
        for o in overrides:
            key, _, value = o.lstrip("+~").partition("=")
            values.setdefault(key, set()).add(value)
    return [k for k, v in values.items() if len(v) > 1]


# Hydra overrides that say how a sweep runs (launcher, sweeper) and belong in a command that repeats
# it; hydra.sweep.dir, hydra.run.dir and the like would make it write over this sweep's folder.
HOW_IT_RUNS = ("hydra/", "hydra.launcher.", "hydra.sweeper.")


def command_overrides(config: DictConfig) -> list[str]:
    """The sweep's command-line overrides, one argument each (the ``overrides`` tag joins them with
    spaces, which a value may contain): the task's, and the Hydra ones of :data:`HOW_IT_RUNS`."""
    how = [o for o in config.hydra.overrides.hydra if o.lstrip("+~").startswith(HOW_IT_RUNS)]
    return how + list(config.hydra.overrides.task)


def check_sweep_gradients(configs: list[dict[str, Any]]) -> None:
    """Before a sweep's store is touched: the gradient check of each model of the interface
    at each data set's shape (each model, hyperparameters and data node once);
    :class:`ModelError` with the one line of the first that fails (unless its ``model.check``
    is false). A function trainer is said once: it has no gradients to check."""

    # lazy: saves ~87 ms at this module's import (measured)
    from sweeper.contract.model import gradient_check

    seen: set[str] = set()
    for cfg in configs:
        model = cfg.get("model")
        what = kind(model)
        path, kwargs = split(model)
        node = json.dumps(
            [path, kwargs, cfg["data"]] if what == "model" else path, sort_keys=True, default=str
        )
        if what == "mlp" or node in seen:
            continue
        seen.add(node)
        if what == "trainer":
            log.info(
                "%s is a function trainer: it computes its own updates, so there are no "
                "gradients for sweeper to "
                "check",
                path,
            )
            continue
        ds = data.load_plain(cfg["data"])
        refusal, _ = gradient_check(model, ds.n_features, ds.n_outputs, ds.task)
        if refusal:
            raise ModelError(refusal)
