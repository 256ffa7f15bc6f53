"""Each job's config composed once per sweep, and most of them without Hydra's composition.

Hydra composes every job of a multirun three times: our check of all jobs before the first one
(``sweep.job_configs``), the sweeper's ``validate_batch_is_legal`` and the launcher (45-90 ms each on
this machine: a 64-job grid spent 3-6 s composing before this). :func:`compose_once` wraps the config
loader of this process:

- the first composition of a job's overrides is kept until its last user takes it: our check and the
  sweeper's ``validate_batch_is_legal`` read it (:meth:`_Once.peek`), the launcher takes it
  (:meth:`_Once.take`: no copy, ~3 ms a job; a later call composes it anew);
- a job whose overrides differ from an already composed job's only in the *values* of plain keys
  (``lr=0.01`` vs ``lr=0.02``: no config group, no ``+``/``~``, nothing under ``hydra.``) is that job's
  config with those values set, the way Hydra applies a command-line override after composing the
  defaults list (so the result is the same: ``tests/test_compose.py`` checks it against Hydra's own).
"""
from __future__ import annotations

import copy
import sys
from typing import Any, Sequence


class _Once:
    def __init__(self, load: Any):
        self.load = load
        self.cache: dict[tuple[str, ...], Any] = {}
        self.templates: dict[tuple, Any] = {}  # (structural overrides, value keys) → a composed config

    def __call__(self, master_config: Any, sweep_overrides: Sequence[str]) -> Any:
        """Hydra's calls: the sweeper's check only reads the config; the launcher writes into it (``hydra.job.id``,
        read-only flags) and is its last user."""
        if sys._getframe(1).f_code.co_name == "validate_batch_is_legal":
            return self.peek(master_config, sweep_overrides)
        return self.take(master_config, sweep_overrides)

    def peek(self, master_config: Any, sweep_overrides: Sequence[str]) -> Any:
        """The composed config itself, for a caller that only reads it (no copy: ~4 ms a job)."""
        key = tuple(sweep_overrides)
        if key not in self.cache:
            self.cache[key] = self._compose(master_config, list(sweep_overrides))
        return self.cache[key]

    def take(self, master_config: Any, sweep_overrides: Sequence[str]) -> Any:
        """The composed config, handed over to its last user (the launcher): no copy, and no longer kept."""
        cfg = self.peek(master_config, sweep_overrides)
        del self.cache[tuple(sweep_overrides)]
        return cfg

    def _compose(self, master_config: Any, overrides: list[str]) -> Any:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        from sweeper.contract.config import GROUPS

        try:
            parsed = OverridesParser.create().parse_overrides(overrides)
        except Exception:  # noqa: BLE001  (Hydra reports its own syntax errors)
            return self.load(master_config, overrides)
        groups = set(GROUPS) | set(master_config.hydra.runtime.choices)
        values = [_simple(o) and o.key_or_group not in groups for o in parsed]
        shape = tuple(f"{o.key_or_group}=" if v else o.input_line for o, v in zip(parsed, values))
        template = self.templates.get(shape)
        if template is None:  # kept as Hydra made it: the configs handed out are written into
            self.templates[shape] = cfg = self.load(master_config, overrides)
            return copy.deepcopy(cfg)
        return _with_values(template, [o for o, v in zip(parsed, values) if v], parsed, master_config)


def _simple(o: Any) -> bool:
    """A plain ``key=scalar`` override: applied by Hydra as a value once the defaults list is composed
    (a dict or list value is merged into what it replaces, so it stays part of the shape)."""
    return (not o.is_sweep_override() and not o.is_add() and not o.is_force_add() and not o.is_delete()
            and o.package is None and not o.key_or_group.startswith("hydra")
            and not isinstance(o.value(), (dict, list)))


def _with_values(template: Any, values: list[Any], parsed: list[Any], master_config: Any) -> Any:
    """``template`` (composed by Hydra for overrides of the same shape) with this job's ``values``."""
    from hydra._internal.config_loader_impl import get_overrides_dirname
    from omegaconf import OmegaConf, open_dict

    cfg = copy.deepcopy(template)
    for o in values:
        OmegaConf.update(cfg, o.key_or_group, o.value(), merge=True)  # as Hydra applies an override
    with open_dict(cfg.hydra):
        cfg.hydra.overrides.task = [o.input_line for o in parsed]
        c = cfg.hydra.job.config.override_dirname
        cfg.hydra.job.override_dirname = get_overrides_dirname(
            overrides=parsed, kv_sep=c.kv_sep, item_sep=c.item_sep, exclude_keys=c.exclude_keys)
    OmegaConf.copy_cache(from_config=master_config, to_config=cfg)
    return cfg


def compose_once(loader: Any) -> Any:
    """Make ``loader.load_sweep_config`` compose each set of overrides once (idempotent); return it."""
    if not isinstance(loader.load_sweep_config, _Once):
        loader.load_sweep_config = _Once(loader.load_sweep_config)
    return loader.load_sweep_config
