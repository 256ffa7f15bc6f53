"""sweeper.base.output: the standard output closed or full, or a job log that cannot be written, is said
once; the work goes on and every run is recorded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import NO_BASELINES, all_runs, cli, one_line


def test_output_piped_into_head_is_said_once_and_the_sweep_records_everything(tmp_path, store):
    """Hostile pass 2, row 33: ``python -m sweeper ... | head -3`` went on with a BrokenPipeError traceback for
    every line logged (18) and left the parent RUNNING. Now: one warning on stderr, the runs and the parent closed."""
    args = [
        sys.executable,
        "-m",
        "sweeper",
        "-m",
        NO_BASELINES,
        "lr=0.001,0.002,0.003",
        "epochs=20",
        "tracking.log_model=false",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"tracking.uri=sqlite:///{store}",
    ]
    proc = subprocess.Popen(
        args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    proc.stdout.readline()
    proc.stdout.close()  # the reader goes away, as head does after its lines
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 0, err
    assert "Traceback" not in err and "Logging error" not in err, err
    assert (
        "the standard output cannot be written (Broken pipe)" in err
        and err.count("cannot be written") == 1
    ), err
    found = all_runs(store)
    assert sorted(r.info.status for r in found) == ["FINISHED"] * 4  # 3 runs and their parent


@pytest.mark.skipif(
    not Path("/dev/full").exists(), reason="no /dev/full (a device whose writes fail: disk full)"
)
@pytest.mark.parametrize(
    "command, code",
    [(["-m", "sweeper", "epochs=20", "tracking.log_model=false"], 0), (["-m", "sweeper.runs"], 1)],
)
def test_output_to_a_full_disk_is_one_line(tmp_path, store, command, code):
    """Row 32: ``> /dev/full`` was a traceback (exit 1) before the sweep began; ``runs`` blamed the store. A sweep
    now runs and says it; a read command, whose output is its result, says it and exits 1."""
    args = [
        sys.executable,
        *command,
        f"hydra.run.dir={tmp_path / 'run'}",
        f"tracking.uri=sqlite:///{store}",
    ]
    if command[1] == "sweeper.runs":
        args = [sys.executable, *command, "--tracking-uri", f"sqlite:///{store}"]
        cli(tmp_path, "epochs=5", "tracking.log_model=false", store=store)
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            args, cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, text=True, timeout=300
        )
    assert proc.returncode == code
    assert "the standard output cannot be written (No space left on device)" in one_line(
        proc.stderr
    )
    if code == 0:
        assert [r.info.status for r in all_runs(store)] == ["FINISHED"]


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


def test_an_errors_one_line_has_one_formatter_whatever_says_it(tmp_path, monkeypatch):
    """output.first_line is the one formatter of an error's one line: the user's code (usercode.raised, user_line),
    the store's refusal and promote's said it each with their own expression, and `str(e).splitlines()[0]` raised
    IndexError on an error without a message, so the store's one line became a traceback."""
    from sweeper import tracking
    from sweeper.base.output import first_line
    from sweeper.models.usercode import raised, user_line

    assert first_line(ValueError()) == "ValueError"  # no message: its type alone, no dangling colon
    assert first_line(ValueError("  \n")) == "ValueError"
    assert first_line(KeyError("a\nb")) == "KeyError: 'a\\nb'"
    assert first_line(RuntimeError("first\nsecond")) == "RuntimeError: first"
    note = "(raised as a result of Query-invoked autoflush; consider using a session.no_autoflush block)"
    assert first_line(RuntimeError(f"{note}\nlocked")) == "RuntimeError: locked"
    assert (
        raised("init", RuntimeError(f"{note}\nlocked"))
        == f"init raised {first_line(RuntimeError('locked'))}"
    )
    assert user_line(RuntimeError("first\nsecond")).startswith("RuntimeError: first")

    def silent(uri):  # e.g. a URI whose port its database driver cannot read
        raise ValueError()

    monkeypatch.setattr(tracking.store, "client", silent)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with pytest.raises(tracking.TrackingError) as e:
        tracking.store.open_store(uri)
    assert str(e.value) == f"tracking.uri={uri} cannot be used: ValueError"


def test_a_line_to_a_standard_error_that_is_gone_is_dropped(monkeypatch, capsys):
    """output.say and output.drained: the warning of a broken standard output and the exit's last flush each
    caught a closed stream with a handler of their own."""
    import io

    from sweeper.base import output

    output.say("said")
    assert capsys.readouterr().err == "said\n"

    class Gone(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    closed = io.StringIO()
    closed.close()
    for stream in (Gone(), closed):
        monkeypatch.setattr(sys, "stderr", stream)
        output.say("dropped")  # nothing raised
        output.drained(stream, sys.stdout)
