"""Mutation testing of one core module: ``python tests/mutate.py TARGET`` (docs/manual/tests.md).

A target (``[tool.sweeper.mutation.TARGET]`` in pyproject.toml) names the files to mutate, the functions whose
mutants to run (``build``, ``Board.best``; all of a file's when absent) and the fast tests that concern them. This
script copies the checkout as it is (uncommitted changes included) into a scratch folder, sets mutmut's
``[tool.mutmut]`` there to the target (``only_mutate``, the test selection), runs ``mutmut run`` on those functions'
mutants, and prints how many were killed, survived, timed out (and the rest), then each survivor. mutmut runs the
tests that reach a function only (it records which do in a first pass), each mutant in a process of its own.

    python tests/mutate.py --list                 # the targets
    python tests/mutate.py leaderboard            # its table and survivors
    python tests/mutate.py leaderboard --show     # each survivor's diff too
    python tests/mutate.py splits --at 83f6702      # the same functions at an older commit (its code and tests)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import io
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATUSES = (
    "killed",
    "survived",
    "timeout",
    "no tests",
    "suspicious",
    "segfault",
    "skipped",
    "not checked",
)


def targets() -> dict[str, dict]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return data["tool"]["sweeper"]["mutation"]


# The repository's models/ and data/ are the packages sweeper.models and sweeper.data (pyproject.toml's package-dir):
# in the scratch copy they move under sweeper/, so that a file's path is its module's name, as mutmut assumes
# (sweeper/__init__.py finds them there as an installed package has them).
MOVED = {"models/": "sweeper/models/", "data/": "sweeper/data/"}


def in_copy(path: str) -> str:
    """Where a file of the repository is in the scratch copy."""
    return next(
        (new + path[len(old) :] for old, new in MOVED.items() if path.startswith(old)), path
    )


def module_of(path: str) -> str:
    """The module name mutmut gives a file of the scratch copy (its path, dotted; a package's ``__init__`` is the
    package)."""
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def patterns(target: dict) -> list[str]:
    """mutmut's names of the target's mutants: ``module.x_func__mutmut_N``, ``module.xǁClassǁmethod__mutmut_N``."""
    out = []
    for path in target["files"]:
        module = module_of(in_copy(path))
        names = target.get("functions", {}).get(path)
        if names is None:
            out.append(f"{module}.*")
            continue
        for name in names:
            cls, _, func = name.rpartition(".")
            out.append(f"{module}.{'xǁ' + cls + 'ǁ' + func if cls else 'x_' + func}__mutmut_*")
    return out


def scratch_copy(folder: Path, at: str | None) -> None:
    """The checkout's files (tracked and untracked but not ignored, as they are now) in ``folder``; with ``at``, the
    files of that commit instead (its code and its tests)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    if at:
        archive = subprocess.run(["git", "archive", at], cwd=ROOT, capture_output=True, check=True)
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(folder, filter="data")
    else:
        listed = (
            subprocess.run(
                ["git", "ls-files", "-co", "--exclude-standard", "-z"],
                cwd=ROOT,
                capture_output=True,
                check=True,
            )
            .stdout.decode()
            .split("\0")
        )
        for name in filter(None, listed):
            src = ROOT / name
            if src.is_file():
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, folder / name)
    for old, new in MOVED.items():
        (folder / old).rename(folder / new)


def present(folder: Path, selections: list[str]) -> tuple[list[str], list[str]]:
    """The test selections that exist in ``folder``'s tests (a file, or ``file::test`` defined in it), and the others
    (an older commit's tests lack the newer ones)."""
    kept, missing = [], []
    for sel in selections:
        path, _, name = sel.partition("::")
        f = folder / path
        ok = f.is_file() and (
            not name or re.search(rf"^def {re.escape(name.split('[')[0])}\(", f.read_text(), re.M)
        )
        (kept if ok else missing).append(sel)
    return kept, missing


