"""Each job's config composed once per sweep.

Hydra composes every job of a multirun three times: our check of all jobs before the first one
(``sweep.job_configs``), the sweeper's ``validate_batch_is_legal`` and the launcher (~45 ms each on
this machine). :func:`compose_once` wraps the config loader of this process so that the first
composition of a job's overrides is kept and later calls get a copy of it.
"""
from __future__ import annotations

import copy
from typing import Any, Sequence


class _Once:
    def __init__(self, load: Any):
        self.load, self.cache = load, {}

    def __call__(self, master_config: Any, sweep_overrides: Sequence[str]) -> Any:
        key = tuple(sweep_overrides)
        if key not in self.cache:
            self.cache[key] = self.load(master_config, list(sweep_overrides))
        return copy.deepcopy(self.cache[key])  # callers write into it (hydra.job.id, runtime)


def compose_once(loader: Any) -> Any:
    """Make ``loader.load_sweep_config`` compose each set of overrides once (idempotent); return it."""
    if not isinstance(loader.load_sweep_config, _Once):
        loader.load_sweep_config = _Once(loader.load_sweep_config)
    return loader.load_sweep_config
