"""The batched launcher's keys, each declared once in its plugin's config
(plugins/hydra_plugins/sweeper_batched_launcher/config.py): a typed field, its default, its
comment and what it allows; the command line's early check, the launcher's check and the
config reference all read that one declaration."""

from __future__ import annotations

import dataclasses
import re

import pytest
from omegaconf import OmegaConf

from conftest import all_runs, cli, one_line
from hydra_plugins.sweeper_batched_launcher.batched_launcher import BatchedLauncher
from hydra_plugins.sweeper_batched_launcher.config import (
    PREFIX,
    Allowed,
    BatchedLauncherConf,
    declared,
)
from sweeper import ROOT
from sweeper.contract.config import ConfigError, check_overrides
from sweeper.contract.reference import PLUGINS, field_comments
from sweeper.sweep import engines

# One value each key refuses and the line that says so, written out by hand: a key added to the
# config without a row here (or a row for a key the config does not have) fails the first test.
BAD = {
    "max_group_bytes": (
        "-1",
        "expected an integer >= 0 (bytes; 0 = a quarter of the machine's memory)",
    ),
    "max_group_size": ("-3", "expected an integer >= 0 (0 = no limit)"),
    "engine": ("nope", "expected one of local, ray, submitit_local, submitit_slurm"),
    "gpus": ("0", "expected an integer >= 1, or null (every GPU)"),
    "cpu_workers": ("0", "expected an integer >= 1, or null (the cores this process may use)"),
    "halving.eta": ("1", "expected an integer >= 2, or null (no halving)"),
    "halving.min_epochs": (
        "0",
        "expected an integer >= 1, or null (the largest epochs / eta^3, at least 2·log_every)",
    ),
}
# Keys that take any value of their type: a mapping handed on as it is, a flag
OPEN = {"ray", "submitit", "pack"}


def test_every_key_has_a_row_here_and_every_row_a_key():
    assert set(BAD) | OPEN == {k[len(PREFIX) :] for k in declared()}


def test_every_key_is_declared_with_what_it_allows_a_comment_and_an_allowed_default():
    """A field without its Allowed (a key nobody checks), a default its own check refuses, or
    a key without the comment the reference shows fails here."""
    notes = field_comments(PLUGINS / "sweeper_batched_launcher" / "config.py")
    for name, f in declared().items():
        allowed = f.metadata.get("allowed")
        assert isinstance(allowed, Allowed), name
        default = f.default_factory() if callable(f.default_factory) else f.default
        assert allowed.ok(default), (name, default)
        assert notes.get(f.name), name


def test_the_launcher_takes_each_key_of_the_config_as_its_attribute():
    fields = [f.name for f in dataclasses.fields(BatchedLauncherConf) if f.name != "_target_"]
    plain = BatchedLauncher()
    set_ = BatchedLauncher(max_group_size=3, engine="ray", halving={"eta": 3})
    assert all(hasattr(plain, name) for name in fields)
    assert (plain.max_group_size, plain.engine, plain.halving.eta) == (0, "local", None)
    assert (set_.max_group_size, set_.engine, set_.halving["eta"]) == (3, "ray", 3)


@pytest.mark.parametrize("name", sorted(BAD))
def test_the_command_line_and_the_launcher_refuse_a_bad_value_in_the_same_line(name):
    value, expected = BAD[name]
    line = f"hydra.launcher.{name}={value} is not allowed: {expected}"
    with pytest.raises(ConfigError) as early:
        check_overrides(["-m", f"hydra.launcher.{name}={value}"], whole=True)
    assert str(early.value) == line
    composed = OmegaConf.structured(BatchedLauncherConf)
    OmegaConf.update(composed, name, int(value) if value.lstrip("-").isdigit() else value)
    with pytest.raises(ConfigError) as late:
        engines.check(composed)
    assert str(late.value) == line


@pytest.mark.parametrize("name", sorted(BAD))
def test_an_allowed_value_passes_both_checks(name):
    good = {"engine": "ray"}.get(name, "5")
    check_overrides(["-m", f"hydra.launcher.{name}={good}"], whole=True)
    composed = OmegaConf.structured(BatchedLauncherConf)
    OmegaConf.update(composed, name, int(good) if good.isdigit() else good)
    engines.check(composed)


def test_another_launchers_keys_are_left_to_it():
    check_overrides(["-m", "hydra/launcher=basic", "hydra.launcher.max_group_bytes=-1"], whole=True)


def test_no_launcher_key_is_checked_outside_its_declaration():
    """The checks that used to repeat the keys (``LAUNCHER_INTS`` and ``HALVING`` in
    hydra_args, four ``if``s in engines.check) are gone: hydra_args names no launcher key, and
    engines refuses no value itself."""
    hydra_args = (ROOT / "sweeper/contract/hydra_args.py").read_text()
    named = set(re.findall(r"hydra\.launcher\.([a-z_]+)", hydra_args))
    assert not named & (set(BAD) | OPEN), named
    assert "is not allowed" not in (ROOT / "sweeper/sweep/engines.py").read_text()


@pytest.mark.parametrize(
    "arg, expected",
    [
        ("hydra.launcher.engine=nope", "hydra.launcher.engine=nope is not allowed: expected one"),
        # of another type than the field's: Hydra's merge refuses it, in one line too
        ("hydra.launcher.max_group_bytes=abc", "hydra.launcher.max_group_bytes=abc"),
    ],
)
def test_a_bad_launcher_key_is_one_line_exit_2_and_nothing_is_written(
    tmp_path, store, arg, expected
):
    proc = cli(tmp_path, "-m", "lr=0.001,0.002", "epochs=5", arg, store=store)
    assert proc.returncode == 2, proc.stderr
    line = one_line(proc.stderr)
    assert line.startswith("sweeper: error: ") and expected in line, line
    assert all_runs(store) == []


def test_the_optuna_sweepers_counts_are_declared_beside_their_fields_too():
    """n_trials and batch: what each allows is in OptunaSweeperConf's field metadata (its default
    allowed), and the sweep's start refuses a value outside it with that declaration's line."""
    pytest.importorskip("optuna")
    from types import SimpleNamespace

    from hydra_plugins.sweeper_optuna_sweeper._core import _settings
    from hydra_plugins.sweeper_optuna_sweeper.config import OptunaSweeperConf

    checked = {f.name: f for f in dataclasses.fields(OptunaSweeperConf) if "allowed" in f.metadata}
    assert set(checked) == {"n_trials", "batch"}
    assert all(f.metadata["allowed"].ok(f.default) for f in checked.values())
    for name in checked:
        settings = SimpleNamespace(**{"n_trials": 20, "batch": 16, name: 0}, params=None)
        with pytest.raises(ConfigError) as e:
            _settings(settings, [])
        assert str(e.value) == f"hydra.sweeper.{name}=0 is not allowed: expected an integer >= 1"
