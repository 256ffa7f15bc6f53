"""``hydra/launcher=batched`` as a Hydra plugin: Hydra's own launcher suites, discovery in a fresh interpreter
(editable and regular installs), a user's own app with configs sweeper never sees, no side effects at import."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from hydra.test_utils.launcher_common_tests import (
    BatchedSweeperTestSuite,
    IntegrationTestSuite,
    LauncherTestSuite,
)

import sweeper

DISCOVER = """
import sys
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
found = {p.__name__: sys.modules[p.__module__].__file__ for p in Plugins.instance().discover(Launcher)}
print(found["BatchedLauncher"])
print(sorted(m for m in sys.modules if m == "sweeper" or m.startswith("sweeper.")))
"""


def _discover(cwd: Path, *args: str, env: dict | None = None) -> tuple[str, str]:
    proc = subprocess.run(
        [sys.executable, *args, "-c", DISCOVER], cwd=cwd, capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    where, imported = proc.stdout.splitlines()
    return where, imported


def test_hydra_discovers_the_launcher_in_a_fresh_interpreter_without_importing_sweeper(tmp_path):
    where, imported = _discover(tmp_path)
    assert Path(where).is_relative_to(sweeper.ROOT / "plugins" / "hydra_plugins"), where
    assert imported == "[]"


def test_hydra_discovers_every_plugin_folder_of_the_checkout(tmp_path):
    """Any package under plugins/hydra_plugins/ is in the install (the package list is computed), and found."""
    built = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path / "site")],
        cwd=sweeper.ROOT,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    plugins = {
        p.parent.name for p in (sweeper.ROOT / "plugins" / "hydra_plugins").glob("*/__init__.py")
    }
    assert "sweeper_batched_launcher" in plugins
    assert {
        p.parent.name for p in (tmp_path / "site" / "hydra_plugins").glob("*/__init__.py")
    } == plugins
    # a namespace shared with others
    assert not (tmp_path / "site" / "hydra_plugins" / "__init__.py").exists()


def test_hydra_discovers_the_launcher_after_a_regular_install(tmp_path):
    """What a wheel holds (setuptools' build_py from setup.py and pyproject.toml), on the path of an interpreter
    that has no editable finder (``-S``: no .pth files) and only the dependencies' site-packages beside it."""
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(site)],
        cwd=sweeper.ROOT,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    env = {"PYTHONPATH": f"{site}:{sysconfig.get_paths()['purelib']}", "PATH": "/usr/bin:/bin"}
    where, imported = _discover(tmp_path, "-S", env=env)
    assert Path(where).is_relative_to(site), where
    assert imported == "[]"


@pytest.fixture(autouse=True)
def _hydras_version_base_unset():
    """Hydra's suites expect a process whose version base nobody set (their jobs change directory, Hydra 1.1's
    default); the other tests' ``initialize_config_dir(version_base="1.3")`` leave it set in this process."""
    from hydra.core.singleton import Singleton
    from hydra.version import VersionBase

    saved = Singleton._instances.pop(VersionBase, None)
    yield
    Singleton._instances.pop(VersionBase, None)
    if saved is not None:
        Singleton._instances[VersionBase] = saved


@pytest.mark.parametrize("launcher_name, overrides", [("batched", [])])
class TestBatchedLauncher(LauncherTestSuite):
    """Hydra's launcher suite (its own test apps and configs: not sweeper configurations)."""


@pytest.mark.parametrize(
    "launcher_name, overrides", [("batched", ["hydra.sweeper.max_batch_size=2"])]
)
class TestBatchedLauncherWithBatches(BatchedSweeperTestSuite):
    """Hydra's suite for a sweeper that launches in batches: job numbers continue across launches."""


@pytest.mark.slow
@pytest.mark.parametrize(
    "task_launcher_cfg, extra_flags",
    [
        (
            {},
            [
                "-m",
                "hydra/job_logging=hydra_debug",
                "hydra/job_logging=disabled",
                "hydra/launcher=batched",
            ],
        )
    ],
)
class TestBatchedLauncherIntegration(IntegrationTestSuite):
    """Hydra's integration suite: its test apps run as scripts in fresh interpreters, which find the plugin."""


IMPORTS = """
import logging, os
import mlflow
before = (dict(os.environ), logging.getLogger("mlflow").level, logging.getLogger("alembic").level)
import hydra_plugins.sweeper_batched_launcher.batched_launcher, hydra_plugins.sweeper_batched_launcher.config
import sweeper.sweep.launch, sweeper.sweep.callbacks, sweeper.tracking, sweeper.tracking.pyfunc, sweeper.job.task
after = (dict(os.environ), logging.getLogger("mlflow").level, logging.getLogger("alembic").level)
print(sorted(set(after[0].items()) ^ set(before[0].items())), before[1:], after[1:])
assert before == after
"""


def test_importing_the_launcher_changes_neither_the_environment_nor_mlflows_loggers(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", IMPORTS], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]


APP = """
from pathlib import Path

import hydra
from omegaconf import OmegaConf


@hydra.main(version_base="1.3", config_path="conf", config_name="app")
def main(cfg):
    cfg.filled = cfg.lr * 2  # a ??? the task fills in itself
    Path(cfg.out, "seen.txt").write_text(f"{cfg.lr} {cfg.out} {cfg.filled}")


if __name__ == "__main__":
    main()
"""
APP_CONF = """
lr: 0.1
out: ${hydra:runtime.output_dir}
secret: ${oc.env:SWEEPER_TEST_NEVER_SET}  # never read by the task
filled: ???
"""


def test_a_users_own_app_with_lazy_values_runs_every_job_under_the_batched_launcher(tmp_path):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "app.yaml").write_text(APP_CONF)
    (tmp_path / "app.py").write_text(APP)
    proc = subprocess.run(
        [
            sys.executable,
            "app.py",
            "-m",
            "lr=0.1,0.2,0.3",
            "hydra/launcher=batched",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = sorted((tmp_path / "sweep").glob("*/seen.txt"))
    assert [p.parent.name for p in seen] == ["0", "1", "2"]
    for i, path in enumerate(seen):
        lr, out, filled = path.read_text().split()
        assert (
            float(lr) == [0.1, 0.2, 0.3][i]
            and Path(out) == path.parent
            and float(filled) == 2 * float(lr)
        )


@pytest.mark.slow
def test_a_grid_of_hundreds_records_every_run_as_the_basic_launcher(tmp_path, store):
    """200 configurations of one shape (one batched group): every run recorded, the same records as basic."""
    from test_launcher import _both, _same_records

    lrs = ",".join(f"{0.001 * (i + 1):.3f}" for i in range(100))
    stores, proc = _both(
        tmp_path,
        store,
        f"lr={lrs}",
        "seed=0,1",
        "epochs=20",
        "log_every=5",
        "depth=1",
        "width=4",
        "tracking.log_model=false",
        batched=("hydra.launcher.cpu_workers=1",),
    )  # one group, unsplit
    assert "Launching 200 jobs: 200 in 1 batched group(s)" in proc.stdout + proc.stderr
    _same_records(stores, rtol=1e-9, statuses_seen=("FINISHED",), groups=1, count=200)
