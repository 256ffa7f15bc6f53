"""The Python API: ``sweeper.multirun([...])`` and ``sweeper.run([...])`` leave what the command line leaves.

The sweeps run in one child process (as a notebook's kernel would run them: twice, then a search, then a refused
sweep, then a single run), whose stdout is replaced the way a kernel replaces it; the equivalent command line runs
beside it into a store of its own.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys

import pytest

import sweeper
from conftest import NO_BASELINES, all_runs, cli, client_for, copy_store

FAST = ("epochs=300", "log_every=10")
GRID = ("lr=0.001,0.005", *FAST, NO_BASELINES)

SCRIPT = r"""
import io, json, sys
from pathlib import Path
import sweeper

store, tmp = sys.argv[1], Path(sys.argv[2])
uri = f"tracking.uri=sqlite:///{store}"
caller, sys.stdout = sys.stdout, io.StringIO()  # a notebook's cell output: not the process's own stdout
out = {}

def sweep(name, *overrides):
    r = sweeper.multirun([*overrides, uri, f"hydra.sweep.dir={tmp / name}"])
    out[name] = {"frame": isinstance(r.leaderboard, __import__("pandas").DataFrame),
                 "leaderboard": r.leaderboard.to_dict("records"), "columns": list(r.leaderboard.columns),
                 "parent": r.parent_run_id, "status": r.status, "exit_code": r.exit_code, "best": r.best_run_id,
                 "model": r.best_model_uri, "next": r.advice.next_overrides, "command": r.advice.command,
                 "advice": r.advice.text, "sweep_dir": str(r.sweep_dir)}
    return r

first = sweep("a", *json.loads(sys.argv[3]))
second = sweep("b", *json.loads(sys.argv[3]), "hydra/launcher=basic")  # another launcher: one job at a time
model = first.load_best_model()
import pandas as pd
X = pd.DataFrame([[0.0] * 10, [0.01] * 10], columns=model.metadata.get_input_schema().input_names())  # diabetes
out["predicted"] = [float(v) for v in __import__("numpy").asarray(model.predict(X)).ravel()]
sweep("optuna", "+sweep=optuna", "baselines=none", "hydra.sweeper.n_trials=2", "hydra.sweeper.batch=2", "depth=1", "width=8",
      "epochs=200", "log_every=20")
try:
    sweeper.multirun(["data.test_fraction=0.2,0.95", uri, f"hydra.sweep.dir={tmp / 'refused'}"])
except ValueError as e:
    out["refused"] = [type(e).__name__, str(e)]
