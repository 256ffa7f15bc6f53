"""``python -m sweeper.contract.reference``: write the configuration reference,
docs/reference/config.md, from the contract itself — ``sweeper.contract.config``'s rules,
conf/config.yaml's and each config group's defaults and comments, the batched launcher's and
the Optuna sweeper's dataclasses — the same sources ``python -m sweeper --help`` reads.
``--check`` exits 1 when the committed page differs from what the code says (tests/test_docs.py
runs the same comparison). Nothing here imports MLflow or composes a config.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from sweeper import CONF_DIR, ROOT
from sweeper.contract import choices, helptext

__all__ = ["COMMAND", "PAGE", "PLUGINS", "ROOT", "field_comments", "main", "page"]

PAGE = ROOT / "docs" / "reference" / "config.md"
PLUGINS = ROOT / "plugins" / "hydra_plugins"
COMMAND = "python -m sweeper.contract.reference"


def shown(value: Any) -> str:
    """A default as a user types it; the checkout's own folder as ``<repo>`` (the page
    is the same in any clone)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value)
    text = (
        "required"
        if value == "???"
        else str(value)
        if not isinstance(value, (list, dict))
        else _inline(value)
    )
    return text.replace("${sweeper_root:}", "<repo>").replace(str(ROOT), "<repo>")


def _inline(value: list | dict) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    return "{" + ", ".join(f"{k}: {shown(v)}" for k, v in value.items()) + "}"


def cell(text: str) -> str:
    """Text inside a Markdown table cell: pipes escaped, one line."""
    return " ".join(str(text).split()).replace("|", "\\|")


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines + [""]


