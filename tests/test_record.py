"""sweeper.job.record: a run printed FINISHED is never lost to Ctrl-C or SIGTERM; a signalled single run is KILLED."""
from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from conftest import all_runs, one_line, wait_for


DIGITS_16 = ("-m", "data=digits", "lr=0.01,0.02,0.03,0.04", "depth=0,1", "width=8,16", "epochs=300", "hydra/launcher=basic")


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [("SIGINT", 130), ("SIGTERM", 143)])
@pytest.mark.parametrize("at", [2, 3])
def test_a_signal_while_runs_are_recorded_loses_no_run_printed_finished(tmp_path, store, sig, code, at):
    """Before: a 16-configuration sweep (it has a writer process) interrupted at [3/16] left that run KILLED with no
    metrics (3 of 3 tries in the hostile round) while its result.json said FINISHED."""
    import json
    import signal

    args = [sys.executable, "-m", "sweeper", *DIGITS_16, f"hydra.sweep.dir={tmp_path / 'sweep'}",
            f"tracking.uri=sqlite:///{store}"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    printed, seen = [], []
    for line in proc.stdout:
        seen.append(line)
        if "  FINISHED  run " in line:
            printed.append(line.rsplit("run ", 1)[1].strip())
        if f"[{at}/16]" in line:
            proc.send_signal(getattr(signal, sig))
            break
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    # the case in question: a writer process records the runs, and every job up to [at/16] was printed FINISHED
    assert "each run's records go to the store from a writer process" in "".join(seen) + out + err
    assert len(printed) == at, seen
    runs = {r.info.run_id: r for r in all_runs(store)}
    for run_id in printed:
        assert runs[run_id].info.status == "FINISHED" and runs[run_id].data.metrics, (run_id, out, err)
    for path in (tmp_path / "sweep").glob("*/result.json"):
        r = json.loads(path.read_text())
        if r["status"] == "FINISHED":
            assert not r.get("recording") and (not r.get("pending_upload") or "upload" in out + err), r
            assert runs[r["run_id"]].info.status == "FINISHED"


@pytest.mark.slow
def test_sigterm_in_a_single_run_records_it_killed_and_exits_143(tmp_path, store):
    """Before: SIGTERM ended the process at once and left the run RUNNING."""
    proc = subprocess.Popen([sys.executable, "-m", "sweeper", "data=xor", "epochs=20000000",
                             f"hydra.run.dir={tmp_path / 'run'}", f"tracking.uri=sqlite:///{store}"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready = tmp_path / "run" / "config_resolved.yaml"  # written once the run exists, just before training
    wait_for(ready.exists, "the run's config_resolved.yaml", proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    (run,) = all_runs(store)
    assert proc.returncode == 143, err
    assert one_line(err) == f"sweeper: interrupted: run {run.info.run_id} KILLED"
    assert run.info.status == "KILLED" and run.data.tags["failure_reason"] == "interrupted (SIGTERM)"
