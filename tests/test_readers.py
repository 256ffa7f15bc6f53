"""data.readers: a file's header read once, its faults refused as it is read."""

from __future__ import annotations


import pytest

from conftest import write_csv


def test_a_duplicated_column_name_is_refused_whatever_names_it(tmp_path):
    """A header that names a column twice is refused as the file is read (before: refused only where a key named
    it; otherwise both trained and the logged model's input example dropped one)."""
    from conftest import make_cfg
    from sweeper import data

    path = write_csv(tmp_path, "a,a,y", [(i % 7, i % 3, i % 5) for i in range(60)])
    for override in ("data.target=a", "data.drop=[a]", "data.target=y"):
        cfg = make_cfg("data=csv", f"data.path={path}", override)
        with pytest.raises(data.DataError, match="the header names column 'a' 2 times"):
            data.load(cfg.data, cfg.seed)
