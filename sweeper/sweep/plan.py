"""A multirun's jobs before any runs: each job's composed config and overrides, the swept keys, the command line."""
from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from sweeper.base.names import BASIC_SWEEPER
from sweeper.contract.config import ConfigError


def _plain(cfg: DictConfig) -> dict[str, Any]:
    """The resolved job config without the ``hydra`` node, as plain containers."""
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.pop("hydra", None)
    return OmegaConf.to_container(cfg, resolve=True)



def job_configs(config: DictConfig) -> list[tuple[list[str], dict[str, Any]]]:
    """Every job of the multirun as (overrides, resolved config), composed exactly as the basic sweeper will.

    Other sweepers (e.g. Optuna) choose their jobs while running; for them only the base config is returned.
    """
    if config.hydra.sweeper.get("_target_") != BASIC_SWEEPER:
        return [([], _plain(config))] * int(config.hydra.sweeper.get("n_trials") or 1)
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = config.hydra.sweeper.get("params") or {}
    args = [f"{k}={v}" for k, v in params.items()] + list(config.hydra.overrides.task)
    batches = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(args), None)
    from sweeper.contract.compose import compose_once

    loader = GlobalHydra.instance().config_loader()
    compose_once(loader)  # the sweeper's check and the launcher reuse these compositions
    jobs = []
    for overrides in batches[0]:
        try:
            cfg = loader.load_sweep_config.peek(config, list(overrides))  # read here, copied by later users
        except Exception as e:  # a composition error, e.g. a group choice that does not exist
            raise ConfigError(f"job {' '.join(overrides)}: {str(e).splitlines()[0]}") from e
        jobs.append((list(overrides), _plain(cfg)))
    return jobs


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



# Hydra overrides that say how a sweep runs (launcher, sweeper) and belong in a command that repeats it;
# hydra.sweep.dir, hydra.run.dir and the like would make it write over this sweep's folder.
HOW_IT_RUNS = ("hydra/", "hydra.launcher.", "hydra.sweeper.")



def command_overrides(config: DictConfig) -> list[str]:
    """The sweep's command-line overrides, one argument each (the ``overrides`` tag joins them with
    spaces, which a value may contain): the task's, and the Hydra ones of :data:`HOW_IT_RUNS`."""
    how = [o for o in config.hydra.overrides.hydra if o.lstrip("+~").startswith(HOW_IT_RUNS)]
    return how + list(config.hydra.overrides.task)
