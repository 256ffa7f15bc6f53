"""OmegaConf's adapter: every name of OmegaConf's that is not its public API, here and
nowhere else, each with the public call it stands for. sweeper reads a config's nodes
without resolving them (the public ``cfg[key]`` and ``key in cfg``
resolve interpolations: ~2 ms a job for the experiment's name) and moves a node between
configs without copying it (``sweeper.sweep.hydra_run_job``). ``tests/test_adapters.py`` fails
on a private name of OmegaConf's used outside this module. Imports nothing of ours."""

from __future__ import annotations

from typing import Any

from omegaconf._utils import get_omega_conf_dumper


__all__ = ["content", "dumper", "flag", "node", "plain_mapping", "value"]


def node(cfg: Any, key: Any) -> Any:
    """The node at ``key`` of a container, unresolved (``cfg._get_node(key)``; public:
    ``OmegaConf.select``, which resolves it)."""
    return cfg._get_node(key)


def value(node: Any) -> Any:
    """A value node's raw value, an interpolation as its text
    (``node._value()``; public: none unresolved)."""
    return node._value()


def plain_mapping(node: Any) -> bool:
    """Whether a node is a mapping with entries of its own: not an interpolation, None
    or ``???`` (the public ``OmegaConf.is_interpolation``/``is_missing`` take a parent
    and a key, not the node)."""
    return not node._is_interpolation() and not node._is_none() and not node._is_missing()


def flag(cfg: Any, name: str) -> bool | None:
    """A config's own flag (``struct``, ``readonly``), None when unset there
    (``cfg._get_node_flag``; the public ``OmegaConf.is_struct``/``is_readonly`` answer
    with the inherited value)."""
    return cfg._get_node_flag(name)


def content(cfg: Any) -> dict[Any, Any]:
    """A DictConfig's own dict of nodes (``cfg.__dict__["_content"]``): to hand a node
    to another config without copying or re-parenting it, and to copy a config less one
    key without copying that key (no public call does either: ``OmegaConf.masked_copy``
    and ``del`` copy or re-parent)."""
    return cfg.__dict__["_content"]


def dumper() -> type:
    """OmegaConf's YAML dumper, its string representer quoting what its own loader would
    read as something else (``omegaconf._utils.get_omega_conf_dumper``; public:
    ``OmegaConf.to_yaml``, a whole config at a time)."""

    return get_omega_conf_dumper()
