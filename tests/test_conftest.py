"""The suite's own machinery in tests/conftest.py: the order README's command runs the tests in."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import conftest

TESTS = Path(__file__).resolve().parent


class _Item:
    def __init__(self, name: str, slow: bool = False):
        self.path, self.slow = TESTS / name.split("::")[0], slow
        self.name = name

    def get_closest_marker(self, marker: str):
        return object() if marker == "slow" and self.slow else None


def _ordered(dist: str, items: list) -> list[str]:
    # a worker's config: xdist set its own option.dist to "no"; the command line's mode is the parsed one
    config = SimpleNamespace(
        option=SimpleNamespace(dist="no"), known_args_namespace=SimpleNamespace(dist=dist)
    )
    conftest.pytest_collection_modifyitems(config, items)
    return [i.name for i in items]


def _collected() -> list:
    return [
        _Item("test_a.py::one"),
        _Item("test_b.py::fast"),
        _Item("test_b.py::slow", slow=True),
        _Item("test_b.py::fast_again"),
        _Item("test_docs.py::fast"),
        _Item("test_docs.py::slow", slow=True),
        _Item("test_c.py::two"),
    ]


def test_under_worksteal_the_longest_files_come_first_then_files_with_a_slow_test_each_file_kept_whole():
    assert _ordered("worksteal", _collected()) == [
        "test_docs.py::fast",
        "test_docs.py::slow",
        "test_b.py::fast",
        "test_b.py::slow",
        "test_b.py::fast_again",
        "test_a.py::one",
        "test_c.py::two",
    ]


def test_other_runs_keep_the_collected_order():
    names = [i.name for i in _collected()]
    for dist in ("load", "no", "loadfile"):
        assert _ordered(dist, _collected()) == names


def test_the_longest_first_files_exist():
    """A file renamed or removed would silently lose its place at the head."""
    assert [n for n in conftest.LONGEST_FIRST if not (TESTS / n).is_file()] == []
