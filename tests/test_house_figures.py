"""bench/house_figures.py counts what its docstring says, on a tiny core written here (expected values by hand)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("house_figures", ROOT / "bench" / "house_figures.py")
house = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(house)

A = '''"""A module; its docstring names halving, which is no code naming it."""
import os

CACHE = {}
TABLE = {"a": 1}
__all__ = ["f"]


def f():
    import json

    try:
        os.getcwd()
    except ValueError:
        pass
    try:
        json.dumps(1)
    except (OSError, Exception):
        pass
    CACHE["x"] = 1
    return "three folds"
'''

B = """# a comment alone
x = 1  # trailing
SEEN = []


def halving_rate(rate):
    # the rate as given
    return rate
"""

STATE = """SPARE = []
SPARE.append(1)
"""

OUTSIDE = """def g():
    import sys
    try:
        pass
    except:
        pass
    return "halving folds"
"""


@pytest.fixture
def figures(tmp_path: Path) -> dict:
    files = {
        "sweeper/a.py": A,
        "models/b.py": B,
        "sweeper/base/state.py": STATE,
        "tests/test_x.py": OUTSIDE,
        "bench/x.py": OUTSIDE,
        "data/readme.txt": OUTSIDE,
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    # outside the core: not looked at
    (tmp_path / "SEEN_mutator.py").write_text("import b\nb.SEEN.append(1)\n")
    return house.measure(tmp_path)


def test_the_handlers_broad_ones_and_imports_inside_functions_are_counted_in_the_core_only(figures):
    assert figures["modules"] == 3  # a.py, b.py, state.py; not tests/, bench/ nor a .txt
    assert (figures["handlers"], figures["broad"]) == (
        2,
        1,
    )  # ValueError; (OSError, Exception) is broad
    assert figures["inner_imports"] == 1  # json in f; os at the top is not
    assert figures["with_all"] == 1


def test_lines_and_characters(figures):
    a_lines = A.splitlines()
    b_lines = B.splitlines()
    s_lines = STATE.splitlines()
    assert figures["lines"] == len(a_lines) + len(b_lines) + len(s_lines) == 21 + 8 + 2
    # A: after the import, twice after the bindings, after the import inside f; B: two before the def
    blank = 4 + 2
    assert figures["nonblank"] == 31 - blank
    assert figures["code_lines"] == 31 - blank - 2  # B's comments alone, one indented
    chars = sum(
        len(line)
        for line in (*a_lines, *b_lines, *s_lines)
        if line.strip() and not line.lstrip().startswith("#")
    )
    assert figures["code_chars"] == chars
    # without A's docstring line and B's trailing comment ("  # trailing": 12 characters)
    assert figures["bare_chars"] == chars - len(a_lines[0]) - len("  # trailing")
    assert figures["nonblank_chars"] == chars + len("# a comment alone") + len(
        "    # the rate as given"
    )
    assert figures["over100"] == figures["over120"] == 0


def test_a_concept_is_named_by_identifiers_and_strings_not_by_docstrings(figures):
    assert figures["where"]["halving"] == ["models/b.py"]  # the def; a.py only in its docstring
    assert figures["where"]["folds"] == ["sweeper/a.py"]  # a string


def test_mutable_bindings_outside_the_state_module_and_those_mutated(figures):
    assert sorted(figures["where"]["mutable"]) == [
        "models/b.py: SEEN",
        "sweeper/a.py: CACHE",
        "sweeper/a.py: TABLE",
    ]
    # TABLE is never changed, SEEN only outside the core
    assert figures["where"]["state"] == ["sweeper/a.py: CACHE"]


def test_a_binding_changed_where_it_was_imported_by_name_is_state(tmp_path):
    (tmp_path / "sweeper").mkdir()
    (tmp_path / "sweeper/c.py").write_text("TABLE = {}\nFIXED = {}\n")
    (tmp_path / "sweeper/d.py").write_text(
        "from sweeper.c import FIXED, TABLE as T\n\nT.update(x=1)\nprint(FIXED['a'])\n"
    )
    figures = house.measure(tmp_path)
    assert figures["where"]["mutable"] == ["sweeper/c.py: TABLE", "sweeper/c.py: FIXED"]
    assert figures["where"]["state"] == ["sweeper/c.py: TABLE"]


def test_long_lines_are_counted(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "long.py").write_text(
        f"x = '{'a' * 95}'\ny = '{'a' * 94}'   \nz = '{'a' * 115}'\n"
    )
    got = house.measure(tmp_path)
    assert (got["over100"], got["over120"]) == (
        2,
        1,
    )  # 101 and 121 characters; 100 (trailing spaces not counted)


def test_an_unknown_commit_is_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        house.main(["--at", "no-such-commit-i58a"])
    assert str(e.value).startswith("house_figures: error: --at no-such-commit-i58a: ")
    assert "\n" not in str(e.value)
