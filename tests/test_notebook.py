"""examples/notebook/sweep.ipynb executes top to bottom: its code cells, in order, as one script in a fresh folder
(no Jupyter needed; a cell's last expression is not displayed, the checks below read the namespace instead)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import sweeper
from conftest import all_runs

NOTEBOOK = sweeper.ROOT / "examples" / "notebook" / "sweep.ipynb"

CHECKS = """
import pandas as pd
assert isinstance(board, pd.DataFrame) and len(board) == 6 and (board.status == "FINISHED").all(), board
assert board.run_id.tolist()[0] == result.best_run_id and result.exit_code == 0
assert len(fig.axes[0].lines) == 2
assert predicted.shape[0] == 5 and one.status == "FINISHED"
print("checked", result.parent_run_id, one.run_id)
"""


def code_cells(path=NOTEBOOK) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def test_the_notebook_is_valid_and_its_cells_compile():
    nb = json.loads(NOTEBOOK.read_text())
    assert nb["nbformat"] == 4 and all("id" in c for c in nb["cells"])
    cells = code_cells()
    assert any("sweeper.multirun(" in c for c in cells) and any(
        "load_best_model()" in c for c in cells
    )
    for i, source in enumerate(cells):
        compile(source, f"cell {i}", "exec")
    # committed without outputs
    assert all(not c["outputs"] for c in nb["cells"] if c["cell_type"] == "code")


@pytest.mark.slow
def test_the_notebook_runs_top_to_bottom(tmp_path):
    script = tmp_path / "sweep.py"
    script.write_text("\n\n".join(code_cells()) + "\n" + CHECKS)
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    parent, run = proc.stdout.strip().splitlines()[-1].split()[1:]
    # written where the notebook says, nowhere else
    runs = all_runs(tmp_path / "notebook-runs" / "mlflow.db")
    assert len([r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent]) == 6
    assert run in {r.info.run_id for r in runs}
    assert "Advice:" in proc.stdout and "next: ['lr=" in proc.stdout
