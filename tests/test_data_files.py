"""User data files (data=csv): what a file's target, header, encoding and size make of a run; one line when refused."""
import json

import numpy as np
import pytest
from omegaconf import OmegaConf

from conftest import FAST_ARGS, client_for, cli, make_cfg, run_once
from sweeper import data
from sweeper.config import ConfigError, check_overrides
from sweeper.data import DataError

RNG = np.random.default_rng(7)
X = RNG.standard_normal((40, 2))


def write_csv(path, target, header="a,b,y", sep=","):
    lines = ([header] if header else []) + [sep.join(map(str, [*r, t])) for r, t in zip(X, target)]
    path.write_text("\n".join(lines) + "\n")
    return path


def load(path, *overrides, seed=0):
    return data.load(make_cfg("data=csv", f"data.path={path}", *overrides).data, seed)


def refused(path, *overrides) -> str:
    with pytest.raises(DataError) as err:
        load(path, *overrides)
    message = str(err.value)
    assert "\n" not in message
    return message


def classes(k):
    return np.arange(len(X)) % k


def test_each_data_file_has_its_own_experiment(tmp_path):
    def experiment(*overrides):
        return OmegaConf.to_container(make_cfg(*overrides), resolve=True)["tracking"]["experiment"]

    assert experiment("data=csv", f"data.path={tmp_path / 'sales.2024.csv'}") == "csv-sales.2024"
    assert experiment("data=csv", "data.path=/x/churn.json", "tracking=server") == "csv-churn"
    assert experiment("data=csv") == "csv"  # no path yet: validate() says data.path is missing
    assert experiment("data=spambase") == "spambase" and experiment() == "diabetes"
    assert experiment("data=csv", "data.path=/x/churn.json", "tracking.experiment=mine") == "mine"
