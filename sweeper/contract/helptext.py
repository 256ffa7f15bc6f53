"""The ``--help`` texts: ``python -m sweeper --help`` built from the configuration's own
files and rules (conf/config.yaml's defaults and comments, ``sweeper.contract.config``'s
allowed values, the config groups' files) and the sub-commands' descriptions, as plain
text. Nothing here imports MLflow or Hydra's composition.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

from omegaconf import OmegaConf

from sweeper import CONF_DIR, ROOT
from sweeper.contract import choices

__all__ = ["COMMANDS", "Parser", "command_line", "describe", "main_help", "option_notes"]

# The standalone commands, in the order a sweep's life uses them (each module's docstring
# describes it); a test checks that this is every entry module of sweeper/ (tests/test_help.py).
COMMANDS = ("runs", "report", "advise", "compare", "summary", "promote", "upload", "check")
EXAMPLES = (
    ("one run, tracked in MLflow", "python -m sweeper lr=0.01 depth=2"),
    ("a grid of 6 runs under one parent run", "python -m sweeper -m lr=0.001,0.005,0.01 depth=1,2"),
    (
        "a classification sweep, then the leaderboard",
        "python -m sweeper -m data=breast_cancer width=8,32 && "
        "python -m sweeper.report --experiment breast_cancer",
    ),
)


def plain(text: str) -> str:
    """Docstring markup (````code````) as plain text."""
    return text.replace("``", "")


class Parser(argparse.ArgumentParser):
    """A command's argument parser whose refusal is one line, like every other error of the project:
    ``sweeper: error: python -m sweeper.report: MESSAGE (see ... --help)``, exit 2
    (argparse's own printed its usage over 3-4 lines first)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"sweeper: error: {self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def describe(doc: str | None) -> str:
    """A module docstring's first paragraph, as one plain line: the description of its
    ``--help``."""
    first = (doc or "").strip().split("\n\n")[0]
    return plain(" ".join(first.split()))


def command_line(module: str) -> str:
    """The one-line description of ``sweeper.<module>``, read from its source (not imported)."""
    doc = ast.get_docstring(ast.parse((Path(__file__).parent.parent / f"{module}.py").read_text()))
    return re.sub(r"^python -m sweeper\.\w+[^:]*:\s*", "", describe(doc))


def _comments(path: Path) -> dict[str, str]:
    """``key: value  # comment`` lines of a YAML file: key → comment."""
    found = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z_]\w*):[^#]*#\s*(.*)$", line)
        if m:
            found[m.group(1)] = m.group(2).strip()
    return found


def option_notes(group: str, name: str) -> dict[str, str]:
    """The comments of ``group=name``'s keys, from each file of its
    :func:`~sweeper.contract.choices.layers` (conf/data_split.yaml's for the split keys, unless the
    data set's own file comments them again)."""
    notes: dict[str, str] = {}
    for path in choices.layers(CONF_DIR / group / f"{name}.yaml"):
        notes.update(_comments(path))
    return notes


def _shown(value: object) -> str:
    text = "true" if value is True else "false" if value is False else str(value)
    return text.replace("${sweeper_root:}", ROOT.as_posix())


def _section(title: str, rows: list[tuple[str, str, str]]) -> list[str]:
    width = max(len(k) for k, _, _ in rows) + 2
    lines = [title]
    for key, default, allowed in rows:
        lines.append(f"  {key:<{width}}default {default}; {allowed}")
    return lines


def chosen_groups(args: list[str], defaults: dict[str, str]) -> dict[str, str]:
    """The config groups a command line chooses (``data=csv``, ``tracking=server``), else their
    defaults; a choice that is no option of its group (or a sweep of several) keeps the default."""
    # lazy: saves ~22 ms at this module's import (measured)
    from sweeper.contract.config import group_options

    chosen = dict(defaults)
    for arg in args:
        key, eq, value = arg.lstrip("+").partition("=")
        if eq and key in ("data", "tracking") and value in group_options(key):
            chosen[key] = value
    return chosen


def model_section(args: list[str]) -> list[str]:
    """The model section's keys (``model._target_``, ``model.check``); with ``model._target_=PATH``
    on the command line, that model's own hyperparameters too (name, default, kind, its docstring's
    line), or one line saying why they cannot be shown (its module does not import)."""
    # lazy: saves ~213 ms at this module's import (measured)
    from sweeper.contract.model import MODEL_KEYS, trainer_keys
    from sweeper.models.interface import described, is_trainer, loaded

    rows = [
        (f"model.{k}", default, f"{allowed} ({meaning})")
        for k, (default, allowed, meaning) in MODEL_KEYS.items()
    ]
    path = next(
        (a.partition("=")[2] for a in args if a.lstrip("+").startswith("model._target_=")), None
    )
    if not path:
        return _section(
            "model keys (model.KEY=VALUE; model._target_=PATH --help lists a model's own):", rows
        )
    target, error = loaded(path)
    if error is not None:
        return [
            *_section("model keys (model.KEY=VALUE):", rows),
            f"  ({error}: its hyperparameters cannot be listed)",
        ]
    trainer = is_trainer(target)
    # a trainer has no gradients to check
    rows = [r for r in rows if not (trainer and r[0] == "model.check")]
    rows += [
        (f"model.{name}", default, kind + (f" ({doc})" if doc else ""))
        for name, default, kind, doc in described(target)
        if not (trainer and name in trainer_keys(target))
    ]
    lines = _section(
        f"model keys (model.KEY=VALUE; shown for model._target_={path}, "
        f"{'a function trainer' if trainer else 'a model class'}):",
        rows,
    )
    if trainer:
        taken = ", ".join(trainer_keys(target)) or "none"
        lines.append(
            "  (a function trainer receives lr, epochs, seed, these model.KEY values and, of "
            "sweeper's "
            f"training-loop keys, those its signature names: {taken})"
        )
    return lines


def main_help(args: list[str] | None = None) -> str:
    """The text of ``python -m sweeper [GROUP=CHOICE ...] --help``: the keys of the data
    set and tracking store the command line chooses (the defaults' otherwise)."""
    # lazy: saves ~20 ms at this module's import (measured)
    from sweeper.contract.config import DATA, GROUPS, TOP_LEVEL, TRACKING, group_options

    cfg = OmegaConf.load(CONF_DIR / "config.yaml")
    notes = _comments(CONF_DIR / "config.yaml")
    defaults = {
        k: v for entry in cfg.defaults if OmegaConf.is_dict(entry) for k, v in entry.items()
    }
    picked = chosen_groups(list(args or []), defaults)
    data_name, tracking_name = picked["data"], picked["tracking"]
    top = [
        (k, _shown(cfg[k]), f"{TOP_LEVEL[k].allowed}" + (f" ({notes[k]})" if k in notes else ""))
        for k in cfg
        if k in TOP_LEVEL
    ]
    data_cfg, data_notes = choices.option("data", data_name), option_notes("data", data_name)
    data_rows = [
        (
            f"data.{k}",
            _shown(data_cfg.get(k, "-")),
            (rule.allowed if k != "name" else "set by data=CHOICE")
            + (f" ({data_notes[k]})" if k in data_notes and k != "name" else ""),
        )
        for k, rule in DATA[data_name].items()
    ]
    tracking_path = CONF_DIR / "tracking" / f"{tracking_name}.yaml"
    tracking_cfg, tracking_notes = OmegaConf.load(tracking_path), _comments(tracking_path)
    tracking_rows = [
        (
            f"tracking.{k}",
            _shown(tracking_cfg[k]) if k != "experiment" else "the data set's name",
            rule.allowed
            + (f" ({tracking_notes[k]})" if k in tracking_notes and k != "experiment" else ""),
        )
        for k, rule in TRACKING.items()
    ]
    lines = [
        "usage: python -m sweeper [-m] [KEY=VALUE ...] [GROUP=CHOICE ...]",
        "",
        "Train a from-scratch NumPy/CuPy MLP on a data set and record the run in MLflow (params, "
        "metrics, loss",
        "curves, data sets, the model). With -m (Hydra's multirun) every combination of "
        "comma-separated values",
        "is one run, all under one parent run, and the end of the sweep prints a leaderboard.",
        "",
        "options:",
        "  -m, --multirun   sweep: KEY=A,B,C runs each value (range(), choice(), glob() work too)",
        "  -h, --help       this text (--hydra-help: Hydra's own help; --cfg job: the composed "
        "config)",
        "",
        *_section("keys (KEY=VALUE):", top),
        "",
        *_section(
            f"data keys (data.KEY=VALUE; shown for data={data_name}: python -m sweeper data=NAME "
            "--help shows "
            f"another data set's):",
            data_rows,
        ),
        "",
        *_section(
            f"tracking keys (tracking.KEY=VALUE; shown for tracking={tracking_name}):",
            tracking_rows,
        ),
        "",
        *model_section(list(args or [])),
        "",
        "groups (GROUP=CHOICE; +GROUP=CHOICE for best and sweep, which have no default):",
    ]
    for group in GROUPS:
        chosen = f" (default {defaults[group]})" if group in defaults else ""
        lines.append(f"  {group:<10}{', '.join(group_options(group))}{chosen}")
    lines += [
        "",
        "sub-commands (python -m sweeper.NAME, or python -m sweeper NAME; --help for each):",
    ]
    lines += [f"  {name:<9}{command_line(name)}" for name in COMMANDS]
    lines += ["", "examples:"]
    for what, cmd in EXAMPLES:
        lines += [f"  # {what}", f"  {cmd}"]
    return "\n".join(lines) + "\n"
