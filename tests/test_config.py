"""The configuration contract: defaults, one-line errors for bad values, the fingerprint."""

import os

import pytest
from omegaconf import OmegaConf

import sweeper
from conftest import make_cfg
from sweeper.contract.config import ConfigError, check_overrides, validate
from sweeper.contract.fingerprint import fingerprint


def plain(*overrides):
    return OmegaConf.to_container(make_cfg(*overrides), resolve=True)


def test_defaults_are_valid_and_name_the_contract_keys():
    cfg = plain()
    validate(cfg)
    for key in (
        "lr",
        "epochs",
        "depth",
        "width",
        "activation",
        "device",
        "seed",
        "dtype",
        "log_every",
        "patience",
    ):
        assert key in cfg
    assert cfg["data"]["name"] == "diabetes" and cfg["device"] == "cpu"
    assert cfg["tracking"]["experiment"] == "diabetes"
    assert cfg["tracking"]["uri"].startswith("sqlite:////") and cfg["tracking"]["uri"].endswith(
        "/mlruns/mlflow.db"
    )


@pytest.mark.parametrize("name", ["xor", "diabetes", "breast_cancer", "synthetic"])
def test_every_data_config_is_valid(name):
    """Each bundled data set's config passes the contract (validate returns, raising nothing), and the contract does
    check that group: a bad value in it is refused, naming the key."""
    cfg = plain(f"data={name}")
    assert (
        validate(cfg) is None
        and cfg["data"]["name"] == name
        and cfg["tracking"]["experiment"] == name
    )
    bad = plain(f"data={name}", "data.test_fraction=1.5")
    with pytest.raises(ConfigError, match="data.test_fraction=1.5"):
        validate(bad)


BAD = [
    ("lr=abc", "lr=abc is not allowed: expected a number > 0"),
    ("lr=0", "lr=0 is not allowed: expected a number > 0"),
    ("lr=-1", "lr=-1 is not allowed: expected a number > 0"),
    ("depth=-1", "depth=-1 is not allowed: expected an integer >= 0"),
    ("width=0", "width=0 is not allowed: expected an integer >= 1"),
    ("epochs=0", "epochs=0 is not allowed: expected an integer from 1 to 100,000,000"),
    ("epochs=1.5", "epochs=1.5 is not allowed: expected an integer from 1 to 100,000,000"),
    ("activation=foo", "activation=foo is not allowed: expected one of relu, tanh, sigmoid"),
    ("device=tpu", "device=tpu is not allowed: expected one of cpu, gpu"),
    ("dtype=float16", "dtype=float16 is not allowed: expected one of float32, float64"),
    ("log_every=0", "log_every=0 is not allowed: expected an integer >= 1"),
    ("patience=-2", "patience=-2 is not allowed: expected an integer >= 0"),
]


@pytest.mark.parametrize("override, message", BAD)
def test_bad_values_in_a_composed_config(override, message):
    with pytest.raises(ConfigError) as err:
        validate(plain(override))
    assert str(err.value) == message


@pytest.mark.parametrize(
    "override, message", BAD + [("data=nope", "data=nope is not allowed: expected one of")]
)
def test_bad_values_on_the_command_line_and_in_sweeps(override, message):
    key, value = override.split("=")
    for args in (
        [override],
        [f"{key}={value},{value}"] if key != "data" else [f"data=xor,{value}"],
    ):
        with pytest.raises(ConfigError) as err:
            check_overrides(args)
        assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_unknown_keys_are_refused_unless_appended():
    with pytest.raises(ConfigError, match="learning_rate is not a known key"):
        check_overrides(["learning_rate=0.1"])
    check_overrides(
        ["+sweep=seed", "hydra.sweep.dir=x", "data=synthetic", "data.n_samples=10", "lr=0.1,0.2"]
    )


