"""Issue 41 (the fourth hostile round): the store is a real, persistent, healthy SQLite file before any work, read
commands never create one, Hydra's parse errors are one line, and no guess goes unsaid. Each test names the case."""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import all_runs, cli, one_line, running_children, wait_for
from sweeper import tracking


# --- (1) the store is checked before any work -----------------------------------------------------------


def _act_at_the_first_job(tmp_path: Path, store: Path, act) -> tuple[int, str, str]:
    """A 3-job sweep of seconds a job (one job at a time), ``act()`` called once its first job is reported; its exit
    code, its output and its standard error."""
    import threading

    args = [sys.executable, "-m", "sweeper", "-m", "lr=0.001,0.002,0.003", "epochs=30000", "log_every=100",
            "hydra/launcher=basic", f"hydra.sweep.dir={tmp_path / 'sweep'}", f"tracking.uri=sqlite:///{store}"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen, errors = [], []
    reader = threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        for line in proc.stdout:
            seen.append(line)
            if "[1/3]" in line:
                act()
                break
        out = "".join(seen) + proc.stdout.read()  # stderr is the reader's alone (communicate() would take some)
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
def test_a_sweep_folder_deleted_mid_sweep_is_said_and_no_run_is_left_running_or_without_its_parent(tmp_path, store):
    """Before: rm -rf of the sweep folder at [1/3] exited 0 with "2 of 0 jobs reported", the parent left RUNNING and
    the later runs recorded without their parent (each job read its parent from the deleted sweep.json)."""
    sweep_dir = tmp_path / "sweep"
    code, out, err = _act_at_the_first_job(tmp_path, store, lambda: _rm_rf(sweep_dir))
    assert code == 1, out + err
    assert f"sweeper: error: hydra.sweep.dir={sweep_dir} was deleted during the sweep" in err  # not with the summary
    assert "sweeper: error:" not in out and "Traceback" not in out + err
    runs = all_runs(store)
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == 3 and {r.data.tags["mlflow.parentRunId"] for r in children} == {parent.info.run_id}
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
    said = re.search(f"tracking.uri=sqlite:///{re.escape(str(store))} was (deleted|deleted or replaced by another file) "
                     r"during the sweep: the (\d) run\(s\) recorded there are not in it.*, and (\d) wait for an upload", err)
    assert "sweeper: error:" not in out
    assert said and said[2] == said[3] and int(said[2]) >= 1, out + err
    # before: upload said there was nothing to upload, and the runs printed FINISHED were lost for good
    from sweeper import upload

    assert upload.main([str(tmp_path / "sweep")]) == 0
    children = [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]
    assert sorted(r.data.params["lr"] for r in children) == ["0.001", "0.002", "0.003"], out + err  # each once
    assert {r.info.status for r in children} == {"FINISHED"}


@pytest.mark.slow
def test_a_store_and_sweep_folder_deleted_together_are_both_said_without_a_contradiction(tmp_path, store):
    """Before (hostile pass 6): the sweep folder's line said "their runs are in the store" while the next line said the
    store had been deleted and the runs were not in it."""
    def delete_both() -> None:
        for f in store.parent.glob(store.name + "*"):
            f.unlink()
        _rm_rf(tmp_path / "sweep")

    code, out, err = _act_at_the_first_job(tmp_path, store, delete_both)
    assert code == 1, out + err
    assert "was deleted during the sweep: the result.json of" in err and "recorded there are not in it" in err, err
    assert "their runs are in the store" not in err and "Traceback" not in out + err


# --- (2) Hydra's parse errors: one line, exit 2 ---------------------------------------------------------


# --- (3) no guess goes unsaid ----------------------------------------------------------------------------


@pytest.mark.parametrize("fractions, said", [
    ({"val_fraction": 0.0, "test_fraction": 0.2}, "validation = the training rows (data.val_fraction=0)"),
    ({"val_fraction": 0.2, "test_fraction": 0.0}, "test = the training rows (data.test_fraction=0)"),
])
def test_a_fraction_of_0_is_a_decision_said_and_tagged(fractions, said):
    """Before: data.val_fraction=0 selected on the training rows without a word."""
    from omegaconf import OmegaConf

    from sweeper import data

    ds = data.load(OmegaConf.create({"name": "diabetes", "split_seed": 0, **fractions}))
    assert ds.decisions["split"].startswith(said)
    assert data.decision_tags(ds)["decided.split"] == ds.decisions["split"]
    assert "split" not in data.load(OmegaConf.create({"name": "diabetes", "split_seed": 0, "val_fraction": 0.2,
                                                       "test_fraction": 0.2})).decisions


def test_a_fraction_of_0_is_a_warning_of_the_run(tmp_path, store):
    proc = cli(tmp_path, "data.val_fraction=0", "epochs=5", store=store)
    assert proc.returncode == 0, proc.stderr
    assert "[WARNING] - data: split: validation = the training rows (data.val_fraction=0)" in proc.stdout + proc.stderr
    (run,) = all_runs(store)
    assert run.data.tags["decided.split"].startswith("validation = the training rows")


def test_the_advisor_says_when_validation_is_the_training_rows_and_when_a_sweep_was_cut():
    from types import SimpleNamespace

    from sweeper.insight.advice.advisor import advise, interrupted_caveats

    records = [{"run": f"lr={lr}", "run_id": str(i), "status": "FINISHED", "reason": None,
                "params": {"lr": str(lr), "data.val_fraction": "0.0"}, "metrics": {"val_mse": 1.0 + i}}
               for i, lr in enumerate((0.1, 0.2, 0.3))]
    text = advise(records, ["-m", "lr=0.1,0.2,0.3"]).text()
    assert "caveat: validation = the training rows (data.val_fraction=0)" in text
    parent = SimpleNamespace(info=SimpleNamespace(status="KILLED"),
                             data=SimpleNamespace(tags={"n_jobs": "16", "failure_reason": "sweep interrupted (Ctrl-C): x"}))
    runs = [SimpleNamespace(info=SimpleNamespace(status="FINISHED"))] * 3
    (caveat,) = interrupted_caveats(parent, runs)
    assert caveat.startswith("the sweep did not finish (sweep interrupted (Ctrl-C)): 3 of 16 jobs finished")
    assert not interrupted_caveats(SimpleNamespace(info=SimpleNamespace(status="FINISHED"), data=parent.data), runs)


def _table(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "t.csv"
    path.write_text("a,y\n" + "\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("task", ["auto", "regression"])
def test_a_constant_target_is_refused(tmp_path, task):
    """Before: it trained as a regression (val_mse ~0.06 of nothing)."""
    from omegaconf import OmegaConf

    from sweeper import data

    path = _table(tmp_path, [f"{(i * 7) % 11 + 0.5},3" for i in range(50)])  # a feature that is no row id
    node = OmegaConf.load(Path(__file__).parents[1] / "conf" / "data" / "csv.yaml")
    node.path, node.task = str(path), task
    with pytest.raises(data.DataError, match=r"the target \(column y\) holds one value \(3\) in every row: there is "
                                             "nothing to learn"):
        data.load(node)


def test_many_text_target_values_read_as_classes_are_a_warning(tmp_path):
    """Before: 60 text values became 60 classes without a word (an INFO line at most)."""
    from omegaconf import OmegaConf

    from sweeper import data

    path = _table(tmp_path, [f"{(i * 7) % 13 + 0.5},v{i % 60}" for i in range(120)])  # a feature that is no row id
    node = OmegaConf.load(Path(__file__).parents[1] / "conf" / "data" / "csv.yaml")
    node.path = str(path)
    ds = data.load(node)
    assert ds.task == "multiclass" and data.ASK_CLASSES in ds.decisions["task"]
    assert "read as 60 classes; more than 20 distinct text values, each a class" in ds.decisions["task"]


# --- (4) a run printed FINISHED is never lost to Ctrl-C or SIGTERM -------------------------------------------

@pytest.mark.parametrize("sig, error", [("SIGINT", KeyboardInterrupt), ("SIGTERM", "Terminated")])
def test_a_signal_inside_a_deferred_section_lands_after_it(sig, error):
    """The section that prints a run FINISHED and hands it to the writer is not cut in two: before, a Ctrl-C between
    the two left the run KILLED with no metrics while result.json said FINISHED."""
    import signal

    from sweeper.base import stop

    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    stop.install()
    done = []
    try:
        with pytest.raises(stop.Terminated if error == "Terminated" else KeyboardInterrupt):
            with stop.deferred():
                os.kill(os.getpid(), getattr(signal, sig))
                time.sleep(0.05)  # the handler runs here, and defers
                done.append("handed")
        assert done == ["handed"] and stop.STOP.is_set()
    finally:
        stop.STOP.clear()
        stop._SEEN.clear()
        for s, h in old.items():
            signal.signal(s, h)


def test_a_signal_in_a_deferred_section_replaces_its_error_and_a_threads_section_defers_nothing():
    import signal
    import threading

    from sweeper.base import stop

    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    stop.install()
    try:
        with pytest.raises(KeyboardInterrupt) as e:
            with stop.deferred():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
                raise ValueError("a library's error the interruption caused")
        assert isinstance(e.value.__context__, ValueError)
        stop.reset()
        depth = []

        def section() -> None:
            with stop.deferred():
                depth.append(stop._DEFERRING[0])

        t = threading.Thread(target=section)
        t.start()
        t.join()
        assert depth == [0]  # a thread's section: signals reach the main thread only
    finally:
        stop.reset()
        for s, h in old.items():
            signal.signal(s, h)


def test_a_ctrl_c_that_a_librarys_cleanup_turned_into_its_own_error_is_still_the_interruption(tmp_path, monkeypatch):
    """Before: Ctrl-C of promote while it composed the pin's re-run command printed "the re-run command for run ...
    does not compose: AttributeError" (Hydra's cleanup raised in the KeyboardInterrupt's way), exit 2."""
    from types import SimpleNamespace

    from sweeper.base import stop
    from sweeper.insight import promotion

    def cut_short(args):
        try:
            raise KeyboardInterrupt
        finally:
            raise AttributeError("'NoneType' object has no attribute 'pop'")

    monkeypatch.setattr(promotion, "check_overrides", cut_short)
    run = SimpleNamespace(info=SimpleNamespace(run_id="r1"))
    with pytest.raises(KeyboardInterrupt):
        promotion._verify("x: 1\n", "p", tmp_path / "pins", run, {})
    assert stop.masked(ValueError("another")) is None


def test_a_launcher_error_a_ctrl_c_caused_is_the_interruption_not_a_failure():
    """Before: Ctrl-C 0.41 s after "Launching" (1 of 25 hostile tries) printed "sweeper: error: the launcher failed:
    AttributeError: 'NoneType' object has no attribute '_invalidate_flags_cache'" (OmegaConf's cleanup raised in the
    KeyboardInterrupt's way), exit 2, instead of the interruption line and 130."""
    import signal

    from sweeper.base import stop
    from sweeper.sweep import guard

    stop.reset()
    stop._SEEN.append(signal.SIGINT)
    stop.STOP.set()
    try:
        with pytest.raises(KeyboardInterrupt):
            guard._failed(None, AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'"))
    finally:
        stop.reset()


SWALLOWS = """
import os, signal, sys, time
import sweeper
from sweeper import main_exit
sys.excepthook = sweeper._interrupted_hook  # as for python -m sweeper.COMMAND
def fn():
    try:  # a library that swallows the signal's exception on its way (an import's `except ImportError`, say)
        os.kill(os.getpid(), getattr(signal, sys.argv[1]))
        time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    print("done")
    return 0
main_exit(fn)
"""


@pytest.mark.parametrize("sig, code", [("SIGINT", {130, -2}), ("SIGTERM", {143})])
def test_a_signal_a_library_swallowed_still_ends_the_command_as_interrupted(tmp_path, sig, code):
    """Before: Ctrl-C 1.8-2.0 s after "Launching" (2 of 20 hostile tries) went into the summary's advice (an import
    cut short, caught as 'no advice'), or nowhere that was said: the sweep exited 0, its parent FINISHED, no word.
    SIGTERM of upload, report or advise died with nothing on stderr. Now the command ends interrupted, one line."""
    proc = subprocess.run([sys.executable, "-c", SWALLOWS, sig], capture_output=True, text=True, timeout=60)
    assert proc.returncode in code, proc.stderr
    assert proc.stdout == "done\n"
    reason = "SIGTERM" if sig == "SIGTERM" else "Ctrl-C"
    assert one_line(proc.stderr) == f"python -m sweeper: interrupted ({reason}): what it had written stays; run it again to finish"


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


BATCHED_16 = ("-m", "data=digits", "lr=0.001,0.01", "width=8,16", "depth=1,2", "epochs=200,400")


def _signalled_group(tmp_path: Path, store: Path, sig: str, at: str, times: int = 1) -> tuple[subprocess.CompletedProcess, list[str]]:
    """The 16-configuration batched sweep (worker processes, a writer process) in a session of its own, ``sig`` sent
    to its whole process group (as a terminal sends Ctrl-C, or SIGHUP when it closes) ``times`` times, 0.15 s apart,
    once a line contains ``at``; the run ids it printed FINISHED."""
    import signal

    args = [sys.executable, "-m", "sweeper", *BATCHED_16, f"hydra.sweep.dir={tmp_path / 'sweep'}",
            f"tracking.uri=sqlite:///{store}"]
    def default_signals() -> None:  # as a terminal's process has them (a background job of a shell ignores some)
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_DFL)

    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=default_signals)
    printed = []
    try:
        for line in proc.stdout:
            if "  FINISHED  run " in line:
                printed.append(line.rsplit("run ", 1)[1].strip())
            if at in line:
                for _ in range(times):
                    os.killpg(proc.pid, getattr(signal, sig))
                    time.sleep(0.15)
                break
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(args, proc.returncode, out, err), printed


def _nothing_lost(store: Path, printed: list[str], proc: subprocess.CompletedProcess) -> None:
    runs = {r.info.run_id: r for r in all_runs(store)}
    assert not [r for r in runs.values() if r.info.status == "RUNNING"], proc.stderr
    for run_id in printed:
        assert runs[run_id].info.status == "FINISHED" and runs[run_id].data.metrics, (run_id, proc.stderr)


@pytest.mark.slow
def test_sighup_of_a_closed_terminal_ends_the_sweep_as_sigterm_does(tmp_path, store):
    """Before: SIGHUP at [3/16] ended the process with 129 and no word, the parent and 3 runs left RUNNING."""
    proc, printed = _signalled_group(tmp_path, store, "SIGHUP", "[3/16]")
    assert proc.returncode == 129, proc.stderr
    line = one_line(proc.stderr)
    assert line.startswith("sweeper: interrupted: "), line
    _nothing_lost(store, printed, proc)
    (parent,) = [r for r in all_runs(store) if "mlflow.parentRunId" not in r.data.tags]
    assert parent.info.status == "KILLED" and "SIGHUP" in parent.data.tags["failure_reason"]


@pytest.mark.slow
def test_ctrl_c_pressed_again_and_again_does_not_cut_the_bookkeeping_short(tmp_path, store):
    """Before: four Ctrl-C 0.15 s apart printed a 22-line traceback (a second KeyboardInterrupt inside the workers'
    stop) before the interruption line."""
    proc, printed = _signalled_group(tmp_path, store, "SIGINT", "[3/16]", times=4)
    assert proc.returncode == 130, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert lines[-1].startswith("sweeper: interrupted: "), proc.stderr
    assert all(x.startswith("sweeper: ") for x in lines), proc.stderr  # at most the "still stopping" line besides
    _nothing_lost(store, printed, proc)


# --- (5) paths confined, a sweep folder in use refused, sweep files read in one line, upload retried once ----


@contextlib.contextmanager
def _live_sweep(sweep_dir: Path):
    """Another process holding ``sweep_dir``'s lock, as a live sweep does; yields it."""
    from sweeper.sweep.life import LOCK_FILE

    sweep_dir.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from sweeper.base.process import hold; assert hold(Path(sys.argv[1])) is None; "
                               "print('held', flush=True); time.sleep(60)", str(sweep_dir / LOCK_FILE)],
                              stdout=subprocess.PIPE, text=True)
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
        assert f"hydra.sweep.dir={sweep_dir} is in use by a live sweep (process {holder.pid}@" in one_line(proc.stderr)
        assert not (tmp_path / "s.db").exists() and sorted(p.name for p in sweep_dir.iterdir()) == [LOCK_FILE]
    from sweeper.base.process import hold

    assert hold(sweep_dir / LOCK_FILE) is None  # free once its holder is gone (killed, not even cleaned up)


