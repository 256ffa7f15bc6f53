"""sweeper.base.stop and the commands' exit (sweeper.main_exit): a signal lands after a deferred section, one
that a library swallowed still ends the command as interrupted, one line; SIGHUP and repeated Ctrl-C."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import all_runs, one_line, wait_for


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
        stop.seen().clear()
        for s, h in old.items():
            signal.signal(s, h)


def test_a_signal_in_a_deferred_section_replaces_its_error_and_a_threads_section_defers_nothing():
    import signal
    import threading

    from sweeper.base import state, stop

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
                depth.append(state.process().deferring)

        t = threading.Thread(target=section)
        t.start()
        t.join()
        assert depth == [0]  # a thread's section: signals reach the main thread only
    finally:
        stop.reset()
        for s, h in old.items():
            signal.signal(s, h)


def test_a_ctrl_c_that_a_librarys_cleanup_turned_into_its_own_error_is_still_the_interruption(
    tmp_path, monkeypatch, capsys
):
    """Before: Ctrl-C of promote while it composed the pin's re-run command printed "the re-run command for run ...
    does not compose: AttributeError" (Hydra's cleanup raised in the KeyboardInterrupt's way), exit 2. The command
    (sweeper.promote.main) decides it, not promotion: the same cleanup error with no Ctrl-C is the one line, exit 2."""
    from types import SimpleNamespace

    from sweeper import promote as command
    from sweeper.base import stop
    from sweeper.insight import promotion

    def cut_short(args):
        try:
            if cut:
                raise KeyboardInterrupt
        finally:
            raise AttributeError("'NoneType' object has no attribute 'pop'")

    monkeypatch.setattr(promotion, "check_overrides", cut_short)
    run = SimpleNamespace(info=SimpleNamespace(run_id="r1"))
    # the command's promotion reaches the pin's re-run command (promotion._verify) at once
    monkeypatch.setattr(
        command,
        "promote",
        lambda *a, **k: promotion._verify("x: 1\n", "p", tmp_path / "pins", run, {}),
    )
    argv = ["--experiment", "e", "--out-dir", str(tmp_path / "pins")]
    cut = False
    assert command.main(argv) == 2
    assert (
        "the re-run command for run r1 does not compose: AttributeError" in capsys.readouterr().err
    )
    cut = True
    with pytest.raises(KeyboardInterrupt):
        command.main(argv)
    assert capsys.readouterr().err == ""
    assert stop.masked(ValueError("another")) is None
    assert "stop" not in vars(promotion)  # promotion holds no signal code of its own


def test_a_launcher_error_a_ctrl_c_caused_is_the_interruption_not_a_failure():
    """Before: Ctrl-C 0.41 s after "Launching" (1 of 25 hostile tries) printed "sweeper: error: the launcher failed:
    AttributeError: 'NoneType' object has no attribute '_invalidate_flags_cache'" (OmegaConf's cleanup raised in the
    KeyboardInterrupt's way), exit 2, instead of the interruption line and 130."""
    import signal

    from sweeper.base import stop
    from sweeper.sweep import resuming_sweeper

    stop.reset()
    stop.seen().append(signal.SIGINT)
    stop.STOP.set()
    try:
        with pytest.raises(KeyboardInterrupt), resuming_sweeper._failing_whole(None):
            raise AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'")
    finally:
        stop.reset()


