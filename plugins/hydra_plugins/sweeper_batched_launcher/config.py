"""The launcher's config, stored under ``hydra/launcher`` as ``batched`` (imported at plugin discovery: light)."""
from dataclasses import dataclass

from hydra.core.config_store import ConfigStore


@dataclass
class BatchedLauncherConf:
    _target_: str = "hydra_plugins.sweeper_batched_launcher.batched_launcher.BatchedLauncher"
    # Most bytes of device memory one group of configurations may hold while it trains; 0 = a quarter of
    # the machine's memory. A larger grid splits into several groups.
    max_group_bytes: int = 0
    # Most configurations in one group (0 = no limit but the memory budget).
    max_group_size: int = 0


ConfigStore.instance().store(group="hydra/launcher", name="batched", node=BatchedLauncherConf, provider="sweeper")
