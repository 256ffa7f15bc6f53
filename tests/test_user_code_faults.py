"""Hostile user code, trainers and callers (issue 55, findings 2, 3, 7, 8, 9): what a user's model, function
trainer, module or Python caller does wrong is that run's failure in one line, never the silent end of a sweep, a
run left RUNNING, a traceback per run or a machine out of memory (finding 12, read commands against a server that
does not answer, is in test_store.py, beside the store's health check).

Each test says what the tree did before. The user's code lives in a folder outside the package (``user_folder``);
the sweeps run as the command line runs them (a subprocess) unless the case needs nothing of one.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import NO_BASELINES, all_runs, cli, client_for, command_env, run_once, user_folder

NETS = """
import os
import sys
import threading
from posix import _exit as bound_exit  # os._exit under another name: an exit sweeper's guard does not see
from pathlib import Path

import numpy as np


class Net:
    def __init__(self, hidden=4, how="none"):
        self.hidden, self.how = hidden, how

    def init(self, n_in, n_out, rng):
        return {"W": rng.standard_normal((n_in, n_out)) * 0.1, "b": np.zeros((1, n_out))}

    def forward(self, xp, params, X):
        end(self.how)
        return X @ params["W"] + params["b"], X

    def backward(self, xp, params, cache, dout):
        return {"W": cache.swapaxes(-1, -2) @ dout, "b": dout.sum(axis=-2, keepdims=True)}


def end(how):
    if how == "sys.exit":
        sys.exit(3)
    if how == "SystemExit":
        raise SystemExit(4)
    if how == "os._exit":
        os._exit(0)
    if how == "KeyboardInterrupt":
        raise KeyboardInterrupt
    if how == "bound" and in_a_worker():
        bound_exit(0)
    if how == "ValueError":
        raise ValueError("the model gave up")
    if how == "oom" and in_a_worker():  # as the kernel's out-of-memory killer ends a CPU worker
        import fcntl

        with open(os.environ["SWEEPER_OOM_COUNTER"], "r+") as counter:  # two workers at once: one after the other
            fcntl.flock(counter, fcntl.LOCK_EX)
            count = int(counter.read())
            counter.seek(0)
            counter.write(str(count + 1))
        with open(os.environ["KILLED_LOG"], "a") as f:
            f.write(f"{os.getpid()}\\n")
        os.kill(os.getpid(), 9)
    if how == "slow" and in_a_worker():  # a worker at work: the test kills the launching process now
        Path(os.environ["WORKING_FLAG"]).write_text(str(os.getpid()))
        import time

        time.sleep(60)


def in_a_worker():  # a CPU worker of the batched launcher, not the launching process (which measures the model)
    import multiprocessing

    return multiprocessing.parent_process() is not None


class Flat(Net):  # forward gives (n,), not (n, 1): its loss broadcast to (n, n) and trained silently
    def forward(self, xp, params, X):
        out, cache = super().forward(xp, params, X)
        return out[:, 0], cache

    def backward(self, xp, params, cache, dout):
        return super().backward(xp, params, cache, dout.reshape(len(cache), -1)[:, :1])


class Wide:  # hidden units from np.zeros: pages untouched until written
    def __init__(self, hidden=4):
        self.hidden = hidden

    def init(self, n_in, n_out, rng):
        return {"W1": np.zeros((n_in, self.hidden)), "W2": np.zeros((self.hidden, n_out))}

    def forward(self, xp, params, X):
        H = X @ params["W1"]
        return H @ params["W2"], (X, H)

    def backward(self, xp, params, cache, dout):
        X, H = cache
        return {"W2": H.swapaxes(-1, -2) @ dout, "W1": X.swapaxes(-1, -2) @ (dout @ params["W2"].swapaxes(-1, -2))}


def fit(data, report, *, lr, epochs, seed, how="none"):
    end(how)
    w = data.xp.zeros((data.X_train.shape[1], 1))
    report(0, train_loss=1.0, val_loss=1.0)
    return lambda X: X @ w