def header_comment(path: Path) -> str:
    """The comment lines a config file opens with, as one paragraph (``# @package``
    lines left out)."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if not line.startswith("# @package"):
            lines.append(line.lstrip("#").strip())
    return " ".join(line for line in lines if line)


def field_comments(path: Path) -> dict[str, str]:
    """The comments of a dataclass config's fields (the ``#`` lines above a field, or
    the one after it)."""
    found: dict[str, str] = {}
    pending: list[str] = []
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
            continue
        head, _, trailing = stripped.partition("  #")
        name = head.split(":", 1)[0]
        if ":" in head and name.isidentifier() and line.startswith("    ") and line[4] != " ":
            found[name] = " ".join([*pending, trailing.strip()]).strip()
        pending = []
    return found


def dataclass_rows(node: type, path: Path, at: str = "") -> list[tuple[str, str, str]]:
    """A row for each field of ``node``; a nested config's fields each a row of their own
    (``halving.eta``)."""
    notes = field_comments(path)
    rows = []
    for f in dataclasses.fields(node):
        if f.name.startswith("_") or f.name == "defaults":
            continue
        if dataclasses.is_dataclass(f.default_factory):
            rows += dataclass_rows(f.default_factory, path, f"{at}{f.name}.")
            continue
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        rows.append(
            (
                f"`{at}{f.name}`",
                "required" if repr(default) == "'???'" else shown(default),
                notes.get(f.name, ""),
            )
        )
    return rows


def top_level() -> list[str]:
    # lazy: saves ~18 ms at this module's import (measured)
    from sweeper.contract.config import ADDED_DEFAULTS, TOP_LEVEL

    cfg = OmegaConf.load(CONF_DIR / "config.yaml")
    notes = helptext._comments(CONF_DIR / "config.yaml")
    rows = [
        (f"`{key}`", f"`{shown(cfg[key])}`", TOP_LEVEL[key].allowed, notes.get(key, ""))
        for key in cfg
        if key in TOP_LEVEL
    ]
    added = ", ".join(f"`{k}`" for k in ADDED_DEFAULTS)
    return [
        "## Top-level keys",
        "",
        "Sweepable as written: `python -m sweeper -m KEY=A,B,C`. Defaults from "
        "`conf/config.yaml`, allowed values "
        "from `sweeper/contract/config.py` (a value outside them stops the command with one "
        "line, exit 2).",
        "",
        *table(("key", "default", "allowed", "meaning"), rows),
        f"{added} enter a run's fingerprint only when they differ from their default (runs made "
        "before these keys "
        "existed keep their fingerprints).",
        "",
    ]


def data_sets() -> list[str]:
    # lazy: saves ~17 ms at this module's import (measured)
    from sweeper.contract.config import DATA, DOWNLOAD, SPLIT

    shared = OmegaConf.load(choices.DATA_SPLIT)
    split = [
        (
            f"`data.{key}`",
            f"`{shown(shared[key])}`",
            SPLIT[key].allowed,
            helptext._comments(choices.DATA_SPLIT).get(key, ""),
        )
        for key in shared
    ]
    lines = [
        "## Data sets (`data=NAME`)",
        "",
        "Each data set's keys (`data.KEY=VALUE`); a key that is not one of them is refused with "
        "the list of those "
        "that are.",
        "",
        "### The split keys (every data set)",
        "",
        header_comment(choices.DATA_SPLIT),
        "",
        *table(("key", "default", "allowed", "meaning"), split),
        "A data set's table below shows these keys only where its default differs.",
        "",
    ]
    for name, rules in DATA.items():
        path = CONF_DIR / "data" / f"{name}.yaml"
        cfg = OmegaConf.to_container(choices.option("data", name), resolve=False)
        notes = helptext.option_notes("data", name)
        rows = [
            (
                f"`data.{key}`",
                "set by `data=NAME`" if key == "name" else f"`{shown(cfg.get(key, '-'))}`",
                rule.allowed,
                notes.get(key, "") if key != "name" else "",
            )
            for key, rule in rules.items()
            if key not in shared or cfg.get(key) != shared[key]
        ]
        lines += [f"### `data={name}`", "", header_comment(path), ""]
        if name in DOWNLOAD:
            lines += [f"A missing file: {DOWNLOAD[name]}.", ""]
        lines += table(("key", "default", "allowed", "meaning"), rows)
    return lines


def tracking() -> list[str]:
    # lazy: saves ~17 ms at this module's import (measured)
    from sweeper.contract.config import TRACKING

    lines = ["## Tracking (`tracking=NAME`)", ""]
    for name in ("local", "server"):
        path = CONF_DIR / "tracking" / f"{name}.yaml"
        cfg, notes = (
            OmegaConf.to_container(OmegaConf.load(path), resolve=False),
            helptext._comments(path),
        )
        rows = [
            (
                f"`tracking.{key}`",
                "the data set's name" if key == "experiment" else f"`{shown(cfg[key])}`",
                rule.allowed,
                notes.get(key, ""),
            )
            for key, rule in TRACKING.items()
        ]
        lines += [
            f"### `tracking={name}`",
            "",
            header_comment(path),
            "",
            *table(("key", "default", "allowed", "meaning"), rows),
        ]
    return lines


def model() -> list[str]:
    # lazy: saves ~198 ms at this module's import (measured)
    from sweeper.contract.model import MODEL_KEYS

    rows = [
        (f"`model.{k}`", f"`{default}`", allowed, meaning)
        for k, (default, allowed, meaning) in MODEL_KEYS.items()
    ]
    return [
        "## The model (`model.KEY=VALUE`)",
        "",
        "Beside these, `model.<name>` sets a hyperparameter of a model of yours (its "
        "constructor's or function's "
        "keyword arguments; `python -m sweeper model._target_=PATH --help` lists them). See "
        "[Your own model](../guide/models.md).",
        "",
        *table(("key", "default", "allowed", "meaning"), rows),
    ]


def groups() -> list[str]:
    # lazy: saves ~18 ms at this module's import (measured)
    from sweeper.contract.config import GROUPS, group_options

    cfg = OmegaConf.load(CONF_DIR / "config.yaml")
    defaults = {
        k: v for entry in cfg.defaults if OmegaConf.is_dict(entry) for k, v in entry.items()
    }
    rows = []
    for group in GROUPS:
        how = f"`{group}=NAME`" if group in defaults else f"`+{group}=NAME`"
        rows.append(
            (
                how,
                ", ".join(f"`{o}`" for o in group_options(group)),
                f"`{defaults[group]}`" if group in defaults else "none",
            )
        )
    sweeps = [
        (
            f"`+sweep={path.stem}`",
            header_comment(path).split(": python -m")[0].split(". ")[0].rstrip(".") + ".",
        )
        for path in sorted((CONF_DIR / "sweep").glob("*.yaml"))
    ]
    return [
        "## Config groups",
        "",
        "Files in `conf/<group>/`; `best` and `sweep` have no default and take a `+`.",
        "",
        *table(("group", "choices", "default"), rows),
        "### Named sweeps",
        "",
        *table(("sweep", "what it is"), sweeps),
    ]


def launcher() -> list[str]:
    sys.path.insert(0, str(ROOT / "plugins"))
    # lazy: saves ~99 ms at this module's import (measured)
    from hydra_plugins.sweeper_batched_launcher.config import PREFIX, BatchedLauncherConf, declared

    path = PLUGINS / "sweeper_batched_launcher" / "config.py"
    allowed = {k[len(PREFIX) :]: f.metadata["allowed"].expected for k, f in declared().items()}
    rows = [
        (name, default, allowed[name.strip("`")], meaning)
        for name, default, meaning in dataclass_rows(BatchedLauncherConf, path)
    ]
    return [
        "## The batched launcher (`hydra/launcher=batched`, the default of `-m`)",
        "",
        "Options as `hydra.launcher.KEY=VALUE` (a key inside `ray` or `submitit` that has no "
        "default takes a `+`: "
        "`+hydra.launcher.submitit.array_parallelism=8`). From "
        "`plugins/hydra_plugins/sweeper_batched_launcher/config.py`, where each key's type, "
        "default, allowed values and meaning are declared once: a value outside what it allows "
        "is refused in one line before any run starts.",
        "",
        *table(("option", "default", "allowed", "meaning"), rows),
    ]


def optuna_sweeper() -> list[str]:
    sys.path.insert(0, str(ROOT / "plugins"))
    # lazy: saves ~103 ms at this module's import (measured)
    from hydra_plugins.sweeper_optuna_sweeper.config import (
        OptunaSweeperConf,
        RandomSamplerConf,
        TPESamplerConf,
    )

    path = PLUGINS / "sweeper_optuna_sweeper" / "config.py"
    space = OmegaConf.load(CONF_DIR / "sweep" / "optuna.yaml").hydra.sweeper.params
    rows = [(f"`{key}`", f"`{value}`") for key, value in space.items()]
    return [
        "## The Optuna sweeper (`+sweep=optuna`)",
        "",
        "Options as `hydra.sweeper.KEY=VALUE`. From "
        "`plugins/hydra_plugins/sweeper_optuna_sweeper/config.py`; "
        "`conf/sweep/optuna.yaml` sets `n_trials`, `batch`, `storage`, `study_name` to the same "
        "values and names "
        "the search space below.",
        "",
        *table(("option", "default", "meaning"), dataclass_rows(OptunaSweeperConf, path)),
        "Samplers (`hydra/sweeper/sampler=NAME`; their options, "
        "`hydra.sweeper.sampler.KEY=VALUE`, are the "
        "arguments of Optuna's `TPESampler` and `RandomSampler`; any `optuna.samplers` class can "
        "be named as "
        "`hydra.sweeper.sampler._target_`):",
        "",
        *table(("`tpe` (default)", "default", "meaning"), dataclass_rows(TPESamplerConf, path)),
        *table(("`random`", "default", "meaning"), dataclass_rows(RandomSamplerConf, path)),
        "The search space of `+sweep=optuna` (`hydra.sweeper.params`; a key given on the command "
        "line replaces its "
        "entry, a fixed value takes the key out of the space):",
        "",
        *table(("key", "space"), rows),
    ]


def commands() -> list[str]:
    rows = [
        (f"`python -m sweeper.{name}`", helptext.command_line(name)) for name in helptext.COMMANDS
    ]
    return [
        "## Commands",
        "",
        "Each takes `--help`.",
        "",
        *table(("command", "what it does"), rows),
    ]


def page() -> str:
    lines = [
        "# Configuration reference",
        "",
        f"<!-- generated by `{COMMAND}` from the code; do not edit by hand (tests/test_docs.py "
        "fails when it is "
        "out of date) -->",
        "",
        "Every key a command line can set, its default and what it allows, read from the same "
        "sources as "
        "`python -m sweeper --help` (`python -m sweeper data=NAME --help` prints one data set's "
        "keys). "
        f"Regenerate with `{COMMAND}`.",
        "",
        *top_level(),
        *data_sets(),
        *tracking(),
        *model(),
        *groups(),
        *launcher(),
        *optuna_sweeper(),
        *commands(),
    ]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=COMMAND, description=(__doc__ or "").split("\n\n")[0].split(": ", 1)[1]
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when the committed page is out of date"
    )
    args = parser.parse_args(argv)
    text = page()
    if args.check:
        if not PAGE.is_file() or PAGE.read_text() != text:
            print(
                f"sweeper: error: {PAGE.relative_to(ROOT)} is out of date: run {COMMAND}",
                file=sys.stderr,
            )
            return 1
        print(f"{PAGE.relative_to(ROOT)} is up to date")
        return 0
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
