"""The sweeper's config, stored under ``hydra/sweeper`` as ``sweeper_optuna``
(imported at plugin discovery: light, no Optuna). ``+sweep=optuna``
(conf/sweep/optuna.yaml) selects it and names a search space."""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

# what a key allows, declared beside it as the batched launcher's keys are (light: no sweeper)
from hydra_plugins.sweeper_batched_launcher.config import at_least, key


__all__ = ["OptunaSweeperConf", "PREFIX", "RandomSamplerConf", "TPESamplerConf"]


@dataclass
class TPESamplerConf:
    """Optuna's TPE sampler; ``constant_liar`` makes the trials asked
    in one round differ from each other."""

    _target_: str = "optuna.samplers.TPESampler"
    seed: Optional[int] = 0
    constant_liar: bool = True
    n_startup_trials: int = 10
    multivariate: bool = False


@dataclass
class RandomSamplerConf:
    _target_: str = "optuna.samplers.RandomSampler"
    seed: Optional[int] = 0


@dataclass
class OptunaSweeperConf:
    _target_: str = "hydra_plugins.sweeper_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    # the sampler is built (and a bad one refused in one line) when the sweep starts
    _recursive_: bool = False
    defaults: List[Any] = field(default_factory=lambda: [{"sampler": "tpe"}])
    # hydra/sweeper/sampler: tpe (default) | random, or any Optuna sampler by _target_
    sampler: Any = MISSING
    # trials this command runs (a study that already has trials keeps them and goes on numbering)
    n_trials: int = key(20, at_least(1))
    # trials asked per round and handed to the launcher in one launch() call:
    # the batched launcher trains those of one shape as one group
    batch: int = key(16, at_least(1))
    # an Optuna RDB URL; "auto": optuna.db beside the MLflow store (a sqlite:///
    # tracking.uri), else in the working directory; null: in memory (lost at the end)
    storage: Optional[str] = "auto"
    study_name: Optional[str] = None  # null: the experiment's name (tracking.experiment)
    # the search space in Hydra's override syntax: interval(),
    # tag(log, interval()), choice(), range(), a value
    params: Dict[str, str] = field(default_factory=dict)


PREFIX = "hydra.sweeper."

cs = ConfigStore.instance()
cs.store(group="hydra/sweeper", name="sweeper_optuna", node=OptunaSweeperConf, provider="sweeper")
cs.store(group="hydra/sweeper/sampler", name="tpe", node=TPESamplerConf, provider="sweeper")
cs.store(group="hydra/sweeper/sampler", name="random", node=RandomSamplerConf, provider="sweeper")
