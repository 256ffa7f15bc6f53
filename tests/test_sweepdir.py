"""sweeper.job.sweepdir: a sweep folder's files read in one line."""

from __future__ import annotations


import pytest

from conftest import one_line


@pytest.mark.parametrize(
    "text, error",
    [
        ('{"parents": [', "cannot be read (JSONDecodeError"),
        ("[1, 2]", "holds a JSON list"),
        ('{"parents": 3, "n_jobs": 1}', "its parents is 3, expected list"),
    ],
)
def test_summary_of_a_malformed_sweep_json_is_one_line(tmp_path, capsys, text, error):
    from sweeper import summary

    (tmp_path / "sweep.json").write_text(text)
    assert summary.main([str(tmp_path)]) == 2
    assert error in one_line(capsys.readouterr().err)
