"""Hydra's ``run_job`` for sweeper's own jobs, without its copies of the whole configuration.

:func:`hydra.core.utils.run_job` is what every Hydra launcher calls per job: it sets the job's
``HydraConfig`` (twice), makes the output folder (and enters it when ``hydra.job.chdir``),
configures the job's logging, writes ``.hydra/config.yaml``, ``hydra.yaml`` and
``overrides.yaml``, calls the callbacks and the task, and returns a ``JobReturn``. It does so
by deep-copying the composed config (the ``hydra`` node alone is ~1 MB of nodes) four times and
dumping it with PyYAML's pure-Python emitter: ~100 ms a job on this machine, more than training
and recording a small configuration together (measured with ``bench/sweep_bench.py --configs``).

:func:`run_job` here does the same steps in the same order with the same outcome, for the batched
launcher's own jobs (a sweeper config lent by :meth:`sweeper.contract.compose.Composer.lend`,
which sets each job's values on one config per shape): ``HydraConfig`` holds the job's ``hydra``
node itself, not a copy (its parent is the job's config, as Hydra's ``set_config`` arranges); the
task gets a copy of the config without ``hydra`` (the node is left out of the copy rather than
copied and deleted); the YAML files are the same documents written by libyaml's emitter when
PyYAML has it. Another app's config goes through Hydra's own ``run_job``.
"""

from __future__ import annotations

import copy
import logging
import os
from enum import Enum
from pathlib import Path
from typing import Any

from hydra import version
from hydra.core.utils import JobReturn, JobRuntime, JobStatus, configure_log, env_override
from omegaconf import Container, DictConfig, OmegaConf, open_dict, read_write

from hydra.core.hydra_config import HydraConfig
from sweeper.base import yamltext
from sweeper.base.hydra_internals import chdir_deprecation, flush_loggers, same_return
from sweeper.base.omegaconf_internals import content, flag, node, plain_mapping, value as raw_value

__all__ = ["hydra_yaml", "lean", "run_job", "to_yaml"]

log = logging.getLogger(__name__)


def to_yaml(cfg: Any) -> str:
    """``OmegaConf.to_yaml(cfg)``: the same document (unresolved,
    enums as names), emitted by libyaml."""
    return yamltext.dump(OmegaConf.to_container(cfg, resolve=False, enum_to_str=True))


# What differs between the jobs of one lent config: the task's overrides
# (hydra.overrides.task), hydra.job's num, id and override_dirname, hydra.runtime.output_dir.
# ``hydra.*`` overrides are part of a shape (sweeper.contract.compose), so everything else in
# a job's Hydra config is the same for its jobs.
PER_JOB = frozenset(
    {
        ("overrides", "task"),
        ("job", "num"),
        ("job", "id"),
        ("job", "override_dirname"),
        ("runtime", "output_dir"),
    }
)
_ABOVE = frozenset(p[:i] for p in PER_JOB for i in range(1, len(p)))  # the mappings that hold them


def hydra_yaml(holder: DictConfig, memo: dict[Any, str] | None = None) -> str:
    """``to_yaml(holder)`` of a job's Hydra config (``{"hydra": node}``), an entry at
    a time: with ``memo`` (the lent config's, :meth:`sweeper.contract.compose.Once.memo`)
    only the entries of :data:`PER_JOB` are written for each job, every other entry once
    for all its jobs (a whole ``hydra.yaml`` was ~10 ms a job). The same document: a block
    mapping is its entries one after another, each dumped here at its own depth under the
    same keys as in the whole (same indentation, so the same line folding)."""
    if memo is None:
        return to_yaml(holder)
    parts = ["hydra:\n"]
    _entries(node(holder, "hydra"), (), memo, parts)
    return "".join(parts) if len(parts) > 1 else to_yaml(holder)


def _entries(mapping: DictConfig, path: tuple, memo: dict[Any, str], parts: list[str]) -> None:

    for key in mapping.keys():
        at = path + (key,)
        child = node(mapping, key)
        # its key, then its entries
        if at in _ABOVE and isinstance(child, DictConfig) and len(child) and plain_mapping(child):
            if ("header", at) not in memo:
                memo[("header", at)] = _dump_at(at, {"x": 0}).splitlines(keepends=True)[0]
            parts.append(memo[("header", at)])
            _entries(child, at, memo, parts)
            continue
        text = memo.get(at) if at not in PER_JOB else None
        if text is None:
            if isinstance(child, Container):
                raw = OmegaConf.to_container(child, resolve=False, enum_to_str=True)
            else:  # a scalar, as to_container writes it
                raw = raw_value(child)
                if isinstance(raw, Enum):
                    raw = raw.name
            text = _dump_at(at, raw)
            if at not in PER_JOB:
                memo[at] = text
        parts.append(text)


def _dump_at(path: tuple, value: Any) -> str:
    """The YAML of the entry ``hydra.<path> = value`` as the whole
    document writes it (the lines of the mappings above it left out)."""
    doc: Any = value
    for key in reversed(path):
        doc = {key: doc}
    lines = yamltext.dump({"hydra": doc}).splitlines(keepends=True)
    return "".join(lines[len(path) :])


def _save(text: str, filename: str, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / filename).write_text(text, encoding="utf-8")


def _holder(config: DictConfig) -> DictConfig:
    """What ``HydraConfig.set_config(config)`` stores — a config whose
    only key is ``hydra``, that node's parent being ``config`` —
    holding the job's own ``hydra`` node instead of a copy of it."""
    OmegaConf.set_readonly(config.hydra, True)
    holder = OmegaConf.create({})
    content(holder)["hydra"] = node(config, "hydra")  # not re-parented: its parent stays config
    return holder


