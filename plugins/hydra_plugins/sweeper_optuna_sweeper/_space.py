"""The search space: ``hydra.sweeper.params`` and the command's overrides, in Hydra's
override syntax, as Optuna distributions (``interval()``, ``tag(log, interval())``,
``choice()`` or a list, ``range()``) and the fixed overrides every trial gets. Bad input
is a :class:`sweeper.contract.config.ConfigError` naming the key and the value."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Transformer
from hydra.errors import HydraException
from sweeper.contract.config import GROUPS, TOP_LEVEL, ConfigError, check_overrides, check_value

__all__ = ["Space", "parse"]

PARAMS = "hydra.sweeper.params"


@dataclass
class Space:
    distributions: dict[str, Any] = field(default_factory=dict)  # key -> optuna distribution
    fixed: list[str] = field(default_factory=list)  # overrides every trial gets, as written
    # swept key -> its value as written (the parent's params)
    written: dict[str, str] = field(default_factory=dict)

    def overrides(self, params: dict[str, Any]) -> tuple[str, ...]:
        """A trial's overrides: its sampled values, then the fixed ones."""
        return tuple(f"{k}={_text(v)}" for k, v in params.items()) + tuple(self.fixed)


def _text(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def parse(params: dict[str, Any], arguments: list[str]) -> Space:
    """The space of ``params`` (``hydra.sweeper.params``) and the command's ``arguments``; a key
    in both takes the command's value (a fixed value there takes the key out of the space)."""

    lines = [f"{k}={v}" for k, v in params.items()]
    parser = OverridesParser.create()
    for line in lines:
        try:
            parser.parse_overrides([line])
        except HydraException as e:
            first = next((ln for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
            raise ConfigError(
                f"{PARAMS}.{line} is not a valid override ({first.strip()})"
            ) from None
    try:
        # choices, ranges, groups and unknown keys, in one line
        check_overrides(lines + list(arguments))
    except ConfigError as e:
        key = re.match(r"[^= ]*", str(e)).group(0)
        raise ConfigError(
            f"{PARAMS}.{e}"
            if key in params and not any(a.startswith(f"{key}=") for a in arguments)
            else str(e)
        ) from None
    # key -> (override, where it comes from), the command's last
    chosen: dict[str, tuple[Any, str]] = {}
    for line, where in [(ln, f"{PARAMS}.") for ln in lines] + [(a, "") for a in arguments]:
        (o,) = parser.parse_overrides([line])
        key = o.get_key_element() if not o.is_delete() else line
        chosen.pop(key.lstrip("+~"), None)
        chosen[key.lstrip("+~")] = (o, where)
    space = Space()
    for o, where in chosen.values():
        if o.is_delete() or not o.is_sweep_override():
            space.fixed.append(o.input_line)
            continue
        key = o.get_key_element()
        space.distributions[key] = distribution(o, where)
        space.written[key] = o.input_line.partition("=")[2]
    if not space.distributions:
        raise ConfigError(
            f"{PARAMS} has no search space: give at least one key interval(), choice() or range()"
        )
    return space


def distribution(o: Any, where: str) -> Any:
    """The Optuna distribution of one sweep override ``o``."""
    # lazy: saves ~174 ms at this module's import (measured)
    from optuna.distributions import CategoricalDistribution

    key = o.get_key_element()
    written = f"{where}{key}={o.input_line.partition('=')[2]}"
    if o.is_interval_sweep():
        return _interval(o, key, written)
    if o.is_range_sweep() and not o.value().shuffle:
        return _range(o, written)
    # choice(), a list, a shuffled range
    if o.is_discrete_sweep() and not o.value_type.name.startswith("GLOB"):
        choices = list(dict.fromkeys(o.sweep_iterator(transformer=Transformer.encode)))
        for x in choices:
            if not isinstance(x, (str, int, float, bool, type(None))):
                raise ConfigError(
                    f"{written} is not allowed: a choice holds str, int, float, bool or null values"
                )
        return CategoricalDistribution(choices)
    raise ConfigError(
        f"{written} is not allowed: expected interval(), tag(log, interval()), choice() or range()"
    )


def _interval(o: Any, key: str, written: str) -> Any:
    """``interval(low, high)`` (``tag(log, ...)``: a log scale) as an Int-
    or FloatDistribution, its bounds checked against the key's own rule."""
    # lazy: saves ~181 ms at this module's import (measured)
    from optuna.distributions import FloatDistribution, IntDistribution

    rule = TOP_LEVEL.get(key.lstrip("+"))
    v = o.value()
    low, high, log = v.start, v.end, "log" in v.tags
    if key in GROUPS:
        raise ConfigError(
            f"{written} is not allowed: {key} is a config group: expected choice(...)"
        )
    if not low < high:
        raise ConfigError(f"{written} is not allowed: expected interval(low, high) with low < high")
    if log and low <= 0:
        raise ConfigError(f"{written} is not allowed: a log scale needs low > 0")
    # Hydra reads interval()'s bounds as floats: an integer key (epochs, depth,
    # width...) or bounds written without a point make an integer interval
    integer = rule is not None and "integer" in rule.allowed
    whole = float(low).is_integer() and float(high).is_integer()
    integral = whole and (integer or not any(c in written.partition("=")[2] for c in ".eE"))
    if integer and not whole:
        raise ConfigError(
            f"{written} is not allowed: {key} is an integer: expected interval(int, int)"
        )
    if rule is not None:
        for bound in (low, high):
            try:
                check_value(key, int(bound) if integral else bound, rule)
            except ConfigError as e:
                raise ConfigError(f"{written} is not allowed: {e}") from None
    if integral:
        return IntDistribution(int(low), int(high), log=log)
    return FloatDistribution(float(low), float(high), log=log)


def _range(o: Any, written: str) -> Any:
    """``range(start, stop, step)`` (not shuffled) as a stepped Int-
    or FloatDistribution (one value: categorical)."""
    # lazy: saves ~173 ms at this module's import (measured)
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    values = list(o.sweep_iterator())
    if not values:
        raise ConfigError(f"{written} is not allowed: the range is empty")
    r = o.value()
    if len(values) == 1:
        return CategoricalDistribution(values)
    if all(isinstance(x, int) for x in values):
        return (
            IntDistribution(values[0], values[-1], step=int(r.step))
            if r.step > 0
            else IntDistribution(values[-1], values[0], step=-int(r.step))
        )
    return FloatDistribution(min(values), max(values), step=abs(float(r.step)))