@pytest.mark.parametrize("inside", ["", "0"])
def test_a_single_run_into_a_live_sweeps_folder_is_refused(tmp_path, inside):
    """Before: hydra.run.dir=<a live sweep's folder> was taken, and the run's result.json, model/ and curves landed
    among the sweep's job folders (the folder's lock was checked for sweeps only)."""
    from sweeper.sweep.life import LOCK_FILE

    sweep_dir = tmp_path / "sweep"
    with _live_sweep(sweep_dir) as holder:
        run_dir = sweep_dir / inside if inside else sweep_dir
        proc = subprocess.run([sys.executable, "-m", "sweeper", "epochs=5", f"hydra.run.dir={run_dir}",
                               f"tracking.uri=sqlite:///{tmp_path / 's.db'}"], cwd=tmp_path, capture_output=True, text=True)
        assert proc.returncode == 2, proc.stderr
        assert f"hydra.run.dir={run_dir} is in use by a live sweep (process {holder.pid}@" in one_line(proc.stderr)
        assert not (tmp_path / "s.db").exists() and sorted(p.name for p in sweep_dir.iterdir()) == [LOCK_FILE]


@pytest.mark.parametrize("through", ["", "zz/../"], ids=["inside", "through a missing folder and .."])
def test_a_sweep_folder_inside_a_live_sweeps_folder_is_refused(tmp_path, through):
    """Before: a sweep's hydra.sweep.dir inside a live sweep's folder was taken (a single run's was refused): its
    job folders 0, 1, ... and sweep.json landed among the live sweep's. Then (hostile pass 3) a path through a
    folder that does not exist and .. still got through."""
    from sweeper.sweep.life import LOCK_FILE

    sweep_dir = tmp_path / "sweep"
    with _live_sweep(sweep_dir) as holder:
        inner = Path(f"{tmp_path}/{through}sweep/inner")
        proc = subprocess.run([sys.executable, "-m", "sweeper", "-m", "epochs=5,6", f"hydra.sweep.dir={inner}",
                               f"tracking.uri=sqlite:///{tmp_path / 's.db'}"], cwd=tmp_path, capture_output=True, text=True)
        assert proc.returncode == 2, proc.stderr
        assert f"hydra.sweep.dir={inner} lies inside the folder of a live sweep (process {holder.pid}@" in one_line(proc.stderr)
        assert not (tmp_path / "s.db").exists() and sorted(p.name for p in sweep_dir.iterdir()) == [LOCK_FILE]
        assert not (tmp_path / "zz").exists()