one = sweeper.run(["depth=0", "epochs=300", "log_every=10", uri, f"hydra.run.dir={tmp / 'run'}"])
out["run"] = {"run_id": one.run_id, "status": one.status, "metrics": one.metrics, "model": one.model_uri}
text, sys.stdout = sys.stdout.getvalue(), caller
out["stdout"] = text
(tmp / "out.json").write_text(json.dumps(out))
"""


@pytest.fixture(scope="module")
def both(tmp_path_factory, _template_store):
    """The API's sweeps (child process) and the command line's sweep, each into its own store."""
    tmp = tmp_path_factory.mktemp("api")
    api_store, cli_store = (
        copy_store(_template_store, tmp / "api"),
        copy_store(_template_store, tmp / "cli"),
    )
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(api_store), str(tmp), json.dumps(GRID)],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = cli(tmp / "cli", "-m", *GRID, store=cli_store)
    assert line.returncode == 0, line.stderr
    return json.loads((tmp / "out.json").read_text()), proc, api_store, cli_store


def _children(store, parent):
    return {
        r.info.run_id: r for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId") == parent
    }


def _by_fingerprint(store, parent):
    """fingerprint → the run's validation and test metrics, for one parent's children."""
    return {
        r.data.tags["fingerprint"]: {
            k: v for k, v in r.data.metrics.items() if k.startswith(("val_", "test_"))
        }
        for r in _children(store, parent).values()
    }


@pytest.mark.slow
def test_multirun_twice_in_one_process_gives_two_parents_and_the_command_lines_leaderboard(both):
    out, proc, api_store, cli_store = both
    (cli_parent,) = [r for r in all_runs(cli_store) if "mlflow.parentRunId" not in r.data.tags]
    with open(client_for(cli_store).download_artifacts(cli_parent.info.run_id, "summary.csv")) as f:
        cli_board = list(csv.DictReader(f))
    expected = _by_fingerprint(cli_store, cli_parent.info.run_id)
    assert len(expected) == 2
    for name in ("a", "b"):
        got = out[name]
        assert got["frame"] and got["status"] == "FINISHED" and got["exit_code"] == 0
        assert got["columns"] == list(cli_board[0])  # summary.csv's columns, its rows in its order
        assert [r["run"] for r in got["leaderboard"]] == [r["run"] for r in cli_board]
        assert [r["lr"] for r in got["leaderboard"]] == [float(r["lr"]) for r in cli_board]
        kids = _children(api_store, got["parent"])
        assert len(kids) == 2 and all(k.info.status == "FINISHED" for k in kids.values())
        assert {r["run_id"] for r in got["leaderboard"]} == set(kids)
        mine = _by_fingerprint(api_store, got["parent"])
        assert mine.keys() == expected.keys()  # the same configurations
        for fp, metrics in expected.items():
            assert metrics.keys() == mine[fp].keys()
            assert all(
                math.isclose(mine[fp][k], v, rel_tol=1e-12, abs_tol=1e-12)
                for k, v in metrics.items()
            )
        for row in got["leaderboard"]:  # the frame's numbers are the store's
            kid = kids[row["run_id"]]
            assert math.isclose(row["val_mse"], kid.data.metrics["val_mse"], rel_tol=1e-12)
        tags = client_for(api_store).get_run(got["parent"]).data.tags
        # the UI's Source
        assert tags["sweep_from"] == "python" and tags["mlflow.source.name"] == "sweeper.multirun"
        assert (
            tags["sweeper.rerun"].startswith("sweeper.multirun([")
            and "'lr=0.001,0.005', 'epochs=300'" in tags["sweeper.rerun"]
        )
        names = [a.path for a in client_for(api_store).list_artifacts(got["parent"])]
        assert {"summary.csv", "summary.md", "advice.md"} <= set(names)
        assert got["best"] == got["leaderboard"][0]["run_id"] and got["model"].startswith(
            "models:/m-"
        )
        assert got["next"][-1] == "resume=true" and "lr=0.001,0.005,0.025,0.12" in got["next"]
        # the advice speaks the caller's language
        assert got["command"] == f"sweeper.multirun({got['next']!r})"
        assert (
            f"Next command (4 configurations: 2 finished already, reused; 2 to train):\n  {got['command']}"
            in out["stdout"]
        )
        assert "# Sweep advice" in got["advice"]
    assert out["a"]["parent"] != out["b"]["parent"]
    assert len(out["predicted"]) == 2 and all(math.isfinite(v) for v in out["predicted"])


@pytest.mark.slow
def test_progress_goes_to_the_callers_stdout(both):
    out, proc, *_ = both
    text = out["stdout"]  # the two grids and the search
    assert text.count("2 of 2 jobs reported") == 3 and "[1/2]  lr=0.001" in text and "[2/2]" in text
    assert "Advice: " in text and f"parent run {out['a']['parent']}" in text
    assert "jobs reported" not in proc.stdout  # nothing of it went around the caller's stream


@pytest.mark.slow
def test_an_optuna_search_and_a_single_run_in_the_same_process(both):
    out, _, api_store, _ = both
    search = out["optuna"]
    kids = _children(api_store, search["parent"])
    assert search["status"] == "FINISHED" and len(kids) == 2
    assert all("optuna.trial_number" in k.data.tags for k in kids.values())
    assert search["next"] is None  # a search sweeper chose the values: no next command
    run = out["run"]
    (mine,) = [r for r in all_runs(api_store) if r.info.run_id == run["run_id"]]
    assert run["status"] == "FINISHED" and "mlflow.parentRunId" not in mine.data.tags
    assert run["metrics"]["val_mse"] == mine.data.metrics["val_mse"] and run["model"].startswith(
        "models:/m-"
    )


@pytest.mark.slow
def test_a_value_refused_once_hydra_composed_raises_value_error_and_writes_no_run(both, tmp_path):
    out, proc, api_store, _ = both
    kind, message = out["refused"]
    assert kind == "ConfigError" and message.startswith(
        "data.val_fraction+data.test_fraction=1.15 is not allowed"
    )
    assert not any("refused" in (r.data.tags.get("sweep_dir") or "") for r in all_runs(api_store))


REFUSED = [["lr=-1"], ["depth=1,-1"], ["data=nope"], ["activation=foo"], ["lr=abc"]]


@pytest.mark.parametrize("overrides", REFUSED, ids=" ".join)
def test_a_bad_override_raises_value_error_with_the_command_lines_message(tmp_path, overrides):
    with pytest.raises(ValueError) as refused:  # not SystemExit: a notebook's kernel lives on
        sweeper.multirun(overrides)
    proc = cli(tmp_path, "-m", *overrides)
    (line,) = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and line == f"sweeper: error: {refused.value}"
    assert not (tmp_path / "sweep").exists()


def test_python_only_input_is_refused_in_one_line():
    with pytest.raises(
        ValueError, match=r"^overrides='lr=0.1 depth=2' is not allowed: expected a list"
    ):
        sweeper.multirun("lr=0.1 depth=2")
    with pytest.raises(ValueError, match=r"^-m is not allowed here"):
        sweeper.multirun(["-m", "lr=0.1"])
    with pytest.raises(
        ValueError, match=r"^lr=0.1,0.2 is a sweep: sweeper.run trains one configuration"
    ):
        sweeper.run(["lr=0.1,0.2"])


def test_a_next_command_reads_back_as_overrides_in_either_form():
    from sweeper.api import next_overrides
    from sweeper.base.fmt import python_call, resume_command

    args = ["lr=0.001,0.005,0.025", "data=csv", "data.path=my file.csv", "resume=false"]
    expected = ["lr=0.001,0.005,0.025", "data=csv", "data.path=my file.csv", "resume=true"]
    assert next_overrides(python_call(args)) == expected
    assert next_overrides(resume_command(["-m", *args])) == expected
    assert python_call(args) == f"sweeper.multirun({expected!r})"
    assert next_overrides(None) is None and next_overrides("python -m sweeper.report") is None


INTERRUPTED = r"""
import signal, sys
import sweeper
tmp, uri = sys.argv[1], f"tracking.uri=sqlite:///{sys.argv[2]}"
try:
    sweeper.multirun(["lr=0.001,0.002,0.003", "epochs=200000", "log_every=100", "hydra/launcher=basic", "baselines=none",
                      f"hydra.sweep.dir={tmp}/sweep", uri])
