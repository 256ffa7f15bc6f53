"""The house's shape: no import cycle among the project's modules (imports inside functions included), no module
over 350 statements (a function's branches and statements are ruff's C901 and PLR0915), no folder of sweeper/ with more than 14 modules, no two modules of one file name,
and the bottom layer importing nothing above it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# where each installed package's files live (pyproject.toml's package-dir)
PACKAGES = {
    "sweeper": ROOT / "sweeper",
    "sweeper.models": ROOT / "models",
    "sweeper.data": ROOT / "data",
}
PLUGINS = ROOT / "plugins"


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([package, *parts])
            if package == "sweeper" and rel.parts[0] in ("models", "data"):
                continue
            found[name] = path
    for path in PLUGINS.rglob("*.py"):
        rel = path.relative_to(PLUGINS).with_suffix("")
        found[".".join(p for p in rel.parts if p != "__init__")] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports anywhere in its file (a package's ``__init__`` for ``from pkg import x``
    when x is no module of its own)."""
    is_package = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                if f"{target}.{a.name}" in known:
                    out.add(f"{target}.{a.name}")
                elif target in known:
                    out.add(target)
    out.discard(name)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, result, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                result.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return result


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) for name, path in found.items()}


def test_no_import_cycle():
    assert cycles(graph()) == []


def test_the_cycle_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_bottom_layer_imports_nothing_above_it():
    g = graph()
    for name, deps in g.items():
        if name.startswith("sweeper.base."):
            assert {d for d in deps if not d.startswith("sweeper.base")} == set(), name


MOST_STATEMENTS = 350  # a module's statements, nested ones included: its size whatever the formatter does to its lines


def statements(source: str) -> int:
    """How many statements ``source`` holds (a function's body, a branch's, a class's included)."""
    return sum(isinstance(n, ast.stmt) for n in ast.walk(ast.parse(source)))


@pytest.mark.parametrize("path", sorted(modules().values()), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_module_a_reader_can_hold(path):
    assert statements(path.read_text()) <= MOST_STATEMENTS


def test_the_size_check_counts_nested_statements():
    source = "import os\n\n\ndef f(x):\n    if x:\n        return 1\n    return 2\n\n\nclass C:\n    y = 1\n"
    # import, def, if, return, return, class, the class body's assignment
    assert statements(source) == 7


# A function's size is ruff's to check (C901 branches, PLR0915 statements: pyproject.toml), not its lines: the
# formatter decides those.


def test_folders_of_a_size_a_reader_can_hold():
    for folder in [
        ROOT / "sweeper",
        *(p for p in (ROOT / "sweeper").rglob("*") if p.is_dir() and p.name != "__pycache__"),
    ]:
        assert len([p for p in folder.glob("*.py") if p.name != "__init__.py"]) <= 14, folder


MOST_TEST_LINES = (
    800  # issue 58: a test file a reader can hold; a module's tests beside it, not by incident
)


def test_no_test_file_runs_past_800_lines():
    """The suite's own files, as the manual says (docs/manual/tests.md, 'Where a test lives'): a file past the bound
    is split by the module its tests pin."""
    long = {
        p.name: n
        for p in sorted((ROOT / "tests").glob("*.py"))
        if (n := len(p.read_text().splitlines())) > MOST_TEST_LINES
    }
    assert not long, f"test files past {MOST_TEST_LINES} lines: {long}"


HYDRA_NAMES = {
    "__init__.py",
    "config.py",
}  # a package's own file; a Hydra plugin's config.py is Hydra's convention


def same_names(paths: list[Path]) -> dict[str, list[str]]:
    """The file names (``HYDRA_NAMES`` aside) that more than one of ``paths`` has: name -> the paths, relative to ROOT."""
    by_name: dict[str, list[str]] = {}
    for path in paths:
        if path.name not in HYDRA_NAMES:
            by_name.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    return {name: sorted(found) for name, found in by_name.items() if len(found) > 1}


def test_no_two_modules_share_a_name():
    """A module's name says what it holds, once: ``guard`` or ``report`` in two folders makes a reader (and a grep,
    a traceback, a test's name) ask which one."""
    assert same_names(list(modules().values())) == {}


def test_the_name_check_finds_two_modules_of_one_name():
    paths = [
        ROOT / "sweeper/a/guard.py",
        ROOT / "sweeper/b/guard.py",
        ROOT / "sweeper/a/config.py",
        ROOT / "plugins/p/config.py",
        ROOT / "sweeper/a/__init__.py",
        ROOT / "sweeper/b/__init__.py",
    ]
    assert same_names(paths) == {"guard.py": ["sweeper/a/guard.py", "sweeper/b/guard.py"]}
