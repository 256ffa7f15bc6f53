"""sweeper.contract.choices: a sweep's choices (interval, glob, range, pins, a key given twice) checked before Hydra,
one line when refused, said when replaced."""

from __future__ import annotations


import pytest

from conftest import all_runs, cli, one_line


def test_interval_passes_with_a_search_sweeper_and_glob_on_a_group():
    from sweeper.contract.config import check_overrides

    check_overrides(["-m", "+sweep=optuna", "lr=interval(0.1,0.2)"], whole=True)
    check_overrides(["-m", "data=glob(dia*)"], whole=True)


def test_a_pin_that_chooses_a_missing_option_is_one_line(tmp_path):
    from sweeper import CONF_DIR
    from sweeper.contract.choices import picks
    from sweeper.contract.config import GROUPS, ConfigError

    pin = tmp_path / "bad.yaml"
    pin.write_text(
        (CONF_DIR / "best" / "diabetes_1.yaml")
        .read_text()
        .replace("override /data: diabetes", "override /data: nope")
    )
    with pytest.raises(
        ConfigError,
        match=r"best=bad: bad.yaml chooses data=nope \(override /data: nope\), which is "
        r"not allowed: expected one of breast_cancer, csv",
    ):
        picks(pin, "best=bad", GROUPS, ConfigError)


def test_a_pin_and_another_data_set_on_the_command_line_are_refused():
    """Before: +best=diabetes_1 data=wine trained diabetes while its name and overrides tag said wine."""
    from sweeper.contract.config import ConfigError, check_overrides

    with pytest.raises(
        ConfigError,
        match=r"^data=wine conflicts with \+best=diabetes_1, which fixes data=diabetes \(data.name: diabetes in ",
    ):
        check_overrides(["+best=diabetes_1", "data=wine"], whole=True)
    with pytest.raises(ConfigError, match=r"^data=diabetes,wine conflicts with"):
        check_overrides(["-m", "+best=diabetes_1", "data=diabetes,wine"], whole=True)
    # the same choice says nothing new
    check_overrides(["+best=diabetes_1", "data=diabetes"], whole=True)
    # a named sweep's data choice gives way: no conflict
    check_overrides(["-m", "+sweep=seed", "data=wine"], whole=True)


@pytest.mark.parametrize(
    "args, error",
    [
        (("lr=range(1,0)",), "lr=range(1,0) is not allowed: the range is empty"),
        (("data=glob(zz*)",), "data=glob(zz*) is not allowed: it matches none of data's options"),
        (
            ("epochs=range(10,20,0)",),
            "epochs=range(10,20,0): a range's step cannot be 0",
        ),  # before: a 21-line traceback
        # before: silent while the launching process listed 10^9 values, growing ~25 MB/s
        (
            ("epochs=range(1,1e9)",),
            "epochs=range(1,1e9): the sweep would have more than 100,000 jobs (epochs: 999,999,999 values)",
        ),
        (("epochs=range(1,1e4)", "seed=range(0,20)"), "(epochs: 9,999 × seed: 20 values)"),
    ],
)
def test_a_sweep_of_no_job_is_one_line_and_writes_nothing(tmp_path, args, error):
    """Before: an empty range or a glob matching nothing exited 1 with nothing on stderr (and wrote the sweep folder)."""
    proc = cli(tmp_path, "-m", *args, "epochs=5", store=tmp_path / "s.db")
    assert proc.returncode == 2, proc.stderr
    assert error in one_line(proc.stderr)
    assert not (tmp_path / "s.db").exists() and not (tmp_path / "sweep").exists()


@pytest.mark.slow
def test_a_key_given_twice_says_which_value_is_used(tmp_path, store):
    """Before: depth=1,2 depth=3 trained depth=3 alone without a word, while the parent's overrides tag recorded
    both. Giving a key again is how a script overrides its own defaults, so it stays allowed, and is said."""
    proc = cli(tmp_path, "-m", "depth=1,2", "depth=3", "epochs=5", store=store)
    assert proc.returncode == 0, proc.stderr
    assert (
        "sweeper: depth is given 2 times (depth=1,2 and depth=3): the last, depth=3, is used"
        in proc.stdout
    )
    (run,) = [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]
    assert run.data.params["depth"] == "3"


def test_a_named_sweeps_key_given_on_the_command_line_says_it_replaces_it(tmp_path):
    """Before: +sweep=seed depth=3 trained depth=3 only, and nothing said the named sweep's depth: 1,2 was replaced.
    A key given twice with + is refused (depth is a key already) without first announcing it as used."""
    proc = cli(
        tmp_path, "-m", "+sweep=seed", "lr=0.001", "depth=3", "epochs=5", store=tmp_path / "one.db"
    )
    assert proc.returncode == 0, proc.stderr
    assert "sweeper: depth=3 replaces +sweep=seed's depth: 1,2" in proc.stdout
    assert "sweeper: epochs=5 replaces +sweep=seed's epochs: 2000,10000" in proc.stdout
    bad = cli(tmp_path, "-m", "depth=1,2", "+depth=3", "epochs=5", store=tmp_path / "s.db")
    assert bad.returncode == 2 and "is given" not in bad.stdout
    assert "+depth=3: depth is already a key of the config" in one_line(bad.stderr)


