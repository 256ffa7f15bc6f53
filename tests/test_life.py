"""sweeper.sweep.life: a sweep folder's lock, a folder or store deleted mid-sweep, the interruption line, the
parent's params."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import NO_BASELINES, all_runs, cli, command, one_line, running_children, wait_for


def _act_at_the_first_job(tmp_path: Path, store: Path, act) -> tuple[int, str, str]:
    """A 3-job sweep of seconds a job (one job at a time), ``act()`` called once its first job is reported; its exit
    code, its output and its standard error."""
    import threading

    args = [
        sys.executable,
        "-m",
        "sweeper",
        "-m",
        NO_BASELINES,
        "lr=0.001,0.002,0.003",
        "epochs=30000",
        "log_every=100",
        "hydra/launcher=basic",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"tracking.uri=sqlite:///{store}",
    ]
    proc = subprocess.Popen(
        args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    seen, errors = [], []
    reader = threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        for line in proc.stdout:
            seen.append(line)
            if "[1/3]" in line:
                act()
                break
        # stderr is the reader's alone (communicate() would take some)
        out = "".join(seen) + proc.stdout.read()
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:  # act() raised: no sweep is left behind
            proc.kill()
            proc.wait()
    reader.join(10)
    return proc.returncode, out, "".join(errors)


def _rm_rf(folder: Path) -> None:
    """``rm -rf`` of a folder a sweep writes into, whole: renamed away at once (a bare rmtree races the files the
    sweep adds meanwhile: 'Directory not empty', as CI once saw), then removed."""
    import shutil

    gone = folder.with_name(folder.name + ".deleted")
    folder.rename(gone)
    shutil.rmtree(gone, ignore_errors=True)


@pytest.mark.slow
def test_a_sweep_folder_deleted_mid_sweep_is_said_and_no_run_is_left_running_or_without_its_parent(
    tmp_path, store
):
    """Before: rm -rf of the sweep folder at [1/3] exited 0 with "2 of 0 jobs reported", the parent left RUNNING and
    the later runs recorded without their parent (each job read its parent from the deleted sweep.json)."""
    sweep_dir = tmp_path / "sweep"
    code, out, err = _act_at_the_first_job(tmp_path, store, lambda: _rm_rf(sweep_dir))
    assert code == 1, out + err
    # not with the summary
    assert f"sweeper: error: hydra.sweep.dir={sweep_dir} was deleted during the sweep" in err
    assert "sweeper: error:" not in out and "Traceback" not in out + err
    runs = all_runs(store)
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == 3 and {r.data.tags["mlflow.parentRunId"] for r in children} == {
        parent.info.run_id
    }
    assert "RUNNING" not in {r.info.status for r in runs}
    assert (sweep_dir / "sweep.json").is_file()  # written again: summary, upload and resume read it


@pytest.mark.slow
def test_a_store_deleted_mid_sweep_is_said_and_the_sweep_fails(tmp_path, store):
    """Before: every record was lost while the sweep printed a full leaderboard and exited 0."""

    def delete() -> None:
        for f in store.parent.glob(store.name + "*"):
            f.unlink()

    code, out, err = _act_at_the_first_job(tmp_path, store, delete)
    assert code == 1, out + err
    said = re.search(
        f"tracking.uri=sqlite:///{re.escape(str(store))} was (deleted|deleted or replaced by another file) "
        r"during the sweep: the (\d) run\(s\) recorded there are not in it.*, and (\d) wait for an upload",
        err,
    )
    assert "sweeper: error:" not in out
    assert said and said[2] == said[3] and int(said[2]) >= 1, out + err
    # before: upload said there was nothing to upload, and the runs printed FINISHED were lost for good
    from sweeper import upload

    assert upload.main([str(tmp_path / "sweep")]) == 0
    children = [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]
    # each once
    assert sorted(r.data.params["lr"] for r in children) == ["0.001", "0.002", "0.003"], out + err
    assert {r.info.status for r in children} == {"FINISHED"}


@pytest.mark.slow
def test_a_store_and_sweep_folder_deleted_together_are_both_said_without_a_contradiction(
    tmp_path, store
):
    """Before (hostile pass 6): the sweep folder's line said "their runs are in the store" while the next line said the
    store had been deleted and the runs were not in it."""

    def delete_both() -> None:
        for f in store.parent.glob(store.name + "*"):
            f.unlink()
        _rm_rf(tmp_path / "sweep")

    code, out, err = _act_at_the_first_job(tmp_path, store, delete_both)
    assert code == 1, out + err
    assert (
        "was deleted during the sweep: the result.json of" in err
        and "recorded there are not in it" in err
    ), err
    assert "their runs are in the store" not in err and "Traceback" not in out + err


@contextlib.contextmanager
def _live_sweep(sweep_dir: Path):
    """Another process holding ``sweep_dir``'s lock, as a live sweep does; yields it."""
    from sweeper.sweep.life import LOCK_FILE

    sweep_dir.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; "
            "from sweeper.base.process import hold; assert hold(Path(sys.argv[1])) is None; "
            "print('held', flush=True); time.sleep(60)",
            str(sweep_dir / LOCK_FILE),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def test_a_sweep_folder_in_use_by_a_live_sweep_is_refused(tmp_path):
    """Before: two sweeps with one hydra.sweep.dir at once wrote over each other's job folders."""
    from sweeper.sweep.life import LOCK_FILE

    sweep_dir = tmp_path / "sweep"
    with _live_sweep(sweep_dir) as holder:
        proc = cli(tmp_path, "-m", "epochs=5,6", store=tmp_path / "s.db")
        assert proc.returncode == 2
        assert (
            f"hydra.sweep.dir={sweep_dir} is in use by a live sweep (process {holder.pid}@"
            in one_line(proc.stderr)
        )
        assert not (tmp_path / "s.db").exists() and sorted(p.name for p in sweep_dir.iterdir()) == [
            LOCK_FILE
        ]
    from sweeper.base.process import hold

    # free once its holder is gone (killed, not even cleaned up)
    assert hold(sweep_dir / LOCK_FILE) is None


