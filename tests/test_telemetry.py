"""MLflow's telemetry is off in sweeper's processes unless the user turns it on (issue 55, finding 6).

MLflow 3.17 writes an installation id to ``~/.config/mlflow/telemetry.json`` (and sends usage events) from any process
that imports it, unless ``MLFLOW_DISABLE_TELEMETRY`` or ``DO_NOT_TRACK`` is true, or it sees a CI or test environment
(``PYTEST_CURRENT_TEST``, ``CI``, ...): the processes here run without those markers, with a temporary HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import sweeper

# The variables MLflow reads as "a CI or test run, no telemetry" (mlflow/telemetry/utils.py), and its own switches.
QUIET_MARKERS = (
    "PYTEST_CURRENT_TEST",
    "GITHUB_ACTIONS",
    "CI",
    "CIRCLECI",
    "GITLAB_CI",
    "JENKINS_URL",
    "TRAVIS",
    "TF_BUILD",
    "BITBUCKET_BUILD_NUMBER",
    "CODEBUILD_BUILD_ARN",
    "BUILDKITE",
    "TEAMCITY_VERSION",
    "CLOUD_RUN_EXECUTION",
    "RUNBOT_HOST_URL",
    "RUNBOT_BUILD_NAME",
    "RUNBOT_WORKER_ID",
    "MLFLOW_DISABLE_TELEMETRY",
    "DO_NOT_TRACK",
    "XDG_CONFIG_HOME",
)


def _user_env(home: Path, **extra: str) -> dict[str, str]:
    """A user's environment: no CI or test marker, no telemetry switch, HOME a temporary folder."""
    env = {k: v for k, v in os.environ.items() if k not in QUIET_MARKERS}
    return {**env, "HOME": str(home), **extra}


def _telemetry_file(home: Path) -> Path:
    return home / ".config" / "mlflow" / "telemetry.json"


def test_a_program_that_imports_sweeper_has_mlflow_telemetry_off(tmp_path, store):
    """Before: ``import sweeper`` then a client of a store wrote ~/.config/mlflow/telemetry.json (an installation id)."""
    code = (
        "import os, sweeper, mlflow; c = mlflow.MlflowClient(os.environ['STORE']); c.search_experiments(); "
        "from mlflow.telemetry import get_telemetry_client; print('client', get_telemetry_client())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=_user_env(tmp_path, STORE=f"sqlite:///{store}"),
    )
    assert out.returncode == 0, out.stderr
    assert "client None" in out.stdout, out.stdout
    assert not _telemetry_file(tmp_path).exists()


def test_a_user_who_sets_either_switch_keeps_it():
    """Sweeper only fills in what the user left unset: DO_NOT_TRACK=false (or MLFLOW_DISABLE_TELEMETRY=false) stays."""
    code = "import os, sweeper; print(os.environ.get('MLFLOW_DISABLE_TELEMETRY'), os.environ.get('DO_NOT_TRACK'))"
    env = {k: v for k, v in os.environ.items() if k not in QUIET_MARKERS}
    answers = {}
    for extra in ({}, {"DO_NOT_TRACK": "false"}, {"MLFLOW_DISABLE_TELEMETRY": "false"}):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            env={**env, **extra},
            cwd=sweeper.ROOT,
        )
        answers[tuple(extra)] = out.stdout.split()
    assert answers[()] == ["true", "None"]
    assert answers[("DO_NOT_TRACK",)] == ["None", "false"]
    assert answers[("MLFLOW_DISABLE_TELEMETRY",)] == ["false", "None"]


@pytest.mark.slow
def test_a_sweep_writes_no_telemetry_file(tmp_path):
    """A real sweep (the launching process, its CPU workers, the writer) leaves no telemetry.json in HOME."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweeper",
            "-m",
            "lr=0.01,0.02",
            "epochs=20",
            "log_every=10",
            f"tracking.uri=sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
            "baselines=none",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=_user_env(tmp_path),
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert not _telemetry_file(tmp_path).exists()