def test_a_composition_error_a_ctrl_c_caused_is_the_sweeps_interruption_not_a_refusal(monkeypatch):
    """The sweep's start (callbacks.start_failed) decides it, not the composition: before,
    sweep.plan held its own check; without it a Ctrl-C while the jobs were composed printed
    "sweeper: error: job ...: AttributeError" and exit 2. The composition catches only its own
    errors (Hydra's, OmegaConf's, YAML's, a file's), so such an error reaches the start as it is:
    with no signal it is a bug (its traceback, exit 1)."""
    import signal

    import yaml
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from sweeper.base import stop
    from sweeper.contract.config import ConfigError
    from sweeper.sweep import callbacks, plan

    def compose(cut: bool):
        try:
            if cut:
                raise KeyboardInterrupt
        finally:
            raise AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'")

    def start(config, caller):  # as sweep.start composes each job (plan.job_configs' loop)
        try:
            compose(bool(stop.seen()))
        except (HydraException, OmegaConfBaseException, yaml.YAMLError, OSError) as e:
            raise ConfigError(f"job lr=0.1: {e}") from e

    monkeypatch.setattr(callbacks.sweep, "start", start)
    stop.reset()
    try:
        with pytest.raises(stop.Refused) as refused:
            callbacks.SweepCallback().on_multirun_start(None)
        assert refused.value.code == 1
        assert refused.value.message.startswith(
            "the sweep could not start: AttributeError: 'NoneType' object"
        )
        stop.seen().append(signal.SIGTERM)
        stop.STOP.set()
        with pytest.raises(stop.Terminated):
            callbacks.SweepCallback().on_multirun_start(None)
    finally:
        stop.reset()
    assert "stop" not in vars(plan)  # the composition holds no signal code of its own


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
    proc = subprocess.run(
        [sys.executable, "-c", SWALLOWS, sig], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode in code, proc.stderr
    assert proc.stdout == "done\n"
    reason = "SIGTERM" if sig == "SIGTERM" else "Ctrl-C"
    assert (
        one_line(proc.stderr)
        == f"python -m sweeper: interrupted ({reason}): what it had written stays; run it again to finish"
    )


BATCHED_16 = ("-m", "data=digits", "lr=0.001,0.01", "width=8,16", "depth=1,2", "epochs=200,400")


def _signalled_group(
    tmp_path: Path, store: Path, sig: str, at: str, times: int = 1
) -> tuple[subprocess.CompletedProcess, list[str]]:
    """The 16-configuration batched sweep (worker processes, a writer process) in a session of its own, ``sig`` sent
    to its whole process group (as a terminal sends Ctrl-C, or SIGHUP when it closes) ``times`` times, 0.15 s apart,
    once a line contains ``at``; the run ids it printed FINISHED."""
    import signal

    args = [
        sys.executable,
        "-m",
        "sweeper",
        *BATCHED_16,
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"tracking.uri=sqlite:///{store}",
    ]

    # as a terminal's process has them (a background job of a shell ignores some)
    def default_signals() -> None:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_DFL)

    proc = subprocess.Popen(
        args,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=default_signals,
        env={**os.environ, "SWEEPER_WRITER": "on"},  # a writer process in this short sweep too
    )
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
        assert runs[run_id].info.status == "FINISHED" and runs[run_id].data.metrics, (
            run_id,
            proc.stderr,
        )


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
    # at most the "still stopping" line besides
    assert all(x.startswith("sweeper: ") for x in lines), proc.stderr
    _nothing_lost(store, printed, proc)


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
    args = [
        sys.executable,
        "-X",
        "importtime",
        "-m",
        f"sweeper.{command}",
        "--experiment",
        "diabetes",
        "--tracking-uri",
        f"sqlite:///{store}",
    ]
    proc = subprocess.Popen(
        args,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    seen = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if line.rstrip().endswith("| sweeper"):
                break
        # the file open in the process: it reads the store, and waits for the lock
        if at == "store":
            fd = Path(f"/proc/{proc.pid}/fd")
            wait_for(
                lambda: any(os.path.realpath(f) == str(store.resolve()) for f in fd.iterdir()),
                f"python -m sweeper.{command} to open the store",
                proc,
            )
        assert proc.poll() is None, "".join(seen)
        proc.send_signal(signal.SIGINT)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    _, rest = proc.communicate(timeout=120)
    err = "".join(seen) + rest
    assert "Traceback" not in err and proc.returncode == -signal.SIGINT, err
    assert err.strip().splitlines()[-1] == (
        f"python -m sweeper.{command}: interrupted (Ctrl-C): what it had written "
        "stays; run it again to finish"
    )


def _swallowed_ctrl_c(before: str = "", said: str = "") -> subprocess.CompletedProcess:
    """A process with sweeper's signal handling whose Ctrl-C lands in a ``__del__`` (where Python cannot raise it),
    ``before`` run first; it prints 'interrupted' and ``said``'s value if the Ctrl-C reaches it, within a 60 s hang
    guard (not a verdict: it ends at the signal)."""
    import signal
    import textwrap

    script = (
        textwrap.dedent("""
        import os, signal, time
        from sweeper.base import stop
        stop.install()
    """)
        + textwrap.dedent(before)
        + textwrap.dedent(f"""
        class Slow:
            def __del__(self):  # the signal lands here
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.1)
        try:
            x = Slow(); del x
            for _ in range(6000):
                time.sleep(0.01)
            print("ran on to the end")
        except KeyboardInterrupt:
            print("interrupted", {said or "''"})
    """)
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def test_a_ctrl_c_python_swallows_in_a_destructor_is_raised_once_it_is_over(tmp_path):
    """Before (a hostile try, 1 of 14): Ctrl-C while SQLAlchemy's garbage-collection callback ran was printed as
    'Exception ignored in: <function _collection_gced ...> KeyboardInterrupt' and lost: the sweep ran on to exit 0."""
    proc = _swallowed_ctrl_c()
    assert proc.stdout.strip() == "interrupted", proc.stdout + proc.stderr
    assert "Exception ignored" not in proc.stderr, proc.stderr


def test_a_ctrl_c_sent_again_that_lands_inside_the_hook_that_sent_it_is_sent_again(tmp_path):
    """Before (1 in 40 tries on a loaded machine, seen in the suite): the hook that sends a swallowed Ctrl-C again
    started a timer thread and waited for its start; the timer's signal came first and landed inside the hook, where
    Python cannot raise it either: the sweep ran on to its end. Here the first sending lands at once, inside the
    hook, as the slow start made it land: it must be sent again and interrupt."""
    import signal

    proc = _swallowed_ctrl_c(
        """
        later, landed = stop._resend_later, []
        def at_once(signum):  # the first sending lands here, inside the hook
            if landed:
                return later(signum)
            landed.append(signum)
            os.kill(os.getpid(), signum)
            for _ in range(10000):  # bytecodes where Python runs the handler
                pass
        stop._resend_later = at_once
        """,
        said="landed",
    )
    assert proc.stdout.strip() == f"interrupted [{int(signal.SIGINT)}]", proc.stdout + proc.stderr
    assert "Exception ignored" not in proc.stderr, proc.stderr


def test_an_import_ctrl_c_cut_short_is_the_one_interruption_line(tmp_path):
    """Before (advise, 1 of 8 hostile tries): Ctrl-C while scipy loaded made its import raise 'ImportError:
    initialization failed' with the KeyboardInterrupt as its context: a 54-line traceback, exit 1."""
    code = (
        "import sys\nsys.argv = ['-m']\nimport sweeper\nsys.argv = ['/x/advise.py']\n"
        "try:\n    raise KeyboardInterrupt\nexcept KeyboardInterrupt:\n    raise ImportError('initialization failed')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130
    assert (
        one_line(proc.stderr)
        == "python -m sweeper.advise: interrupted (Ctrl-C): what it had written stays; run it again to finish"
    )


def test_ctrl_c_once_a_commands_work_is_done_is_one_line_and_its_own_exit_code(tmp_path):
    """Before (promote, 1 of 8): Ctrl-C inside an exit handler, after the pin was written, printed 'Exception ignored
    in atexit callback' and a KeyboardInterrupt traceback, and the command exited 0 all the same."""
    code = (
        "import atexit, os, signal, threading, time\nfrom sweeper import main_exit\n"
        "def work():\n    atexit.register(time.sleep, 3)\n"
        "    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()\n    return 0\n"
        "main_exit(work)\n"
    )
    import signal

    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.returncode == 0
    assert one_line(proc.stderr) == "sweeper: interrupted as it exited: its work was done"


def test_a_read_commands_ctrl_c_python_swallows_is_raised_once_it_is_over(tmp_path):
    """Before (promote --force, ~8 of 30 hostile tries): Ctrl-C inside a destructor printed 'Exception ignored in:
    <... _MultipleClassMarker._remove_item> ... KeyboardInterrupt' and the command ran on to exit 0."""
    import signal

    code = (
        "import sys\nsys.argv = ['-m']\nimport sweeper\nsys.argv = ['/x/promote.py']\n"
        "import os, time\n"  # the signal comes inside a destructor, where Python cannot raise it
        "class Slow:\n    def __del__(self):\n        os.kill(os.getpid(), signal.SIGINT)\n        time.sleep(0.1)\n"
        "def work():\n"
        "    x = Slow(); del x\n    time.sleep(3)\n    print('ran on to the end')\n    return 0\n"
        "import signal\nsweeper.main_exit(work)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert "ran on to the end" not in proc.stdout and "Exception ignored" not in proc.stderr, (
        proc.stderr
    )
    assert one_line(proc.stderr).startswith("python -m sweeper.promote: interrupted (Ctrl-C)")


def test_an_extra_returns_its_result_says_its_error_in_one_line_and_raises_an_interruption():
    """stop.extra, the one place an extra of a sweep's end (baselines, refit, advice) decides its fault: its value;
    None and one warning line for its own error; the KeyboardInterrupt for an error a Ctrl-C caused (a library's
    ``finally`` that failed on its way), which a warning would have swallowed."""
    import io

    from sweeper.base import stop

    out = io.StringIO()
    assert stop.extra("sum", out, lambda a, b: a + b, 2, 3) == 5 and out.getvalue() == ""

    def boom():
        raise ValueError("first\nsecond")

    assert stop.extra("boom", out, boom) is None
    assert out.getvalue() == "sweeper: warning: no boom: ValueError: first\n"

    def cut():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("cannot access local variable") from None

    out = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        stop.extra("cut", out, cut)
    assert out.getvalue() == ""


def test_baselines_whose_fit_a_ctrl_c_broke_interrupt_the_sweeps_end_instead_of_a_warning(
    monkeypatch,
):
    """baselines.ensure fits through stop.extra: an error its fit raised is one warning line and the parent's own
    metrics; an error a Ctrl-C caused raises the interruption (before, every Exception became 'no baselines')."""
    import io
    from types import SimpleNamespace as NS

    from sweeper.insight import baselines

    parent = NS(data=NS(metrics={}), info=NS(run_id="p"))
    results = [{"config": {"data": {"name": "diabetes"}, "baselines": "linear"}}]

    def broken(*a):
        raise OSError("disk full")

    monkeypatch.setattr(baselines, "fit", broken)
    out = io.StringIO()
    assert baselines.ensure(None, parent, results, out) == {}
    assert out.getvalue() == "sweeper: warning: no baselines: OSError: disk full\n"

    def interrupted(*a):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as e:
            raise RuntimeError("joblib's pool went down") from e

    monkeypatch.setattr(baselines, "fit", interrupted)
    with pytest.raises(KeyboardInterrupt):
        baselines.ensure(None, parent, results, io.StringIO())


def test_a_training_loop_hears_a_stop_only_through_its_backends_epoch():
    """Backend.epoch is the one place a model's loop hears a stop (Ctrl-C or SIGTERM set STOP; a group's caller set
    its halt Event): before, models/stacked.py and models/batched.py each read the process's signal flag and raised
    Stopped themselves. models/ and data/ hold no signal code but usercode, the user's code's boundary."""
    import threading

    import numpy as np

    from sweeper import ROOT
    from sweeper.base import stop
    from sweeper.base.backend import resolve
    from sweeper.models.mlp_net import MLPNet
    from sweeper.models.optim import Optimizer
    from sweeper.models.stacked import Member, train_stacked

    backend = resolve("cpu")
    backend.epoch(0)  # nothing asked: it goes on
    halt = threading.Event()
    halt.set()
    with pytest.raises(stop.Stopped):
        backend.epoch(1, halt)
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(32, 3)), rng.normal(size=(32, 1))
    stop.STOP.set()
    try:
        with pytest.raises(stop.Stopped):
            backend.epoch(2)
        with pytest.raises(stop.Stopped):  # a stacked group stops at its first epoch
            train_stacked(
                backend,
                MLPNet(depth=1, width=4),
                "regression",
                X,
                y,
                X,
                y,
                [Member(0.01, 0, (50,)), Member(0.02, 1, (50,))],
                n_out=1,
                log_every=10,
                opt=Optimizer("adam"),
                dtype="float64",
            )
    finally:
        stop.STOP.clear()
    signal_code = ("sweeper.base.stop", "import signal", "KeyboardInterrupt")
    holding = sorted(
        str(p.relative_to(ROOT))
        for folder in ("models", "data")
        for p in (ROOT / folder).glob("*.py")
        if p.name != "usercode.py"
        and any(s in line.split("#")[0] for line in p.read_text().splitlines() for s in signal_code)
    )
    assert holding == []


def test_signal_handlers_are_set_by_the_main_thread_only_and_elsewhere_nothing_is_touched_or_raised():
    """install, ignore, ignoring, restore and exiting decide 'not the main thread' the one way install did (before,
    ignore, restore and the package's exit path each caught signal.signal's ValueError): from a thread (the Python API called from one, a worker's
    thread) they change no handler and raise nothing; from the main thread they do."""
    import signal
    import threading

    from sweeper.base import stop

    old = {s: signal.getsignal(s) for s in stop.SIGNALS}
    errors, installed = [], []

    def elsewhere() -> None:
        try:
            installed.append(stop.install())
            stop.ignore()
            with stop.ignoring():
                pass
            stop.restore({signal.SIGINT: signal.SIG_IGN})
            stop.exiting(3)
        except BaseException as e:  # noqa: BLE001  (what the thread raised is the test's finding)
            errors.append(e)

    t = threading.Thread(target=elsewhere)
    t.start()
    t.join()
    assert errors == [] and installed == [{}]
    assert {s: signal.getsignal(s) for s in stop.SIGNALS} == old
    try:
        stop.ignore()
        assert all(signal.getsignal(s) is signal.SIG_IGN for s in stop.SIGNALS)
        stop.restore(old)
        assert {s: signal.getsignal(s) for s in stop.SIGNALS} == old
    finally:
        for s, h in old.items():
            signal.signal(s, h)