@pytest.mark.parametrize("inside", ["", "0"])
def test_a_single_run_into_a_live_sweeps_folder_is_refused(tmp_path, inside):
    """Before: hydra.run.dir=<a live sweep's folder> was taken, and the run's result.json, model/ and curves landed
    among the sweep's job folders (the folder's lock was checked for sweeps only)."""
    from sweeper.sweep.life import LOCK_FILE

    sweep_dir = tmp_path / "sweep"
    with _live_sweep(sweep_dir) as holder:
        run_dir = sweep_dir / inside if inside else sweep_dir
        proc = command(
            "sweeper",
            "epochs=5",
            f"hydra.run.dir={run_dir}",
            f"tracking.uri=sqlite:///{tmp_path / 's.db'}",
            cwd=tmp_path,
        )
        assert proc.returncode == 2, proc.stderr
        assert (
            f"hydra.run.dir={run_dir} is in use by a live sweep (process {holder.pid}@"
            in one_line(proc.stderr)
        )
        assert not (tmp_path / "s.db").exists() and sorted(p.name for p in sweep_dir.iterdir()) == [
            LOCK_FILE
        ]


@pytest.mark.parametrize(
    "through", ["", "zz/../"], ids=["inside", "through a missing folder and .."]
)
def test_a_sweep_folder_inside_a_live_sweeps_folder_is_refused(tmp_path, through):
    """Before: a sweep's hydra.sweep.dir inside a live sweep's folder was taken (a single run's was refused): its
    job folders 0, 1, ... and sweep.json landed among the live sweep's. Then (hostile pass 3) a path through a
    folder that does not exist and .. still got through."""
    from sweeper.sweep.life import LOCK_FILE

    sweep_dir = tmp_path / "sweep"
    with _live_sweep(sweep_dir) as holder:
        inner = Path(f"{tmp_path}/{through}sweep/inner")
        proc = command(
            "sweeper",
            "-m",
            "epochs=5,6",
            f"hydra.sweep.dir={inner}",
            f"tracking.uri=sqlite:///{tmp_path / 's.db'}",
            cwd=tmp_path,
        )
        assert proc.returncode == 2, proc.stderr
        assert (
            f"hydra.sweep.dir={inner} lies inside the folder of a live sweep (process {holder.pid}@"
            in one_line(proc.stderr)
        )
        assert not (tmp_path / "s.db").exists() and sorted(p.name for p in sweep_dir.iterdir()) == [
            LOCK_FILE
        ]
        assert not (tmp_path / "zz").exists()


