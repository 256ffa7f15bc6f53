"""Issue 26: stop when asked (Ctrl-C and SIGTERM, a batched group's threads included), close what was killed
(a SIGKILLed single run), refuse what cannot become a file, count a re-uploaded stub once, and one line with
exit 2 for the bad inputs of the hostile round."""
from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from conftest import all_runs, cli, client_for, one_line, write_csv
from sweeper import report, tracking
from sweeper.base.process import PID_START, start_mark


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


# --- Ctrl-C and SIGTERM stop a batched group within seconds ---------------------------------------------


# --- a SIGKILLed single run is closed by report --run ---------------------------------------------------

def test_report_run_closes_a_single_run_whose_process_is_gone(store, capsys):
    c = client_for(store)
    exp = tracking.experiment_id(c, "diabetes", f"sqlite:///{store}")
    tags = {"device": "cpu", "fingerprint": "f" * 16, "overrides": "", "sweeper.host": socket.gethostname(), "sweeper.pid": str(dead_pid())}
    run_id = tracking.start_run(c, exp, "cpu", tags)
    assert report.main(["--run", run_id, "--tracking-uri", f"sqlite:///{store}"]) == 0
    out = capsys.readouterr().out
    assert "marked FAILED (orphaned)" in out and f"{run_id}): FAILED" in out
    run = c.get_run(run_id)
    assert run.info.status == "FAILED" and run.data.tags["failure_reason"].startswith("orphaned")


def test_report_run_leaves_a_live_single_run_running(store, capsys):
    c = client_for(store)
    exp = tracking.experiment_id(c, "diabetes", f"sqlite:///{store}")
    live = subprocess.Popen(["sleep", "30"])
    try:
        tags = {"device": "cpu", "fingerprint": "f" * 16, "sweeper.host": socket.gethostname(), "sweeper.pid": str(live.pid),
                PID_START: start_mark(live.pid)}  # the job's process, as its run records it
        run_id = tracking.start_run(c, exp, "cpu", tags)
        assert report.main(["--run", run_id, "--tracking-uri", f"sqlite:///{store}"]) == 0
        assert c.get_run(run_id).info.status == "RUNNING"
    finally:
        live.kill()


@pytest.mark.slow
def test_a_sigkilled_single_run_is_closed_by_report_run(tmp_path, store):
    proc = subprocess.Popen([sys.executable, "-m", "sweeper", "epochs=5000000", "log_every=1000",
                             f"hydra.run.dir={tmp_path / 'run'}", f"tracking.uri=sqlite:///{store}"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (store.is_file() and [r for r in all_runs(store) if r.info.status == "RUNNING"]):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.5)
    finally:
        proc.kill()
        proc.wait()
    (run,) = all_runs(store)
    assert run.info.status == "RUNNING"  # what SIGKILL leaves
    done = subprocess.run([sys.executable, "-m", "sweeper.report", "--run", run.info.run_id,
                           "--tracking-uri", f"sqlite:///{store}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (run,) = all_runs(store)
    assert run.info.status == "FAILED" and run.data.tags["failure_reason"].startswith("orphaned")


# --- names that become files or folders -----------------------------------------------------------------


def test_promote_refuses_a_name_too_long_for_a_file(tmp_path, capsys):
    from sweeper import promote

    code = promote.main(["--experiment", "x", "--name", "n" * 300, "--out-dir", str(tmp_path / "out"),
                         "--tracking-uri", f"sqlite:///{tmp_path / 'none.db'}"])
    assert code == 2 and "--name=nnn" in one_line(capsys.readouterr().err)
    assert not (tmp_path / "none.db").exists()


def test_promote_refuses_an_out_dir_under_a_file(tmp_path, capsys):
    from sweeper import promote

    (tmp_path / "f").write_text("")
    code = promote.main(["--experiment", "x", "--out-dir", str(tmp_path / "f" / "out"),
                         "--tracking-uri", f"sqlite:///{tmp_path / 'none.db'}"])
    assert code == 2 and "expected a folder" in one_line(capsys.readouterr().err)


# --- corrupt stores: one line ---------------------------------------------------------------------------


# --- counts and upload ----------------------------------------------------------------------------------


# --- the smaller bad inputs: one line, exit 2 ---------------------------------------------------------


def test_a_configuration_too_large_for_memory_is_refused_before_the_store(tmp_path):
    store = tmp_path / "s.db"
    proc = cli(tmp_path, "depth=100", "width=4096", store=store)
    assert proc.returncode == 2
    line = one_line(proc.stderr)
    assert "depth=100 width=4096 dtype=float64 needs about" in line and "GiB" in line and "memory" in line
    assert not store.exists()


def test_the_memory_estimate_of_one_configuration_counts_its_weights():
    from conftest import make_cfg
    from sweeper import data
    from sweeper.job.compute import config_bytes

    small, big = make_cfg("depth=1", "width=16"), make_cfg("depth=100", "width=4096")
    ds = data.load(small.data, small.seed)
    weights = 99 * (4096 * 4096 + 4096) * 8  # the hidden layers alone, float64
    assert config_bytes(small, ds) < 10 << 20 and config_bytes(big, ds) > 4 * weights


@pytest.mark.parametrize("big, error", [("y", "the target cannot be scaled"), ("b", "column b cannot be scaled")])
def test_values_near_1e308_are_refused_as_unscalable_data(tmp_path, big, error):
    from conftest import make_cfg
    from sweeper import data

    rows = [(i % 7, (i * 3) % 5 * (1.5e307 if big == "b" else 1), (i + 0.5) * (1.3e306 if big == "y" else 1))
            for i in range(60)]
    cfg = make_cfg("data=csv", f"data.path={write_csv(tmp_path, 'a,b,y', rows)}")
    with pytest.raises(data.DataError, match=error):
        data.load(cfg.data, cfg.seed)


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
