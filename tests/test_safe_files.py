"""What sweeper writes is safe to open (issue 55, finding 5): no CSV cell that a spreadsheet would run as a formula
(OWASP: a text cell beginning with =, +, -, @, tab or carriage return gets a leading '), numbers left as numbers, the
Python API's leaderboard the values as they were; and no value from a user's file starts a log line of its own."""

from __future__ import annotations

import csv
import logging

import numpy as np

from conftest import FAST_ARGS, run_once
from sweeper.insight.leaderboard import Board

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
LABELS = ["=cmd|' /C calc'!A0", "@SUM(A1)", "+x"]  # class labels a spreadsheet would run


def _risky(cells: list[str]) -> list[str]:
    """The cells a spreadsheet would run: text beginning with a formula character that is no plain number."""

    def number(c: str) -> bool:
        try:
            float(c)
        except ValueError:
            return False
        return True

    return [c for c in cells if c.startswith(FORMULA_START) and not number(c)]


def _cells(path) -> list[str]:
    with open(path, newline="") as f:
        return [c for row in csv.reader(f) for c in row]


def test_a_runs_csv_files_escape_labels_a_spreadsheet_would_run(tmp_path, store):
    """Before: test_predictions.csv and confusion_matrix.csv held =cmd|' /C calc'!A0 as written (and the confusion
    matrix's class names were not even CSV-quoted)."""
    rng = np.random.default_rng(0)
    path = tmp_path / "labels.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["x", "label"])
        for i in range(90):
            w.writerow([f"{(i % 3) + 0.1 * rng.normal():.3f}", LABELS[i % 3]])
    result = run_once(
        tmp_path, "data=csv", f"data.path={path}", "data.task=multiclass", *FAST_ARGS, store=store
    )
    assert result["status"] == "FINISHED", result
    job = tmp_path / "job"
    for name in ("test_predictions.csv", "confusion_matrix.csv"):
        cells = _cells(job / name)
        assert _risky(cells) == [], name
        # the label, one quote in front
        assert f"'{LABELS[0]}" in cells and f"'{LABELS[1]}" in cells, name


def test_summary_csv_escapes_text_keeps_numbers_and_reads_back_as_it_was(tmp_path):
    """Before: summary.csv wrote a swept value =1+1 as it was. Numbers stay numbers (-3.2 is no formula), and the
    Python API's leaderboard (read from summary.csv) gives the values as the sweep had them."""
    rows = [
        {
            "run": "=1+1",
            "model.kind": '=HYPERLINK("http://x")',
            "model.shift": -3.2,
            "model.note": "'=kept",
            "val_mse": 0.5,
            "test_mse": -0.25,
            "train_time_s": 1.0,
            "status": "FINISHED",
            "reason": "@bad",
            "run_id": "0123",
        }
    ]
    board = Board(rows, ["model.kind", "model.shift", "model.note"], "mse", True)
    path = tmp_path / "summary.csv"
    path.write_text(board.csv())
    cells = _cells(path)
    assert _risky(cells) == []
    assert "-3.2" in cells and "-0.25" in cells  # numbers as numbers
    from sweeper.insight.leaderboard import read_csv

    back = read_csv(path).iloc[0]
    assert (
        back["run"] == "=1+1"
        and back["model.kind"] == rows[0]["model.kind"]
        and back["model.note"] == "'=kept"
    )
    assert back["reason"] == "@bad" and back["model.shift"] == -3.2 and back["run_id"] == "0123"


def test_a_category_with_a_line_break_cannot_forge_a_log_line(tmp_path, store, caplog):
    """Before: the column report logged ``city: category, 2 levels (Paris\\n[...][sweeper][INFO] - forged, Rome)`` and
    the forged text stood on a line of its own."""
    forged = "Paris\n[2026-12-06 10:00:00,000][sweeper][INFO] - all runs FINISHED"
    path = tmp_path / "cities.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["x", "city", "y"])
        for i in range(40):
            w.writerow([i % 7, forged if i % 2 else "Rome", (i % 7) * 2.0 + i % 2])
    with caplog.at_level(logging.INFO, logger="sweeper"):
        result = run_once(tmp_path, "data=csv", f"data.path={path}", *FAST_ARGS, store=store)
    assert result["status"] == "FINISHED", result
    data_lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("data:")]
    assert any("Paris\\n[2026" in m for m in data_lines), data_lines  # said, on its one line
    assert not [m for m in data_lines if "\n" in m or "\r" in m]