def fit_locked(data, report, *, lr, epochs, seed):
    w = data.xp.zeros((data.X_train.shape[1], 1))
    lock = threading.Lock()

    def predict(X):
        with lock:
            return X @ w

    report(0, train_loss=1.0, val_loss=1.0)
    return predict
"""
EXITS_ON_IMPORT = "import os\nos._exit(0)\n"
SYS_EXIT_ON_IMPORT = "import sys\nsys.exit(5)\n"
FAST = ("epochs=20",)  # a function trainer refuses log_every (its loop is its own)
UNCHECKED = (
    *FAST,
    "log_every=10",
    "++model.check=false",
)  # past the gradient check, which refuses a model that raises or exits


@pytest.fixture
def user(tmp_path, monkeypatch):
    return user_folder(
        tmp_path,
        monkeypatch,
        {
            "nets.py": NETS,
            "exits_on_import.py": EXITS_ON_IMPORT,
            "sysexit_on_import.py": SYS_EXIT_ON_IMPORT,
        },
    )


def _line_of(user: Path, text: str) -> int:
    return next(
        i for i, line in enumerate((user / "nets.py").read_text().splitlines(), 1) if text in line
    )


def _sweep(
    user: Path, store: Path, *args: str, env: dict | None = None
) -> tuple[subprocess.CompletedProcess, list]:
    proc = cli(user, "-m", *args, *FAST, store=store, env=env)
    return proc, all_runs(store)


# --- finding 2: user code cannot end a sweep silently ----------------------------------------------------------


@pytest.mark.parametrize("how, code", [("sys.exit", "sys.exit(3)"), ("SystemExit", "sys.exit(4)")])
def test_an_exit_in_a_models_code_is_that_runs_failure_with_its_code(
    user, tmp_path, store, how, code
):
    """Before: SystemExit left the job (and, in a sweep, the whole launching process: rc 3, runs RUNNING)."""
    result = run_once(
        tmp_path, "model._target_=nets.Net", f"+model.how={how}", *UNCHECKED, store=store
    )
    where = f"nets.py:{_line_of(user, 'sys.exit(3)' if how == 'sys.exit' else 'raise SystemExit(4)')} in end"
    assert (
        result["status"] == "FAILED"
        and result["reason"].startswith(f"{code} called (")
        and where in result["reason"]
    )
    (run,) = all_runs(store)
    assert run.info.status == "FAILED" and run.data.tags["failure_reason"] == result["reason"]


def test_the_gradient_check_before_a_sweep_refuses_a_model_that_exits_in_one_line(user):
    """Before: the check (in the launching process, before any run) let SystemExit through: the sweep ended with the
    model's code (3) and no line."""
    from sweeper.contract.model import gradient_check

    refusal, tags = gradient_check({"_target_": "nets.Net", "how": "sys.exit"}, 10, 1, "regression")
    assert refusal.startswith(
        "model._target_=nets.Net: its gradients cannot be checked (sys.exit(3) called ("
    )
    assert "\n" not in refusal and tags["gradient_check"] == "failed"


def test_a_module_that_exits_on_import_is_refused_in_one_line(user):
    """Before: ``sys.exit(5)`` while importing the model's module ended the command with 5 and no output."""
    from sweeper.models.interface import ModelError, load_target

    with pytest.raises(ModelError) as refused:
        load_target("sysexit_on_import.Net")
    assert str(refused.value).startswith(
        "model._target_=sysexit_on_import.Net: importing sysexit_on_import: sys.exit(5) called ("
    )
    assert "\n" not in str(refused.value) and "sysexit_on_import.py:2 in <module>" in str(
        refused.value
    )


