"""data.loaders: what a table's target makes of a run (refused, or a decision said)."""

from __future__ import annotations

from pathlib import Path

import pytest


def _table(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "t.csv"
    path.write_text("a,y\n" + "\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("task", ["auto", "regression"])
def test_a_constant_target_is_refused(tmp_path, task):
    """Before: it trained as a regression (val_mse ~0.06 of nothing)."""
    from sweeper import data
    from sweeper.contract import choices

    # a feature that is no row id
    path = _table(tmp_path, [f"{(i * 7) % 11 + 0.5},3" for i in range(50)])
    node = choices.option("data", "csv")
    node.path, node.task = str(path), task
    with pytest.raises(
        data.DataError,
        match=r"the target \(column y\) holds one value \(3\) in every row: there is "
        "nothing to learn",
    ):
        data.load(node)
    if task == "auto":  # one text class: was "set data.task=multiclass for more classes"
        node.path = str(_table(tmp_path, [f"{(i * 7) % 11 + 0.5},ham" for i in range(50)]))
        with pytest.raises(
            data.DataError, match=r"column y\) holds one value \('ham'\) in every row"
        ):
            data.load(node)


def test_many_text_target_values_read_as_classes_are_a_warning(tmp_path):
    """Before: 60 text values became 60 classes without a word (an INFO line at most)."""
    from sweeper import data
    from sweeper.contract import choices

    # a feature that is no row id
    path = _table(tmp_path, [f"{(i * 7) % 13 + 0.5},v{i % 60}" for i in range(120)])
    node = choices.option("data", "csv")
    node.path = str(path)
    ds = data.load(node)
    assert ds.task == "multiclass" and data.ASK_CLASSES in ds.decisions["task"]
    assert (
        "read as 60 classes; more than 20 distinct text values, each a class"
        in ds.decisions["task"]
    )


def test_a_separator_ending_every_line_makes_no_column_and_a_nameless_one_is_named_as_pandas_does(
    tmp_path,
):
    """Before: the default target (the last field) was the empty one ("target : every one of its
    40 rows has no value"), and pandas' index column (no name) showed as "column : id"."""
    import pandas as pd
    from test_data_files import load

    frame = pd.DataFrame({"a": [i * 7 % 40 for i in range(40)], "y": [i % 5 for i in range(40)]})
    path = tmp_path / "t.csv"
    path.write_text("a,y,\n" + "".join(f"{a},{y},\n" for a, y in frame.itertuples(index=False)))
    ds = load(path, "data.task=regression")
    assert ds.decisions["target"].startswith("y: range [0, 4]")
    assert ds.decisions["sep"].endswith("; every line ends with it: the empty last field left out")
    path.write_text("a,y\n" + "".join(f"{a},{y},\n" for a, y in frame.itertuples(index=False)))
    ds = load(path, "data.task=regression")  # on the data lines only: was "the header has 2 names
    assert ds.decisions["target"].startswith("y: range [0, 4]")  # but the rows have 3 fields"
    frame.to_csv(path)  # its index first, under no name
    report = {r["column"]: r for r in load(path, "data.task=regression").report}
    assert report["Unnamed: 0"]["kind"] == "id" and list(pd.read_csv(path))[0] == "Unnamed: 0"
