"""Each job's config composed without Hydra's composition, and planned without composing it at all.

Hydra composes every job of a multirun three times: our check of all jobs before the first one
(``sweep.job_configs``), the sweeper's ``validate_batch_is_legal`` and the launcher
(45-90 ms each on this machine). :func:`compose_once` wraps the config loader of this
process so that each *shape* of overrides is composed by Hydra once:

- a job whose overrides differ from an already composed job's only in the *values* of plain keys
  (``lr=0.01`` vs ``lr=0.02``: no config group, no ``+``/``~``, nothing under
  ``hydra.``) is that job's config with those values set, the way Hydra applies
  a command-line override after composing the defaults list (so the result is the same:
  ``tests/test_compose.py`` checks it against Hydra's own);
- :meth:`Once.plain` gives a job's resolved config (no ``hydra`` node, plain
  containers) from its shape's resolved config with the values set, without composing
  the job: what planning and checking read (O(1) per job, a few KB kept);
- the sweeper's check (``validate_batch_is_legal``, which
  ``sweeper.sweep.resuming_sweeper.validate`` points at :meth:`Once.check`) gets the
  shape's template, nothing composed or kept; the launcher composes each job when it
  runs it (:meth:`Once.take`), so no composed config outlives its job.

A job whose config cannot be resolved outside its job (:func:`resolvable`:
``${hydra:...}``, a ``???`` the task fills in, an interpolation that fails here) has no
plain config here: it runs alone, resolved in its job.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Sequence

from omegaconf import OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException
from sweeper.base.hydra_internals import overrides_dirname
from sweeper.base.tested import shortcut
from sweeper.contract.config import GROUPS

__all__ = ["Once", "compose_once", "plain", "resolvable"]

# a shape's template whose resolved values depend on a swept value (an interpolation names the
# key, or a value is itself an interpolation): each job is composed and resolved on its own
_DEPENDENT = object()


def plain(cfg: Any) -> dict[str, Any]:
    """The resolved job config without the ``hydra`` node, as plain containers (raises
    when it cannot be resolved)."""

    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.pop("hydra", None)
    return OmegaConf.to_container(cfg, resolve=True)


def _strings(node: Any) -> Any:
    if isinstance(node, dict):
        for v in node.values():
            yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)
    elif isinstance(node, str):
        yield node


def interpolations(cfg: Any) -> list[str]:
    """Every value of the job config (no ``hydra`` node) that holds an interpolation, unresolved."""

    raw = OmegaConf.to_container(cfg, resolve=False)
    raw.pop("hydra", None)
    return [s for s in _strings(raw) if "${" in s]


def resolvable(cfg: Any) -> dict[str, Any] | None:
    """:func:`plain`, or None when the config can only be resolved inside its job: it
    reads Hydra's job config (``${hydra:...}``: set by ``run_job``), or its resolution
    fails here (a ``???``, an unset variable)."""
    if any("hydra:" in s for s in interpolations(cfg)):
        return None
    try:
        return plain(cfg)
    # OmegaConf's (a resolver's own error too, which OmegaConf raises as its
    # InterpolationResolutionError): the job resolves it, or reports it
    except OmegaConfBaseException:
        return None


class Once:
    def __init__(self, load: Any):
        self.load = load
        self.cache: dict[tuple[str, ...], Any] = {}
        # (structural overrides, value keys) → a composed config
        self.templates: dict[tuple, Any] = {}
        # shape → its template resolved (plain), None, or _DEPENDENT
        self.plains: dict[tuple, Any] = {}
        self.parsed: dict[str, Any] = {}  # an override → Hydra's parse of it
        self.checked: set[str] = set()  # keys whose quick reading matched Hydra's
        self.groups: set[str] | None = None
        self.lent: dict[tuple, Any] = {}  # shape → the config lent to the launcher (:meth:`lend`)
        # shape → whether its value keys are all in its template
        self.settable: dict[tuple, bool] = {}
        # id of a lent config (alive with self.lent) → what its jobs share
        self.memos: dict[int, dict[str, Any]] = {}

    def __call__(self, master_config: Any, sweep_overrides: Sequence[str]) -> Any:
        """Hydra's launchers' call: the launcher writes into the config
        (``hydra.job.id``, read-only flags) and is its only user. The sweeper's check
        calls :meth:`check` by name (``sweeper.sweep.resuming_sweeper.validate``)."""
        return self.take(master_config, sweep_overrides)

    def check(self, master_config: Any, sweep_overrides: Sequence[str]) -> Any:
        """A config that shows this job composes (not a copy: only for a caller that
        discards it)."""
        parsed, values, shape = self._parse(master_config, list(sweep_overrides), quick=True)
        if shape is not None and shape in self.templates:
            if shape not in self.settable:  # the same keys for every job of the shape
                self.settable[shape] = _settable(self.templates[shape], parsed, values)
            if self.settable[shape]:
                return self.templates[shape]
        return self.peek(master_config, sweep_overrides)

    def peek(self, master_config: Any, sweep_overrides: Sequence[str]) -> Any:
        """The composed config itself, for a caller that only reads it (no copy), kept
        for :meth:`take`."""
        key = tuple(sweep_overrides)
        if key not in self.cache:
            self.cache[key] = self._compose(master_config, list(sweep_overrides))
        return self.cache[key]

    def take(self, master_config: Any, sweep_overrides: Sequence[str]) -> Any:
        """The composed config, handed over to its last user (the launcher): no copy,
        and no longer kept."""
        cfg = self.peek(master_config, sweep_overrides)
        del self.cache[tuple(sweep_overrides)]
        return cfg

    def lend(self, master_config: Any, sweep_overrides: Sequence[str]) -> Any:
        """The job's config for a caller that runs one job at a time and keeps nothing
        of it (the batched launcher hands it to ``run_job``, which copies what it
        keeps): one config per shape, with this job's values set in place — no copy (a
        deep copy of a composed config costs ~25 ms)."""
        overrides = list(sweep_overrides)
        # a number: not Hydra's grammar
        parsed, values, shape = self._parse(master_config, overrides, quick=True)
        if shape is None:
            return self.load(master_config, overrides)
        if shape not in self.lent:  # its own copy: the template stays as Hydra composed it
            self.lent[shape] = copy.deepcopy(self._template(master_config, overrides, shape))
            self.memos[id(self.lent[shape])] = {}
        return _set_values(
            self.lent[shape], [o for o, v in zip(parsed, values) if v], parsed, master_config
        )

    def memo(self, cfg: Any) -> dict[str, Any] | None:
        """A dict that lives as long as ``cfg`` when it is a config :meth:`lend` lends
        (one per shape: its jobs differ only in their values, never in ``hydra.*``
        beyond what each job sets), for what they can share (``sweeper.sweep.hydra_run_job``:
        the YAML of the Hydra config's other sections); None for any other config."""
        # a lent config lives as long as this object: no other shares its id
        return self.memos.get(id(cfg))

    def plain(self, master_config: Any, sweep_overrides: Sequence[str]) -> dict[str, Any] | None:
        """The job's resolved config without ``hydra`` (:func:`resolvable`), from its
        shape's resolved template with the job's values set: no composition, O(1) per
        job. Raises as Hydra's composition would."""
        overrides = list(sweep_overrides)
        parsed, values, shape = self._parse(master_config, overrides, quick=True)
        entry = self.plains.get(shape, _DEPENDENT) if shape is not None else _DEPENDENT
        if shape is not None and shape not in self.plains:
            template = self._template(master_config, overrides, shape)
            keys = [o.key_or_group for o, v in zip(parsed, values) if v]
            found = interpolations(template)
            dependent = any(
                re.search(rf"(?<!\w){re.escape(k)}(?!\w)", s) for k in keys for s in found
            )
            entry = self.plains[shape] = _DEPENDENT if dependent else resolvable(template)
        if entry is None:
            return None
        if entry is not _DEPENDENT:
            out = copy.deepcopy(entry)
            if all(_set(out, o.key_or_group, o.value()) for o, v in zip(parsed, values) if v):
                return out
        # each job on its own (or Hydra's error)
        return resolvable(self._compose(master_config, overrides))

    def _parse(
        self, master_config: Any, overrides: list[str], quick: bool = False
    ) -> tuple[Any, Any, Any]:
        """(overrides parsed, which are plain values, the shape). Each distinct override is
        parsed by Hydra's grammar once (~1.5 ms each); with ``quick``, a ``key=number`` override
        is read without it (a :class:`_Quick`, checked against Hydra's parse once per key)."""

        # lazy: saves ~70 ms at this module's import (measured: hydra's package)
        from hydra.errors import HydraException

        if self.groups is None:
            self.groups = set(GROUPS) | set(master_config.hydra.runtime.choices)
        try:
            parsed = [(quick and self._quick(s)) or self._parsed(s) for s in overrides]
        except HydraException:  # its parser's (OverrideParseException): it reports its own later
            return None, None, None
        values = [_simple(o) and o.key_or_group not in self.groups for o in parsed]
        shape = tuple(f"{o.key_or_group}=" if v else o.input_line for o, v in zip(parsed, values))
        return parsed, values, shape

    def _parsed(self, s: str) -> Any:
        if s not in self.parsed:
            # lazy: saves ~180 ms at this module's import (measured)
            from hydra.core.override_parser.overrides_parser import OverridesParser

            self.parsed[s] = OverridesParser.create().parse_overrides([s])[0]
        return self.parsed[s]

    def _quick(self, s: str) -> Any:
        m = _NUMBER.fullmatch(s)
        if m is None or m["key"].startswith("hydra"):
            return None
        key, text = m["key"], m["value"]
        q = _Quick(key, int(text) if _INT.fullmatch(text) else float(text), s)
        if key not in self.checked:  # once per key: Hydra's grammar reads the same
            o = self._parsed(s)
            if not (
                _simple(o)
                and o.key_or_group == key
                and type(o.value()) is type(q.value())
                and o.value() == q.value()
            ):
                return None
            self.checked.add(key)
        return q

    def _template(self, master_config: Any, overrides: list[str], shape: tuple) -> Any:
        if shape not in self.templates:  # kept as Hydra made it: the configs handed out are copies
            self.templates[shape] = self.load(master_config, overrides)
        return self.templates[shape]

    def _compose(self, master_config: Any, overrides: list[str]) -> Any:
        parsed, values, shape = self._parse(master_config, overrides)
        if shape is None:
            return self.load(master_config, overrides)
        if shape not in self.templates:
            return copy.deepcopy(self._template(master_config, overrides, shape))
        template = self.templates[shape]
        return _with_values(
            template, [o for o, v in zip(parsed, values) if v], parsed, master_config
        )


# ``key=number``: an int or a float as Hydra's override grammar reads them (no ``_``
# separators, no inf/nan)
_NUMBER = re.compile(
    r"(?P<key>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)=(?P<value>[+-]?(?:0|[1-9]\d*|\d+\.\d*|\.\d+"
    r"|(?:\d+|\d+\.\d*|\.\d+)[eE][+-]?\d+))"
)
_INT = re.compile(r"[+-]?(?:0|[1-9]\d*)")


class _Quick:
    """A ``key=number`` override read without Hydra's grammar: what planning reads of an
    ``Override``."""

    __slots__ = ("key_or_group", "_value", "input_line")

    def __init__(self, key: str, value: Any, line: str):
        self.key_or_group, self._value, self.input_line = key, value, line

    def value(self) -> Any:
        return self._value

    def is_sweep_override(self) -> bool:
        return False

    # never a hydra.* key (_quick)
    is_add = is_force_add = is_delete = is_hydra_override = is_sweep_override
    package = None


def _settable(template: Any, parsed: list[Any], values: list[bool]) -> bool:
    """Whether every value override of the job names a key its shape's config has (else
    Hydra's error)."""

    return all(
        OmegaConf.select(template, o.key_or_group, default=_DEPENDENT) is not _DEPENDENT
        for o, v in zip(parsed, values)
        if v
    )


def _set(out: dict[str, Any], key: str, value: Any) -> bool:
    """Set ``key`` (dotted) in a plain config to an override's value, as Hydra would;
    False when it cannot be done here (a key the config lacks: Hydra's error; a value
    that is itself an interpolation)."""
    if isinstance(value, str) and "${" in value:
        return False
    *parents, last = key.split(".")
    node = out
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict) or last not in node or isinstance(node[last], (dict, list)):
        return False
    node[last] = value
    return True


