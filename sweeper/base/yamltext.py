"""YAML text as ``OmegaConf.to_yaml`` writes it (block style, keys in order, strings
that would read back as numbers or booleans quoted), emitted by libyaml when PyYAML
has it: ~20x faster than PyYAML's pure-Python emitter, which a sweep pays for every
job's ``.hydra`` files and ``config_resolved.yaml``. Imports nothing of ours but
OmegaConf's adapter and the output's masking of passwords."""

from __future__ import annotations

import functools
from typing import Any

import yaml

from sweeper.base.omegaconf_internals import dumper
from sweeper.base.output import masked


__all__ = ["dump"]


@functools.cache
def _dumper() -> type:
    """OmegaConf's YAML dumper (its string representer) on libyaml's emitter."""

    base = dumper()
    if not getattr(yaml, "__with_libyaml__", False):
        return base

    class Dumper(yaml.CDumper):  # the same representer (yaml.Dumper's), the C emitter
        pass

    Dumper.add_representer(str, base.str_representer)
    return Dumper


def dump(container: Any) -> str:
    """``OmegaConf.to_yaml(container)`` for a plain container (dicts, lists, scalars):
    the same document."""
    text = yaml.dump(
        container, default_flow_style=False, allow_unicode=True, sort_keys=False, Dumper=_dumper()
    )
    return masked(text)  # a URI's password (tracking.uri) is in no YAML file sweeper writes