def test_a_single_run_folder_under_a_file_is_one_line(tmp_path):
    """Before: hydra.run.dir under a file was a traceback (NotADirectoryError from Hydra's run_job), exit 1."""
    (tmp_path / "f").write_text("x")
    proc = command(
        "sweeper",
        "epochs=5",
        f"hydra.run.dir={tmp_path / 'f' / 'run'}",
        f"tracking.uri=sqlite:///{tmp_path / 's.db'}",
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert f"hydra.run.dir={tmp_path / 'f' / 'run'} cannot be used: Not a directory" in one_line(
        proc.stderr
    )
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize(
    "where, error", [("file", "Not a directory"), ("/proc", "No such file or directory")]
)
def test_a_sweep_folder_that_cannot_be_made_is_one_line(tmp_path, where, error):
    """Before: hydra.sweep.dir under a file (or under /proc) was a traceback."""
    (tmp_path / "file").write_text("x")
    folder = (tmp_path / "file" / "sweep") if where == "file" else Path("/proc/sweeper-test/sweep")
    proc = command(
        "sweeper",
        "-m",
        "epochs=5,6",
        f"hydra.sweep.dir={folder}",
        f"tracking.uri=sqlite:///{tmp_path / 's.db'}",
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2
    assert f"hydra.sweep.dir={folder} cannot be used: {error}" in one_line(proc.stderr)
    assert not (tmp_path / "s.db").exists()


@pytest.mark.slow
def test_the_interruption_line_counts_what_the_store_holds(tmp_path, store):
    """Before: Ctrl-C while a batched group trained said "0 killed, 16 not run" with its members' runs KILLED in the
    store (they have no job folder yet)."""
    import re
    import signal

    lrs = ",".join(f"{0.0001 * (i + 1):.4f}" for i in range(16))
    args = [
        sys.executable,
        "-m",
        "sweeper",
        "-m",
        NO_BASELINES,
        f"lr={lrs}",
        "epochs=2000000",
        "log_every=1000",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"tracking.uri=sqlite:///{store}",
    ]
    proc = subprocess.Popen(
        args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    for line in proc.stdout:
        if "Launching 16 jobs" in line:
            break
    # the group trains: once it has trained 1 s, its members' runs are opened RUNNING (launch.AHEAD_AFTER_S)
    wait_for(lambda: running_children(store) == 16, "the group's 16 runs RUNNING", proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    children = [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]
    killed = sum(r.info.status == "KILLED" for r in children)
    found = re.search(r"sweeper: interrupted: (\d+) finished, (\d+) killed, (\d+) not run", err)
    assert found, err
    assert int(found[2]) == killed and int(found[1]) + killed + int(found[3]) == 16, (err, killed)


def test_an_optuna_parents_params_are_the_space_the_command_line_left():
    """Before: epochs=50 on the command line, yet the parent's param epochs said the config file's choice(...)."""
    from omegaconf import OmegaConf

    from sweeper.sweep.life import space

    config = OmegaConf.create(
        {
            "hydra": {
                "overrides": {
                    "task": ["+sweep=optuna", "epochs=50", "depth=1,2", "tracking.log_model=false"]
                },
                "sweeper": {
                    "params": {
                        "lr": "tag(log, interval(0.0005, 0.05))",
                        "epochs": "choice(1000, 3000)",
                        "depth": "choice(0, 1)",
                    }
                },
            }
        }
    )
    got = space(config)
    assert (
        got["epochs"] == "50"
        and got["depth"] == "1,2"
        and got["lr"] == "tag(log, interval(0.0005, 0.05))"
    )
    assert not any(k.startswith("tracking") for k in got)


def test_a_sweep_folder_deleted_while_the_store_opens_ends_the_parent_in_one_line(
    tmp_path, store, monkeypatch
):
    """Before: a 12-line traceback (sweep.json could not be written) and the parent run left RUNNING."""
    from sweeper.contract.config import ConfigError
    from sweeper.sweep import life
    from test_interrupt import start_sweep

    opened = life._open_parents

    def open_then_delete(config, jobs, sweep_dir, caller):
        parents = opened(config, jobs, sweep_dir, caller)
        _rm_rf(sweep_dir)
        return parents

    monkeypatch.setattr(life, "_open_parents", open_then_delete)
    with pytest.raises(ConfigError) as e:
        start_sweep(
            tmp_path / "sweep",
            store,
            "0.001,0.002",
            "hydra/launcher=basic",
            "tracking.log_model=false",
        )
    assert (
        f"hydra.sweep.dir={tmp_path / 'sweep'} was deleted before the first job: no job ran; parent run(s) "
        in str(e.value)
    )
    (parent,) = all_runs(store)
    assert (
        parent.info.status == "KILLED"
        and "was deleted before the first job" in parent.data.tags["failure_reason"]
    )


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MB file system (tmpfs) at ``tmp_path/small``, 236 kB of it free; skips where it cannot be mounted."""
    disk = tmp_path / "small"
    disk.mkdir()
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)], capture_output=True
    ).returncode:
        pytest.skip("a small file system cannot be mounted here (mount -t tmpfs needs root)")
    try:
        (disk / "fill").write_bytes(bytes(2_900_000))
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.mark.slow
def test_a_full_disk_under_the_sweep_folder_names_the_cause_in_every_run_it_ended(
    tmp_path, store, small_disk
):
    """Before: the runs the failure cut short ended FAILED 'orphaned: its job ended without closing the run
    (killed?)' while the sweep said 'No space left on device'."""
    proc = command(
        "sweeper",
        "-m",
        "lr=0.001,0.002,0.003,0.004,0.005,0.006",
        "epochs=50",
        f"hydra.sweep.dir={small_disk / 'sweep'}",
        f"tracking.uri=sqlite:///{store}",
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 2 and "No space left on device" in proc.stderr.splitlines()[-1], (
        proc.stderr
    )
    runs = [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]
    assert "RUNNING" not in {r.info.status for r in runs}
    reasons = [r.data.tags.get("failure_reason", "") for r in runs if r.info.status != "FINISHED"]
    assert reasons and all("No space left on device" in x for x in reasons), reasons
    assert not any("killed?" in x for x in reasons), reasons


def test_a_deleted_sweep_folder_counts_the_jobs_it_made_fail(tmp_path):
    """Before (hostile pass 3): 'the result.json of 0 of its 2 jobs went with it' while one job had FAILED because
    its folder went as it recorded (its result.json written again with that reason)."""
    import io

    from sweeper.sweep import life

    rows = [
        {"status": "FINISHED", "reason": None},
        {
            "status": "FAILED",
            "reason": "its results could not be kept (FileNotFoundError: No such file or directory: x)",
        },
    ]
    out = io.StringIO()
    life._restore_sweep_file(tmp_path / "sweep", {"parents": [], "n_jobs": 2}, rows, out)
    line = one_line(out.getvalue())
    assert "the result.json of 0 of its 2 jobs went with it, and 1 job(s) FAILED for it" in line
    assert (tmp_path / "sweep" / "sweep.json").is_file()
