"""Docs that cannot lie: README fits on two screens, the configuration reference is what the code says, the manual
builds with ``mkdocs build --strict``, and every shell block marked runnable runs (tests/docs_blocks.py says how
blocks are marked) and prints what its shown output says."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

import docs_blocks
from sweeper import ROOT
from sweeper.contract import reference
from sweeper.contract.config import DATA, SPLIT, TOP_LEVEL


def test_readme_fits_on_two_screens():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, (
        f"README.md has {len(lines)} lines: move the details into the manual (docs/)"
    )


def test_the_configuration_reference_is_up_to_date():
    assert reference.PAGE.read_text() == reference.page(), (
        f"docs/reference/config.md is out of date: run {reference.COMMAND}"
    )


def test_the_reference_names_every_key_of_the_contract():
    text = reference.page()
    for key in TOP_LEVEL:
        assert f"| `{key}` |" in text, key
    split = text.split("### The split keys (every data set)")[1].split("### ")[0]
    for name, rules in DATA.items():
        section = text.split(f"### `data={name}`")[1].split("### ")[0]
        for key in rules:
            row = f"| `data.{key}` |"
            assert row in section or (key in SPLIT and key != "name" and row in split), (name, key)


def test_the_reference_documents_the_split_keys_once():
    """conf/data_split.yaml's keys have one table; a data set's table repeats one only where its
    default differs (data=xor's fractions, 0.0)."""
    text = reference.page()
    rows = {key: text.count(f"| `data.{key}` |") for key in SPLIT if key != "name"}
    assert rows == {"val_fraction": 2, "test_fraction": 2, "split_seed": 1, "folds": 1}
    xor = text.split("### `data=xor`")[1].split("### ")[0]
    assert "| `data.val_fraction` | `0.0` |" in xor and "| `data.test_fraction` | `0.0` |" in xor


def test_help_and_the_reference_say_the_same_allowed_values():
    from sweeper.contract.helptext import main_help

    text = reference.page()
    for line in main_help().splitlines():
        key, _, rest = line.strip().partition(" ")
        if line.startswith("  ") and key in TOP_LEVEL:
            allowed = rest.split("; ", 1)[1].split(" (")[0]
            row = next(r for r in text.splitlines() if r.startswith(f"| `{key}` | "))
            assert f"| {allowed}" in row, (key, allowed, row)


def test_the_reference_command_says_when_the_page_is_stale(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "config.md"
    stale.write_text(reference.page().replace("| `lr` |", "| `learning_rate` |"))
    monkeypatch.setattr(reference, "PAGE", stale)
    monkeypatch.setattr(reference, "ROOT", tmp_path)
    assert reference.main(["--check"]) == 1
    assert (
        "config.md is out of date: run python -m sweeper.contract.reference"
        in capsys.readouterr().err
    )
    assert reference.main([]) == 0 and reference.main(["--check"]) == 0


def test_blocks_are_found_by_their_marks_and_outputs_attach_to_their_run(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "text\n<!-- run -->\n```bash\necho hi <your.csv>\necho ok\n```\n\n<!-- output -->\n```text\nok\n```\n"
        "```bash\nnot marked\n```\n"
    )
    found = docs_blocks.blocks(page)
    assert [(b.kind, b.line, b.text) for b in found] == [("run", 3, "echo hi <your.csv>\necho ok")]
    assert found[0].output is not None and found[0].output.text == "ok"
    bad = tmp_path / "bad.md"
    bad.write_text("<!-- output -->\n```text\nx\n```\n")
    with pytest.raises(ValueError, match="must follow a runnable block"):
        docs_blocks.blocks(bad)


def test_masking_hides_what_changes_between_runs_and_keeps_the_results():
    a = (
        "[2026-12-02 23:48:48,147][sweeper][INFO] - [1/2]  lr=0.001  val_mse=3145  0.1749 s  FINISHED  run "
        + "a" * 32
    )
    b = (
        "[2026-12-03 10:00:00,000][sweeper][INFO] - [1/2]  lr=0.001  val_mse=3145  0.09 s  FINISHED  run "
        + "b" * 32
    )
    assert docs_blocks.masked(a) == docs_blocks.masked(b)  # seconds, to any precision: a timing
    assert docs_blocks.masked("val_accuracy 0.97  test 0.95") != docs_blocks.masked(
        "val_accuracy 0.96  test 0.95"
    )
    assert (
        docs_blocks.masked("took 0.7 s")
        == docs_blocks.masked("took 0.8 s")
        != docs_blocks.masked("took 0.7 min")
    )
    assert docs_blocks.masked(a) == docs_blocks.masked(
        a.replace("0.1749", "0.2001").replace("a" * 32, "c" * 32)
    )
    assert docs_blocks.masked(a) != docs_blocks.masked(a.replace("3145", "3146"))
    assert docs_blocks.masked(a) != docs_blocks.masked(a.replace("lr=0.001", "lr=0.002"))


def test_a_shown_timing_agrees_with_one_printed_with_fewer_decimals_and_nothing_else_does():
    row = "lr=0.001,cpu         0.001  3145       2757        {}          -          FINISHED"
    shown = docs_blocks.masked(row.format("0.1178"))
    assert docs_blocks.agree(shown, docs_blocks.masked(row.format("0.42")))  # .4g of 0.4200
    assert docs_blocks.agree(shown, docs_blocks.masked(row.format("2")))
    assert not docs_blocks.agree(
        shown, docs_blocks.masked(row.format("0.42").replace("3145", "3146"))
    )
    assert not docs_blocks.agree(shown, docs_blocks.masked(row.format("fast")))
    assert not docs_blocks.agree(shown, shown + ["one more line"])


@pytest.mark.docs
@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path):
    if (
        shutil.which("mkdocs") is None
        and subprocess.run(
            [sys.executable, "-m", "mkdocs", "--version"], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip(
            "mkdocs is not installed (pip install -e '.[dev]' installs mkdocs and mkdocs-material)"
        )
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "config" / "index.html").is_file()


@pytest.mark.docs
@pytest.mark.slow
def test_every_runnable_block_runs_and_prints_what_it_shows():
    start = time.perf_counter()
    results = docs_blocks.run_all()
    assert results, "no block is marked <!-- run -->"
    failures = []
    for block, proc, seconds in results:
        if proc.returncode != 0:
            failures.append(
                f"{block.where}: exit {proc.returncode} after {seconds:.1f} s:\n{proc.stdout[-1500:]}"
            )
        elif block.output is not None:
            shown, got = docs_blocks.masked(block.output.text), docs_blocks.masked(proc.stdout)
            if not docs_blocks.agree(shown, got):
                failures.append(
                    f"{block.output.where}: the shown output is not what the block prints "
                    f"(python tests/docs_blocks.py --write regenerates it):\n"
                    + "\n".join(f"- {s}\n+ {g}" for s, g in zip(shown, got) if s != g)
                    + (
                        f"\n({len(shown)} lines shown, {len(got)} printed)"
                        if len(shown) != len(got)
                        else ""
                    )
                )
    assert not failures, "\n\n".join(failures)
    print(f"{len(results)} runnable blocks in {time.perf_counter() - start:.1f} s")


def test_job_lines_compare_in_job_order_whichever_group_finished_first():
    one = "[2026-12-02 23:48:48,147][sweeper][INFO] - [1/2]  lr=0.001  val_mse=3145  FINISHED"
    two = "[2026-12-02 23:48:48,150][sweeper][INFO] - [2/2]  lr=0.005  val_mse=3325  FINISHED"
    assert docs_blocks.masked(f"a\n{one}\n{two}\nb") == docs_blocks.masked(f"a\n{two}\n{one}\nb")
    assert docs_blocks.masked(f"a\n{one}\n{two}") != docs_blocks.masked(
        f"a\n{two.replace('3325', '3326')}\n{one}"
    )
