"""The house's figures (issue 58): size, density, fault handling,
declared surface and spread concepts of the core.

    python bench/house_figures.py                  # the working tree
    python bench/house_figures.py --at 8f5099a     # a commit (its ``git archive``, in a temporary
                                                   # folder)
    python bench/house_figures.py --at 8f5099a --at HEAD   # side by side

The core is every ``.py`` file under ``sweeper/``, ``models/``, ``data/`` and ``plugins/``
(tests, bench, docs and examples are not in it). What each figure counts, exactly:

- *modules*: the core's ``.py`` files.
- *lines*: every line of them; *code lines*: the lines that are neither blank nor a
  comment alone (``# ...`` after optional indentation). Docstrings are code lines.
- *code characters*: the characters of the code lines, indentation and
  trailing comments included, trailing whitespace and newlines not.
- *code characters without docstrings and comments*: the same with
  every docstring's lines (a module's, a class's, a function's first
  statement when it is a string) and every ``#`` comment left out.
- *mean line length*: the characters of the non-blank lines (trailing
  whitespace not counted) over their number.
- *lines over 100* and *over 120*: lines whose length (trailing whitespace not counted) exceeds it.
- *except handlers / 1,000 code lines*: ``ast.ExceptHandler`` nodes (``except*`` included)
  per 1,000 code lines; *broad*: those of them that are bare (``except:``) or whose type is,
  or is a tuple holding, ``Exception`` or ``BaseException`` (by name or as ``builtins.X``).
- *__all__ coverage*: modules that bind ``__all__`` at module level (an assignment or augmented
  assignment in the module's body, inside a top-level ``if``/``try`` included) over modules.
- *imports inside functions*: ``import`` and ``from ... import``
  statements whose innermost enclosing scope is a function (``def``,
  ``async def``; one inside a class inside a function counts too).
- *files naming halving* / *folds*: modules in which an identifier (a name, an attribute,
  a ``def``/``class`` name, an argument, a keyword, an imported name or module) or a
  string constant that is not a docstring contains ``halving`` / ``folds``, in any case.
- *module-level mutable bindings*: in every module but ``sweeper/base/state.py``,
  the module-level assignments (``x = ...``, ``x: T = ...``, in the module's body or
  a top-level ``if``/``try``/``with``) whose value is a list, dict or set display or
  comprehension, or a call of ``list``, ``dict``, ``set``, ``defaultdict``, ``deque``,
  ``OrderedDict``, ``Counter`` or ``WeakValueDictionary``/``WeakKeyDictionary``/``WeakSet``
  (by name or as an attribute: ``collections.deque()``), whatever the name bound: a
  constant table in a dict counts too (a tuple or a ``frozenset``/``MappingProxyType`` does
  not), since nothing stops a caller from changing it. ``__all__`` is not counted.
- *of them mutated (state)*: those bindings that the core changes after the import: the
  module calls a mutating method on the name (``NAME.append(...)``, ``.add``, ``.update``,
  ``.pop``, ``.clear``, ``.setdefault``, ... of ``MUTATORS``), assigns or deletes an item of
  it (``NAME[k] = v``, ``del NAME[k]``), augments it (``NAME += ...``) or rebinds it under
  ``global NAME``; or any module of the core does the first three through an attribute of
  that name (``stop._SEEN.append(...)``: matched by the attribute's name alone), or through
  a name it imported (``from m import TABLE``, then ``TABLE.update(...)``: likewise).
"""

from __future__ import annotations

import argparse
import ast
import io
import subprocess
import sys
import tarfile
import tempfile
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ("sweeper", "models", "data", "plugins")
STATE_MODULE = "sweeper/base/state.py"
MUTABLE_CALLS = {
    "list",
    "dict",
    "set",
    "defaultdict",
    "deque",
    "OrderedDict",
    "Counter",
    "WeakValueDictionary",
    "WeakKeyDictionary",
    "WeakSet",
}
MUTATORS = {
    "append",
    "extend",
    "insert",
    "remove",
    "pop",
    "popitem",
    "clear",
    "update",
    "setdefault",
    "add",
    "discard",
    "appendleft",
    "popleft",
    "extendleft",
    "rotate",
    "move_to_end",
    "sort",
    "reverse",
    "difference_update",
    "intersection_update",
    "symmetric_difference_update",
}
BROAD = {"Exception", "BaseException"}
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def core_files(root: Path) -> list[Path]:
    return sorted(
        p for top in CORE for p in (root / top).rglob("*.py") if "__pycache__" not in p.parts
    )


