"""sweeper.sweep.plan: a sweep's plan reads its command line as Hydra's sweeper does."""

from __future__ import annotations


import pytest

from conftest import cli


@pytest.mark.slow
def test_a_glob_over_a_group_runs_its_options(tmp_path, store):
    """Before: "ConfigLoader is not set" with a traceback (the sweep's plan parsed the glob without Hydra's loader)."""
    proc = cli(tmp_path, "-m", "data=glob(dia*)", "epochs=5", store=store)
    assert proc.returncode == 0, proc.stderr
    assert "[1/1]" in proc.stdout


@pytest.mark.parametrize("raised", ["yaml", "hydra", "omegaconf", "oserror", "bug"])
def test_a_job_that_does_not_compose_is_one_line_and_a_bug_goes_on_to_the_sweeps_start(
    monkeypatch, raised
):
    """plan.job_configs: a job whose composition fails (Hydra's error, OmegaConf's, a config file that is no
    YAML or cannot be read) is the sweep's one line naming the job; any other error (a bug, one a Ctrl-C caused
    on its way through OmegaConf) is raised as it is, for the sweep's start to decide
    (callbacks.start_failed: the interruption, or a bug's traceback)."""
    import yaml
    from hydra import compose, initialize_config_dir
    from hydra.errors import MissingConfigException
    from omegaconf.errors import InterpolationResolutionError

    import sweeper
    from sweeper.contract.config import ConfigError
    from sweeper.sweep import plan

    error = {
        "yaml": yaml.YAMLError("expected ',' or ']'"),
        "hydra": MissingConfigException("Could not find 'data/nope'"),
        "omegaconf": InterpolationResolutionError("KeyError raised while resolving"),
        "oserror": PermissionError(13, "Permission denied"),
        "bug": AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'"),
    }[raised]

    class Once:
        def __init__(self, loader):
            pass

        def plain(self, config, overrides):
            raise error

    monkeypatch.setattr(plan, "compose_once", Once)
    with initialize_config_dir(config_dir=str(sweeper.CONF_DIR), version_base="1.3"):
        config = compose(config_name="config", overrides=["lr=0.1"], return_hydra_config=True)
        expected = AttributeError if raised == "bug" else ConfigError
        with pytest.raises(expected) as e:
            plan.job_configs(config)
    if raised != "bug":
        assert str(e.value) == f"job lr=0.1: {str(error).splitlines()[0]}"