def test_data_specific_checks():
    with pytest.raises(ConfigError, match=r"^data.path is missing for data=csv"):
        validate(plain("data=csv"))
    with pytest.raises(ConfigError, match=r"^data.path=/no/such.csv does not exist"):
        validate(plain("data=csv", "data.path=/no/such.csv"))
    with pytest.raises(
        ConfigError, match=r"download spambase.data from https://archive.ics.uci.edu"
    ):
        validate(plain("data=spambase", "data.path=/no/spambase.data"))
    with pytest.raises(ConfigError, match=r"^data.n_samples=2 is not allowed"):
        validate(plain("data=synthetic", "data.n_samples=2"))
    with pytest.raises(ConfigError, match=r"^data.val_fraction\+data.test_fraction=0.95"):
        validate(plain("data.val_fraction=0.5", "data.test_fraction=0.45"))


def test_fingerprint_ignores_device_and_tracking_only():
    base = fingerprint(plain())
    assert fingerprint(plain("device=gpu")) == base
    assert (
        fingerprint(plain("tracking.experiment=other", "tracking.uri=sqlite:////tmp/x.db")) == base
    )
    assert fingerprint(plain("lr=0.001")) != base
    assert fingerprint(plain("data=xor")) != base


@pytest.mark.parametrize(
    "data",
    [
        {"name": "diabetes"},
        {"name": "csv", "path": "/x/sales.csv"},
        {"name": "csv", "path": "/x/sales.csv", "task": 3},
        {"name": "csv", "path": None},
        {"name": "text", "path": "s.txt", "task": "regression"},
        {"name": "csv", "path": "${data.name}.csv"},
        {"name": "csv", "path": "a.csv", "task": "???"},
    ],
)
def test_the_default_experiment_set_without_omegaconfs_grammar_is_what_it_resolves_to(data):
    import copy

    from omegaconf import OmegaConf

    from sweeper.contract.config import EXPERIMENT, resolve_experiment

    for name in ("local", "server"):  # the shortcut applies to the conf's own text
        assert (
            OmegaConf.load(sweeper.CONF_DIR / "tracking" / f"{name}.yaml")
            ._get_node("experiment")
            ._value()
            == EXPERIMENT
        )
    cfg = OmegaConf.create({"data": data, "tracking": {"experiment": EXPERIMENT}})
    want = copy.deepcopy(cfg)
    OmegaConf.resolve(want)
    resolve_experiment(cfg)
    assert "${" not in cfg.tracking._get_node("experiment")._value()  # set, not left to OmegaConf
    assert cfg.tracking.experiment == want.tracking.experiment


@pytest.mark.parametrize(
    "make, what",
    [(lambda p: p.mkdir(), "is a folder"), (lambda p: os.mkfifo(p), "is not a regular file")],
)
def test_a_data_path_that_is_no_file_is_named_for_what_it_is(tmp_path, make, what):
    from conftest import make_cfg
    from omegaconf import OmegaConf

    path = tmp_path / "thing"
    make(path)
    cfg = OmegaConf.to_container(make_cfg("data=csv", f"data.path={path}"), resolve=True)
    with pytest.raises(ConfigError, match=what):
        validate(cfg)
    cfg["data"]["path"] = "/dev/null"
    with pytest.raises(ConfigError, match="is not a regular file"):
        validate(cfg)


@pytest.mark.parametrize(
    "content, error",
    [
        (b"a: [1, 2\nb: 3\n", "ParserError"),  # YAML that does not parse
        (b"a: 1\n\tb: 2\n", "ScannerError"),  # a tab where YAML allows none
        (b"a: 1\na: 2\n", "ConstructorError"),  # a key twice (OmegaConf's loader refuses it)
        (b"\xff\xfe\x00a: \x80\x81\n", "UnicodeDecodeError"),  # not UTF-8
        (None, "IsADirectoryError"),  # a folder where the file should be
    ],
)
def test_a_config_file_that_cannot_be_read_is_one_line_naming_it(tmp_path, content, error):
    """A broken conf/GROUP/NAME.yaml (a hand-edited conf/best pin): ConfigError's one line
    names the argument, the file and what the reader said, not Hydra's traceback."""
    from sweeper.contract.config import _readable

    path = tmp_path / "x.yaml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(ConfigError) as e:
        _readable(path, "best=x")
    line = str(e.value)
    assert line.startswith(f"best=x: {path} cannot be read ({error}: ") and "\n" not in line, line
    assert line.endswith("): fix the file or choose another"), line
