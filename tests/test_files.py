"""sweeper.base.files: the store path SQLAlchemy opens, names that become files and addresses, one line when refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import cli, one_line
from sweeper import report
from sweeper.contract.config import ConfigError, check_overrides, validate


@pytest.mark.parametrize(
    "uri",
    [
        "sqlite:////tmp/a%20b/x.db",
        "sqlite:////tmp/ro%2Fx.db",
        "sqlite:////tmp/a%zz.db",
        "sqlite:////tmp/x.db?mode=ro",
        "sqlite:///relative/a%20b.db",
    ],
)
def test_the_store_file_checked_is_the_one_sqlalchemy_opens(uri):
    """Before: sqlite:////.../a%20b/x.db made and checked the folder a%20b while MLflow (SQLAlchemy) opened a b/x.db:
    a folder that did not exist, retried for ~100 s before a refusal."""
    from sqlalchemy.engine import make_url

    from sweeper.base.files import sqlite_path

    assert sqlite_path(uri) == Path(make_url(uri).database)


def test_a_379_character_experiment_name_is_refused_before_the_store(tmp_path):
    store = tmp_path / "s.db"
    proc = cli(tmp_path, "epochs=10", f"tracking.experiment={'e' * 379}", store=store)
    assert proc.returncode == 2
    line = one_line(proc.stderr)
    assert (
        line.startswith("sweeper: error: tracking.experiment=eee")
        and "expected a name of 1 to 200 bytes" in line
    )
    assert not store.exists()


def test_a_sweep_folder_name_too_long_is_refused_before_hydra():
    with pytest.raises(
        ConfigError, match="hydra.sweep.dir=.*is 300 bytes long: expected a name of at most 200"
    ):
        check_overrides(["-m", "lr=0.1,0.2", f"hydra.sweep.dir=/tmp/{'s' * 300}/x"], whole=True)


def test_a_malformed_server_address_is_one_line(tmp_path, capsys):
    assert report.main(["--run", "f" * 32, "--tracking-uri", "http://[::1"]) == 2
    assert "cannot be read as an address" in one_line(capsys.readouterr().err)
    from conftest import make_cfg
    from omegaconf import OmegaConf

    cfg = OmegaConf.to_container(make_cfg("tracking.uri='http://[::1'"), resolve=True)
    with pytest.raises(
        ConfigError, match=r"tracking.uri=http://\[::1 is not allowed: expected a tracking URI"
    ):
        validate(cfg)