except KeyboardInterrupt:
    print("KeyboardInterrupt raised; the caller's handler is back:", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
again = sweeper.multirun(["lr=0.001", "epochs=300", "log_every=10", "baselines=none", f"hydra.sweep.dir={tmp}/again", uri])
print("again", again.status, again.counts["n_finished"])
"""


@pytest.mark.slow
def test_ctrl_c_closes_the_sweep_raises_keyboard_interrupt_and_the_next_call_works(tmp_path, store):
    import signal
    import time

    proc = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED, str(tmp_path), str(store)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    ready, deadline = (
        tmp_path / "sweep" / "0" / "config_resolved.yaml",
        time.monotonic() + 120,
    )  # the first job trains
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert (
        "KeyboardInterrupt raised; the caller's handler is back: True" in out
        and "again FINISHED 1" in out
    )
    assert "sweeper: interrupted: 0 finished, 1 killed, 2 not run; resume with: " in err
    first = [r for r in all_runs(store) if str(tmp_path / "sweep") == r.data.tags.get("sweep_dir")]
    assert [r.info.status for r in first] == ["KILLED"]
    (killed,) = [
        r for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId") == first[0].info.run_id
    ]
    assert (
        killed.info.status == "KILLED"
        and killed.data.tags["failure_reason"] == "interrupted (Ctrl-C)"
    )


def test_a_sweeps_state_is_one_object_and_reset_begins_a_fresh_one(tmp_path):
    """The writer, painter, store clients, experiments, runs and parents of a sweep live in one object
    (sweeper.base.state); reset(), before each sweep of the API, stops its processes and begins a fresh one."""
    from sweeper import tracking
    from sweeper.api import reset
    from sweeper.base import state

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    # creates the store (not kept: a new store's client is made under its lock)
    tracking.client(uri)
    c = tracking.client(uri)
    now = state.current()
    assert now.clients[uri] is c
    experiment = tracking.experiment_id(c, "e", uri, in_sweep=True)
    assert now.experiments[(uri, "e")] == experiment
    run_id = tracking.start_run(c, experiment, "r", {})
    assert now.runs[run_id][1] == experiment
    reset()
    fresh = state.current()
    assert fresh is not now and (fresh.clients, fresh.experiments, fresh.runs, fresh.parents) == (
        {},
        {},
        {},
        {},
    )
    assert fresh.writer is None and fresh.painter is None
    assert (
        tracking.client(uri) is not c
        and tracking.experiment_id(c, "e", uri, in_sweep=True) == experiment
    )
    # the earlier sweep's object is untouched: nothing of it leaks into the next
    assert now.clients[uri] is c


def test_a_sweeps_idle_painter_is_kept_for_the_next_sweep_and_a_busy_one_is_closed(monkeypatch):
    """The Python API's next call takes the painter the last sweep left idle (its imports paid); a painter with a
    request unanswered is closed instead, or its answer would be read as the next sweep's."""
    from sweeper.base import state
    from sweeper.insight import plots

    monkeypatch.setattr(state.process(), "spare_painter", None)
    state.begin()
    plots.start(None)
    first = plots.current()
    try:
        assert first is not None and first.idle()
        plots.stop(keep=True)
        assert state.process().spare_painter is first and plots.current() is None
        plots.start(None)
        assert plots.current() is first and state.process().spare_painter is None
        first.fitting = {
            "nodes": [],
            "asked": "auto",
        }  # as if its baselines' answer were never read
        plots.stop(keep=True)
        assert state.process().spare_painter is None and first.proc is None
    finally:
        first.close()
        state.begin()
