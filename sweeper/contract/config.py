"""The configuration contract: which keys exist and which values they allow (the
fingerprint of a run: :mod:`sweeper.contract.fingerprint`).

Every check turns bad input into a :class:`ConfigError` whose message is one line naming the key,
the value and what is allowed. Checks run before any work: on the command line before Hydra
composes (:func:`check_overrides`), on every job of a multirun before the first job starts
(``sweeper.sweep.callbacks``) and on the composed config of each job (:func:`validate`).

Plain YAML plus these rules is used instead of a Hydra structured config because Hydra reports
a structured-config type error over several lines and before our code can word it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from sweeper import CONF_DIR, ROOT
from sweeper.base.hydra_internals import convert_value
from sweeper.base.files import MAX_NAME_BYTES, uri_problem
from sweeper.base.fmt import near, number
from sweeper.base.omegaconf_internals import node as node_at, value as raw_value
from sweeper.contract import choices

# group_options: re-exported
from sweeper.contract.choices import defaults as _defaults, group_options  # noqa: F401


__all__ = [
    "ADDED_DEFAULTS",
    "ConfigError",
    "DATA",
    "DATA_ADDED_DEFAULTS",
    "DOWNLOAD",
    "EXPERIMENT",
    "GROUPS",
    "MAX_EPOCHS",
    "METADATA",
    "NOT_FINGERPRINTED",
    "SEP_NAMES",
    "SPLIT",
    "TOP_LEVEL",
    "TRACKING",
    "check_overrides",
    "check_value",
    "experiment_name",
    "group_options",
    "resolve_experiment",
    "validate",
]


def experiment_name(data_name: str, path: str = "", task: str = "auto") -> str:
    """The default experiment of a data set: its name, and for a user file
    (``data=csv``, ``data=text``) the file's stem too (``csv-sales``), so that unrelated
    files are not ranked together; a task the command forces (``data.task=regression``)
    is appended (``csv-sales-regression``), so that a file run both as classes (auto)
    and as a number ranks each in its own experiment. ``${sweeper_experiment:...}``."""
    if data_name not in ("csv", "text") or not path:
        return data_name
    stem = Path(path.removesuffix(".gz")).stem  # sales.csv.gz: csv-sales
    return f"{data_name}-{stem}" + ("" if task in ("auto", "", None) else f"-{task}")


# conf/tracking/{local,server}.yaml's tracking.experiment
EXPERIMENT = (
    "${sweeper_experiment:${data.name},${oc.select:data.path,''},${oc.select:data.task,auto}}"
)
_MISSING = object()


def resolve_experiment(cfg: Any) -> None:
    """Set ``tracking.experiment`` when it is :data:`EXPERIMENT` to what OmegaConf resolves it to —
    the resolver called with the same arguments, read with ``OmegaConf.select`` — without
    OmegaConf's grammar (~2 ms a job for this interpolation, paid by every job of a sweep). Anything
    else (another interpolation, values that are interpolations themselves) is left to OmegaConf."""

    tracking = node_at(cfg, "tracking")  # not ``in``: it would resolve the value it looks for
    node = node_at(tracking, "experiment") if isinstance(tracking, DictConfig) else None
    if node is None or raw_value(node) != EXPERIMENT:
        return
    args = [
        OmegaConf.select(cfg, "data.name", default=_MISSING),
        OmegaConf.select(cfg, "data.path", default=""),
        OmegaConf.select(cfg, "data.task", default="auto"),
    ]
    if _MISSING in args or any(OmegaConf.is_config(a) for a in args):
        return
    cfg.tracking.experiment = experiment_name(*args)


if not OmegaConf.has_resolver("sweeper_root"):
    OmegaConf.register_new_resolver("sweeper_root", lambda: ROOT.as_posix())
if not OmegaConf.has_resolver("sweeper_experiment"):
    OmegaConf.register_new_resolver("sweeper_experiment", experiment_name)


class ConfigError(ValueError):
    """A configuration value that is not allowed; the message is one line."""


@dataclass(frozen=True)
class Rule:
    """What one key allows: ``check(value)`` is true for allowed values; ``allowed``
    says it in words."""

    allowed: str
    check: Callable[[Any], bool]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)


def integer(ge: int) -> Rule:
    return Rule(f"an integer >= {ge}", lambda v: _is_int(v) and v >= ge)


def positive_number() -> Rule:
    return Rule("a number > 0", lambda v: _is_number(v) and v > 0)


def fraction() -> Rule:
    return Rule("a number in [0, 1)", lambda v: _is_number(v) and 0 <= v < 1)


def choice(*options: str) -> Rule:
    return Rule("one of " + ", ".join(options), lambda v: v in options)


def text() -> Rule:
    return Rule("a non-empty string", lambda v: isinstance(v, str) and v != "")


# The most epochs a run may ask for: 10^8 full passes take ~20 minutes for the smallest
# net (~10 us an epoch) and days for most; a number past it is a typo
# (epochs=99999999999999999999999 trained forever), refused before any work
MAX_EPOCHS = 100_000_000
TOP_LEVEL: MappingProxyType[str, Rule] = MappingProxyType(
    {
        "lr": positive_number(),
        "epochs": Rule(
            f"an integer from 1 to {MAX_EPOCHS:,}", lambda v: _is_int(v) and 1 <= v <= MAX_EPOCHS
        ),
        "depth": integer(ge=0),
        "width": integer(ge=1),
        "activation": choice("relu", "tanh", "sigmoid"),
        "device": choice("cpu", "gpu"),
        "seed": integer(ge=0),
        "dtype": choice("float32", "float64"),
        "log_every": integer(ge=1),
        "patience": integer(ge=0),
        "sync_every_epoch": Rule("true or false", lambda v: isinstance(v, bool)),
        "resume": Rule("true or false", lambda v: isinstance(v, bool)),
        "optimizer": choice("gd", "momentum", "adam"),
        "momentum": fraction(),
        "nesterov": Rule("true or false", lambda v: isinstance(v, bool)),
        "beta1": fraction(),
        "beta2": fraction(),
        "eps": positive_number(),
        "batch_size": Rule("an integer >= 0 (0 = the full batch)", lambda v: _is_int(v) and v >= 0),
        "weight_decay": Rule("a number >= 0", lambda v: _is_number(v) and v >= 0),
        "baselines": Rule(
            "auto, a comma list of linear, boosting, or none", lambda v: _baselines(v)
        ),
    }
)

# The top-level keys that are sweeper's MLP's hyperparameters (a model of the interface
# has its own: model.*).


def _baselines(value: Any) -> bool:
    """``baselines``: references fitted at a sweep's end (sweeper.insight.baselines),
    not part of any run."""
    names = (
        [str(v).strip() for v in value]
        if isinstance(value, (list, tuple)) or OmegaConf.is_list(value)
        else [v.strip() for v in str(value).split(",")]
    )
    return names in (["none"], ["auto"]) or (
        bool(names) and all(n in ("linear", "boosting") for n in names)
    )


# Keys added after runs were pinned, with their defaults: a key at its default is left out of the
# fingerprint, so a run from before the key keeps its fingerprint (resume=true, conf/best pins).
ADDED_DEFAULTS: MappingProxyType[str, Any] = MappingProxyType(
    {
        "optimizer": "gd",
        "momentum": 0.9,
        "nesterov": False,
        "beta1": 0.9,
        "beta2": 0.999,
        "eps": 1e-8,
        "batch_size": 0,
        "weight_decay": 0.0,
    }
)

# The keys every data set has: its name and the split keys, whose defaults and comments
# conf/data_split.yaml declares once (sweeper.contract.choices.DATA_SPLIT). data.split_seed draws
# the split (and synthetic data); the top-level seed draws the initial weights (and the mini-batch
# order). Before split_seed existed, seed drew both: see fingerprint() for how the two hash.
SPLIT = MappingProxyType(
    {
        "name": text(),
        "val_fraction": fraction(),
        "test_fraction": fraction(),
        "split_seed": integer(ge=0),
        "folds": Rule(
            "0 (one validation split) or an integer >= 2 (k-fold cross-validation)",
            lambda v: _is_int(v) and (v == 0 or v >= 2),
        ),
    }
)
# data keys that a node may leave out (a node written before the key existed, a
# benchmark's namespace): absent = 0
OPTIONAL_DATA = ("folds",)
# data.sep may name a separator that a shell or Hydra's override parser makes awkward to type.
SEP_NAMES = MappingProxyType({"tab": "\t", "\\t": "\t", "space": " ", "semicolon": ";"})
# How documents become features (data=sms, data=text): sweeper.data.vectorizer.
_TEXT_FEATURES = MappingProxyType(
    {
        "features": choice("tfidf", "counts", "hashing"),
        "max_features": Rule("an integer >= 0 (0: no cap)", lambda v: _is_int(v) and v >= 0),
        "ngram_max": Rule(
            "1 (words) or 2 (words and word pairs)", lambda v: _is_int(v) and v in (1, 2)
        ),
        "min_df": integer(ge=1),
        "sparse": Rule("true or false", lambda v: isinstance(v, bool)),
    }
)
_CSV_COLUMNS = MappingProxyType(
    {
        "target": Rule(
            "a column name or an integer index", lambda v: _is_int(v) or isinstance(v, str)
        ),
        "header": Rule("true or false", lambda v: isinstance(v, bool)),
        "sep": Rule(
            "auto (sniffed: comma, semicolon or tab), one character, or " + " / ".join(SEP_NAMES),
            lambda v: isinstance(v, str) and (len(v) == 1 or v in SEP_NAMES or v == "auto"),
        ),
        "task": choice("auto", "regression", "binary", "multiclass"),
        "positive_class": Rule(
            "auto, or the target value to read as 1 (a number or text)",
            lambda v: _is_number(v) or (isinstance(v, str) and v != ""),
        ),
    }
)


def _names(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and all(
        _is_int(c) or isinstance(c, str) and c != "" for c in v
    )


# Which columns of a table are features (data=csv): sweeper.data.columns.
_COLUMN_CHOICE = MappingProxyType(
    {
        "drop": Rule("a list of column names or indices, e.g. [id,name] ([]: none)", _names),
        "features": Rule(
            "a list of column names or indices, e.g. [age,sex] ([]: every column but the target)",
            _names,
        ),
        "max_categories": integer(ge=1),
        "keep": Rule(
            "a list of column names or indices kept although they look like ids, "
            "e.g. [PassengerId]",
            _names,
        ),
        "dates": Rule(
            "a list of column names or indices read as dates, e.g. [dteday] "
            "([]: ISO dates are found)",
            _names,
        ),
        "categorical": Rule(
            "a list of numeric column names or indices encoded as categories, e.g. [origin]", _names
        ),
    }
)
# Missing cells of a table (data=csv): sweeper.data.table.
_MISSING_CELLS = MappingProxyType(
    {
        "missing": choice("impute", "drop_rows", "refuse"),
        "na_values": Rule(
            "a list of texts read as a missing cell besides '', NA, N/A, NaN, null, ?, -, "
            "e.g. [n/a]",
            lambda v: (
                isinstance(v, (list, tuple)) and all(isinstance(c, (str, int, float)) for c in v)
            ),
        ),
    }
)
DATA: MappingProxyType[str, dict[str, Rule]] = MappingProxyType(
    {
        "xor": SPLIT,
        "diabetes": SPLIT,
        "breast_cancer": SPLIT,
        "iris": SPLIT,
        "wine": SPLIT,
        "digits": SPLIT,
        "spambase": {**SPLIT, "path": text()},
        "csv": {
            **SPLIT,
            "path": text(),
            **_CSV_COLUMNS,
            "decimal": choice("auto", "point", "comma"),
            **_COLUMN_CHOICE,
            **_MISSING_CELLS,
        },
        "sms": {**SPLIT, "path": text(), **_TEXT_FEATURES},
        "text": {
            **SPLIT,
            "path": text(),
            "text": Rule(
                "a column name or an integer index", lambda v: _is_int(v) or isinstance(v, str)
            ),
            **_CSV_COLUMNS,
            **_TEXT_FEATURES,
        },
        "synthetic": {
            **SPLIT,
            "task": choice("regression", "binary"),
            "n_samples": integer(ge=10),
            "n_features": integer(ge=1),
            "noise": Rule("a number >= 0", lambda v: _is_number(v) and v >= 0),
        },
    }
)

# Where a data set that is not shipped comes from (the one-line error of a missing data.path).
DOWNLOAD = MappingProxyType(
    {
        "spambase": "download spambase.data from "
        "https://archive.ics.uci.edu/dataset/94/spambase to that path, "
        "or set data.path=/path/to/spambase.data",
        "sms": "download smsspamcollection.zip from "
        "https://archive.ics.uci.edu/dataset/228/sms+spam+collection, "
        "unzip its SMSSpamCollection to that path, or set data.path=/path/to/SMSSpamCollection",
        "text": "expected an existing .csv/.tsv/.txt, .json or .jsonl file",
    }
)

_BOOL = Rule("true or false", lambda v: isinstance(v, bool))
TRACKING: MappingProxyType[str, Rule] = MappingProxyType(
    {
        "uri": Rule(
            "a tracking URI: sqlite:///PATH (a database file; not :memory:) or http(s)://HOST:PORT",
            lambda v: isinstance(v, str) and v != "" and uri_problem(v) is None,
        ),
        "experiment": Rule(
            f"a name of 1 to {MAX_NAME_BYTES} bytes (it names the experiment's artifact folder)",
            lambda v: (
                isinstance(v, str)
                and len(v.encode("utf-8", "surrogateescape")) <= MAX_NAME_BYTES
                and v.strip() != ""
            ),
        ),
        "log_model": _BOOL,
        "system_metrics": _BOOL,
        "curve_points": integer(ge=0),
        "system_metrics_min_s": integer(ge=0),
    }
)

# Config groups whose choices are files in conf/<group>/ (checked before Hydra composes).
GROUPS = ("data", "tracking", "sweep", "best", "model")

# Optional top-level mappings that describe a run without changing it: ``pinned`` holds
# the provenance and expected metrics of a promoted config (conf/best/*.yaml).
METADATA = ("pinned",)

# Keys left out of the fingerprint: where and how a run is executed, not what it computes.
NOT_FINGERPRINTED = (
    "device",
    "sync_every_epoch",
    "resume",
    "tracking",
    "hydra",
    "baselines",
    *METADATA,
)


def _fail(key: str, value: Any, allowed: str) -> ConfigError:
    shown = json.dumps(value) if value is None or isinstance(value, bool) else value
    return ConfigError(f"{key}={shown} is not allowed: expected {allowed}")


def _parses_as_number(text: str) -> bool:
    """A quoted number (``lr='0.01'``): a string Hydra kept as one, refused as a string,
    not as its value."""
    return number(text) is not None


def check_value(key: str, value: Any, rule: Rule) -> None:
    if not rule.check(value):
        if (
            isinstance(value, str)
            and _parses_as_number(value)
            and rule.allowed.startswith(("a number", "an integer"))
        ):
            raise ConfigError(
                f"{key}={json.dumps(value)} is a string: expected {rule.allowed} "
                f"(write {key}={value}, without quotes)"
            )
        raise _fail(key, value, rule.allowed)


def validate(cfg: Mapping[str, Any]) -> None:
    """Check a composed, resolved config (a plain dict or a DictConfig); raise
    :class:`ConfigError`."""
    for key, rule in TOP_LEVEL.items():
        if key not in cfg:
            raise ConfigError(f"{key} is missing: expected {rule.allowed}")
        check_value(key, cfg[key], rule)
    unknown = sorted(set(cfg) - set(TOP_LEVEL) - {"data", "tracking", "hydra", "model", *METADATA})
    if unknown:
        raise ConfigError(
            f"{unknown[0]} is not a known key{near(unknown[0], TOP_LEVEL)}: expected one of "
            f"{', '.join(sorted(TOP_LEVEL))}, data.*, tracking.*, model.*"
        )
    # lazy: saves ~218 ms at this module's import (measured)
    from sweeper.contract.model import check_model
    from sweeper.models.interface import ModelError

    try:
        check_model(cfg.get("model"), cfg)  # and the keys it would ignore
    except ModelError as e:
        raise ConfigError(str(e)) from None

    data = cfg["data"]
    name = data.get("name")
    if name not in DATA:
        raise _fail("data.name", name, "one of " + ", ".join(DATA))
    rules = DATA[name]
    for key, rule in rules.items():
        if key in OPTIONAL_DATA and key not in data:
            continue
        if data.get(key) in (None, "???"):
            raise ConfigError(f"data.{key} is missing for data={name}: expected {rule.allowed}")
        check_value(f"data.{key}", data[key], rule)
    extra = sorted(set(data) - set(rules))
    if extra:
        raise ConfigError(
            f"data.{extra[0]} is not a key of data={name}{near(extra[0], rules, 'data.')}: "
            f"expected one of {', '.join(sorted(rules))}"
        )
    if data["val_fraction"] + data["test_fraction"] >= 0.9:
        raise ConfigError(
            "data.val_fraction+data.test_fraction="
            f"{data['val_fraction'] + data['test_fraction']:g} is not allowed: "
            "expected a sum < 0.9 so that training keeps data"
        )
    if data.get("sparse") and cfg["batch_size"]:
        raise ConfigError(
            f"batch_size={cfg['batch_size']} is not allowed with sparse text features "
            "(data.sparse=true): "
            "expected batch_size=0 (full batch), or data.sparse=false"
        )
    if "path" in rules and not Path(data["path"]).is_file():
        hint = DOWNLOAD.get(name, "expected an existing .csv/.tsv/.txt, .json, .jsonl or .npz file")
        path = Path(data["path"])
        what = (
            "is a folder"
            if path.is_dir()
            else "is not a regular file"
            if path.exists()
            else "does not exist"
        )
        raise ConfigError(f"data.path={data['path']} {what}: {hint}")

    for key, rule in TRACKING.items():
        check_value(f"tracking.{key}", cfg["tracking"].get(key), rule)


def _unknown(key: str) -> ConfigError:
    return ConfigError(
        f"{key} is not a known key{near(key, [*TOP_LEVEL, *GROUPS])}: expected one of "
        f"{', '.join(sorted(TOP_LEVEL))}, a group ({', '.join(GROUPS)}) or data.*/tracking.* keys"
    )


# Groups whose keys a dotted override (``data.val_fraction=0.1``) must name.
NESTED = ("data", "tracking")


def check_nested_key(key: str, overrides: list[Any]) -> None:
    """``data.val_frac=0.1``: one line naming the key and the keys of the chosen ``data`` config,
    where Hydra says "Could not override ... not in struct" over 7 lines. ``+data.foo=1`` (an
    append) is left to :func:`validate`, which refuses keys a data set does not have."""
    group, _, rest = key.partition(".")
    if group in TOP_LEVEL:  # lr.x=1: Hydra says "Key 'x' is not in struct"
        raise ConfigError(
            f"{key} is not a key: {group} is one value ({TOP_LEVEL[group].allowed}), not a group "
            f"of keys: write {group}=VALUE"
        )
    if group not in NESTED:
        if group not in (*TOP_LEVEL, *GROUPS, *METADATA):  # dta.val_fraction=0.1
            raise _unknown(group)
        return
    name = rest.split(".")[0]
    for option in _chosen(group, overrides):
        path = CONF_DIR / group / f"{option}.yaml"
        if not path.is_file():
            continue  # the choice itself is refused by check_overrides
        keys = sorted(choices.option(group, option))  # the shared split keys included
        if name not in keys:
            raise ConfigError(
                f"{group}.{name} is not a key of {group}={option}{near(name, keys, group + '.')}: "
                f"expected one of {', '.join(keys)}"
            )


def _chosen(group: str, overrides: list[Any]) -> list[str]:
    """The options of ``group`` the command composes: its own ``data=...`` (every value
    of a sweep), else what a ``+best=``/``+sweep=`` config picks
    (``override /data: ...``), else conf/config.yaml's default."""
    for o in overrides:
        if o.key_or_group == group and not o.is_delete():
            if not o.is_sweep_override():
                return [str(o.value())]
            if o.is_discrete_sweep() and not o.value_type.name.startswith("GLOB"):
                return [str(v) for v in o.sweep_iterator(transformer=convert_value)]
            return []  # a glob: the sweeper expands it, validate() sees each job
    picked = [
        option
        for o in overrides
        if o.key_or_group in ("best", "sweep") and not o.is_sweep_override()
        for option in _defaults(CONF_DIR / o.key_or_group / f"{o.value()}.yaml", group)
    ]
    return picked or _defaults(CONF_DIR / "config.yaml", group)