def test_the_check_of_a_model_that_exits_says_so_in_one_line(user, capsys):
    """Before: ``python -m sweeper.check`` of it exited with the model's code (7, 3, ...) and no output."""
    from sweeper import check

    assert check.main(["nets.Net", "how=sys.exit"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "sweeper.check: FAIL nets.Net: sys.exit(3) called ("
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "target, how, said",
    [
        ("nets.Net", "sys.exit", "sys.exit(3) called"),
        ("nets.Net", "os._exit", "os._exit(0) called"),
        (
            "nets.Net",
            "KeyboardInterrupt",
            "KeyboardInterrupt raised by the code itself, not a Ctrl-C",
        ),
        ("nets.fit", "SystemExit", "sys.exit(4) called"),
        ("nets.fit", "os._exit", "os._exit(0) called"),
    ],
)
def test_user_code_that_would_end_the_process_fails_its_runs_and_the_sweep_ends_as_usual(
    user, store, target, how, said
):
    """Before: a model's ``os._exit(0)`` ended the sweep with exit code 0, two runs RUNNING, its last line "Launching 2
    jobs"; ``sys.exit(3)`` with 3; a model's KeyboardInterrupt was taken for the user's Ctrl-C (exit 130, KILLED)."""
    unchecked = ["model.check=false"] if target == "nets.Net" else []
    proc, runs = _sweep(
        user, store, f"model._target_={target}", f"+model.how={how}", "lr=0.01,0.02", *unchecked
    )
    # no run finished: the sweep failed
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    kids = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert parent.info.status == "FINISHED" and parent.data.tags["n_failed"] == "2"
    assert len(kids) == 2 and {r.info.status for r in kids} == {"FAILED"}
    assert all(
        r.data.tags["failure_reason"].startswith(said)
        and "nets.py:" in r.data.tags["failure_reason"]
        for r in kids
    )
    assert "2 of 2 jobs reported" in proc.stdout and "interrupted" not in proc.stderr
    # once, not once a run
    assert (proc.stdout + proc.stderr).count("Traceback (most recent call last)") == 1


@pytest.mark.slow
def test_an_exit_the_guard_cannot_see_loses_the_worker_and_fails_its_runs_not_the_sweep(
    user, store
):
    """``posix._exit`` (os._exit under another name: as an exit from C code, not seen). Before: the group was lost
    twice, then run in the launching process, which the same exit ended at once with exit code 0, nothing recorded."""
    proc, runs = _sweep(
        user,
        store,
        "model._target_=nets.Net",
        "+model.how=bound",
        "lr=0.01,0.02",
        "hydra.launcher.cpu_workers=2",
    )
    assert proc.returncode == 1 and "2 of 2 jobs reported" in proc.stdout, (
        proc.stdout[-2000:] + proc.stderr[-2000:]
    )
    kids = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(kids) == 2 and {r.info.status for r in kids} == {"FAILED"}
    assert all(
        r.data.tags["failure_reason"].startswith(
            "its worker process ended twice as it trained (exit code 0"
        )
        for r in kids
    )


@pytest.mark.slow
def test_a_module_that_exits_on_import_is_refused_by_a_sweep_in_one_line(user, store):
    """Before: ``os._exit(0)`` on import ended the sweep with exit code 0 and no output at all."""
    proc, runs = _sweep(user, store, "model._target_=exits_on_import.Net", "lr=0.01,0.02")
    assert proc.returncode == 2 and runs == []
    (line,) = proc.stderr.splitlines()
    assert line.startswith(
        "sweeper: error: model._target_=exits_on_import.Net: importing exits_on_import: os._exit(0) "
        "called (exits_on_import.py:2 in <module>)"
    )


API_FAILED = r"""
import json, sys
import sweeper
store, tmp = sys.argv[1], sys.argv[2]
try:
    sweeper.multirun(["model._target_=nets.Net", "+model.how=sys.exit", "model.check=false", "lr=0.01,0.02", "epochs=20", "log_every=10", "baselines=none",
                      f"tracking.uri=sqlite:///{store}", f"hydra.sweep.dir={tmp}/sweep"])
    got = {"raised": None}
except sweeper.SweepFailed as e:
    r = e.result
    got = {"raised": str(e), "status": r.status, "counts": r.counts, "parent": r.parent_run_id,
           "rows": len(r.leaderboard)}
one = sweeper.run(["model._target_=nets.Net", "+model.how=os._exit", "model.check=false", "epochs=20", "log_every=10",
                   f"tracking.uri=sqlite:///{store}", f"hydra.run.dir={tmp}/run"])
open(f"{tmp}/got.json", "w").write(json.dumps([got, {"run": one.status, "reason": one.reason}]))
"""


@pytest.mark.slow
def test_the_python_api_raises_one_error_for_a_failed_sweep_with_the_stores_status(
    user, tmp_path, store
):
    """Before: ``sweeper.multirun`` of such a model returned a result whose status was RUNNING and raised nothing;
    ``sweeper.run`` let SystemExit escape (os._exit ended the caller's process)."""
    proc = subprocess.run(
        [sys.executable, "-c", API_FAILED, str(store), str(tmp_path)],
        cwd=user,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    failed, one = json.loads((tmp_path / "got.json").read_text())
    (parent,) = [r for r in all_runs(store) if "n_jobs" in r.data.tags]
    assert (
        failed["raised"].startswith("the sweep failed (2 jobs, 2 failed;")
        and failed["parent"] == parent.info.run_id
    )
    assert failed["status"] == parent.info.status == "FINISHED" and failed["rows"] == 2
    assert failed["counts"] == {
        k: int(v) for k, v in parent.data.tags.items() if k.startswith("n_") and v.isdigit()
    }
    assert one["run"] == "FAILED" and one["reason"].startswith("os._exit(0) called (")


# --- finding 3: a predict that cannot be pickled ---------------------------------------------------------------


def test_a_trainers_predict_that_cannot_be_pickled_fails_its_run_in_one_line_and_keeps_its_metrics(
    user, tmp_path, store
):
    """Before: cloudpickle's TypeError left the job (in a sweep: Hydra's traceback, the parent and both runs RUNNING,
    the trained results lost)."""
    result = run_once(tmp_path, "model._target_=nets.fit_locked", *FAST, store=store)
    assert result["status"] == "FAILED"
    assert result["reason"].startswith(
        "its predict cannot be saved as the logged model: the variable 'lock' it closes "
        "over (a _thread.lock) cannot be pickled (TypeError: "
    )
    (run,) = all_runs(store)
    assert run.info.status == "FAILED" and run.data.tags["failure_reason"] == result["reason"]
    # what it trained is kept
    assert {"val_mse", "test_mse", "train_time_s"} <= set(run.data.metrics)
    assert not (tmp_path / "job" / "model").exists()


@pytest.mark.slow
def test_a_sweep_of_such_a_trainer_closes_its_parent_without_a_traceback(user, store):
    proc, runs = _sweep(user, store, "model._target_=nets.fit_locked", "lr=0.01,0.02")
    assert (
        proc.returncode == 1
        and "Traceback" not in proc.stdout + proc.stderr
        and "HYDRA_FULL_ERROR" not in proc.stderr
    )
    assert "RUNNING" not in {r.info.status for r in runs} and len(runs) == 3
    assert sum("the variable 'lock'" in r.data.tags.get("failure_reason", "") for r in runs) == 2


# --- finding 7: the Python API from threads, and what each call leaves open ------------------------------------

API_CALLS = r"""
import io, json, os, sys, threading
import psutil
import sweeper
store, tmp, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
args = ["epochs=1", "log_every=1", "baselines=none", "tracking.log_model=false", "tracking.system_metrics=false",
        f"tracking.uri=sqlite:///{store}"]
caller, sys.stdout = sys.stdout, io.StringIO()
out = {"threads": {}}

def two(name):
    try:
        out["threads"][name] = sweeper.multirun(["lr=0.01", *args, f"hydra.sweep.dir={tmp}/t{name}"]).status
    except BaseException as e:
        out["threads"][name] = f"{type(e).__name__}: {e}"

threads = [threading.Thread(target=two, args=(i,)) for i in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
me = psutil.Process()
fds, rss = [], []
for i in range(n):
    sys.stdout = io.StringIO()
    sweeper.multirun(["lr=0.01", *args, f"hydra.sweep.dir={tmp}/s{i}"])
    fds.append(me.num_fds())
    rss.append(me.memory_info().rss)
out |= {"fds": fds, "rss": rss, "locks": [f.path for f in me.open_files() if f.path.endswith(".sweep.lock")]}
sys.stdout = caller
print(json.dumps(out))
"""


def _calls(user: Path, tmp_path: Path, store: Path, n: int) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", API_CALLS, str(store), str(tmp_path), str(n)],
        cwd=user,
        capture_output=True,
        text=True,
        timeout=1800,
        env=command_env(),  # no figures drawn (conftest.NO_PLOTS): each call still logs its summary and advice files
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_api_calls_from_two_threads_run_one_after_another_and_each_call_lets_go_of_its_files(
    user, tmp_path, store
):
    """Before: the two threads' calls both failed (one with Hydra's AssertionError); every call kept its sweep folder's
    lock file open (13 → 32 fds over 20 calls), so the command line was refused 'in use by a live sweep'."""
    got = _calls(user, tmp_path, store, 10)
    assert got["threads"] == {"0": "FINISHED", "1": "FINISHED"}
    # the first call may open lasting files
    assert got["locks"] == [] and len(set(got["fds"][1:])) == 1, got["fds"]
    proc = cli(
        tmp_path,
        "-m",
        "lr=0.01",
        "epochs=1",
        "log_every=1",
        f"hydra.sweep.dir={tmp_path / 's9'}",
        store=store,
    )
    # (the caller's process has ended here; its lock is gone too)
    assert "in use by a live sweep" not in proc.stderr


@pytest.mark.slow
def test_fifty_api_calls_leave_file_descriptors_and_memory_flat(user, tmp_path, store):
    """50 calls, not the 100 the issue named: each costs ~2 s of a sweep's bookkeeping, and the suite's wall is kept
    under 15 minutes on 2 cores; a leak of a file or a lock a call shows from the second call on."""
    got = _calls(user, tmp_path, store, 50)
    assert got["locks"] == [] and len(set(got["fds"][1:])) == 1, got["fds"]
    # memory: the last 25 calls grow the process by less than a tenth of what the first 10 calls brought
    rss = got["rss"]
    assert rss[-1] - rss[24] < max(0.1 * (rss[9] - rss[0]), 8 << 20), [r >> 20 for r in rss]


def test_a_call_from_inside_a_call_is_refused_in_one_line():
    from sweeper import api
    from sweeper.base import state

    state.process().api_caller = threading.get_ident()
    try:
        with pytest.raises(
            RuntimeError,
            match=r"^sweeper.multirun/run was called while a sweep of this same thread ",
        ):
            with api._session([]):
                pass
    finally:
        state.process().api_caller = None


# --- finding 8: a model's memory, measured before it trains ---------------------------------------------------


def test_a_models_parameters_and_activations_are_measured_from_its_init_and_a_small_forward_pass(
    user, tmp_path
):
    from nets import Wide

    from sweeper.models.generic import footprint

    X = __import__("numpy").ones((4, 10))
    params, per_row = footprint(Wide(hidden=1000), 10, 1, X, 0, "float64")
    # W1 (10, 1000), W2 (1000, 1); a row: its 10 inputs, 1000 hidden units and 1 output, 8 bytes each
    assert params == (10 * 1000 + 1000) * 8 and per_row == (10 + 1000 + 1) * 8


def test_a_model_larger_than_the_memory_is_refused_in_one_line_before_it_trains(
    user, tmp_path, monkeypatch
):
    """Before: no estimate for a model of the interface (a class of 20 million hidden units trained on until the kernel
    killed the workers, four times). Here the machine is this process's memory limit, set low."""
    from conftest import make_cfg
    from sweeper import data
    from sweeper.base import process
    from sweeper.base.backend import resolve
    from sweeper.job import compute

    cfg = make_cfg("model._target_=nets.Wide", "+model.hidden=100000")
    monkeypatch.setattr(
        process,
        "memory_limit",
        lambda: (64 << 20, "this process's address-space limit (ulimit -v)"),
    )
    line = compute.memory_problem(cfg, data.load(cfg.data), resolve("cpu"))
    assert line is not None and "\n" not in line
    assert line.startswith(
        "model._target_=nets.Wide model.hidden=100000 dtype=float64 needs about "
    )
    assert line.endswith(
        "more than this process's address-space limit (ulimit -v) (0.1 GiB): expected smaller "
        "hyperparameters, a batch_size, or dtype=float32"
    )


def _low_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


@pytest.mark.slow
def test_a_sweep_of_a_model_too_large_for_the_memory_skips_it_in_one_line_and_trains_nothing(
    user, tmp_path, store
):
    """Under ``ulimit -v`` 4 GiB, 2 million hidden units (~12 GiB to train). Before: the group's workers and then the
    launching process trained on into MemoryError, a traceback each."""
    args = [
        sys.executable,
        "-m",
        "sweeper",
        "-m",
        NO_BASELINES,
        "model._target_=nets.Wide",
        "+model.hidden=2000000",
        "lr=0.01,0.02",
        *FAST,
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"tracking.uri=sqlite:///{store}",
    ]
    proc = subprocess.run(
        args, cwd=user, capture_output=True, text=True, timeout=600, preexec_fn=_low_memory
    )
    assert (
        "Traceback" not in proc.stdout + proc.stderr
        and "MemoryError" not in proc.stdout + proc.stderr
    )
    kids = [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]
    assert kids == []  # SKIPPED before a run was made
    skipped = [
        line for line in proc.stdout.splitlines() if "SKIPPED (model._target_=nets.Wide" in line
    ]
    assert len(skipped) == 2 and all(
        "more than this process's address-space limit (ulimit -v) (4.0 GiB)" in s for s in skipped
    )


@pytest.mark.slow
def test_a_worker_killed_for_memory_is_not_given_the_same_group_again(user, tmp_path, store):
    """The kernel's out-of-memory killer, as it shows: the worker ends by SIGKILL while the host's count of such kills
    rises (a counter file stands in for /proc/vmstat). Before: the group went to a new worker (killed again), then
    to the launching process."""
    counter, killed = tmp_path / "oom_kill", tmp_path / "killed"
    counter.write_text("0")
    env = {"SWEEPER_OOM_COUNTER": str(counter), "KILLED_LOG": str(killed)}
    proc, runs = _sweep(
        user,
        store,
        "model._target_=nets.Net",
        "+model.how=oom",
        "lr=0.01,0.02",
        "hydra.launcher.cpu_workers=2",
        env=env,
    )
    # one worker a group, none again
    assert len(killed.read_text().split()) == 2, proc.stdout[-3000:]
    kids = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(kids) == 2 and {r.info.status for r in kids} == {"FAILED"}
    assert all(
        r.data.tags["failure_reason"].startswith(
            "killed for memory: the kernel's out-of-memory killer ended its worker process"
        )
        for r in kids
    )


# --- finding 9: one line per failure ---------------------------------------------------------------------------


def test_a_models_error_is_one_line_with_the_users_file_and_line_and_its_traceback_is_an_artifact(
    user, tmp_path, store
):
    """Before: a single run re-raised it (Hydra's traceback); in a sweep each failed run printed a full traceback."""
    result = run_once(
        tmp_path, "model._target_=nets.Net", "+model.how=ValueError", *UNCHECKED, store=store
    )
    where = f"nets.py:{_line_of(user, 'the model gave up')} in end"
    assert result["status"] == "FAILED"
    assert re.fullmatch(rf"ValueError: the model gave up \((.*/)?{where}\)", result["reason"]), (
        result["reason"]
    )
    (run,) = all_runs(store)
    c = client_for(store)
    assert [a.path for a in c.list_artifacts(run.info.run_id)] == ["error.txt"]
    text = Path(c.download_artifacts(run.info.run_id, "error.txt", str(tmp_path))).read_text()
    assert text.startswith("Traceback (most recent call last)") and text.rstrip().endswith(
        "ValueError: the model gave up"
    )


def test_a_wrong_output_shape_is_named_as_the_check_names_it(user, tmp_path, store):
    """Before: ``forward`` giving (n,) instead of (n, 1) trained and FINISHED (its loss broadcast to (n, n)); (n, 2)
    failed at scoring with NumPy's 'operands could not be broadcast together'."""
    from nets import Flat

    from sweeper import check

    (said,) = [c.detail for c in check.run_checks(Flat, "nets.Flat", {}) if c.ok is False]
    # the check's words, for its 6 rows
    assert said == "forward gave out of shape (6,), expected (6, 1)"
    result = run_once(tmp_path, "model._target_=nets.Flat", *UNCHECKED, store=store)
    said = re.fullmatch(
        r"ModelError: Flat\.forward gave out of shape \((\d+),\), expected \((\d+), 1\) \(n_out=1: one "
        r"row per input row, one column per output; python -m sweeper.check names the same\)",
        result["reason"],
    )
    assert result["status"] == "FAILED" and said and said.group(1) == said.group(2), result[
        "reason"
    ]


@pytest.mark.slow
def test_after_kill_9_of_the_launching_process_its_workers_and_painter_end_quietly(
    user, tmp_path, store
):
    """Before: each worker trained its group to the end, then printed a BrokenPipeError traceback; the painter could
    outlive the sweep."""
    flag = tmp_path / "working"
    args = [
        sys.executable,
        "-m",
        "sweeper",
        "-m",
        NO_BASELINES,
        "model._target_=nets.Net",
        "+model.how=slow",
        "lr=0.01,0.02",
        "hydra.launcher.cpu_workers=2",
        *FAST,
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"tracking.uri=sqlite:///{store}",
    ]
    proc = subprocess.Popen(
        args,
        cwd=user,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "WORKING_FLAG": str(flag)},
    )
    deadline = time.monotonic() + 300
    while not flag.exists():  # a worker is inside the model's forward
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    # the pipes close once every process that held them has ended
    out, err = proc.communicate(timeout=60)
    deadline = time.monotonic() + 30
    # the painter: once it sees its parent gone
    while _in_session(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (
        _in_session(proc.pid) == [] and "Traceback" not in err and "BrokenPipeError" not in err
    ), err[-3000:]


def _in_session(sid: int) -> list[int]:
    """The live processes of session ``sid``: not a zombie, which has ended and waits only for its
    parent to read its status (an orphan's parent: init, or a child subreaper such as tests/tree_cpu.py)."""
    found = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and os.getsid(int(p.name)) == sid:
                state = (p / "stat").read_text().rpartition(")")[2].split()[0]
                if state != "Z":
                    found.append(int(p.name))
        except OSError:
            continue
    return found


def test_what_the_users_code_raised_is_said_one_way_by_its_one_owner(tmp_path, monkeypatch):
    """usercode.raised: the model's import, its constructor, the gradient check's steps and the stacked proof said
    '<what> raised <Type>: <line>' each with a formatter of its own (an empty message: 'Type: ', 'Type: Type', or
    'Type'); usercode.attempt is the one handler that turns the user's error into the caller's one line."""
    from sweeper.models.interface import ModelError, instantiate
    from sweeper.models.usercode import UserCodeError, attempt, raised

    assert (
        raised("init", RuntimeError("no weights\nsecond line"))
        == "init raised RuntimeError: no weights"
    )
    assert raised("forward", ValueError()) == "forward raised ValueError"
    exited = UserCodeError("SystemExit", "sys.exit(3) called (net.py:4 in __init__)", None, "")
    assert (
        raised("importing net", exited)
        == "importing net: sys.exit(3) called (net.py:4 in __init__)"
    )

    def refuses(**kw):
        raise KeyError(sorted(kw))

    with pytest.raises(ModelError) as e:
        attempt(ModelError, "Net(k=1)", refuses, k=1)
    assert str(e.value) == "Net(k=1) raised KeyError: ['k']"
    assert e.value.__suppress_context__  # one line: the user's traceback is not the caller's
    assert attempt(ModelError, "Net()", lambda: 7) == 7
    user_folder(tmp_path, monkeypatch, {"refusing.py": REFUSING})
    with pytest.raises(ModelError) as e:  # the constructor's empty message: its type alone
        instantiate({"_target_": "refusing.Net", "width": 3})
    assert str(e.value) == "refusing.Net(width=3) raised ValueError"


REFUSING = """
class Net:
    def __init__(self, width=1):
        raise ValueError()

    def init(self, n_in, n_out, rng):
        return {}

    def forward(self, xp, params, X):
        return X, None

    def backward(self, xp, params, cache, dout):
        return {}
"""
