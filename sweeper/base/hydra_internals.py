"""Hydra's adapter: every name of Hydra's that is not its public API, here and nowhere
else, each with the public call it stands for (or why there is none).
``tests/test_adapters.py`` fails on a private name of Hydra's used outside this module.
Imports nothing of ours but :mod:`sweeper.base.tested`."""

from __future__ import annotations

from typing import Any

from sweeper.base import tested

__all__ = [
    "BASIC_SWEEPER",
    "basic_sweeper",
    "chdir_deprecation",
    "convert_value",
    "fast",
    "flush_loggers",
    "main_hydra",
    "overrides_dirname",
    "reporter",
    "same_return",
    "set_reporter",
]

# The basic (grid) sweeper's ``_target_``, as Hydra's own conf/hydra/sweeper/basic.yaml names it.
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def fast() -> bool:
    """Whether sweeper's own ``run_job`` (:mod:`sweeper.sweep.hydra_run_job`, a copy of Hydra's
    without its copies of the config) may run: Hydra and OmegaConf inside the versions
    the tests ran, and the shortcut ``jobrun`` not turned off (``SWEEPER_PUBLIC_ONLY``).
    Else Hydra's public ``run_job``."""
    return tested.shortcut("jobrun")


def convert_value(value: Any) -> Any:
    """``Override._convert_value``: a swept value as the basic sweeper hands it to a job (no
    public spelling: the transformer Hydra's own sweeper passes to ``Override.sweep_iterator``)."""
    # lazy: saves ~149 ms at this module's import (measured)
    from hydra.core.override_parser.types import Override

    return Override._convert_value(value)


def basic_sweeper() -> type:
    """Hydra's ``BasicSweeper`` class, for its ``split_arguments`` (the grid's batches
    as the sweeper makes them; public only as the plugin ``hydra/sweeper=basic``)."""
    # lazy: saves ~113 ms at this module's import (measured)
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    return BasicSweeper


def overrides_dirname(
    overrides: list[Any], kv_sep: str, item_sep: str, exclude_keys: list[str]
) -> str:
    """``hydra.job.override_dirname`` as Hydra's config loader computes it
    (``get_overrides_dirname``; public only through a composed config)."""
    # lazy: saves ~105 ms at this module's import (measured)
    from hydra._internal.config_loader_impl import get_overrides_dirname

    return get_overrides_dirname(
        overrides=overrides, kv_sep=kv_sep, item_sep=item_sep, exclude_keys=exclude_keys
    )


def main_hydra(task_name: str, conf_dir: str) -> Any:
    """Hydra's app over ``conf_dir`` as ``@hydra.main`` builds it (plugins' search paths too): the
    public ``hydra.initialize_config_dir`` + ``compose`` compose one config, not a multirun."""
    # lazy: saves ~110 ms at this module's import (measured)
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path

    return Hydra.create_main_hydra2(
        task_name=task_name, config_search_path=create_config_search_path(conf_dir)
    )


def reporter() -> Any:
    """The function through which ``@hydra.main`` runs the app and reports its errors
    (``run_and_report``); no public hook exists (``HYDRA_FULL_ERROR`` only widens the report)."""
    # lazy: saves ~105 ms at this module's import (measured)
    from hydra._internal import utils

    return utils.run_and_report


def set_reporter(fn: Any) -> None:
    """``fn`` in place of :func:`reporter`'s, so that a parse error can be made one line."""
    # lazy: saves ~105 ms at this module's import (measured)
    from hydra._internal import utils

    utils.run_and_report = fn


def flush_loggers() -> None:
    """``hydra.core.utils._flush_loggers``, as Hydra's ``run_job`` calls it after a job (the logging
    module's handlers flushed; public: ``logging.shutdown`` flushes them but closes them too)."""
    # lazy: saves ~114 ms at this module's import (measured)
    from hydra.core.utils import _flush_loggers

    _flush_loggers()


def chdir_deprecation(message: str) -> None:
    """Hydra's deprecation warning of a job that changes directory without ``hydra.job.chdir``
    set (as its ``run_job``); public: ``warnings.warn``, which Hydra's own wraps."""
    # lazy: saves ~110 ms at this module's import (measured)
    from hydra._internal.deprecation_warning import deprecation_warning

    deprecation_warning(message=message, stacklevel=3)


def same_return(ret: Any, cls: type) -> Any:
    """A ``JobReturn`` of class ``cls`` (a subclass) with ``ret``'s fields, its stored
    return value included without raising a failed job's exception (the dataclass field
    ``_return_value``; the public ``return_value`` re-raises it)."""
    return cls(
        overrides=ret.overrides,
        hydra_cfg=ret.hydra_cfg,
        working_dir=ret.working_dir,
        task_name=ret.task_name,
        status=ret.status,
        _return_value=ret._return_value,
    )
