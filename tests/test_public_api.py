"""The declared public surface: every ``__all__`` of the core resolves, ``from sweeper import *`` gives the user's
names, ``sweeper.tracking`` re-exports no module it imports yet has every name the tree reaches through it, and the
imports README.md and docs/ show work."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import re
import types
from pathlib import Path

import pytest

import sweeper
from sweeper import tracking

ROOT = Path(__file__).resolve().parent.parent
CORE = {
    "sweeper": "sweeper",
    "models": "sweeper.models",
    "data": "sweeper.data",
    "plugins/hydra_plugins": "hydra_plugins",
}
USER_SURFACE = {
    "RunResult",
    "SweepFailed",
    "SweepResult",
    "multirun",
    "run",
}  # docs/guide/python.md


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).as_posix()
    for folder, package in CORE.items():
        if rel.startswith(folder + "/"):
            parts = [package, *rel[len(folder) + 1 :].removesuffix(".py").split("/")]
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise AssertionError(rel)


def declared() -> dict[str, list[str]]:
    """Each core module that binds ``__all__`` at its top level, with the list (read from the source, not imported)."""
    found = {}
    for folder in CORE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for stmt in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(stmt, ast.Assign) and any(
                    getattr(t, "id", None) == "__all__" for t in stmt.targets
                ):
                    name = module_name(path)
                    try:
                        found[name] = ast.literal_eval(stmt.value)
                    except ValueError:  # built from other lists (sweeper.tracking's)
                        found[name] = list(importlib.import_module(name).__all__)
    return found


def resolve(dotted: str) -> object:
    """``a.b.c`` as ``import``/``from ... import`` would find it: the longest importable module, then attributes
    (a submodule not imported yet included)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for j, name in enumerate(parts[i:], start=i):
            if not hasattr(obj, name) and isinstance(obj, types.ModuleType):
                # ImportError: not there either
                obj = importlib.import_module(".".join(parts[: j + 1]))
            obj = getattr(obj, name)
        return obj
    raise ImportError(dotted)


def test_every_name_of_every___all___resolves():
    found = declared()
    assert {
        "sweeper",
        "sweeper.api",
        "sweeper.check",
        "sweeper.models",
        "sweeper.models.interface",
        "sweeper.data",
        "sweeper.tracking.experiments",
        "sweeper.tracking.records",
        "sweeper.tracking.store",
        "sweeper.tracking.storefile",
        "sweeper.tracking.system",
    } <= set(found)
    missing = []
    for module, names in found.items():
        assert len(names) == len(set(names)), f"{module}.__all__ repeats a name"
        mod = importlib.import_module(module)
        missing += [f"{module}.{name}" for name in names if not hasattr(mod, name)]
    assert not missing, f"in an __all__ but not in its module: {missing}"


def test_from_sweeper_import_star_gives_the_user_surface():
    namespace: dict = {}
    exec("from sweeper import *", namespace)  # noqa: S102
    assert set(namespace) - {"__builtins__"} == USER_SURFACE == set(sweeper.__all__)
    assert namespace["multirun"] is importlib.import_module("sweeper.api").multirun
    assert set(sweeper.__all__) <= set(dir(sweeper))


def test_the_tracking_package_re_exports_no_module_it_imports():
    leaked = {
        name: value.__name__
        for name in dir(tracking)
        if isinstance(value := getattr(tracking, name), types.ModuleType)
        and not value.__name__.startswith("sweeper.tracking.")
    }
    assert not leaked, f"sweeper.tracking re-exports modules it imports: {leaked}"
    for name in (
        "os",
        "sqlite3",
        "subprocess",
        "re",
        "logging",
        "Path",
        "Any",
        "masked",
        "_is_wal_database",
    ):
        assert not hasattr(tracking, name), f"tracking.{name}"