def _docstrings(tree: ast.Module) -> list[ast.Constant]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, *FUNCTIONS)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.append(first.value)
    return found


def _is_broad(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    names = {
        t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else None
        for t in types
    }
    return bool(names & BROAD)


def _imports_in_functions(node: ast.AST, in_function: bool = False) -> int:
    count = 0
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)) and in_function:
            count += 1
        count += _imports_in_functions(child, in_function or isinstance(child, FUNCTIONS))
    return count


def _identifiers(tree: ast.Module, docstrings: set[int]) -> list[str]:
    words: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, (ast.ClassDef, *FUNCTIONS)):
            words.append(node.name)
        elif isinstance(node, ast.arg):
            words.append(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            words.append(node.arg)
        elif isinstance(node, ast.alias):
            words += [node.name, node.asname or ""]
        elif isinstance(node, ast.ImportFrom):
            words.append(node.module or "")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            words.append(node.value)
    return words


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The module's statements, those inside a top-level if/try/with
    included (not inside a def or a class)."""
    out = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, ast.If):
            out += _top_level(stmt.body) + _top_level(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            out += _top_level(stmt.body) + _top_level(stmt.orelse) + _top_level(stmt.finalbody)
            for handler in stmt.handlers:
                out += _top_level(handler.body)
        elif isinstance(stmt, ast.With):
            out += _top_level(stmt.body)
    return out


def _is_mutable(value: ast.expr | None) -> bool:
    if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Call):
        f = value.func
        return (
            f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        ) in MUTABLE_CALLS
    return False


def _mutable_bindings(tree: ast.Module) -> list[str]:
    found = []
    for stmt in _top_level(tree.body):
        targets = (
            stmt.targets
            if isinstance(stmt, ast.Assign)
            else [stmt.target]
            if isinstance(stmt, ast.AnnAssign)
            else []
        )
        if _is_mutable(stmt.value if targets else None):
            found += [t.id for t in targets if isinstance(t, ast.Name) and t.id != "__all__"]
    return found


def _mutated(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names this module mutates as names, and those it mutates as
    attributes (``x.NAME.append``)."""
    names: set[str] = set()
    attributes: set[str] = set()

    def note(target: ast.expr) -> None:
        if isinstance(target, ast.Name):
            names.add(target.id)
        elif isinstance(target, ast.Attribute):
            attributes.add(target.attr)

    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATORS
        ):
            note(node.func.value)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            note(node.value)
        elif isinstance(node, ast.AugAssign):
            note(node.target)
        elif isinstance(node, ast.Global):
            names.update(node.names)
    # a name imported from another module (``from m import TABLE``; ``TABLE.update(...)``)
    # is that module's binding, changed as ``m.TABLE`` would be
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) in names:
                    attributes.add(alias.name)
    return names, attributes


def _binds_all(tree: ast.Module) -> bool:
    for stmt in _top_level(tree.body):
        targets = (
            stmt.targets
            if isinstance(stmt, ast.Assign)
            else [stmt.target]
            if isinstance(stmt, (ast.AnnAssign, ast.AugAssign))
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return True
    return False


def _comment_columns(source: str) -> dict[int, int]:
    return {
        tok.start[0]: tok.start[1]
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }


def measure(root: Path) -> dict:
    """Every figure of the module docstring, for the core under
    ``root``; the per-module lists under ``where``."""
    f = dict(
        modules=0,
        lines=0,
        code_lines=0,
        code_chars=0,
        bare_chars=0,
        nonblank=0,
        nonblank_chars=0,
        over100=0,
        over120=0,
        handlers=0,
        broad=0,
        with_all=0,
        inner_imports=0,
    )
    where: dict[str, list[str]] = {"halving": [], "folds": []}
    bindings: list[tuple[str, str, bool]] = []  # (module, name, mutated there by name)
    as_attributes: set[str] = set()
    for path in core_files(root):
        rel = path.relative_to(root).as_posix()
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=rel)
        docs = _docstrings(tree)
        doc_lines = {n for d in docs for n in range(d.lineno, d.end_lineno + 1)}
        comments = _comment_columns(source)
        f["modules"] += 1
        for number, line in enumerate(source.splitlines(), 1):
            line = line.rstrip()
            f["lines"] += 1
            f["over100"] += len(line) > 100
            f["over120"] += len(line) > 120
            if not line.strip():
                continue
            f["nonblank"] += 1
            f["nonblank_chars"] += len(line)
            if line.lstrip().startswith("#"):
                continue
            f["code_lines"] += 1
            f["code_chars"] += len(line)
            if number not in doc_lines:
                f["bare_chars"] += len(line[: comments.get(number, len(line))].rstrip())
        handlers = [n for n in ast.walk(tree) if isinstance(n, ast.ExceptHandler)]
        f["handlers"] += len(handlers)
        f["broad"] += sum(map(_is_broad, handlers))
        f["with_all"] += _binds_all(tree)
        f["inner_imports"] += _imports_in_functions(tree)
        words = " ".join(_identifiers(tree, {id(d) for d in docs})).lower()
        for concept in ("halving", "folds"):
            if concept in words:
                where[concept].append(rel)
        names, attributes = _mutated(tree)
        as_attributes |= attributes
        if rel != STATE_MODULE:
            bindings += [(rel, name, name in names) for name in _mutable_bindings(tree)]
    where["mutable"] = [f"{rel}: {name}" for rel, name, _ in bindings]
    where["state"] = [
        f"{rel}: {name}" for rel, name, by_name in bindings if by_name or name in as_attributes
    ]
    f["where"] = where
    return f