def _simple(o: Any) -> bool:
    """A plain ``key=scalar`` override: applied by Hydra as a value once the defaults
    list is composed (a dict or list value is merged into what it replaces, so it stays
    part of the shape)."""
    return (
        not o.is_sweep_override()
        and not o.is_add()
        and not o.is_force_add()
        and not o.is_delete()
        and o.package is None
        and not o.key_or_group.startswith("hydra")
        and not isinstance(o.value(), (dict, list))
    )


def _with_values(template: Any, values: list[Any], parsed: list[Any], master_config: Any) -> Any:
    """``template`` (composed by Hydra for overrides of the same shape) with this job's
    ``values``."""
    return _set_values(copy.deepcopy(template), values, parsed, master_config)


def _set_values(cfg: Any, values: list[Any], parsed: list[Any], master_config: Any) -> Any:
    """``cfg`` (a config of the job's shape) given this job's ``values`` and overrides, in place."""

    for o in values:
        OmegaConf.update(cfg, o.key_or_group, o.value(), merge=True)  # as Hydra applies an override
    # as Hydra's loader: hydra.* overrides are the shape's (in its template's
    # hydra.overrides.hydra), not the task's
    task = [o for o in parsed if not o.is_hydra_override()]
    with (
        read_write(cfg.hydra),
        open_dict(cfg.hydra),
    ):  # a config lent before: run_job made its hydra read-only
        cfg.hydra.overrides.task = [o.input_line for o in task]
        c = cfg.hydra.job.config.override_dirname
        cfg.hydra.job.override_dirname = overrides_dirname(
            task, c.kv_sep, c.item_sep, c.exclude_keys
        )
    OmegaConf.copy_cache(from_config=master_config, to_config=cfg)
    return cfg


