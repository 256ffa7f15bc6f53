"""The suite's ``python -m sweeper`` forked past its imports (tests/forked_cli.py) behaves as a fresh interpreter:
the same exit status, output and errors, the test's working folder and environment seen, a user's module found in
that folder."""

from __future__ import annotations

import subprocess
import sys

import forked_cli
import pytest
from conftest import _ZYGOTE, cli, command


def fresh(tmp_path, *args, module="sweeper"):
    """The same command in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=tmp_path, capture_output=True, text=True
    )


def forked(tmp_path, *args, module="sweeper"):
    import os

    return _ZYGOTE.run(list(args), tmp_path, dict(os.environ), timeout=300, module=module)


def same(a: subprocess.CompletedProcess, b: subprocess.CompletedProcess) -> None:
    assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)


def test_a_refused_value_is_the_same_one_line_and_exit(tmp_path):
    got = forked(tmp_path, "lr=abc")
    assert got.returncode == 2 and got.stderr.startswith("sweeper: error: lr=abc")
    same(got, fresh(tmp_path, "lr=abc"))


def test_help_is_the_same(tmp_path):
    got = forked(tmp_path, "--help")
    assert got.returncode == 0 and "lr" in got.stdout
    same(got, fresh(tmp_path, "--help"))


def test_the_environment_at_the_call_is_the_one_the_run_reads(tmp_path, monkeypatch):
    monkeypatch.setenv("SWEEPER_THREADS", "two")  # set after the zygote imported everything
    got = forked(tmp_path, "lr=0.1")
    assert got.returncode == 2 and "SWEEPER_THREADS=two" in got.stderr, got.stderr
    same(got, fresh(tmp_path, "lr=0.1"))


def test_a_module_in_the_working_folder_is_imported_from_there(tmp_path):
    (tmp_path / "mine.py").write_text("raise SystemExit('imported from the working folder')\n")
    got = forked(tmp_path, "model._target_=mine.Net")
    assert got.returncode != 0 and "imported from the working folder" in got.stderr, got.stderr
    same(got, fresh(tmp_path, "model._target_=mine.Net"))


def test_a_run_trains_and_records_in_its_own_folder(tmp_path, store):
    proc = cli(tmp_path, "epochs=5", store=store)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "run").is_dir()  # Hydra's run folder, under the test's folder (its cwd)


def test_fresh_interpreters_on_request(tmp_path, monkeypatch):
    monkeypatch.setenv(forked_cli.FRESH, "1")
    calls = []
    monkeypatch.setattr(_ZYGOTE, "run", lambda *a, **k: calls.append(a))
    assert cli(tmp_path, "lr=abc").returncode == 2 and calls == []


@pytest.mark.parametrize(
    "module, args, code",
    [
        ("sweeper.report", ["--experiment", "nope", "--tracking-uri", "sqlite:///no.db"], 2),
        ("sweeper.advise", ["--help"], 0),
        ("sweeper.runs", ["--tracking-uri", "sqlite:///no.db", "--state", "sideways"], 2),
        ("sweeper.summary", ["no-such-folder"], 2),
        ("sweeper.promote", ["--experiment", "nope", "--tracking-uri", "sqlite:///no.db"], 2),
    ],
)
def test_any_command_of_the_package_is_the_same_forked(tmp_path, module, args, code):
    """``python -m sweeper.X`` forked (conftest.command) as in a fresh interpreter: the module run as __main__
    (its own exit, output and errors: a relative store or folder found from the working folder), not the
    package's."""
    got = forked(tmp_path, *args, module=module)
    assert got.returncode == code and got.args[2] == module, got.stderr
    assert "Traceback" not in got.stderr and (got.stdout if code == 0 else got.stderr), got
    same(got, fresh(tmp_path, *args, module=module))


def test_a_command_runs_in_the_folder_given_and_fresh_with_an_env_of_its_own(tmp_path, monkeypatch):
    (tmp_path / "mine.py").write_text("")
    got = command("sweeper.summary", "mine.py", cwd=tmp_path)  # a file, found from the folder given
    same(got, fresh(tmp_path, "mine.py", module="sweeper.summary"))
    calls = []
    monkeypatch.setattr(_ZYGOTE, "run", lambda *a, **k: calls.append(a))
    assert command("sweeper.summary", "--help", env={"X_OF_MINE": "1"}).returncode == 0
    assert calls == []


def test_a_run_given_sweepers_own_variables_is_forked_and_the_same(tmp_path, monkeypatch):
    """``cli(..., env={"SWEEPER_...": ...})`` forks (no import read the variable) and the run sees it."""
    calls = []
    run = _ZYGOTE.run
    monkeypatch.setattr(_ZYGOTE, "run", lambda *a, **k: calls.append(a) or run(*a, **k))
    got = cli(tmp_path, "lr=0.1", env={"SWEEPER_THREADS": "two"})
    assert len(calls) == 1 and got.returncode == 2 and "SWEEPER_THREADS=two" in got.stderr
    monkeypatch.setenv("SWEEPER_THREADS", "two")
    same(got, fresh(tmp_path, "lr=0.1", f"hydra.run.dir={tmp_path / 'run'}"))


def test_a_variable_an_import_read_or_not_sweepers_own_is_a_fresh_interpreter(monkeypatch):
    assert _ZYGOTE.forks({"SWEEPER_THREADS": "1", "SWEEPER_CACHE_DIR": "/x"})
    assert not _ZYGOTE.forks({"PYTHONPATH": "/x"}) and not _ZYGOTE.forks({"OMP_NUM_THREADS": "1"})
    monkeypatch.setattr(_ZYGOTE, "read", _ZYGOTE.read | {"SWEEPER_THREADS"})
    assert not _ZYGOTE.forks({"SWEEPER_THREADS": "1"})
    monkeypatch.setattr(_ZYGOTE, "read", _ZYGOTE.read | {"*"})  # an import went through them all
    assert not _ZYGOTE.forks({"SWEEPER_CACHE_DIR": "/x"})


def test_the_zygote_records_the_variables_its_imports_read(monkeypatch):
    import os

    def imports():
        os.environ.get("SWEEPER_READ_AT_IMPORT")
        assert "SWEEPER_ASKED" not in os.environ
        return dict(os.environ)  # every variable

    monkeypatch.setattr(forked_cli, "_preload", imports)
    monkeypatch.setattr(forked_cli._Recording, "read", set())
    read = forked_cli._preload_recording()
    assert {"SWEEPER_READ_AT_IMPORT", "SWEEPER_ASKED", "*"} <= set(read)
    assert type(os.environ) is os._Environ  # put back