def names_used_through_tracking() -> dict[str, set[str]]:
    """``tracking.X`` (where ``tracking`` is ``from sweeper import tracking``), ``sweeper.tracking.X``,
    ``monkeypatch.setattr(tracking, "X", ...)`` and ``from sweeper.tracking import X`` across the tree."""
    uses: dict[str, set[str]] = {}
    for folder in ("sweeper", "models", "data", "plugins", "tests", "bench", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            bound = any(
                isinstance(n, ast.ImportFrom)
                and n.module == "sweeper"
                and any(a.name == "tracking" and a.asname in (None, "tracking") for a in n.names)
                for n in ast.walk(tree)
            )
            for n in ast.walk(tree):
                names: list[str] = []
                if (
                    isinstance(n, ast.Attribute)
                    and isinstance(n.value, ast.Name)
                    and n.value.id == "tracking"
                    and bound
                ):
                    names.append(n.attr)
                elif (
                    isinstance(n, ast.Attribute)
                    and isinstance(n.value, ast.Attribute)
                    and n.value.attr == "tracking"
                    and isinstance(n.value.value, ast.Name)
                    and n.value.value.id == "sweeper"
                ):
                    names.append(n.attr)
                elif isinstance(n, ast.ImportFrom) and n.module == "sweeper.tracking":
                    names += [a.name for a in n.names]
                elif (
                    isinstance(n, ast.Call)
                    and bound
                    and len(n.args) >= 2
                    and isinstance(n.args[0], ast.Name)
                    and n.args[0].id == "tracking"
                    and isinstance(n.args[1], ast.Constant)
                ):
                    names.append(n.args[1].value)
                for name in names:
                    uses.setdefault(name, set()).add(path.relative_to(ROOT).as_posix())
    return uses


def test_every_name_the_tree_reaches_through_tracking_is_there():
    uses = names_used_through_tracking()
    assert {
        "client",
        "finish_run",
        "thin",
        "stop",
        "UNREACHABLE",
        "TrackingError",
        "sqlite_path",
        "writer",
    } <= set(uses)
    missing = {
        name: sorted(where)
        for name, where in uses.items()
        if not hasattr(tracking, name)
        and importlib.util.find_spec(f"sweeper.tracking.{name}") is None
    }
    assert not missing, f"used as tracking.X but not exported: {missing}"


def documented_names() -> dict[str, set[str]]:
    """What README.md, docs/ and the example notebooks show a user importing: the ``import``/``from ... import`` of
    sweeper and every ``sweeper.a.b`` in their Python blocks and cells, and each inline ``sweeper.a.b(.c)`` name."""
    sources: list[tuple[str, str]] = []  # (file, Python code)
    inline: dict[str, set[str]] = {}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT).as_posix()
        sources += [(rel, block) for block in re.findall(r"```python\n(.*?)```", text, flags=re.S)]
        for name in re.findall(r"`(sweeper(?:\.[A-Za-z_]\w*){2,})(?:\([^`]*\))?`", text):
            inline.setdefault(name, set()).add(rel)
    for path in sorted((ROOT / "examples").rglob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        sources += [
            (path.relative_to(ROOT).as_posix(), "".join(c["source"]))
            for c in cells
            if c["cell_type"] == "code"
        ]
    names = dict(inline)
    for rel, code in sources:
        for node in ast.walk(ast.parse(code)):
            found = []
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names if a.name.split(".")[0] == "sweeper"]
            elif (
                isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sweeper"
            ):
                found = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Attribute):
                chain = []
                while isinstance(node, ast.Attribute):
                    chain.insert(0, node.attr)
                    node = node.value
                if isinstance(node, ast.Name) and node.id == "sweeper":
                    found = [".".join(["sweeper", *chain])]
            for name in found:
                names.setdefault(name, set()).add(rel)
    return names


def test_the_imports_the_docs_show_work():
    names = documented_names()
    assert {
        "sweeper",
        "sweeper.multirun",
        "sweeper.run",
        "sweeper.check.check_model",
        "sweeper.models.Model",
        "sweeper.models.MLPNet",
    } <= set(names), sorted(names)
    broken = {}
    for name, where in sorted(names.items()):
        try:
            resolve(name)
        except (ImportError, AttributeError) as e:
            broken[name] = f"{sorted(where)}: {e}"
    assert not broken, broken


@pytest.mark.parametrize(
    "dotted, ok",
    [
        ("sweeper.models.interface.offer", True),
        ("sweeper.tracking.store.client", True),
        ("sweeper.models.nothing_here", False),
        ("sweeper.no_module.x", False),
    ],
)
def test_resolve_finds_what_an_import_finds(dotted, ok):
    if ok:
        assert callable(resolve(dotted))
    else:
        with pytest.raises((ImportError, AttributeError)):
            resolve(dotted)
