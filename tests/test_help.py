"""``--help`` follows the command line and the code: every key, allowed value and sub-command it names exists, and
none is missing (python -m sweeper data=csv --help shows the csv keys)."""

from __future__ import annotations

import ast

import pytest
from conftest import command

from sweeper import ROOT
from sweeper.contract.config import DATA, TOP_LEVEL, group_options
from sweeper.contract.helptext import COMMANDS, main_help


def entry_modules() -> set[str]:
    """The modules of sweeper/ that run as ``python -m sweeper.NAME`` (an ``if __name__ == "__main__"`` block)."""
    found = set()
    for path in (ROOT / "sweeper").glob("*.py"):
        if path.stem.startswith("__"):
            continue
        tree = ast.parse(path.read_text())
        if any(isinstance(n, ast.If) and "__main__" in ast.unparse(n.test) for n in tree.body):
            found.add(path.stem)
    return found


def test_every_sub_command_is_listed_and_every_listed_one_exists():
    assert set(COMMANDS) == entry_modules()
    text = main_help()
    for name in COMMANDS:
        assert any(line.split()[:1] == [name] for line in text.splitlines()), name


def rows(text: str, prefix: str) -> dict[str, str]:
    return {line.split()[0]: line for line in text.splitlines() if line.startswith(f"  {prefix}")}


@pytest.mark.parametrize("group", group_options("data"))
def test_each_data_set_shows_exactly_its_own_keys(group):
    shown = rows(main_help([f"data={group}"]), "data.")
    assert set(shown) == {f"data.{k}" for k in DATA[group]}
    for key, rule in DATA[group].items():
        if key != "name":
            assert rule.allowed in shown[f"data.{key}"], key


def test_top_level_keys_and_their_allowed_values():
    shown = {
        line.split()[0]: line
        for line in main_help().splitlines()
        if line[:2] == "  " and line[2:3].isalpha()
    }
    for key, rule in TOP_LEVEL.items():
        assert key in shown and rule.allowed in shown[key], key


def test_a_group_chosen_on_the_command_line_is_the_one_shown():
    proc = command("sweeper", "data=csv", "--help")
    assert proc.returncode == 0, proc.stderr
    assert (
        "shown for data=csv" in proc.stdout
        and "  data.path" in proc.stdout
        and "  data.sep" in proc.stdout
    )
    # a choice that is no data set keeps the default's keys (Hydra's own check reports it when the command runs)
    assert "shown for data=diabetes" in main_help(["data=nope"])
