"""The declared public surface: every module of the core has an ``__all__`` and every name in it resolves, no
core module imports from another a name its ``__all__`` leaves out (a sibling's private name aside, and the
exceptions listed with their reasons), ``from sweeper import *`` gives the user's names, ``sweeper.tracking``
re-exports no module it imports yet has every name the tree reaches through it, and the imports README.md and
docs/ show work."""

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
    """Each core module that binds ``__all__`` at its top level, with the list (read from the source; imported
    only where the list is built from others, as ``sweeper.tracking``'s)."""
    found = {}
    for folder in CORE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for stmt in ast.parse(path.read_text(encoding="utf-8")).body:
                targets = getattr(stmt, "targets", [getattr(stmt, "target", None)])
                if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and any(
                    getattr(t, "id", None) == "__all__" for t in targets
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


def core_files() -> dict[str, Path]:
    """Every module of the core, by its dotted name."""
    return {
        module_name(path): path
        for folder in CORE
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def test_every_core_module_declares___all__():
    undeclared = sorted(set(core_files()) - set(declared()))
    assert not undeclared, f"core modules without __all__: {undeclared}"


def bound_locally(tree: ast.AST) -> dict[ast.AST, set[str]]:
    """For each node inside a function, the names an enclosing function binds (its arguments and
    assignments), which shadow a module imported under the same name."""
    shadowed: dict[ast.AST, set[str]] = {}

    def visit(node: ast.AST, names: frozenset[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            own = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
            own |= {a.arg for a in (args.vararg, args.kwarg) if a}
            own |= {
                n.id
                for n in ast.walk(node)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
            names = names | own
        for child in ast.iter_child_nodes(node):
            shadowed[child] = names
            visit(child, names)

    visit(tree, frozenset())
    return shadowed


def imported_names(this: str, path: Path, modules: set[str]) -> list[tuple[int, str, str]]:
    """``(line, module, name)`` for each name this core module takes from another one: ``from M import
    name`` (relative included) and ``m.name`` where ``m`` is a core module imported under that name
    (``import M as m``, ``from P import m``, ``import sweeper.a`` then ``sweeper.a.name``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[int, str, str]] = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name in modules:
                    aliases[a.asname] = a.name
                elif not a.asname and a.name.split(".")[0] in modules:
                    aliases[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                package = this.split(".")[: -1 if path.name != "__init__.py" else None]
                module = ".".join(
                    package[: len(package) - node.level + 1] + [module] * bool(module)
                )
            if module not in modules:
                continue
            for a in node.names:
                if f"{module}.{a.name}" in modules:
                    aliases[a.asname or a.name] = f"{module}.{a.name}"
                else:
                    found.append((node.lineno, module, a.name))
    shadowed = bound_locally(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain = []
        base = node
        while isinstance(base, ast.Attribute):
            chain.insert(0, base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or base.id not in aliases:
            continue
        if base.id in shadowed.get(base, ()):
            continue
        module = aliases[base.id]
        *path_to, name = chain
        if all(f"{module}.{'.'.join(path_to[: i + 1])}" in modules for i in range(len(path_to))):
            owner = ".".join([module, *path_to])
            if f"{owner}.{name}" not in modules:
                found.append((node.lineno, owner, name))
    return found


# A core module may import, from another one, a name its __all__ declares; and a private name
# (``_x``) of a sibling inside the same subsystem (``sweeper.insight``, ``sweeper.models``,
# ``hydra_plugins.sweeper_optuna_sweeper``, ...): private by package. The exceptions:
UNDECLARED = {
    ("sweeper", "CONF_DIR"): "the package's own paths and exit, not the user's `import *`",
    ("sweeper", "ROOT"): "the package's own paths and exit, not the user's `import *`",
    ("sweeper", "main_exit"): "the package's own paths and exit, not the user's `import *`",
    ("sweeper", "settled"): "the package's own paths and exit, not the user's `import *`",
    ("sweeper.tracking", "UNREACHABLE"): "built when first asked: `import *` would build it",
    ("sweeper.tracking.store", "UNREACHABLE"): "built when first asked: `import *` would build it",
    # private helpers another subsystem reaches (each a rename across modules, left to a later pass)
    ("sweeper.models.batched_pass", "_Pass"): "a group's preallocated pass, sized by sweep.packing",
}


def subsystem(module: str) -> str:
    return ".".join(module.split(".")[:2])


def undeclared_imports() -> list[str]:
    files = core_files()
    modules = set(files)
    lists = declared()
    wrong = []
    for this, path in files.items():
        for line, module, name in imported_names(this, path, modules):
            if (
                module == this
                or name == "*"  # takes the __all__
                or name.startswith("__")  # the module's own attributes (__file__)
                or name in lists.get(module, ())
                or (module, name) in UNDECLARED
                or (name.startswith("_") and subsystem(module) == subsystem(this))
            ):
                continue
            wrong.append(f"{path.relative_to(ROOT)}:{line} {module}.{name}")
    return wrong


def test_no_core_module_imports_a_name_another_does_not_declare():
    wrong = undeclared_imports()
    assert not wrong, (
        "imported but not in the module's __all__ (declare it, or keep it inside):\n"
        + ("\n".join(wrong))
    )


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
