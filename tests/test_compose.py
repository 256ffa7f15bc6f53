"""A job's config set from a composed job of the same shape equals Hydra's own composition of it."""

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

import sweeper
from sweeper.contract.compose import compose_once

JOBS = [
    ["lr=0.01", "depth=1"],
    ["lr=0.02", "depth=2"],
    ["lr=1e-3", "depth=0"],  # one shape: values only
    ["data=breast_cancer", "lr=0.5"],
    ["data=breast_cancer", "lr=0.25"],  # a group choice stays in the shape
    ["+best=diabetes_1", "seed=3"],
    ["+best=diabetes_1", "seed=4"],
    ["data=synthetic", "data.n_samples=100", "dtype=float32"],
    ["data=synthetic", "data.n_samples=300", "dtype=float64"],
    ["tracking.curve_points=7", "epochs=10"],
    ["tracking.curve_points=9", "epochs=20"],
    ["lr=0.01", "depth=1", "hydra/launcher=basic"],
]


def _plain(cfg):
    cfg = OmegaConf.to_container(cfg, resolve=False)
    cfg["hydra"]["runtime"].pop("output_dir", None)
    return cfg


def test_compose_once_gives_what_hydra_composes():
    with initialize_config_dir(config_dir=str(sweeper.CONF_DIR), version_base="1.3"):
        master = compose(config_name="config", return_hydra_config=True)
        loader = GlobalHydra.instance().config_loader()
        hydra_own = [loader.load_sweep_config(master, list(job)) for job in JOBS]
        fast = compose_once(loader)
        ours = [fast(master, list(job)) for job in JOBS]
        again = fast(master, list(JOBS[1]))
    assert len(fast.templates) == 6  # six shapes: the others were set from a template
    for job, a, b in zip(JOBS, hydra_own, ours):
        assert _plain(a) == _plain(b), job
        assert (a.lr, a.tracking.experiment, a.data.name) == (
            b.lr,
            b.tracking.experiment,
            b.data.name,
        )
    assert _plain(again) == _plain(ours[1]) and again is not ours[1]


@pytest.mark.parametrize("bad", [["lr=0.1", "nope=1"], ["data=nope"]])
def test_a_job_hydra_refuses_is_refused_the_same_way(bad):
    with initialize_config_dir(config_dir=str(sweeper.CONF_DIR), version_base="1.3"):
        master = compose(config_name="config", return_hydra_config=True)
        loader = GlobalHydra.instance().config_loader()
        fast = compose_once(loader)
        fast(master, ["lr=0.2"])
        with pytest.raises(Exception) as err:
            fast(master, bad)
        assert "nope" in str(err.value)


def test_the_guarded_sweepers_check_composes_each_shape_once_and_keeps_nothing():
    """The sweeper's validate_batch_is_legal reaches the composed-once check by name (no look at the caller's
    stack frame): a batch of one shape is composed once, and no job's config is kept for the launcher."""
    from types import SimpleNamespace

    from hydra_plugins.sweeper_batched_launcher.guarded_sweeper import GuardedSweeper

    with initialize_config_dir(config_dir=str(sweeper.CONF_DIR), version_base="1.3"):
        master = compose(config_name="config", return_hydra_config=True)
        loader = GlobalHydra.instance().config_loader()
        fast = compose_once(loader)
        composed = []
        inner = fast._compose
        fast._compose = lambda *a: composed.append(a[1]) or inner(*a)
        guarded = GuardedSweeper.__new__(GuardedSweeper)
        guarded.hydra_context, guarded.config = SimpleNamespace(config_loader=loader), master
        batch = [
            ["lr=0.01", "depth=1"],
            ["lr=0.02", "depth=1"],
            ["lr=0.03", "depth=1"],
            ["lr=0.04", "depth=1"],
        ]
        fast.plain(master, batch[0])  # planning: the shape's template
        before = len(composed)
        guarded.validate_batch_is_legal(batch)
        # the template served; nothing kept for the launcher
        assert len(composed) == before and not fast.cache
        with pytest.raises(Exception, match="nope"):
            guarded.validate_batch_is_legal([["data=nope"]])


def test_a_config_that_resolves_only_in_its_job_is_none_here_and_a_bug_is_raised(monkeypatch):
    """compose.resolvable: a config OmegaConf cannot resolve here (a resolver's own error, which OmegaConf
    raises as its InterpolationResolutionError; a key that is not there) is None (its job resolves or reports
    it); an error that is no OmegaConf's (a bug) is raised. Once._parse: an override Hydra's parser refuses
    is no shape (Hydra reports it later); a bug there is raised too."""
    from sweeper.contract import compose as module
    from sweeper.contract.compose import Once, resolvable

    OmegaConf.register_new_resolver("sweeper_test_fails", lambda: 1 / 0, replace=True)
    try:
        assert resolvable(OmegaConf.create({"a": "${sweeper_test_fails:}"})) is None
    finally:
        OmegaConf.clear_resolver("sweeper_test_fails")
    assert resolvable(OmegaConf.create({"a": "${b}"})) is None
    assert resolvable(OmegaConf.create({"a": 1})) == {"a": 1}
    monkeypatch.setattr(module, "plain", lambda cfg: (_ for _ in ()).throw(TypeError("ours")))
    with pytest.raises(TypeError, match="ours"):
        resolvable(OmegaConf.create({"a": 1}))

    once = Once(None)
    once.groups = set()
    assert once._parse(None, ["lr=("]) == (None, None, None)
    monkeypatch.setattr(once, "_parsed", lambda s: (_ for _ in ()).throw(TypeError("ours")))
    with pytest.raises(TypeError, match="ours"):
        once._parse(None, ["lr=0.1"])
