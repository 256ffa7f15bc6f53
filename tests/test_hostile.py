"""Issue 41 (the fourth hostile round): the store is a real, persistent, healthy SQLite file before any work, read
commands never create one, Hydra's parse errors are one line, and no guess goes unsaid. Each test names the case."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import all_runs, cli


# --- (1) the store is checked before any work -----------------------------------------------------------


# --- (2) Hydra's parse errors: one line, exit 2 ---------------------------------------------------------


# --- (3) no guess goes unsaid ----------------------------------------------------------------------------


@pytest.mark.parametrize("fractions, said", [
    ({"val_fraction": 0.0, "test_fraction": 0.2}, "validation = the training rows (data.val_fraction=0)"),
    ({"val_fraction": 0.2, "test_fraction": 0.0}, "test = the training rows (data.test_fraction=0)"),
])
def test_a_fraction_of_0_is_a_decision_said_and_tagged(fractions, said):
    """Before: data.val_fraction=0 selected on the training rows without a word."""
    from omegaconf import OmegaConf

    from sweeper import data

    ds = data.load(OmegaConf.create({"name": "diabetes", "split_seed": 0, **fractions}))
    assert ds.decisions["split"].startswith(said)
    assert data.decision_tags(ds)["decided.split"] == ds.decisions["split"]
    assert "split" not in data.load(OmegaConf.create({"name": "diabetes", "split_seed": 0, "val_fraction": 0.2,
                                                       "test_fraction": 0.2})).decisions


def test_a_fraction_of_0_is_a_warning_of_the_run(tmp_path, store):
    proc = cli(tmp_path, "data.val_fraction=0", "epochs=5", store=store)
    assert proc.returncode == 0, proc.stderr
    assert "[WARNING] - data: split: validation = the training rows (data.val_fraction=0)" in proc.stdout + proc.stderr
    (run,) = all_runs(store)
    assert run.data.tags["decided.split"].startswith("validation = the training rows")


def test_the_advisor_says_when_validation_is_the_training_rows_and_when_a_sweep_was_cut():
    from types import SimpleNamespace

    from sweeper.insight.advice.advisor import advise, interrupted_caveats

    records = [{"run": f"lr={lr}", "run_id": str(i), "status": "FINISHED", "reason": None,
                "params": {"lr": str(lr), "data.val_fraction": "0.0"}, "metrics": {"val_mse": 1.0 + i}}
               for i, lr in enumerate((0.1, 0.2, 0.3))]
    text = advise(records, ["-m", "lr=0.1,0.2,0.3"]).text()
    assert "caveat: validation = the training rows (data.val_fraction=0)" in text
    parent = SimpleNamespace(info=SimpleNamespace(status="KILLED"),
                             data=SimpleNamespace(tags={"n_jobs": "16", "failure_reason": "sweep interrupted (Ctrl-C): x"}))
    runs = [SimpleNamespace(info=SimpleNamespace(status="FINISHED"))] * 3
    (caveat,) = interrupted_caveats(parent, runs)
    assert caveat.startswith("the sweep did not finish (sweep interrupted (Ctrl-C)): 3 of 16 jobs finished")
    assert not interrupted_caveats(SimpleNamespace(info=SimpleNamespace(status="FINISHED"), data=parent.data), runs)


def _table(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "t.csv"
    path.write_text("a,y\n" + "\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("task", ["auto", "regression"])
def test_a_constant_target_is_refused(tmp_path, task):
    """Before: it trained as a regression (val_mse ~0.06 of nothing)."""
    from omegaconf import OmegaConf

    from sweeper import data

    path = _table(tmp_path, [f"{(i * 7) % 11 + 0.5},3" for i in range(50)])  # a feature that is no row id
    node = OmegaConf.load(Path(__file__).parents[1] / "conf" / "data" / "csv.yaml")
    node.path, node.task = str(path), task
    with pytest.raises(data.DataError, match=r"the target \(column y\) holds one value \(3\) in every row: there is "
                                             "nothing to learn"):
        data.load(node)


def test_many_text_target_values_read_as_classes_are_a_warning(tmp_path):
    """Before: 60 text values became 60 classes without a word (an INFO line at most)."""
    from omegaconf import OmegaConf

    from sweeper import data

    path = _table(tmp_path, [f"{(i * 7) % 13 + 0.5},v{i % 60}" for i in range(120)])  # a feature that is no row id
    node = OmegaConf.load(Path(__file__).parents[1] / "conf" / "data" / "csv.yaml")
    node.path = str(path)
    ds = data.load(node)
    assert ds.task == "multiclass" and data.ASK_CLASSES in ds.decisions["task"]
    assert "read as 60 classes; more than 20 distinct text values, each a class" in ds.decisions["task"]


# --- (4) a run printed FINISHED is never lost to Ctrl-C or SIGTERM -------------------------------------------


# --- (5) paths confined, a sweep folder in use refused, sweep files read in one line, upload retried once ----
