"""The package's layout: no top-level `data` or `models` that a user's own folders would shadow."""

import subprocess
import sys
from pathlib import Path

import pytest

import sweeper
from conftest import all_runs, cli

PROBE = "import sweeper.data, sweeper.models; print(sweeper.data.__file__); print(sweeper.models.__file__)"


def _user_folders(where: Path, with_init: bool) -> None:
    for name in ("data", "models"):
        (where / name).mkdir()
        if with_init:
            (where / name / "__init__.py").write_text(
                "raise ImportError('the user package was imported')\n"
            )
    (where / "data" / "wine.csv").write_text("a,b\n1,2\n")


@pytest.mark.slow
@pytest.mark.parametrize("with_init", [False, True], ids=["folders", "packages"])
def test_a_sweep_runs_from_a_folder_that_holds_data_and_models(tmp_path, store, with_init):
    _user_folders(tmp_path, with_init)
    probe = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, capture_output=True, text=True
    )
    assert probe.returncode == 0, probe.stderr
    assert all(Path(line).is_relative_to(sweeper.ROOT) for line in probe.stdout.split()), (
        probe.stdout
    )
    proc = cli(tmp_path, "-m", "lr=0.001,0.005", "epochs=50", "log_every=10", store=store)
    assert proc.returncode == 0, proc.stderr
    assert sorted(r.info.status for r in all_runs(store)) == ["FINISHED"] * 3


def test_a_regular_install_ships_no_top_level_data_or_models(tmp_path):
    """What a regular (non-editable) install copies, as setuptools lays it out from pyproject.toml (its
    build_py step, no network), holds every subpackage, sweeper.data and sweeper.models inside the package, and imports
    them from a folder that has its own."""
    target = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(target)],
        cwd=sweeper.ROOT,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    assert not (target / "data").exists() and not (target / "models").exists()
    assert (target / "sweeper" / "models" / "mlp.py").is_file() and (
        target / "sweeper" / "data" / "loaders.py"
    ).is_file()
    assert (target / "sweeper" / "sweep" / "launch.py").is_file() and (
        target / "sweeper" / "insight" / "advice"
    ).is_dir()
    work = tmp_path / "work"
    work.mkdir()
    _user_folders(work, with_init=True)
    probe = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {PROBE}"],
        cwd=work,
        capture_output=True,
        text=True,
    )
    assert probe.returncode == 0, probe.stderr
    assert all(Path(line).is_relative_to(target) for line in probe.stdout.split()), probe.stdout
