"""The suite's own machinery in tests/conftest.py: the order README's command runs the tests in, the bytecode it
keeps."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import conftest
import pytest

import sweeper

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


@pytest.mark.skipif(
    not sys.flags.dont_write_bytecode,
    reason="Python writes the bytecode itself (no PYTHONDONTWRITEBYTECODE)",
)
def test_every_project_module_has_current_bytecode_for_the_interpreters_the_tests_start():
    """conftest compiles the project once a session where PYTHONDONTWRITEBYTECODE is set: each module's .pyc is there,
    as new as its source (else each fresh interpreter compiles it again)."""
    stale = []
    for package in conftest.CORE:
        for path in (sweeper.ROOT / package).rglob("*.py"):
            cached = Path(importlib.util.cache_from_source(str(path)))
            if not cached.exists() or cached.stat().st_mtime < path.stat().st_mtime:
                stale.append(str(path.relative_to(sweeper.ROOT)))
    assert not stale, stale


def test_the_test_modules_rewritten_bytecode_is_kept_whatever_pythondontwritebytecode_says():
    """conftest's pytest_collection lets pytest cache this module's assert-rewritten bytecode (each worker would
    rewrite and compile every test module again)."""
    cached = (
        TESTS
        / "__pycache__"
        / f"{Path(__file__).stem}.{sys.implementation.cache_tag}-pytest-{pytest.__version__}.pyc"
    )
    assert cached.exists(), cached
    # the user's setting (PYTHONDONTWRITEBYTECODE, -B) holds again once the tests are collected
    assert sys.dont_write_bytecode == bool(sys.flags.dont_write_bytecode)
