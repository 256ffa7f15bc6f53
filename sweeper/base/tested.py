"""The versions of MLflow, Hydra and OmegaConf the tests ran, declared once.

sweeper's shortcuts past a framework's public API (:data:`sweeper.base.environment.SHORTCUTS`)
are asked for by name (:func:`shortcut`). Those that reach into these packages' internals
(their adapters: :mod:`sweeper.tracking.bulk` for MLflow, :mod:`sweeper.base.hydra_internals`
and :mod:`sweeper.base.omegaconf_internals`) are switched on only where the installed version
is inside :data:`TESTED`; outside it the public calls run (slower, correct) and one log line
says so (:func:`within`). ``SWEEPER_PUBLIC_ONLY`` turns any of them off by name.
pyproject.toml's bounds allow up to the next major version; ``.ci/run`` installs the newest
versions those bounds allow in a fresh environment and runs the whole suite against them.
Imports nothing of ours but :mod:`sweeper.base.environment`."""

from __future__ import annotations

import importlib
import logging
from functools import lru_cache
from types import MappingProxyType, ModuleType

from sweeper.base.environment import SHORTCUTS, turned_off_by

__all__ = [
    "DISTRIBUTION",
    "PUBLIC_ONLY",
    "TESTED",
    "inside",
    "installed",
    "optional",
    "shortcut",
    "within",
]

log = logging.getLogger("sweeper")

# distribution -> (lowest, below): the versions the suite ran with, lowest included, below excluded
# (mlflow 3.17.2 and 3.18.0: the whole suite on each; 3.13-3.16 were not run;
# hydra-core 1.3.8; omegaconf 2.3.1).
TESTED = MappingProxyType(
    {
        "mlflow": ("3.17.2", "3.19"),
        "hydra-core": ("1.3.8", "1.4"),
        "omegaconf": ("2.3.1", "2.4"),
        # MLflow's web UI, whose shared view state (sweeper.tracking.ui) is internal
        # UI state: checked in a browser (bench/ui_check.py, headless Chromium) on 3.17.2 and
        # 3.18.0; outside it the address sweeper prints carries the sort alone
        "mlflow-ui": ("3.17.2", "3.19"),
    }
)
# a TESTED entry that is a part of a distribution: the distribution
DISTRIBUTION = MappingProxyType({"mlflow-ui": "mlflow"})
# SWEEPER_PUBLIC_ONLY=1: the public calls everywhere, as outside the tested range (to
# compare or to rule us out); SWEEPER_PUBLIC_ONLY=jobrun,bulk: those shortcuts only
PUBLIC_ONLY = "SWEEPER_PUBLIC_ONLY"


def _key(version: str) -> tuple[int, ...]:
    """``"3.17.2"`` → (3, 17, 2); a pre-release's letters end its number
    (``"3.19.0rc1"`` → (3, 19, 0))."""
    out = []
    for part in version.split(".")[:4]:
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        out.append(int(digits or 0))
        if len(digits) < len(part):
            break
    return tuple(out)


def inside(version: str, lowest: str, below: str) -> bool:
    return _key(lowest) <= _key(version) < _key(below)


@lru_cache(maxsize=None)
def within(dist: str) -> bool:
    """Whether the installed ``dist`` is inside the range the tests ran; when it is not,
    one log line, once a process, says that its public calls are used instead."""
    lowest, below = TESTED[dist]
    version = installed(DISTRIBUTION.get(dist, dist)) or "0"
    if inside(version, lowest, below):
        return True
    if dist in DISTRIBUTION:
        log.warning(
            "%s %s is outside the versions in which sweeper checked %s (>=%s,<%s): sweeper does "
            "without it",
            DISTRIBUTION[dist],
            version,
            dist,
            lowest,
            below,
        )
    else:
        log.warning(
            "%s %s is outside the versions sweeper's tests ran (>=%s,<%s): its public calls are "
            "used "
            "(correct, slower)",
            dist,
            version,
            lowest,
            below,
        )
    return False


@lru_cache(maxsize=None)
def shortcut(name: str) -> bool:
    """Whether sweeper's shortcut ``name`` (a key of :data:`SHORTCUTS`) runs: not turned off
    by ``SWEEPER_PUBLIC_ONLY`` (one log line, once a process, names the public path that runs
    instead) and each package it reaches into inside its tested range (:func:`within`)."""
    packages, _, public = SHORTCUTS[name]
    if (setting := turned_off_by(name)) is not None:
        log.info("%s: the shortcut %s is off: %s", setting, name, public)
        return False
    return all([within(dist) for dist in packages])  # each package outside its range said


@lru_cache(maxsize=None)
def installed(dist: str) -> str | None:
    """The installed version of distribution ``dist``; None where it is not installed. Asked
    once a process: each logged model pins three (``pyfunc.requirements_for``), and each
    lookup scans the path's distributions (~1 ms: 92 ms for a 32-model sweep's 96, measured)."""
    # 12 ms of imports, only once a version is asked for
    # lazy: saves ~17 ms at this module's import (measured)
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def optional(name: str) -> ModuleType | None:
    """The module ``name`` of an optional dependency (psutil, joblib, fcntl that Windows lacks),
    imported when first asked for; None where it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