def check_overrides(args: list[str], whole: bool = False) -> None:
    """Check command-line overrides before Hydra composes, so bad input fails in one
    line; ``whole``: ``args`` is the whole command line, flags included, so a sweep
    without ``-m`` is refused ("add -m").

    Covers overrides Hydra's parser rejects (``data.sep=;``, ``lr=(``), config-group choices
    (``data=nope`` would otherwise fail inside Hydra over several lines) and the top-level keys,
    every value of a sweep included. Everything else is left to Hydra and to :func:`validate`.
    """
    # lazy: saves ~92 ms at this module's import (measured)
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    # lazy: saves ~5.0 ms at this module's import (measured)
    from sweeper.contract.hydra_args import check_commands, check_hydra

    if whole:
        check_commands(args, ConfigError)
    all_args, args = args, [a for a in args if not a.startswith("-")]
    parser = OverridesParser.create()
    try:
        overrides = parser.parse_overrides(args)
    except HydraException:
        for arg in args:
            try:
                parser.parse_overrides([arg])
            except HydraException as e:
                _unparsable(arg, e)
        return  # e.g. the value of an option such as --cfg job: Hydra's own parser decides
    for o in choices.sized(overrides, ConfigError):
        if o.is_delete() or o.key_or_group.startswith("hydra"):
            continue
        key = o.key_or_group
        if "." in key and not o.is_add() and not o.is_force_add():
            check_nested_key(key, overrides)
        if not o.is_sweep_override():
            values = [o.value()]
        elif o.is_discrete_sweep() and not o.value_type.name.startswith("GLOB"):
            values = list(o.sweep_iterator(transformer=convert_value))
            choices.some_job(o, values, GROUPS, ConfigError)
        else:
            choices.search_only(o, overrides, whole, GROUPS, ConfigError)
            choices.some_job(o, None, GROUPS, ConfigError)
            continue  # globs and intervals are expanded by the sweeper; validate() sees each job
        if key == "model" and any(a.lstrip("+").startswith("hydra.searchpath") for a in args):
            # a model/<name>.yaml of the user's own config folder: Hydra finds it
            # (validate checks it)
            continue
        _check_values(o, key, values)
    choices.conflicts(overrides, GROUPS, ConfigError)
    check_hydra(all_args, overrides, ConfigError, TOP_LEVEL, whole)
    # the command line as typed, once it passed (an Optuna space's lines are overridden
    # by it, as Hydra means)
    if whole:
        print("".join(f"{line}\n" for line in choices.given_twice(overrides)), end="", flush=True)


