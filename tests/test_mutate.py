"""The mutation targets of pyproject.toml ([tool.sweeper.mutation.*], run by tests/mutate.py) name what exists: a
module renamed or a function moved would leave a target that mutates nothing (mutate.py would find no mutant)."""

from __future__ import annotations

import re

import mutate
import pytest

import sweeper

TARGETS = mutate.targets()


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_each_mutation_target_names_files_functions_and_tests_that_exist(name):
    target = TARGETS[name]
    missing = [p for p in target["files"] if not (sweeper.ROOT / p).is_file()]
    for test in target["tests"]:  # a file, or a file::test
        path, _, function = test.partition("::")
        if not (sweeper.ROOT / path).is_file() or (
            function
            and not re.search(
                rf"^def {re.escape(function)}\(", (sweeper.ROOT / path).read_text(), re.M
            )
        ):
            missing.append(test)
    assert not missing, f"{name}: {missing}"
    for path, functions in target.get("functions", {}).items():
        assert path in target["files"], f"{name}: functions of {path}, not one of its files"
        text = (sweeper.ROOT / path).read_text()
        gone = [
            f
            for f in functions
            if not re.search(rf"^\s*def {re.escape(f.split('.')[-1])}\(", text, re.M)
        ]
        assert not gone, f"{name}: {path} defines none of {gone}"


def test_each_no_mutate_pragma_sits_on_a_line_of_code_that_mutmut_skips():
    """mutmut skips the mutants of the line that carries ``# pragma: no mutate``: a pragma the formatter moved onto a
    statement's closing bracket (a long call wrapped) marks nothing, and its equivalent mutant survives again (the
    leaderboard's two did, after ruff format)."""
    stray = []
    for target in TARGETS.values():
        for path in target["files"]:
            for n, line in enumerate((sweeper.ROOT / path).read_text().splitlines(), 1):
                code = line.partition("#")[0].strip()
                if "pragma: no mutate" in line and not code.strip(")]}:, "):
                    stray.append(f"{path}:{n}: {line.strip()}")
    assert not stray, "\n".join(stray)
