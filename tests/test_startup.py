"""Start-up cost: what answers without training imports nothing heavy.

``import mlflow`` alone costs ~2 s here (it pulls in pandas, SQLAlchemy, FastAPI, ...). ``--help`` and a
refused value must answer without it, and without matplotlib or scikit-learn: each command below runs
for real in ``python -X importtime``, whose stderr names every module the process imported (those
imported by a thread included).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

HEAVY = ("mlflow", "matplotlib", "sklearn", "pandas", "sqlalchemy")

HELP = [
    "sweeper",
    "sweeper.promote",
    "sweeper.report",
    "sweeper.compare",
    "sweeper.summary",
    "sweeper.upload",
    "sweeper.runs",
]
REFUSED = {  # arguments → what the one error line names
    "a bad value": (["lr=-1"], "lr=-1 is not allowed"),
    "a bad value in a sweep": (["-m", "lr=0.1,-1"], "lr=-1 is not allowed"),
    # refused after Hydra composed the config: in the job (one run) and in the callback (a multirun)
    "a bad data key": (["data.name=nope"], "data.name=nope is not allowed"),
    "a bad data value in a sweep": (["-m", "data.test_fraction=0.2,0.95"], "is not allowed"),
}


def imported(tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``python -X importtime ARGS`` in ``tmp_path``; its result and the top-level packages it imported."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    packages = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    # the parse saw the imports
    assert "sys" not in packages and "sweeper" in packages, proc.stderr[-2000:]
    proc.stderr = "\n".join(
        line for line in proc.stderr.splitlines() if not line.startswith("import time:")
    )
    return proc, packages


@pytest.mark.parametrize("module", HELP)
def test_help_imports_nothing_heavy(tmp_path, module):
    proc, packages = imported(tmp_path, "-m", module, "--help")
    assert proc.returncode == 0, proc.stderr
    # sweeper: our own help; --hydra-help is Hydra's
    assert "usage: python -m " + module in proc.stdout
    assert not packages & set(HEAVY), (
        f"python -m {module} --help imported {sorted(packages & set(HEAVY))}"
    )


@pytest.mark.parametrize("case", REFUSED)
def test_a_refused_value_imports_nothing_heavy(tmp_path, case):
    args, message = REFUSED[case]
    proc, packages = imported(
        tmp_path,
        "-m",
        "sweeper",
        *args,
        f"hydra.run.dir={tmp_path / 'run'}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"tracking.uri=sqlite:///{tmp_path / 'x.db'}",
    )
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("sweeper: error: ") and message in line
    assert not packages & set(HEAVY), (
        f"python -m sweeper {' '.join(args)} imported {sorted(packages & set(HEAVY))}"
    )
    assert not (tmp_path / "x.db").exists()


def test_unreachable_names_what_a_failing_store_raises_without_importing_mlflow(tmp_path):
    """``except tracking.UNREACHABLE`` holds the classes whose modules are loaded: nothing else can be raised."""
    code = """if True:
        import sys
        from sweeper import tracking
        names = lambda: sorted(c.__name__ for c in tracking.UNREACHABLE)
        print(names(), "mlflow" in sys.modules)
        import mlflow
        print(names())
        import sqlalchemy.exc
        print(names(), "UNREACHABLE" in vars(tracking))"""
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        proc.stdout.splitlines()
        == [
            "['OSError'] False",
            "['MlflowException', 'OSError', 'RequestException']",
            "['MlflowException', 'OSError', 'RequestException', 'SQLAlchemyError'] True",  # complete: kept
        ]
    )


EXITS = r"""
import atexit, sys, threading, time
from pathlib import Path
from sweeper import main_exit
out = Path(sys.argv[1])
def late():
    time.sleep(0.2)
    out.with_suffix(".thread").write_text("joined")
def fn():
    atexit.register(lambda: out.with_suffix(".atexit").write_text("ran"))
    threading.Thread(target=late).start()
    import concurrent.futures  # its idle worker thread stops in threading's exit hooks (as loky's, joblib's)
    global pool  # kept: a collected executor would stop its thread by itself
    pool = concurrent.futures.ThreadPoolExecutor(1)
    pool.submit(int)
    print("buffered, not flushed", end="")
    {action}
main_exit(fn)
"""


@pytest.mark.parametrize(
    "action,code,stderr",
    [
        ("return 3", 3, ""),
        ("sys.exit(4)", 4, ""),
        ("return None", 0, ""),
        ("sys.exit('no such run')", 1, "no such run"),
    ],
)
def test_a_command_ends_fast_but_as_sys_exit_would(tmp_path, action, code, stderr):
    """main_exit skips the interpreter's teardown (0.6-1.1 s after MLflow) and nothing else: the exit code,
    a message given to sys.exit, non-daemon threads, atexit handlers and unflushed output all survive."""
    proc = subprocess.run(
        [sys.executable, "-c", EXITS.replace("{action}", action), str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=60,
    )  # a hang (a worker thread never told) fails
    assert (
        proc.returncode == code
        and proc.stdout == "buffered, not flushed"
        and proc.stderr.strip() == stderr
    )
    assert (tmp_path / "x.thread").read_text() == "joined" and (
        tmp_path / "x.atexit"
    ).read_text() == "ran"


def test_a_profiled_command_still_writes_its_profile(tmp_path):
    """``python -m cProfile -o F -m sweeper.runs``: the profiler writes F in Python's own exit."""
    out = tmp_path / "prof.out"
    proc = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "sweeper.runs", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 0 and out.stat().st_size > 0, proc.stderr


def test_settled_keeps_the_collector_off_during_an_import_and_off_its_objects_after():
    import gc

    from sweeper import settled

    before = gc.get_freeze_count()
    try:
        with settled():
            assert not gc.isenabled()
            kept = [[i] for i in range(1000)]  # what an import leaves alive
        assert gc.isenabled() and gc.get_freeze_count() >= before + len(kept)
    finally:
        gc.unfreeze()


def test_the_python_api_is_an_attribute_that_imports_nothing_heavy(tmp_path):
    """``import sweeper`` and ``sweeper.multirun`` (a lazy attribute: sweeper.api) import no MLflow, pandas, ...:
    they come with the first call."""
    proc, packages = imported(
        tmp_path, "-c", "import sweeper; print(sweeper.multirun.__module__, sweeper.run.__name__)"
    )
    assert proc.returncode == 0 and proc.stdout.split() == ["sweeper.api", "run"], proc.stderr
    assert not packages & {*HEAVY, "hydra"}, sorted(packages & {*HEAVY, "hydra"})
