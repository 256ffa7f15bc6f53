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