def _task_config(config: DictConfig) -> DictConfig:
    """``deepcopy(config)`` less its ``hydra`` key, without copying
    that node: it is set aside for the copy."""
    nodes = content(config)
    kept = dict(nodes)
    del nodes["hydra"]
    try:
        return copy.deepcopy(config)
    finally:  # the keys back in their order
        nodes.clear()
        nodes.update(kept)


def run_job(
    task_function: Any,
    config: DictConfig,
    job_dir_key: str,
    job_subdir_key: str | None,
    hydra_context: Any,
    configure_logging: bool = True,
    memo: dict[str, Any] | None = None,
) -> Any:
    """:func:`hydra.core.utils.run_job`, step for step, without its copies (the module's
    docstring). ``memo``: what the jobs of a lent config share (:func:`hydra_yaml`)."""

    callbacks = hydra_context.callbacks
    old_cwd = os.getcwd()
    instance = HydraConfig.instance()
    orig_hydra_cfg = instance.cfg
    # the job's Hydra config, for ${hydra:...} in the output folder's keys
    instance.cfg = _holder(config)
    output_dir = str(OmegaConf.select(config, job_dir_key))
    if job_subdir_key is not None:
        output_dir = os.path.join(output_dir, str(OmegaConf.select(config, job_subdir_key)))
    with read_write(config.hydra.runtime), open_dict(config.hydra.runtime):
        config.hydra.runtime.output_dir = os.path.abspath(output_dir)
    instance.cfg = hydra_cfg = _holder(config)
    _chdir = None
    try:
        ret = JobReturn()
        task_cfg = _task_config(config)
        ret.cfg = task_cfg
        ret.hydra_cfg = hydra_cfg
        ret.overrides = OmegaConf.to_container(config.hydra.overrides.task)
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        _chdir = _job_chdir(hydra_cfg)
        if _chdir:
            os.chdir(output_dir)
            ret.working_dir = output_dir
        else:
            ret.working_dir = os.getcwd()
        if configure_logging:
            configure_log(config.hydra.job_logging, config.hydra.verbose)
        _save_configs(config, task_cfg, hydra_cfg, memo)
        with env_override(hydra_cfg.hydra.job.env_set):
            callbacks.on_job_start(config=config, task_function=task_function)
            try:
                ret.return_value = task_function(task_cfg)
                ret.status = JobStatus.COMPLETED
            except Exception as e:  # noqa: BLE001  (as Hydra's run_job: the JobReturn carries it)
                ret.return_value = e
                ret.status = JobStatus.FAILED
        ret.task_name = JobRuntime.instance().get("name")
        flush_loggers()
        callbacks.on_job_end(config=config, job_return=ret)
        return ret
    finally:
        instance.cfg = orig_hydra_cfg
        if _chdir:
            os.chdir(old_cwd)


def _job_chdir(hydra_cfg: DictConfig) -> bool:
    """Whether the job runs in its output folder (``hydra.job.chdir``; unset: Hydra's default for
    its version base, with Hydra's deprecation warning where that default changes the folder)."""
    chdir = hydra_cfg.hydra.job.chdir
    if chdir is None:
        chdir = not version.base_at_least("1.2")
        if chdir:
            chdir_deprecation(
                "Future Hydra versions will no longer change working directory at job runtime by "
                "default.\n"
                "See https://hydra.cc/docs/1.2/upgrades/1.1_to_1.2/changes_to_job_working_dir/ "
                "for more "
                "information."
            )
    return chdir


def _save_configs(
    config: DictConfig, task_cfg: DictConfig, hydra_cfg: DictConfig, memo: dict[str, Any] | None
) -> None:
    """The job's ``config.yaml``, ``hydra.yaml`` and ``overrides.yaml``
    in ``hydra.output_subdir`` (none: not saved)."""
    if config.hydra.output_subdir is not None:
        folder = Path(config.hydra.runtime.output_dir) / Path(config.hydra.output_subdir)
        _save(to_yaml(task_cfg), "config.yaml", folder)
        _save(hydra_yaml(hydra_cfg, memo), "hydra.yaml", folder)
        _save(to_yaml(config.hydra.overrides.task), "overrides.yaml", folder)


class LeanReturn(JobReturn):
    """A finished job's ``JobReturn`` whose ``cfg`` is kept as its plain container (~3
    KB a job instead of ~20 KB of OmegaConf nodes: Hydra's sweeper keeps every job's
    return until the sweep ends, ~190 MB for 10,000 jobs) and read as a config equal
    to the job's, with its flags (struct, read-only): a new one at each read."""

    @property  # type: ignore[override]
    def cfg(self) -> Any:
        if "_plain" in self.__dict__:
            return OmegaConf.create(self.__dict__["_plain"], flags=self.__dict__["_flags"])
        return self.__dict__.get("_cfg")

    @cfg.setter
    def cfg(self, value: Any) -> None:
        self.__dict__.pop("_plain", None)
        self.__dict__["_cfg"] = value


def lean(ret: JobReturn) -> JobReturn:
    """``ret`` as a :class:`LeanReturn`; ``ret`` itself when its
    config is not a plain one (a structured config)."""
    cfg = ret.cfg
    if (
        type(ret) is not JobReturn
        or not isinstance(cfg, DictConfig)
        or OmegaConf.get_type(cfg) not in (dict, None)
    ):
        return ret
    out = same_return(ret, LeanReturn)
    out.__dict__["_plain"] = OmegaConf.to_container(cfg, resolve=False)
    out.__dict__["_flags"] = {
        f: flag(cfg, f) for f in ("struct", "readonly") if flag(cfg, f) is not None
    }
    return out