def _check_values(o: Any, key: str, values: list[Any]) -> None:
    """Each value an override gives a config group (an option that exists and can be
    read) or a top-level key; a plain key that is neither is unknown (a nested or an
    added one is left to Hydra and :func:`validate`)."""
    if key in GROUPS:
        options = group_options(key)
        for v in values:
            if v not in options:
                raise _fail(key, v, "one of " + ", ".join(options))
            _readable(CONF_DIR / key / f"{v}.yaml", f"{key}={v}")
            choices.picks(CONF_DIR / key / f"{v}.yaml", f"{key}={v}", GROUPS, ConfigError)
    elif key in TOP_LEVEL:
        for v in values:
            check_value(key, v, TOP_LEVEL[key])
    elif "." not in key and not o.is_add() and not o.is_force_add():
        raise _unknown(key)


def _readable(path: Path, arg: str) -> None:
    """A config file that YAML cannot read (a broken conf/best/NAME.yaml): one line
    naming it, not Hydra's 67-line traceback."""
    try:
        doc = OmegaConf.load(path)
    # yaml's ScannerError/ParserError, OmegaConf's own, a bad encoding (a ValueError), unreadable
    except (yaml.YAMLError, OmegaConfBaseException, ValueError, OSError) as e:
        raise ConfigError(
            f"{arg}: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} cannot be "
            "read "
            f"({type(e).__name__}: {' '.join(str(e).split())[:160]}): fix the file or choose "
            "another"
        ) from None
    if not OmegaConf.is_dict(doc):
        raise ConfigError(
            f"{arg}: {path.name} is not a mapping of keys: fix the file or choose another"
        )