class _Public:
    """:class:`Once`'s calls, each job composed by Hydra
    (``SWEEPER_PUBLIC_ONLY=compose``: the shortcut off): what Hydra's own sweeper and
    launcher do, for the benchmark that measures the shortcut (and to rule it out)."""

    def __init__(self, load: Any):
        self.load = load

    def __call__(self, master_config: Any, sweep_overrides: Sequence[str]) -> Any:
        return self.load(master_config, list(sweep_overrides))

    lend = take = peek = __call__

    def memo(self, cfg: Any) -> None:
        return None

    def plain(self, master_config: Any, sweep_overrides: Sequence[str]) -> dict[str, Any] | None:
        return resolvable(self.load(master_config, list(sweep_overrides)))


def compose_once(loader: Any) -> Any:
    """Make ``loader.load_sweep_config`` compose each set of overrides once (idempotent);
    return it. With the shortcut ``compose`` off, a :class:`_Public` that composes each
    job through Hydra (the sweeper's check, then Hydra's own ``validate_batch_is_legal``,
    then the launcher's: three times, as without sweeper)."""
    if not isinstance(loader.load_sweep_config, (Once, _Public)):
        loader.load_sweep_config = (Once if shortcut("compose") else _Public)(
            loader.load_sweep_config
        )
    return loader.load_sweep_config
