"""sweeper.sweep.plan: a sweep's plan reads its command line as Hydra's sweeper does."""

from __future__ import annotations


import pytest

from conftest import cli


@pytest.mark.slow
def test_a_glob_over_a_group_runs_its_options(tmp_path, store):
    """Before: "ConfigLoader is not set" with a traceback (the sweep's plan parsed the glob without Hydra's loader)."""
    proc = cli(tmp_path, "-m", "data=glob(dia*)", "epochs=5", store=store)
    assert proc.returncode == 0, proc.stderr
    assert "[1/1]" in proc.stdout