def _unparsable(arg: str, e: Exception) -> None:
    """One line for an override Hydra's parser rejects (e.g. ``data.sep=;``); an argument
    without ``=`` is left to Hydra, which may read it as the value of an option."""
    key, eq, value = arg.partition("=")
    if not eq:
        return
    if key.lstrip("+~") == "data.sep":
        names = "|".join(n for n in SEP_NAMES if n.isalpha())
        raise ConfigError(
            f"{arg} cannot be read by Hydra's override parser: quote the character "
            f"('data.sep=\"{value}\"') or name it: data.sep={names}"
        )
    lines = [
        ln.strip()
        for ln in str(e).splitlines()
        if ln.strip() not in ("", "^") and not ln.startswith(("See ", "Error parsing"))
    ]
    raise ConfigError(
        f"{arg} is not a valid override ({lines[0] if lines else type(e).__name__}): "
        "quote a value that holds special characters, e.g. 'key=\"value\"'"
    )


# data keys added after runs were pinned (data=csv's column choice, data.sep's
# sniffing), as ADDED_DEFAULTS: at these values they hash as before they
# existed; data.sep=auto hashes as the old default ",", which is what any file that ran
# before sniffing was read with unless data.sep named another.
DATA_ADDED_DEFAULTS: MappingProxyType[str, Any] = MappingProxyType(
    {
        "drop": [],
        "features": [],
        "max_categories": 50,
        "keep": [],
        "dates": [],
        "categorical": [],
        "missing": "impute",
        "na_values": [],
        "folds": 0,
        "decimal": "auto",
    }
)