def rows(f: dict) -> list[tuple[str, str]]:
    per_k = 1000 / max(f["code_lines"], 1)
    return [
        ("modules", f"{f['modules']}"),
        ("lines / code lines", f"{f['lines']:,} / {f['code_lines']:,}"),
        ("code characters", f"{f['code_chars'] / 1000:.0f}k"),
        ("code characters without docstrings and comments", f"{f['bare_chars'] / 1000:.0f}k"),
        (
            "mean line length (non-blank lines)",
            f"{f['nonblank_chars'] / max(f['nonblank'], 1):.1f}",
        ),
        ("lines over 100 / over 120", f"{f['over100']:,} / {f['over120']:,}"),
        (
            "except handlers / 1,000 code lines (broad)",
            f"{f['handlers'] * per_k:.1f} ({f['broad'] * per_k:.1f})",
        ),
        ("except handlers (broad)", f"{f['handlers']} ({f['broad']})"),
        ("`__all__` coverage", f"{f['with_all']} / {f['modules']}"),
        ("imports inside functions", f"{f['inner_imports']}"),
        ("files naming halving", f"{len(f['where']['halving'])}"),
        ("files naming folds", f"{len(f['where']['folds'])}"),
        (f"module-level mutable bindings (not {STATE_MODULE})", f"{len(f['where']['mutable'])}"),
        ("  of them mutated (state)", f"{len(f['where']['state'])}"),
    ]


def archived(commit: str, into: Path) -> Path:
    """The core of ``commit`` (``git archive``), unpacked under ``into``."""
    blob = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, *CORE],
        capture_output=True,
        check=False,
    )
    if blob.returncode:
        raise SystemExit(f"house_figures: error: --at {commit}: {blob.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(blob.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument(
        "--at",
        action="append",
        default=[],
        metavar="COMMIT",
        help="measure a commit's tree (git archive); repeat for columns side by side",
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="also list the files naming halving and folds and the mutable bindings",
    )
    args = parser.parse_args(argv)
    columns: list[tuple[str, dict]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, commit in enumerate(args.at):
            label = (
                subprocess.run(
                    ["git", "-C", str(ROOT), "rev-parse", "--short", commit],
                    capture_output=True,
                    text=True,
                    check=False,
                ).stdout.strip()
                or commit
            )
            columns.append((label, measure(archived(commit, Path(tmp) / str(i)))))
    if not args.at:
        columns.append(("working tree", measure(ROOT)))
    table = [("figure", *(label for label, _ in columns))]
    per_column = [rows(f) for _, f in columns]
    for i, (name, _) in enumerate(per_column[0]):
        table.append((name, *(col[i][1] for col in per_column)))
    widths = [max(len(r[c]) for r in table) for c in range(len(table[0]))]
    print("| " + " | ".join(cell.ljust(w) for cell, w in zip(table[0], widths)) + " |")
    print(
        "|"
        + "|".join("-" * (w + 2) if c == 0 else "-" * (w + 1) + ":" for c, w in enumerate(widths))
        + "|"
    )
    for r in table[1:]:
        print(
            "| "
            + " | ".join(
                cell.ljust(w) if c == 0 else cell.rjust(w)
                for c, (cell, w) in enumerate(zip(r, widths))
            )
            + " |"
        )
    if args.list:
        for label, f in columns:
            for key, names in f["where"].items():
                print(f"\n{label}, {key} ({len(names)}):")
                print("\n".join(f"  {n}" for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
