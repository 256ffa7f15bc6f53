"""sweeper.base.logfile: a job log that cannot be written is one warning; every run is recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import all_runs, cli


@pytest.mark.skipif(
    not Path("/dev/full").exists(), reason="no /dev/full (a device whose writes fail: disk full)"
)
def test_a_job_log_on_a_full_disk_is_said_in_one_line_and_every_run_is_recorded(tmp_path, store):
    """The jobs' log file on a full disk (/dev/full: every write fails with ENOSPC): one warning line, no
    "--- Logging error ---" block per line logged, and the sweep records all its runs."""
    r = cli(
        tmp_path,
        "-m",
        "lr=0.01,0.1",
        "epochs=5",
        "hydra.job_logging.handlers.file.filename=/dev/full",
        store=store,
    )
    said = r.stdout + r.stderr
    assert r.returncode == 0, said[-2000:]
    assert "Logging error" not in said and "Traceback" not in said, said[-3000:]
    assert (
        said.count(
            "sweeper: warning: the log file /dev/full cannot be written (No space left on device)"
        )
        == 1
    )
    children = [x for x in all_runs(store) if "mlflow.parentRunId" in x.data.tags]
    assert len(children) == 2 and {x.info.status for x in children} == {"FINISHED"}