# The split keys as the docs state them (docs/manual/data.md, the reference); data=xor is too small
# to split.
STATED = {"val_fraction": 0.2, "test_fraction": 0.2, "split_seed": 0, "folds": 0}
XOR = {**STATED, "val_fraction": 0.0, "test_fraction": 0.0}


def test_every_data_set_takes_the_split_keys_from_one_entry_and_keeps_only_what_differs():
    """conf/data_split.yaml declares the split keys once; each conf/data/NAME.yaml takes it in its
    defaults list and sets only what differs. Hydra composes each data set's four keys at the stated
    values; what ``--help``, the reference and ``data.KEY=`` checks read without composing
    (``choices.option``) is Hydra's node, key order included; and the shared entry is no choice
    (``data=`` lists the data sets, ``hydra.runtime.choices`` has no entry for it)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from sweeper import CONF_DIR
    from sweeper.contract.choices import DATA_SPLIT, group_options, layers, option
    from sweeper.contract.config import DATA

    assert group_options("data") == sorted(DATA)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for name in group_options("data"):
            cfg = compose(
                config_name="config", overrides=[f"data={name}"], return_hydra_config=True
            )
            node = OmegaConf.to_container(cfg.data, resolve=False)
            assert {k: node[k] for k in STATED} == (XOR if name == "xor" else STATED), name
            groups = {k for k in cfg.hydra.runtime.choices if not k.startswith("hydra/")}
            assert groups == {"data", "tracking", "model"}, name
            mine = OmegaConf.to_container(option("data", name), resolve=False)
            assert mine == node and list(mine) == list(node), name
            path = CONF_DIR / "data" / f"{name}.yaml"
            assert layers(path) == [DATA_SPLIT, path]
            own = OmegaConf.load(path)
            assert [k for k in STATED if k in own and own[k] == STATED[k]] == [], name


def test_a_data_config_of_the_layout_before_reads_and_composes_as_it_did(tmp_path, monkeypatch):
    """A data YAML with its own four split keys and no defaults list (the layout before
    conf/data_split.yaml, or a user's copy of it) is itself alone, and Hydra composes it to the data
    set it was."""
    import shutil

    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from sweeper import CONF_DIR
    from sweeper.contract import choices

    conf = shutil.copytree(CONF_DIR, tmp_path / "conf")
    old = conf / "data" / "iris.yaml"
    old.write_text(
        "name: iris\nval_fraction: 0.25\ntest_fraction: 0.2\n"
        "split_seed: 0        # the split\nfolds: 0\n"
    )
    monkeypatch.setattr(choices, "CONF_DIR", conf)
    assert choices.layers(old) == [old]
    expected = {"name": "iris", **STATED, "val_fraction": 0.25}
    assert OmegaConf.to_container(choices.option("data", "iris")) == expected
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["data=iris"])
    assert OmegaConf.to_container(cfg.data) == expected


def test_the_split_keys_are_keys_of_every_data_set_and_their_values_are_checked(tmp_path):
    """``data.val_fraction=0.1`` names a key of the chosen data set (its file no longer lists it:
    the shared entry does); a typo lists the split keys among the allowed; a bad value is one line
    naming the key."""
    from sweeper.contract.config import ConfigError, check_overrides

    for args in (
        ["data.val_fraction=0.1"],
        ["data=xor", "data.folds=3"],
        ["data=csv", "data.split_seed=2"],
    ):
        check_overrides(args)
    with pytest.raises(
        ConfigError, match=r"expected one of folds, name, split_seed, test_fraction, val_fraction$"
    ):
        check_overrides(["data=wine", "data.val_frac=0.1"])
    proc = cli(tmp_path, "data.val_fraction=2")
    assert proc.returncode != 0 and one_line(proc.stderr) == (
        "sweeper: error: data.val_fraction=2 is not allowed: expected a number in [0, 1)"
    )


@pytest.mark.parametrize(
    "content",
    [
        b"a: [1, 2\nb: 3\n",  # YAML that does not parse
        b"a: 1\n\tb: 2\n",  # a tab
        b"a: 1\na: 2\n",  # a key twice
        b"\xff\xfe\x00a: \x80\x81\n",  # not UTF-8
        None,  # a folder
        b"- 1\n- 2\n",  # a list, not a mapping
        b"hydra: 5\n",  # a number where hydra's keys go
    ],
)
def test_a_named_sweep_that_cannot_be_read_replaces_nothing_and_raises_nothing(
    tmp_path, monkeypatch, content
):
    """given_twice reads +sweep/+best files for the keys the command line replaces; one it cannot read (each error
    that config._readable names in one line, or keys that are no mapping) replaces nothing, and is left to it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from sweeper.contract import choices

    (tmp_path / "best").mkdir()
    path = tmp_path / "best" / "x.yaml"
    path.mkdir() if content is None else path.write_bytes(content)
    monkeypatch.setattr(choices, "CONF_DIR", tmp_path)
    overrides = OverridesParser.create().parse_overrides(["+best=x", "depth=3"])
    assert choices.given_twice(overrides) == []
