"""The test session's own files (tests/conftest.py): whatever the session and the commands it starts write to the
system's temporary folder goes with the session."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import sweeper


@pytest.mark.slow
def test_a_session_leaves_nothing_in_the_temporary_folder_but_pytests_own(tmp_path):
    """Before: each session left its ``sweeper-test-cache-*`` folder, and a model saved without a writable cache its
    ``sweeper-model-*`` one (MLflow's downloaded artifacts, ``tmp*`` folders, likewise)."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SWEEPER_CACHE_DIR", "PYTEST_DEBUG_TEMPROOT")
    }
    env["TMPDIR"] = str(temp)
    test = "tests/test_pyfunc.py::test_an_unwritable_cache_still_saves_models"  # saves into a temporary folder
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", test],
        cwd=sweeper.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in temp.iterdir()) == [
        "pytest-of-" + __import__("getpass").getuser()
    ]
