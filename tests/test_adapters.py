"""Dependencies at arm's length (issue 42): no name of MLflow's, Hydra's or OmegaConf's that is not their public API
outside its adapter, no write to MLflow's tables outside it, no caller found by its stack frame; and outside the
versions the tests ran the public calls run, with one line saying so."""

from __future__ import annotations

import ast
import importlib.util
import logging
import re
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

import pytest
from conftest import CORE

ROOT = Path(__file__).resolve().parent.parent
SCANNED = CORE
# each dependency's adapter: the only files where its private names (and, for MLflow, its tables) may be used
ADAPTERS = {
    "mlflow": ("sweeper/tracking/bulk.py", "sweeper/tracking/ui.py"),
    # and the guarded sweeper's shim, a subclass of Hydra's BasicSweeper that Hydra imports in every app at its start,
    # where importing sweeper's adapter would import sweeper (tests/test_hydra_plugin.py)
    "hydra": (
        "sweeper/base/hydra_internals.py",
        "plugins/hydra_plugins/sweeper_batched_launcher/guarded_sweeper.py",
    ),
    "omegaconf": ("sweeper/base/omegaconf_internals.py",),
    # not named by the issue: Optuna's internals are used by sweeper's own Optuna sweeper plugin only
    "optuna": ("plugins/hydra_plugins/sweeper_optuna_sweeper/",),
}


@lru_cache(maxsize=None)  # read, never changed, by two tests
def _files() -> dict[str, ast.AST]:
    return {
        str(f.relative_to(ROOT)): ast.parse(f.read_text())
        for d in SCANNED
        for f in (ROOT / d).rglob("*.py")
    }


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined(tree: ast.AST, arguments: bool = True) -> set[str]:
    """The names a module defines: functions, classes, globals and locals, attributes set, dataclass fields (and its
    functions' arguments: a dependency's are no name of its API)."""
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
            names.add(n.attr)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            names.add(n.target.id)
        elif arguments and isinstance(n, ast.arg):
            names.add(n.arg)
    return names


@lru_cache(maxsize=None)
def _dependency_names(dep: str, wanted: frozenset[str]) -> frozenset[str]:
    """The private names of ``wanted`` that a dependency defines. Only its files that hold one of them as a word are
    parsed: a name is defined by a file that spells it (MLflow's 1,200 files all parsed cost ~4.5 CPU-s a session)."""
    spelled = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, sorted(wanted))) + r")(?!\w)")
    names: set[str] = set()
    for f in Path(importlib.util.find_spec(dep).origin).parent.rglob("*.py"):
        text = f.read_text(errors="ignore")
        if not wanted or not spelled.search(text):
            continue
        try:
            names |= _defined(ast.parse(text), arguments=False)
        except SyntaxError:
            continue
    return frozenset(x for x in names & wanted if _private(x))


def _named(trees: dict[str, ast.AST]) -> frozenset[str]:
    """Every private name the trees use as an attribute, a keyword or a string: what :func:`uses` may look up in a
    dependency's names."""
    names = set()
    for tree in trees.values():
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute):
                names.add(n.attr)
            elif isinstance(n, ast.keyword) and n.arg:
                names.add(n.arg)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                names.add(n.value)
    return frozenset(x for x in names if _private(x))


def _own_names(trees: dict[str, ast.AST]) -> set[str]:
    """Names the project defines itself (an attribute of ours may share a name with one of a dependency's)."""
    return set().union(*(_defined(t) for t in trees.values()))


