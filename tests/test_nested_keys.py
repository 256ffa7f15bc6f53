"""Dotted overrides (data.*, tracking.*) name a key of the chosen data/tracking config, or fail in one line
before Hydra composes (Hydra's own "Could not override ... not in struct" takes 7 lines, exit 1)."""

import pytest
from omegaconf import OmegaConf

from sweeper import CONF_DIR
from sweeper.contract.config import DATA, ConfigError, check_overrides


def keys(group: str, option: str) -> str:
    """The keys of conf/<group>/<option>.yaml, as the message lists them."""
    return ", ".join(sorted(OmegaConf.load(CONF_DIR / group / f"{option}.yaml")))


# a data set's keys: its own and the split keys it takes from conf/data_split.yaml (not its file's)
DIABETES = XOR = "folds, name, split_seed, test_fraction, val_fraction"
CSV = ", ".join(sorted(DATA["csv"]))
TRACKING, SERVER = keys("tracking", "local"), keys("tracking", "server")


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["data.val_frac=0.1"],
            f"data.val_frac is not a key of data=diabetes (did you mean data.val_fraction?): expected one of {DIABETES}",
        ),
        (
            ["tracking.foo=1"],
            f"tracking.foo is not a key of tracking=local: expected one of {TRACKING}",
        ),
        (
            ["tracking=server", "tracking.urii=http://x"],
            f"tracking.urii is not a key of tracking=server (did you mean tracking.uri?): expected one of {SERVER}",
        ),
        (
            ["data.pth=x.csv", "data=csv"],
            f"data.pth is not a key of data=csv (did you mean data.path?): expected one of {CSV}",
        ),  # any order
        (
            ["data=csv,xor", "data.path=x.csv"],
            f"data.path is not a key of data=xor: expected one of {XOR}",
        ),
        (
            ["data.val_frac=0.1,0.2"],
            f"data.val_frac is not a key of data=diabetes (did you mean data.val_fraction?): expected one of {DIABETES}",
        ),
        (["data.foo.bar=1"], f"data.foo is not a key of data=diabetes: expected one of {DIABETES}"),
        (
            ["+sweep=seed", "data.n_samples=10"],
            f"data.n_samples is not a key of data=diabetes: expected one of {DIABETES}",
        ),
        (
            ["+best=xor", "data.noise=1"],
            f"data.noise is not a key of data=xor: expected one of {XOR}",
        ),
        (
            ["dta.val_fraction=0.1"],
            "dta is not a known key (did you mean data?): expected one of activation, ",
        ),
    ],
)
def test_a_nested_typo_names_the_key_and_the_allowed_ones(args, message):
    with pytest.raises(ConfigError) as err:
        check_overrides(args)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "args",
    [
        ["data.val_fraction=0.1", "tracking.experiment=x"],
        ["data=synthetic", "data.n_samples=10,20"],
        ["data=csv", "data.path=x.csv", "data.sep=tab"],
        ["+best=xor", "data.val_fraction=0.0"],
        ["data=glob(*)", "data.whatever=1"],  # the sweeper expands a glob; validate() sees each job
        ["+data.foo=1"],  # an append: validate() refuses it for a data set without that key
        ["hydra.sweep.dir=x", "hydra.job.chdir=false"],
    ],
)
def test_known_nested_keys_pass(args):
    check_overrides(args)


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "data.val_frac=0.1",
            f"data.val_frac is not a key of data=diabetes (did you mean data.val_fraction?): expected one of {DIABETES}",
        ),
        (
            "tracking.foo=1",
            f"tracking.foo is not a key of tracking=local: expected one of {TRACKING}",
        ),
    ],
)
def test_a_nested_typo_on_the_command_line_is_one_line_and_exit_2(tmp_path, override, message):
    from conftest import cli

    for args in ([override], ["-m", "lr=0.001,0.005", override]):
        proc = cli(tmp_path, *args)
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines() == [f"sweeper: error: {message}"], proc.stderr
