"""Hydra's own errors on the command line, seen before Hydra composes (:func:`check_hydra`), so they are one
line and exit 2 instead of Hydra's 4-14 lines and exit 1: an unknown ``hydra.`` key, ``+key=`` for a key
that exists, an unknown ``hydra/launcher=`` or ``hydra/sweeper=``, a sweep without ``-m``, and the batched
launcher's knobs out of range."""
from __future__ import annotations

from typing import Any

# The batched launcher's own keys (plugins/hydra_plugins/sweeper_batched_launcher/config.py) and what they allow.
LAUNCHER_INTS = {"hydra.launcher.max_group_bytes": "an integer >= 0 (bytes; 0 = a quarter of the machine's memory)",
                 "hydra.launcher.max_group_size": "an integer >= 0 (0 = no limit)"}


# Successive halving (sweeper.sweep.halving): allowed values and their least integer.
HALVING = {"hydra.launcher.halving.eta": ("an integer >= 2 (null: no halving)", 2),
           "hydra.launcher.halving.min_epochs": ("an integer >= 1 (null: the largest epochs / eta^3)", 1)}


# Hydra's keys whose values become folders (a sweep's, a run's, a job's).
FOLDERS = ("hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir", "hydra.job.name")


def hydra_groups(group: str) -> list[str]:
    """The options of a Hydra group (``hydra/launcher``): its own configs and those the installed plugins
    register (discovering the plugins imports them: ~0.4 s, paid only when the command names the group)."""
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins

    Plugins.instance()
    names = {n.removesuffix(".yaml") for n in ConfigStore.instance().list(group) if n.endswith(".yaml")}
    try:
        from importlib.resources import files

        names |= {p.name.removesuffix(".yaml") for p in files("hydra.conf").joinpath(group).iterdir()
                  if p.name.endswith(".yaml")}
    except (FileNotFoundError, NotADirectoryError, ModuleNotFoundError):
        pass
    return sorted(names)


def check_hydra(args: list[str], overrides: list[Any], error: type[Exception], top_level: Any,
                whole: bool = True) -> None:
    """Raise ``error`` (one line) for an override of ``args`` (parsed: ``overrides``) that Hydra would refuse
    over several lines; ``top_level`` are the config's own top-level keys; ``whole``: ``args`` is the whole
    command line (else whether ``-m`` was given is unknown)."""
    multirun = not whole or any(a in ("-m", "--multirun") for a in args) or any(
        o.key_or_group == "hydra.mode" for o in overrides)
    for o in overrides:
        key = o.key_or_group
        if not multirun and o.is_sweep_override():
            raise error(f"{o.input_line} is a sweep: add -m (python -m sweeper -m {o.input_line} ...), "
                        "or give one value")
        if o.is_add() and key in top_level:
            raise error(f"{o.input_line}: {key} is already a key of the config: write {o.input_line[1:]} (without +)")
        if key in ("hydra/launcher", "hydra/sweeper") and not o.is_sweep_override() and not o.is_delete():
            options = hydra_groups(key)
            if options and str(o.value()) not in options:
                raise error(f"{key}={o.value()} is not allowed: expected one of {', '.join(options)}")
        if key.startswith("hydra.") and not o.is_add() and not o.is_force_add() and not o.is_delete():
            import dataclasses

            from hydra.conf import HydraConf

            fields = [f.name for f in dataclasses.fields(HydraConf)]
            if key.split(".")[1] not in fields:
                raise error(f"{key} is not a key of Hydra's config: expected hydra.<one of {', '.join(fields)}>")
        if key in FOLDERS and not o.is_sweep_override() and not o.is_delete():
            from pathlib import PurePath

            from sweeper.base.names import name_problem

            for part in PurePath(str(o.value())).parts:
                why = name_problem(part) if part not in ("/", ".", "..") else None
                if why:
                    raise error(f"{key}={str(o.value())[:60]}...: the folder name {part[:40]}... is {why}")
        if key in LAUNCHER_INTS and not o.is_sweep_override():
            v = o.value()
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise error(f"{key}={v} is not allowed: expected {LAUNCHER_INTS[key]}")
        if key in HALVING and not o.is_sweep_override():
            v, (allowed, least) = o.value(), HALVING[key]
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < least):
                raise error(f"{key}={v} is not allowed: expected {allowed}")