def configure(folder: Path, target: dict) -> list[str]:
    """The scratch copy's ``[tool.mutmut]``: this checkout's, plus the target's files and its tests that exist there
    (the missing ones are returned: an older commit's tests lack the newer ones)."""
    text = (folder / "pyproject.toml").read_text()
    if not re.search(r"^\[tool\.mutmut\]$", text, re.M):  # an older commit: before mutation testing
        text += "\n[tool.mutmut]\n"
    base = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    tests, missing = present(folder, list(target["tests"]))
    base |= {
        "source_paths": ["sweeper"],
        "only_mutate": [in_copy(f) for f in target["files"]],
        "pytest_add_cli_args_test_selection": tests,
    }
    section = "[tool.mutmut]\n" + "".join(
        f"{k} = {json.dumps(v, ensure_ascii=False)}\n" for k, v in base.items()
    )
    text = re.sub(r"^\[tool\.mutmut\]\n(?:(?!\[).*\n)*", section + "\n", text, count=1, flags=re.M)
    (folder / "pyproject.toml").write_text(text)
    return missing


def results(folder: Path, wanted: list[str]) -> dict[str, str]:
    """Each of the wanted mutants' status, as ``mutmut results --all true`` gives it."""
    import fnmatch

    out = subprocess.run(
        ["mutmut", "results", "--all", "true"], cwd=folder, capture_output=True, text=True
    ).stdout
    found = {}
    for line in out.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name and any(fnmatch.fnmatch(name, p) for p in wanted):
            found[name] = status
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tests/mutate.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "target", nargs="?", help="a target of [tool.sweeper.mutation] in pyproject.toml"
    )
    parser.add_argument("--list", action="store_true", help="list the targets and exit")
    parser.add_argument("--show", action="store_true", help="print each survivor's diff")
    parser.add_argument(
        "--at",
        metavar="REV",
        help="mutate the commit REV (its code and its tests) instead of the "
        "checkout (a before/after comparison)",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        help="the scratch folder (default: $TMPDIR/sweeper-mutate-CHECKOUT-TARGET, "
        "CHECKOUT this checkout's folder name)",
    )
    args = parser.parse_args(argv)
    every = targets()
    if args.list or not args.target:
        for name, t in every.items():
            print(f"{name:12} {', '.join(t['files'])}  ({len(t['tests'])} test selections)")
        return 0
    if args.target not in every:
        parser.error(f"no target {args.target!r}: expected one of {', '.join(every)}")
    if shutil.which("mutmut") is None:
        parser.error(
            "mutmut is not installed: pip install 'mutmut>=3.8,<4' (it is in the dev extra)"
        )
    target = every[args.target]
    # the checkout's name in it: two checkouts on one machine (worktrees) must not remove each other's copy mid-run
    folder = (
        args.dir
        or Path(os.environ.get("TMPDIR", "/tmp")) / f"sweeper-mutate-{ROOT.name}-{args.target}"
    )
    scratch_copy(folder, args.at)
    for sel in configure(folder, target):
        print(f"not in these tests: {sel}")
    wanted = patterns(target)
    env = {
        **os.environ,
        "SWEEPER_SHARED_DATA": os.environ.get(
            "SWEEPER_SHARED_DATA", str(ROOT.parent / "shared" / "data")
        ),
    }
    # each mutant's pytest session ends by os._exit (no session finish to clean up after it): its cache and temporary
    # files go to the scratch folder, removed with it, not one folder a mutant in the system's temporary folder
    (folder / "tmp").mkdir(exist_ok=True)
    env.update(SWEEPER_CACHE_DIR=str(folder / "cache"), TMPDIR=str(folder / "tmp"))
    log = folder / "mutmut.log"
    print(f"mutmut run in {folder} ({', '.join(wanted)}); its output: {log}", flush=True)
    with open(log, "w") as f:
        done = subprocess.run(
            ["mutmut", "run", *wanted], cwd=folder, env=env, stdout=f, stderr=subprocess.STDOUT
        )
    found = results(folder, wanted)
    if done.returncode or not found:
        print(
            f"mutmut ended with exit {done.returncode} and {len(found)} results: see {log}",
            file=sys.stderr,
        )
        return 1
    counts = Counter(found.values())
    print(f"\n{args.target}: {len(found)} mutants" + (f" (at {args.at})" if args.at else ""))
    print(
        "  ".join(
            f"{s}: {counts[s]}"
            for s in STATUSES
            if counts[s] or s in ("killed", "survived", "timeout")
        )
    )
    for name, status in sorted(found.items()):
        if status not in ("killed",):
            print(f"  {status:9} {name}")
            if args.show:
                shown = subprocess.run(
                    ["mutmut", "show", name], cwd=folder, capture_output=True, text=True
                ).stdout
                print("    " + shown.replace("\n", "\n    "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
