"""The shell blocks of README.md and the manual (docs/) that are marked runnable, run for real in a scratch copy of
the checkout; tests/test_docs.py asserts they succeed and that each shown output is what the command prints.

Markings (an HTML comment on the line right before a fenced block; Markdown renderers do not show it):

- ``<!-- run -->`` before a ```` ```bash ```` block: the block runs as one bash script (``set -e``), in the copy's
  root. Blocks run in the order of :func:`pages` (README first, then the manual in its navigation's order) in one
  copy, so a later block may read what an earlier one wrote (the store ``mlruns/mlflow.db`` of the copy).
  A line with a placeholder (``<your.csv>``, ``<sweep dir>``) is not run and is listed as skipped.
- ``<!-- output -->`` before a ```` ```text ```` block: what the runnable block just above it printed (stdout and
  stderr together). Compared line by line after :func:`masked` (dates, times of day, run ids, timings);
  ``python tests/docs_blocks.py --write`` replaces every output block with a fresh run's.

Unmarked blocks are not run. Keep the runnable set small: every block costs a process start (~3 s here).
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHOWN_ROOT = "/home/you/sweeper"  # how an output block spells the checkout's folder
RUN, OUTPUT = "<!-- run -->", "<!-- output -->"
PLACEHOLDER = re.compile(r"<[a-z][a-z0-9 ._-]*>")
FENCE = re.compile(r"^```(\w*)\s*$")
MASKS = (
    (re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\]"), "[<time>]"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<id>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d\b"), "<date>/<time>"),
    (re.compile(r"/experiments/\d+/"), "/experiments/<n>/"),
    (
        re.compile(r"(?<![=\w.])\d+\.\d{3,}(?![\w%])"),
        "<t>",
    ),  # timings (0.1749 s); not lr=0.001 nor +5.787%
    (
        re.compile(r"(?<![=\w.])\d+\.\d\d? s\b"),
        "<t> s",
    ),  # seconds to a tenth or hundredth (in 0.7 s)
    # whether this machine already keeps an empty store of this MLflow version (the cache folder) decides the words
    (
        re.compile(
            r"\(creating it: the first store of this MLflow version on this machine takes a few seconds\)"
        ),
        "(creating it)",
    ),
    (re.compile(r"\s+"), " "),  # table columns widen with the values
)


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    kind: str  # "run" or "output"
    text: str
    output: "Block | None" = None  # a run block's output block
    skipped: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line}"


def pages() -> list[Path]:
    """README.md, then every page of mkdocs.yml's navigation in its order, then any other page under docs/."""
    nav = re.findall(r":\s*([\w./-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    found = [ROOT / "README.md", *(ROOT / "docs" / p for p in nav)]
    found += sorted(p for p in (ROOT / "docs").rglob("*.md") if p not in found)
    return [p for p in dict.fromkeys(found) if p.is_file()]


def blocks(page: Path) -> list[Block]:
    """The marked blocks of one page; each output block attached to the run block before it."""
    lines = page.read_text().splitlines()
    found: list[Block] = []
    i, fence = (
        0,
        "",
    )  # fence: the backticks of the fenced block the scan is inside (marks there are examples)
    while i < len(lines):
        ticks = re.match(r"^(`{3,})", lines[i])
        if fence:
            fence = "" if ticks and lines[i].strip() == fence else fence
        elif ticks:
            fence = ticks.group(1)
        elif lines[i].strip() in (RUN, OUTPUT) and i + 1 < len(lines) and FENCE.match(lines[i + 1]):
            end = next(j for j in range(i + 2, len(lines)) if lines[j].strip() == "```")
            block = Block(
                page,
                i + 2,
                "run" if lines[i].strip() == RUN else "output",
                "\n".join(lines[i + 2 : end]),
            )
            if block.kind == "output":
                if not found or found[-1].kind != "run" or found[-1].output is not None:
                    raise ValueError(f"{block.where}: an output block must follow a runnable block")
                found[-1].output = block
            else:
                found.append(block)
            i = end
        i += 1
    return found


def scratch_copy(dest: Path) -> Path:
    """The checkout's files (tracked and untracked, not ignored ones: no store, no sweep folders) under ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
    )
    if listed.returncode == 0:
        for name in filter(None, listed.stdout.decode().split("\0")):
            src = ROOT / name
            if src.is_file():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / name)
    else:  # not a git checkout: everything but what a checkout ignores
        shutil.copytree(
            ROOT,
            dest,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns(
                ".git",
                ".venv",
                "mlruns",
                "multirun",
                "outputs",
                "site",
                "__pycache__",
                "*.egg-info",
                ".pytest_cache",
            ),
        )
    return dest


def environment(copy: Path) -> dict[str, str]:
    """The copy's code first on the path, the test's Python as ``python``, nothing pointing at another store."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "SWEEPER_FAKE"))}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(copy), str(copy / "plugins")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run(block: Block, copy: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    kept = []
    for line in block.text.splitlines():
        (block.skipped if PLACEHOLDER.search(line) else kept).append(line)
    script = "set -e\n" + "\n".join(kept) + "\n"
    return subprocess.run(
        ["bash", "-c", script],
        cwd=copy,
        env=environment(copy),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )


def shown(output: str, copy: Path) -> str:
    """A command's output as an output block shows it: the copy's folder spelled as the reader's checkout."""
    return output.replace(str(copy), SHOWN_ROOT).rstrip("\n")


JOB_LINE = re.compile(r"^\[<time>\]\[sweeper\]\[INFO\] - \[\d+/\d+\] ")


def masked(text: str) -> list[str]:
    """The text's lines with what changes between runs masked; a run of job lines in job order (groups on
    worker processes finish in either order: each line keeps its job's number)."""
    lines: list[str] = []
    for line in text.splitlines():
        for pattern, replacement in MASKS:
            line = pattern.sub(replacement, line)
        lines.append(line.strip())
    out: list[str] = []
    for is_job, run in itertools.groupby(lines, key=lambda x: bool(JOB_LINE.match(x))):
        run = list(run)
        out += sorted(run, key=lambda x: int(re.search(r"\[(\d+)/", x)[1])) if is_job else run
    return out


# a timing shown with 3 or more decimals (masked <t>) that printed this time with fewer (0.42, 2): .4g drops zeros
TIMING_AGAIN = r"(?:<t>|\d+(?:\.\d+)?)"


def agree(shown: list[str], got: list[str]) -> bool:
    """Whether the masked lines printed are the masked lines shown, a shown timing matching any number."""
    return len(shown) == len(got) and all(
        s == g or re.fullmatch(re.escape(s).replace(re.escape("<t>"), TIMING_AGAIN), g)
        for s, g in zip(shown, got)
    )


def write_output(block: Block, text: str) -> None:
    """Replace an output block's text in its page."""
    assert block.output is not None
    lines = block.output.page.read_text().splitlines()
    start = block.output.line  # index of the first line after the fence
    end = start + len(block.output.text.splitlines()) if block.output.text else start
    lines[start:end] = text.splitlines()
    block.output.page.write_text("\n".join(lines) + "\n")


def run_all(write: bool = False) -> list[tuple[Block, subprocess.CompletedProcess, float]]:
    """Every runnable block, in order, in one scratch copy; with ``write`` each output block is rewritten."""
    results = []
    with tempfile.TemporaryDirectory(prefix="sweeper-docs-") as tmp:
        copy = scratch_copy(Path(tmp) / "sweeper")
        for page in pages():
            ran = []
            for block in blocks(page):
                start = time.perf_counter()
                proc = run(block, copy)
                proc.stdout = shown(proc.stdout, copy)
                ran.append((block, proc, time.perf_counter() - start))
            # from the page's end, so that the line numbers of the blocks above stay right
            if write:
                for block, proc, _ in reversed(ran):
                    if block.output is not None and proc.returncode == 0:
                        write_output(block, proc.stdout)
            results += ran
    return results


if __name__ == "__main__":
    for block, proc, seconds in run_all(write="--write" in sys.argv[1:]):
        skipped = f", skipped {len(block.skipped)} placeholder line(s)" if block.skipped else ""
        print(f"{block.where}: exit {proc.returncode} in {seconds:.1f} s{skipped}")
        if proc.returncode:
            print(proc.stdout[-2000:])