def test_a_single_run_folder_under_a_file_is_one_line(tmp_path):
    """Before: hydra.run.dir under a file was a traceback (NotADirectoryError from Hydra's run_job), exit 1."""
    (tmp_path / "f").write_text("x")
    proc = subprocess.run([sys.executable, "-m", "sweeper", "epochs=5", f"hydra.run.dir={tmp_path / 'f' / 'run'}",
                           f"tracking.uri=sqlite:///{tmp_path / 's.db'}"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2
    assert f"hydra.run.dir={tmp_path / 'f' / 'run'} cannot be used: Not a directory" in one_line(proc.stderr)
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("where, error", [("file", "Not a directory"), ("/proc", "No such file or directory")])
def test_a_sweep_folder_that_cannot_be_made_is_one_line(tmp_path, where, error):
    """Before: hydra.sweep.dir under a file (or under /proc) was a traceback."""
    (tmp_path / "file").write_text("x")
    folder = (tmp_path / "file" / "sweep") if where == "file" else Path("/proc/sweeper-test/sweep")
    proc = subprocess.run([sys.executable, "-m", "sweeper", "-m", "epochs=5,6", f"hydra.sweep.dir={folder}",
                           f"tracking.uri=sqlite:///{tmp_path / 's.db'}"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert f"hydra.sweep.dir={folder} cannot be used: {error}" in one_line(proc.stderr)
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("text, error", [("{\"parents\": [", "cannot be read (JSONDecodeError"), ("[1, 2]", "holds a JSON list"),
                                         ("{\"parents\": 3, \"n_jobs\": 1}", "its parents is 3, expected list")])
def test_summary_of_a_malformed_sweep_json_is_one_line(tmp_path, capsys, text, error):
    from sweeper import summary

    (tmp_path / "sweep.json").write_text(text)
    assert summary.main([str(tmp_path)]) == 2
    assert error in one_line(capsys.readouterr().err)


def _pending(tmp_path: Path, store: Path) -> Path:
    """A sweep folder with one job whose result.json waits for an upload (as a failing server leaves it)."""
    import json

    from conftest import FAST_ARGS, make_cfg
    from sweeper.job.context import JobContext
    from sweeper.job.record import run

    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir()
    (sweep_dir / "sweep.json").write_text(json.dumps({"parents": [], "n_jobs": 1, "swept": ["lr"]}))
    run(make_cfg("lr=0.01", *FAST_ARGS, "tracking.log_model=false", store=store),
        JobContext(output_dir=sweep_dir / "0", overrides=["lr=0.01"], sweep_dir=sweep_dir))
    path = sweep_dir / "0" / "result.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "pending_upload": True, "run_id": None}))
    return sweep_dir


@pytest.mark.parametrize("edit, error", [(lambda r: "{", "cannot be read (JSONDecodeError"),
                                         (lambda r: {**r, "metrics": {**r["metrics"], "val_mse": "high"}},
                                          'its metric val_mse is "high", expected a number')])
def test_upload_of_a_malformed_result_json_is_one_line_and_starts_no_run(tmp_path, store, capsys, edit, error):
    """Before: a traceback, and a non-numeric metric left the uploaded run RUNNING."""
    import json

    from sweeper import upload

    sweep_dir = _pending(tmp_path, store)
    path = sweep_dir / "0" / "result.json"
    edited = edit(json.loads(path.read_text()))
    path.write_text(edited if isinstance(edited, str) else json.dumps(edited))
    before = len(all_runs(store))
    assert upload.main([str(sweep_dir)]) == 2
    assert error in one_line(capsys.readouterr().err)
    assert len(all_runs(store)) == before


def test_upload_retried_after_a_failure_does_not_duplicate_the_run(tmp_path, store, capsys, monkeypatch):
    """Before: a retry after a failed (disk full) upload made a second run: 5 FINISHED runs for 4 jobs."""
    from sweeper import upload

    sweep_dir = _pending(tmp_path, store)
    real = tracking.finish_run

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tracking, "finish_run", full)
    assert upload.main([str(sweep_dir)]) == 2
    (half,) = [r for r in all_runs(store) if r.data.tags.get("uploaded_from")]
    assert half.info.status == "FAILED" and "upload failed" in half.data.tags["failure_reason"]  # not RUNNING
    monkeypatch.setattr(tracking, "finish_run", real)
    assert upload.main([str(sweep_dir)]) == 0
    uploaded = [r for r in all_runs(store) if r.data.tags.get("uploaded_from")]
    assert [r.info.status for r in uploaded] == ["FINISHED"] and uploaded[0].info.run_id != half.info.run_id


@pytest.mark.slow
def test_the_interruption_line_counts_what_the_store_holds(tmp_path, store):
    """Before: Ctrl-C while a batched group trained said "0 killed, 16 not run" with its members' runs KILLED in the
    store (they have no job folder yet)."""
    import re
    import signal

    lrs = ",".join(f"{0.0001 * (i + 1):.4f}" for i in range(16))
    args = [sys.executable, "-m", "sweeper", "-m", f"lr={lrs}", "epochs=2000000", "log_every=1000",
            f"hydra.sweep.dir={tmp_path / 'sweep'}", f"tracking.uri=sqlite:///{store}"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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

    config = OmegaConf.create({"hydra": {"overrides": {"task": ["+sweep=optuna", "epochs=50", "depth=1,2",
                                                                 "tracking.log_model=false"]},
                                         "sweeper": {"params": {"lr": "tag(log, interval(0.0005, 0.05))",
                                                                "epochs": "choice(1000, 3000)", "depth": "choice(0, 1)"}}}})
    got = space(config)
    assert got["epochs"] == "50" and got["depth"] == "1,2" and got["lr"] == "tag(log, interval(0.0005, 0.05))"
    assert not any(k.startswith("tracking") for k in got)


@pytest.mark.slow
@pytest.mark.parametrize("at", ["imports", "store"])
@pytest.mark.parametrize("command", ["report", "advise"])
def test_ctrl_c_in_a_read_commands_first_seconds_is_one_line(tmp_path, store, command, at):
    """Before: a KeyboardInterrupt traceback from wherever the command was (its imports, opening the store).

    Where the signal lands is decided by events, not by a clock: the test holds the store locked (a rollback-journal
    database, so the command's first read of it waits), so the command cannot end before the signal; Ctrl-C comes
    while it imports (the line ``-X importtime`` writes once the sweeper package is imported: its handler is set,
    MLflow is still to come) or once it has the store's file open (it waits on the lock there)."""
    import signal
    import sqlite3

    lock = sqlite3.connect(store, isolation_level=None)
    lock.execute("PRAGMA journal_mode=DELETE")
    lock.execute("BEGIN EXCLUSIVE")
    args = [sys.executable, "-X", "importtime", "-m", f"sweeper.{command}", "--experiment", "diabetes",
            "--tracking-uri", f"sqlite:///{store}"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if line.rstrip().endswith("| sweeper"):
                break
        if at == "store":  # the file open in the process: it reads the store, and waits for the lock
            fd = Path(f"/proc/{proc.pid}/fd")
            wait_for(lambda: any(os.path.realpath(f) == str(store.resolve()) for f in fd.iterdir()),
                     f"python -m sweeper.{command} to open the store", proc)
        assert proc.poll() is None, "".join(seen)
        proc.send_signal(signal.SIGINT)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    _, rest = proc.communicate(timeout=120)
    err = "".join(seen) + rest
    assert "Traceback" not in err and proc.returncode == -signal.SIGINT, err
    assert err.strip().splitlines()[-1] == (f"python -m sweeper.{command}: interrupted (Ctrl-C): what it had written "
                                            "stays; run it again to finish")


@pytest.mark.slow
def test_a_kill_9_of_a_joblib_sweep_ends_its_workers_and_their_hold_on_its_output(tmp_path, store):
    """Before: loky's workers trained on after the sweep was killed, holding its stdout: a caller reading the
    output waited for minutes."""
    import signal
    import threading

    args = [sys.executable, "-m", "sweeper", "-m", "lr=0.001,0.002", "epochs=2000000", "log_every=1000",
            "hydra/launcher=joblib", f"hydra.sweep.dir={tmp_path / 'sweep'}", f"tracking.uri=sqlite:///{store}",
            "tracking.log_model=false"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watchdog = threading.Timer(180, proc.kill)
    watchdog.start()
    try:
        for line in proc.stdout:
            if "Launching" in line:
                break
        # the workers train once both jobs' runs are RUNNING (a job creates its run, then trains)
        wait_for(lambda: running_children(store) == 2, "both jobs' runs RUNNING", proc)
        proc.send_signal(signal.SIGKILL)
        ended = threading.Event()
        threading.Thread(target=lambda: (proc.stdout.read(), ended.set()), daemon=True).start()
        assert ended.wait(20), "the sweep's output stayed open 20 s after its kill -9 (its workers live on)"
    finally:
        watchdog.cancel()
        proc.kill()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full (a device whose writes fail: disk full)")
def test_a_job_log_on_a_full_disk_is_said_in_one_line_and_every_run_is_recorded(tmp_path, store):
    """The jobs' log file on a full disk (/dev/full: every write fails with ENOSPC): one warning line, no
    "--- Logging error ---" block per line logged, and the sweep records all its runs."""
    r = cli(tmp_path, "-m", "lr=0.01,0.1", "epochs=5", "hydra.job_logging.handlers.file.filename=/dev/full", store=store)
    said = r.stdout + r.stderr
    assert r.returncode == 0, said[-2000:]
    assert "Logging error" not in said and "Traceback" not in said, said[-3000:]
    assert said.count("sweeper: warning: the log file /dev/full cannot be written (No space left on device)") == 1
    children = [x for x in all_runs(store) if "mlflow.parentRunId" in x.data.tags]
    assert len(children) == 2 and {x.info.status for x in children} == {"FINISHED"}


def test_output_piped_into_head_is_said_once_and_the_sweep_records_everything(tmp_path, store):
    """Hostile pass 2, row 33: ``python -m sweeper ... | head -3`` went on with a BrokenPipeError traceback for
    every line logged (18) and left the parent RUNNING. Now: one warning on stderr, the runs and the parent closed."""
    args = [sys.executable, "-m", "sweeper", "-m", "lr=0.001,0.002,0.003", "epochs=20", "tracking.log_model=false",
            f"hydra.sweep.dir={tmp_path / 'sweep'}", f"tracking.uri=sqlite:///{store}"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.readline()
    proc.stdout.close()  # the reader goes away, as head does after its lines
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 0, err
    assert "Traceback" not in err and "Logging error" not in err, err
    assert "the standard output cannot be written (Broken pipe)" in err and err.count("cannot be written") == 1, err
    found = all_runs(store)
    assert sorted(r.info.status for r in found) == ["FINISHED"] * 4  # 3 runs and their parent


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full (a device whose writes fail: disk full)")
@pytest.mark.parametrize("command, code", [(["-m", "sweeper", "epochs=20", "tracking.log_model=false"], 0),
                                           (["-m", "sweeper.runs"], 1)])
def test_output_to_a_full_disk_is_one_line(tmp_path, store, command, code):
    """Row 32: ``> /dev/full`` was a traceback (exit 1) before the sweep began; ``runs`` blamed the store. A sweep
    now runs and says it; a read command, whose output is its result, says it and exits 1."""
    args = [sys.executable, *command, f"hydra.run.dir={tmp_path / 'run'}", f"tracking.uri=sqlite:///{store}"]
    if command[1] == "sweeper.runs":
        args = [sys.executable, *command, "--tracking-uri", f"sqlite:///{store}"]
        cli(tmp_path, "epochs=5", "tracking.log_model=false", store=store)
    with open("/dev/full", "w") as full:
        proc = subprocess.run(args, cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == code
    assert "the standard output cannot be written (No space left on device)" in one_line(proc.stderr)
    if code == 0:
        assert [r.info.status for r in all_runs(store)] == ["FINISHED"]


def test_upload_to_another_store_goes_under_a_parent_there_and_stays_pending_for_its_own(tmp_path, store, capsys,
                                                                                          _template_store):
    """Before: upload --tracking-uri of another, new store logged the runs as top-level runs, failed on the parent that
    lives in the sweep's own store (exit 2) and had marked every result.json uploaded: a later upload to the sweep's
    own store said there was nothing to upload."""
    import json

    from conftest import client_for, copy_store
    from sweeper import upload
    from test_liveness import start_sweep
    from test_interrupt import run_job

    sweep_dir = tmp_path / "sweep"
    jobs, state = start_sweep(sweep_dir, store, "0.001,0.002", "hydra/launcher=basic")
    (p,) = state["parents"]
    for i in range(2):
        run_job(jobs, sweep_dir, i)
        path = sweep_dir / str(i) / "result.json"  # as a store that failed at the run's end leaves it
        path.write_text(json.dumps({**json.loads(path.read_text()), "pending_upload": True}))
    (tmp_path / "other").mkdir()
    other = copy_store(_template_store, tmp_path / "other")  # a new, empty store
    other_uri = f"sqlite:///{other}"

    assert upload.main([str(sweep_dir), "--tracking-uri", other_uri]) == 0
    out = capsys.readouterr().out
    assert out.count(f"its own store sqlite:///{store} still lacks it") == 2, out
    there = [r for r in all_runs(other) if r.info.lifecycle_stage == "active"]
    (parent,) = [r for r in there if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in there if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == 2 and {r.data.tags["mlflow.parentRunId"] for r in children} == {parent.info.run_id}
    assert parent.info.status == "FINISHED" and parent.data.tags["parent_in_own_store"].startswith(p["run_id"])
    original = client_for(store).get_run(p["run_id"]).data.tags  # before: no sweep_argv (advise had no next command)
    assert [parent.data.tags.get(k) for k in ("sweep_argv", "sweeper")] == [original["sweep_argv"], original["sweeper"]]
    assert upload.main([str(sweep_dir), "--tracking-uri", other_uri]) == 0  # again: nothing new there
    assert "nothing to upload" in capsys.readouterr().out and len(all_runs(other)) == len(there)

    assert upload.main([str(sweep_dir)]) == 0  # the sweep's own store: both are still pending for it
    assert capsys.readouterr().out.count("uploaded as run") == 2
    own = client_for(store).search_runs([p["experiment_id"]], f"tags.mlflow.parentRunId = '{p['run_id']}' and tags.uploaded_from != ''")
    assert len(own) == 2 and {r.info.status for r in own} == {"FINISHED"}
    assert upload.main([str(sweep_dir)]) == 0 and "nothing to upload" in capsys.readouterr().out


@pytest.mark.parametrize("edit, error", [
    (lambda r: {k: v for k, v in r.items() if k != "config"}, "its config is null, expected dict"),
    (lambda r: {k: v for k, v in r.items() if k != "fingerprint"}, "its fingerprint is null, expected str"),
    (lambda r: {**r, "device": 7}, "its device is 7, expected str"),
    (lambda r: {**r, "status": "BOGUS"}, 'its status is "BOGUS", expected one of FINISHED, FAILED, KILLED'),
    (lambda r: {**r, "artifacts": None}, "its artifacts is null, expected"),
    (lambda r: {**r, "pending_upload": "yes"}, 'its pending_upload is "yes", expected true or false'),
])
def test_upload_of_a_result_json_without_what_it_logs_is_one_line_and_starts_no_run(tmp_path, store, capsys, edit, error):
    """Before: a result.json missing config, fingerprint or device, or with status BOGUS, was a traceback (the last
    after a run was started)."""
    import json

    from sweeper import upload

    sweep_dir = _pending(tmp_path, store)
    path = sweep_dir / "0" / "result.json"
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    before = len(all_runs(store))
    assert upload.main([str(sweep_dir)]) == 2
    assert error in one_line(capsys.readouterr().err)
    assert len(all_runs(store)) == before


def test_a_sweep_folder_deleted_while_the_store_opens_ends_the_parent_in_one_line(tmp_path, store, monkeypatch):
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
        start_sweep(tmp_path / "sweep", store, "0.001,0.002", "hydra/launcher=basic", "tracking.log_model=false")
    assert f"hydra.sweep.dir={tmp_path / 'sweep'} was deleted before the first job: no job ran; parent run(s) " in str(e.value)
    (parent,) = all_runs(store)
    assert parent.info.status == "KILLED" and "was deleted before the first job" in parent.data.tags["failure_reason"]


def test_an_interrupted_upload_closes_the_parent_it_made_and_a_later_one_closes_a_parent_left_open(
        tmp_path, store, capsys, _template_store, monkeypatch):
    """Before: Ctrl-C of `upload --tracking-uri OTHER` after its runs were uploaded left the parent it made there
    RUNNING with no metrics, and a second upload said "nothing to upload" and left it RUNNING for good (hostile
    pass 5, 1 of 8 tries; SIGTERM: 1 more, silently)."""
    import json
    import signal

    from conftest import client_for, copy_store
    from sweeper import upload
    from test_interrupt import run_job
    from test_liveness import start_sweep

    sweep_dir = tmp_path / "sweep"
    jobs, _ = start_sweep(sweep_dir, store, "0.001,0.002", "hydra/launcher=basic")
    for i in range(2):
        run_job(jobs, sweep_dir, i)
        path = sweep_dir / str(i) / "result.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "pending_upload": True}))
    (tmp_path / "other").mkdir()
    other_uri = f"sqlite:///{copy_store(_template_store, tmp_path / 'other')}"
    real, calls = upload.upload, []

    def cut_short(path, uri=None):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(path, uri)

    monkeypatch.setattr(upload, "upload", cut_short)
    signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with pytest.raises(KeyboardInterrupt):
        upload.main([str(sweep_dir), "--tracking-uri", other_uri])
    # the caller's signals as they were (once ignored for good: every later test's sweep ignored SIGTERM)
    assert {s: signal.getsignal(s) for s in signals} == signals
    monkeypatch.setattr(upload, "upload", real)
    c = client_for(Path(other_uri.removeprefix("sqlite:///")))
    (parent,) = [r for r in c.search_runs([e.experiment_id for e in c.search_experiments()])
                 if "mlflow.parentRunId" not in r.data.tags]
    assert parent.info.status != "RUNNING" and parent.data.metrics, parent.info  # before: RUNNING, no metrics
    assert upload.main([str(sweep_dir), "--tracking-uri", other_uri]) == 0  # the job it did not get to
    c.update_run(parent.info.run_id, status="RUNNING")  # as an upload killed before it closed the parent leaves it
    capsys.readouterr()
    assert upload.main([str(sweep_dir), "--tracking-uri", other_uri]) == 0
    out = capsys.readouterr().out
    assert "nothing to upload" in out and f"parent run {parent.info.run_id}, left RUNNING by an interrupted upload" in out
    assert c.get_run(parent.info.run_id).info.status == "FINISHED"


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MB file system (tmpfs) at ``tmp_path/small``, 236 kB of it free; skips where it cannot be mounted."""
    disk = tmp_path / "small"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("a small file system cannot be mounted here (mount -t tmpfs needs root)")
    try:
        (disk / "fill").write_bytes(bytes(2_900_000))
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.mark.slow
def test_a_full_disk_under_the_sweep_folder_names_the_cause_in_every_run_it_ended(tmp_path, store, small_disk):
    """Before: the runs the failure cut short ended FAILED 'orphaned: its job ended without closing the run
    (killed?)' while the sweep said 'No space left on device'."""
    proc = subprocess.run([sys.executable, "-m", "sweeper", "-m", "lr=0.001,0.002,0.003,0.004,0.005,0.006",
                           "epochs=50", f"hydra.sweep.dir={small_disk / 'sweep'}", f"tracking.uri=sqlite:///{store}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "No space left on device" in proc.stderr.splitlines()[-1], proc.stderr
    runs = [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]
    assert "RUNNING" not in {r.info.status for r in runs}
    reasons = [r.data.tags.get("failure_reason", "") for r in runs if r.info.status != "FINISHED"]
    assert reasons and all("No space left on device" in x for x in reasons), reasons
    assert not any("killed?" in x for x in reasons), reasons


def _submitit_sweep(tmp_path: Path, store: Path) -> subprocess.Popen:
    """A 2-job submitit_local sweep (minutes a job) in a process group of its own, once both jobs' runs are RUNNING."""
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "sweeper", "-m", "lr=0.001,0.002", "epochs=5000000", "log_every=1000",
                             "hydra/launcher=submitit_local", f"hydra.sweep.dir={tmp_path / 'sweep'}",
                             f"tracking.uri=sqlite:///{store}"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if [r.info.status for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags] == ["RUNNING"] * 2:
            return proc
        time.sleep(0.5)
    proc.kill()
    raise AssertionError(f"the jobs did not start: {proc.communicate()}")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["terminal Ctrl-C", "SIGTERM"])
def test_submitit_local_jobs_stop_with_their_sweep_in_one_line(tmp_path, store, how):
    """Before: a terminal's Ctrl-C reached submitit's job controllers too, each printing a KeyboardInterrupt
    traceback after the sweep's line; a SIGTERM to the sweep left its jobs training on for minutes after it exited
    143, their runs RUNNING, while its line said '0 killed'."""
    import signal

    proc = _submitit_sweep(tmp_path, store)
    if how == "SIGTERM":
        proc.send_signal(signal.SIGTERM)
    else:
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal does: every process of its foreground group
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == (143 if how == "SIGTERM" else 130), err
    assert "sweeper: interrupted: 0 finished, 2 killed, 0 not run" in one_line(err)
    runs = all_runs(store)
    assert sorted(r.info.status for r in runs) == ["KILLED"] * 3
    left = subprocess.run(["pgrep", "-f", f"submitit.*{tmp_path}"], capture_output=True, text=True).stdout
    assert not left.strip(), left


def test_a_ctrl_c_python_swallows_in_a_destructor_is_raised_once_it_is_over(tmp_path):
    """Before (a hostile try, 1 of 14): Ctrl-C while SQLAlchemy's garbage-collection callback ran was printed as
    'Exception ignored in: <function _collection_gced ...> KeyboardInterrupt' and lost: the sweep ran on to exit 0."""
    import textwrap

    script = textwrap.dedent("""
        import os, signal, time
        from sweeper.base import stop
        stop.install()
        class Slow:
            def __del__(self):  # the signal lands here, where Python cannot raise it
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.1)
        try:
            x = Slow(); del x
            for _ in range(300):
                time.sleep(0.01)
            print("ran on to the end")
        except KeyboardInterrupt:
            print("interrupted")
    """)
    import signal

    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout.strip() == "interrupted", proc.stdout + proc.stderr
    assert "Exception ignored" not in proc.stderr, proc.stderr


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads signal masks from /proc (Linux)")
def test_the_cpu_workers_start_with_the_stopping_signals_blocked(tmp_path, store):
    """Before: a terminal's Ctrl-C in a sweep's first second reached its CPU workers while Python started in them,
    before they could ignore it: 21-46 lines of 'Fatal Python error: init_import_site ... KeyboardInterrupt' above
    the sweep's one line (2 of 2 hostile tries). Starting multiprocessing's resource tracker also unblocked the
    signals again for the first worker. Now each worker starts with SIGINT, SIGTERM and SIGHUP blocked."""
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "sweeper", "-m", "lr=0.001,0.002,0.003", "epochs=3000000",
                             "log_every=1000", "hydra.launcher.cpu_workers=2", f"hydra.sweep.dir={tmp_path / 'sweep'}",
                             f"tracking.uri=sqlite:///{store}"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        masks: dict[int, int] = {}
        deadline = time.monotonic() + 120
        while len(masks) < 2 and time.monotonic() < deadline:
            for pid in subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split():
                try:
                    if "multiprocessing.spawn" in Path(f"/proc/{pid}/cmdline").read_text():
                        status = Path(f"/proc/{pid}/status").read_text()
                        masks[int(pid)] = int(re.search(r"SigBlk:\s*([0-9a-f]+)", status)[1], 16)
                except OSError:
                    continue
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert len(masks) == 2, masks
    wanted = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGHUP - 1))
    assert all(m & wanted == wanted for m in masks.values()), {p: hex(m) for p, m in masks.items()}


def test_an_import_ctrl_c_cut_short_is_the_one_interruption_line(tmp_path):
    """Before (advise, 1 of 8 hostile tries): Ctrl-C while scipy loaded made its import raise 'ImportError:
    initialization failed' with the KeyboardInterrupt as its context: a 54-line traceback, exit 1."""
    code = ("import sys\nsys.argv = ['-m']\nimport sweeper\nsys.argv = ['/x/advise.py']\n"
            "try:\n    raise KeyboardInterrupt\nexcept KeyboardInterrupt:\n    raise ImportError('initialization failed')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130
    assert one_line(proc.stderr) == "python -m sweeper.advise: interrupted (Ctrl-C): what it had written stays; run it again to finish"


def test_ctrl_c_once_a_commands_work_is_done_is_one_line_and_its_own_exit_code(tmp_path):
    """Before (promote, 1 of 8): Ctrl-C inside an exit handler, after the pin was written, printed 'Exception ignored
    in atexit callback' and a KeyboardInterrupt traceback, and the command exited 0 all the same."""
    code = ("import atexit, os, signal, threading, time\nfrom sweeper import main_exit\n"
            "def work():\n    atexit.register(time.sleep, 3)\n"
            "    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()\n    return 0\n"
            "main_exit(work)\n")
    import signal

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.returncode == 0
    assert one_line(proc.stderr) == "sweeper: interrupted as it exited: its work was done"


def test_a_deleted_sweep_folder_counts_the_jobs_it_made_fail(tmp_path):
    """Before (hostile pass 3): 'the result.json of 0 of its 2 jobs went with it' while one job had FAILED because
    its folder went as it recorded (its result.json written again with that reason)."""
    import io

    from sweeper.sweep import life

    rows = [{"status": "FINISHED", "reason": None},
            {"status": "FAILED", "reason": "its results could not be kept (FileNotFoundError: No such file or directory: x)"}]
    out = io.StringIO()
    life._restore_sweep_file(tmp_path / "sweep", {"parents": [], "n_jobs": 2}, rows, out)
    line = one_line(out.getvalue())
    assert "the result.json of 0 of its 2 jobs went with it, and 1 job(s) FAILED for it" in line
    assert (tmp_path / "sweep" / "sweep.json").is_file()


def test_a_read_commands_ctrl_c_python_swallows_is_raised_once_it_is_over(tmp_path):
    """Before (promote --force, ~8 of 30 hostile tries): Ctrl-C inside a destructor printed 'Exception ignored in:
    <... _MultipleClassMarker._remove_item> ... KeyboardInterrupt' and the command ran on to exit 0."""
    import signal

    code = ("import sys\nsys.argv = ['-m']\nimport sweeper\nsys.argv = ['/x/promote.py']\n"
            "import os, time\n"  # the signal comes inside a destructor, where Python cannot raise it
            "class Slow:\n    def __del__(self):\n        os.kill(os.getpid(), signal.SIGINT)\n        time.sleep(0.1)\n"
            "def work():\n"
            "    x = Slow(); del x\n    time.sleep(3)\n    print('ran on to the end')\n    return 0\n"
            "import signal\nsweeper.main_exit(work)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert "ran on to the end" not in proc.stdout and "Exception ignored" not in proc.stderr, proc.stderr
    assert one_line(proc.stderr).startswith("python -m sweeper.promote: interrupted (Ctrl-C)")