def uses(trees: dict[str, ast.AST]) -> list[tuple[str, int, str, set[str]]]:
    """Every use of a dependency's private name: (file, line, what, the dependencies it may belong to)."""
    own = _own_names(trees)
    wanted = _named(trees) - own  # a name of ours is never looked up in a dependency's
    deps = {d: _dependency_names(d, wanted) for d in ADAPTERS}
    found = []
    for path, tree in trees.items():
        for n in ast.walk(tree):
            hits: list[tuple[str, set[str]]] = []
            if isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] in deps:
                top = n.module.split(".")[0]
                if any(_private(p) for p in n.module.split(".")):
                    hits.append((f"from {n.module} import", {top}))
                hits += [(f"{n.module}.{a.name}", {top}) for a in n.names if _private(a.name)]
                if n.module.startswith("mlflow.store.tracking.dbmodels"):  # MLflow's tables
                    hits.append((n.module, {"mlflow"}))
            elif isinstance(n, ast.Import):
                hits += [
                    (a.name, {a.name.split(".")[0]})
                    for a in n.names
                    if a.name.split(".")[0] in deps and any(_private(p) for p in a.name.split("."))
                ]
            elif (
                isinstance(n, ast.Attribute)
                and _private(n.attr)
                and n.attr not in own
                and not _stdlib(n.value)
            ):
                hits.append((n.attr, {d for d, names in deps.items() if n.attr in names}))
            elif isinstance(n, ast.keyword) and n.arg and _private(n.arg) and n.arg not in own:
                hits.append((f"{n.arg}=", {d for d, names in deps.items() if n.arg in names}))
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                v = n.value
                if any(v.startswith(f"{d}.") for d in deps) and any(
                    _private(p) for p in v.split(".")
                ):
                    # a private module named in a string (a _target_)
                    hits.append((v, {v.split(".")[0]}))
            if (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name)
                and n.func.id in ("getattr", "hasattr", "setattr")
                and len(n.args) > 1
                and isinstance(n.args[1], ast.Constant)
                and not _stdlib(n.args[0])
            ):
                named = n.args[1].value  # getattr(x, "_name")
            elif (
                isinstance(n, ast.Subscript)
                and isinstance(n.value, ast.Attribute)
                and n.value.attr == "__dict__"
                and isinstance(n.slice, ast.Constant)
            ):
                named = n.slice.value  # x.__dict__["_name"]
            else:
                named = None
            if isinstance(named, str) and _private(named) and named not in own:
                hits.append((repr(named), {d for d, names in deps.items() if named in names}))
            for what, owners in hits:
                if owners:
                    found.append((path, getattr(n, "lineno", 0), what, owners))
    return found


# Python's own modules whose private names sweeper's exit uses (sweeper/__init__.py: threading._shutdown,
# atexit._run_exitfuncs, os._exit; only under ``python -m``), not a dependency's
STDLIB = frozenset({"threading", "atexit", "os", "sys", "gc"})


