"""What the command's config-group choices and the configs they pick (``+best=NAME``,
``+sweep=NAME``) decide, checked before Hydra composes: a pin choosing an option that
does not exist, a pin whose data set overrides the command's, ``interval()`` without a
search sweeper, ``glob()`` on a value. Each raises the caller's ``error`` (one line);
:mod:`sweeper.contract.config` calls them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from sweeper import CONF_DIR
from sweeper.base.hydra_internals import convert_value


__all__ = [
    "CONF_DIR",
    "DATA_SPLIT",
    "conflicts",
    "defaults",
    "given_twice",
    "group_options",
    "layers",
    "option",
    "picks",
    "search_only",
    "sized",
    "some_job",
]

# The split keys every data set shares (val_fraction, test_fraction, split_seed, folds), declared
# once: each conf/data/*.yaml takes them first in its defaults list (``- /data_split@_here_``: at
# the data set's own package, ``data``) and sets after them only what differs (data=xor's
# fractions). A config at the top of conf/, not a group: no choice of ``data=``, no entry of
# hydra.runtime.choices.
DATA_SPLIT = CONF_DIR / "data_split.yaml"


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def layers(path: Path) -> list[Path]:
    """The files Hydra merges into the package of the config file ``path``, in its order: each
    config its defaults list takes at that package (``- /data_split@_here_``: conf/data_split.yaml,
    the split keys of every conf/data/*.yaml), and ``path`` itself at ``_self_`` (last when the list
    names none). A file of the layout before (its own split keys, no defaults list) is itself
    alone."""
    entries = OmegaConf.load(path).get("defaults") or []
    found = []
    for entry in [*entries, *([] if "_self_" in entries else ["_self_"])]:
        if entry == "_self_":
            found.append(path)
        elif isinstance(entry, str) and entry.startswith("/") and entry.endswith("@_here_"):
            found += layers(CONF_DIR / f"{entry[1:].removesuffix('@_here_')}.yaml")
    return found


def option(group: str, name: str) -> Any:
    """The keys and defaults of ``group=name`` as Hydra composes them (unresolved), read from its
    :func:`layers` without composing: what ``--help`` and the reference show, the keys
    ``data.KEY=VALUE`` may name."""
    bodies = [OmegaConf.load(p) for p in layers(CONF_DIR / group / f"{name}.yaml")]
    for body in bodies:
        body.pop("defaults", None)
    return OmegaConf.merge(*bodies)


def defaults(path: Path, group: str) -> list[str]:
    """The option of ``group`` that the defaults list of the config file ``path``
    chooses (``[]``: none)."""
    if not path.is_file():
        return []
    found = []
    for entry in OmegaConf.load(path).get("defaults") or []:
        # {"override /data": "xor"}; a plain string is this file's _self_ etc.
        if OmegaConf.is_dict(entry):
            found += [
                str(v)
                for k, v in entry.items()
                if str(k).removeprefix("override ").strip("/ ") == group
            ]
    return found


def _values(o: Any) -> list[str]:
    """An override's values: its one value, or a list sweep's (a glob or an interval:
    none known here)."""

    if not o.is_sweep_override():
        return [str(o.value())]
    if o.is_discrete_sweep() and not o.value_type.name.startswith("GLOB"):
        return [str(v) for v in o.sweep_iterator(transformer=convert_value)]
    return []


def fixed(path: Path, group: str) -> list[str]:
    """The option of ``group`` that the body of the config file ``path`` fixes (a
    pin's ``data: {name: diabetes}``: merged after the command's ``data=wine``, it
    wins), ``[]`` when it fixes none."""
    if not path.is_file():
        return []
    node = OmegaConf.load(path).get(group)
    name = node.get("name") if OmegaConf.is_dict(node) else None
    return [str(name)] if name is not None else []


def conflicts(overrides: list[Any], groups: tuple[str, ...], error: type[Exception]) -> None:
    """``+best=diabetes_1 data=wine``: the pin's ``data: {name: diabetes, ...}`` is
    merged last in Hydra, so the run would train diabetes while its name and
    ``overrides`` tag say wine; refused in one line. (A named sweep's
    ``override /data: ...`` alone gives way to the command's choice: no conflict.)"""
    for o in overrides:
        if o.key_or_group not in ("best", "sweep") or o.is_sweep_override() or o.is_delete():
            continue
        path = CONF_DIR / o.key_or_group / f"{o.value()}.yaml"
        for mine in overrides:
            group = mine.key_or_group
            if group in ("best", "sweep") or group not in groups or mine.is_delete():
                continue
            picked = fixed(path, group)
            other = [v for v in _values(mine) if picked and v not in picked]
            if other:
                raise error(
                    f"{mine.input_line} conflicts with {o.input_line}, which fixes {group}="
                    f"{picked[0]} "
                    f"({group}.name: {picked[0]} in {path.name}) and wins: the run would train "
                    f"{group}={picked[0]} "
                    f"under the name {mine.input_line}; drop {mine.input_line}, or pin a run of "
                    f"{group}={other[0]}"
                )


def picks(path: Path, arg: str, groups: tuple[str, ...], error: type[Exception]) -> None:
    """A pin or named sweep whose defaults choose an option that does not exist
    (``override /data: nope``): one line naming the file, the choice and the options,
    where Hydra says "Could not find 'data/nope'" over 20."""
    for group in groups:
        for option in defaults(path, group):
            if option not in group_options(group):
                raise error(
                    f"{arg}: {path.name} chooses {group}={option} (override /{group}: {option}), "
                    "which "
                    f"is not allowed: expected one of {', '.join(group_options(group))}"
                )


def search_only(
    o: Any, overrides: list[Any], whole: bool, groups: tuple[str, ...], error: type[Exception]
) -> None:
    """``lr=glob(*)`` (glob() picks among a config group's files) and, under the grid
    sweeper, ``lr=interval(...)`` (a range only a search sweeper can draw from): one
    line, where Hydra raises "ConfigLoader is not set" or "BasicSweeper does not support
    sweep type" with its traceback."""
    key = o.key_or_group
    if o.value_type.name.startswith("GLOB") and key not in groups:
        raise error(
            f"{o.input_line} is not allowed: glob() chooses among the files of a config group "
            f"({', '.join(groups)}; e.g. data=glob(*)): give {key}'s values as a list (a,b,c) or "
            "range()"
        )
    if o.is_interval_sweep() and whole and not searching(overrides):
        raise error(
            f"{o.input_line} is not allowed: interval() is a range for a search sweeper to draw "
            "from: "
            "add +sweep=optuna, or give values (a list a,b,c or range(start,stop,step))"
        )


def searching(overrides: list[Any]) -> bool:
    """Whether the command picks a sweeper other than Hydra's grid (``hydra/sweeper=...``,
    or a ``+sweep=`` config whose defaults override ``/hydra/sweeper``)."""
    for o in overrides:
        if o.key_or_group == "hydra/sweeper" and not o.is_delete() and str(o.value()) != "basic":
            return True
        if o.key_or_group in ("sweep", "best") and not o.is_sweep_override() and not o.is_delete():
            if [
                v
                for v in defaults(CONF_DIR / o.key_or_group / f"{o.value()}.yaml", "hydra/sweeper")
                if v != "basic"
            ]:
                return True
    return any(v != "basic" for v in defaults(CONF_DIR / "config.yaml", "hydra/sweeper"))


def some_job(
    o: Any, values: list[Any] | None, groups: tuple[str, ...], error: type[Exception]
) -> None:
    """A sweep override that gives no value (``lr=range(1,0)``: ``values`` empty) or a
    glob over a config group that matches none of its options (``data=glob(zz*)``): one
    line, where Hydra's sweep ran no job, exited 1 and said nothing."""
    key = o.key_or_group
    if values is not None and not values:
        raise error(
            f"{o.input_line} is not allowed: the range is empty, so the sweep would run no job: "
            "expected a "
            "range with at least one value (range(start,stop[,step]), start < stop for a step > "
            "0) or a list a,b,c"
        )
    if (
        values is None
        and o.value_type.name.startswith("GLOB")
        and key in groups
        and not o.value().filter(group_options(key))
    ):
        raise error(
            f"{o.input_line} is not allowed: it matches none of {key}'s options, so the sweep "
            "would run no job: "
            f"expected a pattern matching one of {', '.join(group_options(key))}"
        )


def given_twice(overrides: list[Any]) -> list[str]:
    """A key given more than once (``depth=1,2 depth=3``, or a script that appends its
    own ``epochs=``): Hydra keeps the last and drops the others without a word; a line
    for each such key, naming what is used."""
    seen: dict[tuple[str, Any], list[Any]] = {}
    for o in overrides:
        if not o.is_delete():
            seen.setdefault((o.key_or_group, o.package), []).append(o)
    lines = [
        f"sweeper: {os_[-1].key_or_group} is given {len(os_)} times ("
        f"{' and '.join(o.input_line for o in os_)}): "
        f"the last, {os_[-1].input_line}, is used"
        for os_ in seen.values()
        if len(os_) > 1
    ]
    return lines + _named_sweeps_replaced(overrides)


def _named_sweeps_replaced(overrides: list[Any]) -> list[str]:
    """A key of a named sweep's or pin's ``hydra.sweeper.params``
    (``+sweep=seed``: ``depth: 1,2``) that the command line gives too: the command's
    value is used (Hydra's rule), and a line says so."""
    given = {o.key_or_group: o for o in overrides if not o.is_delete()}
    out = []
    for o in overrides:
        if o.key_or_group not in ("sweep", "best") or o.is_sweep_override() or o.is_delete():
            continue
        path = CONF_DIR / o.key_or_group / f"{o.value()}.yaml"
        try:
            params = (
                OmegaConf.to_container(OmegaConf.load(path))
                .get("hydra", {})
                .get("sweeper", {})
                .get("params")
                or {}
            )
        # a file that cannot be read (config._readable's errors: check_overrides names it), or
        # whose keys are no mapping (a list, a number: no .get)
        except (yaml.YAMLError, OmegaConfBaseException, ValueError, OSError, AttributeError):
            continue
        out += [
            f"sweeper: {given[k].input_line} replaces {o.input_line}'s {k}: {v}"
            for k, v in params.items()
            if k in given and given[k] is not o
        ]
    return out


# a sweep's jobs from the command line; Hydra's basic sweeper lists every one before the first
MAX_JOBS = 100_000


def sized(overrides: list[Any], error: type[Exception]) -> list[Any]:
    """A ``range()`` whose step is 0 or moves away from its stop, and a command whose
    swept values multiply to more than :data:`MAX_JOBS` jobs, refused in one line before
    any value is listed (before: a traceback from Python's ``range``, or a launching
    process listing 10^9 values at ~25 MB/s without a word). Returns ``overrides``."""

    # lazy: saves ~66 ms at this module's import (measured)
    from hydra.core.override_parser.types import RangeSweep

    total, counts = 1, []
    for o in overrides:
        if (
            not o.is_sweep_override()
            or not o.is_discrete_sweep()
            or o.value_type.name.startswith("GLOB")
        ):
            continue
        v, arg = o.value(), o.input_line
        if isinstance(v, RangeSweep):
            if v.step == 0:
                raise error(
                    f"{arg}: a range's step cannot be 0: write range(start, stop, step) with a "
                    "step that goes "
                    "from start towards stop (e.g. range(10,20,2))"
                )
            n = max(0, math.ceil((v.stop - v.start) / v.step))
        else:
            n = len(v.list)
        counts.append(f"{o.key_or_group}: {n:,}")
        total *= max(n, 1)
        if total > MAX_JOBS:
            raise error(
                f"{arg}: the sweep would have more than {MAX_JOBS:,} jobs ({' × '.join(counts)} "
                "values): "
                "choose fewer values (a larger step), or a search sweeper (+sweep=optuna) for a "
                "large space"
            )
    return overrides