def _stdlib(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in STDLIB


def _allowed(path: str, owners: set[str]) -> bool:
    return any(path.startswith(a) for d in owners for a in ADAPTERS[d])


def test_no_private_name_of_mlflow_hydra_or_omegaconf_outside_its_adapter():
    outside = [
        f"{p}:{line}: {what} ({'/'.join(sorted(o))})"
        for p, line, what, o in uses(_files())
        if not _allowed(p, o)
    ]
    assert outside == [], "\n".join(outside)


def test_the_scan_finds_a_private_name_outside_an_adapter():
    trees = {
        "sweeper/x.py": ast.parse(
            "from hydra._internal.utils import run_and_report\n"
            "from mlflow.utils.validation import _validate_tag\n"
            "from mlflow.store.tracking.dbmodels.models import SqlRun\n"
            "def f(c, cfg):\n"
            "    return c._tracking_client, cfg._get_node('x'), cfg.__dict__['_content'], getattr(c, '_tracking_client')\n"
        )
    }
    found = {what for p, _, what, o in uses(trees) if not _allowed(p, o)}
    assert {
        "from hydra._internal.utils import",
        "mlflow.utils.validation._validate_tag",
        "mlflow.store.tracking.dbmodels.models",
        "_tracking_client",
        "_get_node",
        "'_content'",
        "'_tracking_client'",
    } <= found
    # the same lines inside the adapters are allowed
    assert all(
        _allowed(a, o)
        for p, _, _, o in uses(trees)
        for a in ADAPTERS["mlflow"] + ADAPTERS["hydra"] + ADAPTERS["omegaconf"]
        if any(a in ADAPTERS[d] for d in o)
    )


# Files that read a stack frame only to record where something happened, never to choose what to do: the
# strict GPU stand-in's ledger names the line of each host<->device copy in its report.
RECORDS_A_SITE = {"sweeper/base/strict/ledger.py"}


def test_no_behaviour_is_chosen_by_a_callers_stack_frame():
    for path, tree in _files().items():
        if path in RECORDS_A_SITE:
            continue
        for n in ast.walk(tree):
            assert not (
                isinstance(n, ast.Attribute)
                and n.attr in ("_getframe", "currentframe", "stack")
                and isinstance(n.value, ast.Name)
                and n.value.id in ("sys", "inspect")
            ), f"{path}:{n.lineno}"


def test_the_tested_range_is_declared_once_and_the_installed_versions_are_inside_it():
    from importlib import metadata

    from sweeper.base import tested

    for dist, (lowest, below) in tested.TESTED.items():
        version = metadata.version(tested.DISTRIBUTION.get(dist, dist))
        assert tested.inside(version, lowest, below), (dist, version)
    assert tested.inside("3.18.0", "3.17", "3.19") and not tested.inside(
        "3.19.0rc1", "3.17", "3.19"
    )
    assert not tested.inside("3.16.9", "3.17", "3.19") and tested.inside("1.3.8", "1.3.2", "1.4")


@pytest.fixture
def outside_range(monkeypatch):
    """The installed MLflow outside the tested range (a range that excludes it), the answers asked afresh."""
    from sweeper.base import tested

    monkeypatch.setattr(
        tested, "TESTED", MappingProxyType({**tested.TESTED, "mlflow": ("0.1", "0.2")})
    )
    tested.within.cache_clear()
    tested.shortcut.cache_clear()
    yield
    tested.within.cache_clear()
    tested.shortcut.cache_clear()


def test_outside_the_tested_range_mlflows_public_calls_run_and_one_line_says_so(
    outside_range, tmp_path, caplog, store
):
    """The embedded store, used the way a sweep does, through MLflow's public calls only: the same records."""
    from conftest import client_for
    from sweeper.tracking import bulk, ending

    # a sweep's new store (a copy of the session's template: no migrations run again)
    c = client_for(store)
    e = c.create_experiment("x", artifact_location=(tmp_path / "artifacts").as_uri())
    with caplog.at_level(logging.INFO, logger="sweeper"):
        assert bulk.sql_store(c) is None and not bulk.creates_in_bulk(c)
        assert bulk.sql_store(c) is None
    said = [r.getMessage() for r in caplog.records if "public calls" in r.getMessage()]
    assert len(said) == 1 and "mlflow" in said[0], said  # once a process
    [a, b] = bulk.start_runs(
        c, e, [{"name": n, "tags": {"k": n}, "params": {"lr": 0.1}} for n in ("a", "b")]
    )
    end = {"status": "FAILED", "tags": {"failure_reason": "diverged"}}
    assert ending.end_runs(c, [ending.Ending(a, end)]) == ending.CALLS
    bulk.set_tag_on_runs(c, [a, b], "k", "v")
    runs = {r.info.run_id: r for r in c.search_runs([e])}
    assert runs[a].info.status == "FAILED" and runs[a].data.tags["failure_reason"] == "diverged"
    assert runs[b].data.params == {"lr": "0.1"} and {r.data.tags["k"] for r in runs.values()} == {
        "v"
    }


def test_an_optional_dependency_is_its_module_or_none():
    """tested.optional: psutil, joblib, fcntl (Windows lacks it) asked for by name, imported
    then; one that is not installed is None (each caller's fallback), not an ImportError."""
    import json

    from sweeper.base.tested import optional

    assert optional("json") is json
    assert optional("sweeper_no_such_module_58") is None
    assert optional("sweeper.no_such_submodule") is None


def test_an_installed_version_is_looked_up_once_a_process(monkeypatch):
    """Each logged model pins three versions (``pyfunc.requirements_for``): one scan of the
    path's distributions each, not one a model."""
    from importlib import metadata

    from sweeper.base import tested
    from sweeper.tracking import pyfunc

    asked = []
    forget = getattr(tested.installed, "cache_clear", lambda: None)  # a plain function: no cache

    def version(dist):
        asked.append(dist)
        return "1.2.3"

    forget()
    monkeypatch.setattr(metadata, "version", version)
    try:
        first = [pyfunc.requirements_for(text=False) for _ in range(4)]
        assert first[0] == ["mlflow==1.2.3", "numpy==1.2.3", "pandas==1.2.3"] == first[-1]
        assert sorted(asked) == ["mlflow", "numpy", "pandas"]
    finally:
        forget()
