"""sweeper.contract.hydra_args: Hydra's options and errors as one line (exit 2), sub-commands, paths under
hydra.job.chdir."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import NO_BASELINES, all_runs, cli, command, one_line
from sweeper.contract.config import ConfigError, check_overrides


COMPOSE = [
    (
        ["hydra.launcher.gpus=abc"],
        "Error merging override hydra.launcher.gpus=abc: Value 'abc' of type 'str' could "
        "not be converted to Integer",
    ),
    (
        ["-m", "+sweep=optuna", "hydra.sweeper.n_trials=2.5"],
        "Error merging override hydra.sweeper.n_trials=2.5",
    ),
    (["--config-name", "nope"], "Cannot find primary config 'nope'"),
    (
        ["hydra.searchpath=[file://{pins}]", "+mypins=bad"],
        "Could not find 'data/nope': expected one of breast_cancer,",
    ),
]


@pytest.mark.parametrize("args, error", COMPOSE, ids=[" ".join(a) for a, _ in COMPOSE])
def test_hydra_composition_errors_are_one_line_exit_2(tmp_path, args, error):
    """Before: Hydra's 4-14 lines and exit 1."""
    from sweeper import CONF_DIR

    (tmp_path / "pins" / "mypins").mkdir(parents=True)
    (tmp_path / "pins" / "mypins" / "bad.yaml").write_text(
        (CONF_DIR / "best" / "diabetes_1.yaml")
        .read_text()
        .replace("override /data: diabetes", "override /data: nope")
    )
    proc = cli(
        tmp_path,
        *[a.format(pins=tmp_path / "pins") for a in args],
        "epochs=5",
        store=tmp_path / "s.db",
    )
    assert proc.returncode == 2, proc.stderr
    line = one_line(proc.stderr)
    assert line.startswith("sweeper: error: ") and error in line, line
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("name", ["report", "runs"])
def test_a_command_named_after_python_m_sweeper_runs_that_command(tmp_path, name):
    """Before: python -m sweeper report --experiment X --tracking-uri ... printed Hydra's 8-line usage (exit 2), and
    python -m sweeper report alone "Error parsing override 'report'"."""
    db = tmp_path / "typo" / "mlflow.db"
    args = [
        sys.executable,
        "-m",
        "sweeper",
        name,
        *(["--experiment", "x"] if name == "report" else []),
        "--tracking-uri",
        f"sqlite:///{db}",
    ]
    proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 2
    assert f"--tracking-uri=sqlite:///{db}: no such store" in one_line(proc.stderr)
    assert not db.parent.exists()


def test_chdir_paths_makes_a_relative_data_path_absolute_only_with_chdir(
    tmp_path, monkeypatch, capsys
):
    from sweeper.contract.hydra_args import chdir_paths

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.csv").write_text("x,y\n1,2\n")
    (tmp_path / "b.csv").write_text("x,y\n1,2\n")
    assert chdir_paths(["data=csv", "data.path=a.csv"]) == [
        "data=csv",
        "data.path=a.csv",
    ]  # no chdir: as given
    got = chdir_paths(["data.path=a.csv,b.csv,gone.csv", "hydra.job.chdir=true"])
    assert got == [
        f"data.path={tmp_path / 'a.csv'},{tmp_path / 'b.csv'},gone.csv",
        "hydra.job.chdir=true",
    ]
    assert "read as" in capsys.readouterr().err
    assert (
        chdir_paths(["data.path=glob(*.csv)", "hydra.job.chdir=true"])[0] == "data.path=glob(*.csv)"
    )


@pytest.mark.slow
def test_a_relative_data_path_and_sweep_folder_with_chdir_train_and_record(tmp_path, store):
    """Before: hydra.job.chdir=true ran each job in its own folder, where data.path=t.csv named nothing (a
    traceback per job in a sweep, after its group had trained) and the job lines counted [1/0]."""
    rows = "\n".join(f"{i % 7},{(i * 3) % 5},{i % 7 + (i * 3) % 5}" for i in range(60))
    (tmp_path / "t.csv").write_text("a,b,y\n" + rows + "\n")
    args = [
        sys.executable,
        "-m",
        "sweeper",
        "-m",
        NO_BASELINES,
        "data=csv",
        "data.path=t.csv",
        "data.target=y",
        "lr=0.01,0.02",
        "epochs=20",
        "log_every=10",
        "hydra.job.chdir=true",
        "hydra.sweep.dir=multirun/here",
        f"tracking.uri=sqlite:///{store}",
        "tracking.log_model=false",
    ]
    proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert f"data.path=t.csv read as {tmp_path / 't.csv'}" in proc.stderr
    assert "[1/2]" in proc.stdout + proc.stderr and "/0]" not in proc.stdout + proc.stderr
    kids = [r for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId")]
    assert len(kids) == 2 and {r.info.status for r in kids} == {"FINISHED"}
    assert len(list((tmp_path / "multirun" / "here").glob("*/result.json"))) == 2


def test_our_list_of_hydras_options_is_hydras():
    from hydra._internal.utils import get_args_parser

    from sweeper.contract.hydra_args import OPTIONS

    assert sorted(OPTIONS) == sorted(
        o for a in get_args_parser()._actions for o in a.option_strings
    )


@pytest.mark.parametrize(
    "args, error",
    [
        (
            ["--experiment", "digits"],
            "--experiment is not an option of python -m sweeper",
        ),  # before: argparse took it for
        (["--lr=3"], "a key is given as key=value (lr=...)"),  # --experimental-rerun: a traceback
        (["--experimental-rerun", "nope"], "--experimental-rerun=nope: no such file"),
    ],
)
def test_an_option_hydra_does_not_have_is_one_line(tmp_path, args, error):
    proc = cli(tmp_path, *args, store=tmp_path / "s.db")
    assert proc.returncode == 2
    assert error in one_line(proc.stderr)
    assert not (tmp_path / "s.db").exists()


@pytest.mark.slow
def test_a_relative_store_under_chdir_is_one_store_and_said(tmp_path):
    """Before: hydra.job.chdir=true with tracking.uri=sqlite:///st/m.db: where the store landed was not said."""
    proc = command(
        "sweeper",
        "-m",
        "epochs=5,6",
        "hydra.job.chdir=true",
        "hydra/launcher=basic",
        "tracking.uri=sqlite:///st/m.db",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        f"sweeper: tracking.uri=sqlite:///st/m.db read as sqlite:///{tmp_path / 'st' / 'm.db'} (hydra.job.chdir=true"
        in proc.stderr
    )
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.db")) == ["st/m.db"]
    assert len(all_runs(tmp_path / "st" / "m.db")) == 3


HYDRA = [
    (["hydra.foo=1"], "hydra.foo is not a key of Hydra's config: expected hydra.<one of "),
    (
        ["hydra.sweeeper.x=1"],
        "hydra.sweeeper.x is not a key of Hydra's config (did you mean hydra.sweeper?)",
    ),
    (["widht=3"], "widht is not a known key (did you mean width?): expected one of activation, "),
    (
        [
            "-m",
            "hydra.launcher.cpu_worker=2",
        ],  # Hydra: "Could not override ... not in 'BatchedLauncherConf'"
        "hydra.launcher.cpu_worker is not a key of hydra.launcher (did you mean "
        "hydra.launcher.cpu_workers?): expected one of cpu_workers, engine, gpus, halving, ",
    ),
    (
        ["-m", "hydra.launcher.halving.et=3"],
        "hydra.launcher.halving.et is not a key of hydra.launcher.halving (did you mean "
        "hydra.launcher.halving.eta?): expected one of eta, min_epochs",
    ),
    (["+lr=0.1"], "+lr=0.1: lr is already a key of the config: write lr=0.1 (without +)"),
    (["hydra/launcher=nope"], "hydra/launcher=nope is not allowed: expected one of basic, batched"),
    (["depth=1,2"], "depth=1,2 is a sweep: add -m"),
    (
        ["-m", "hydra.launcher.max_group_bytes=-1"],
        "hydra.launcher.max_group_bytes=-1 is not allowed",
    ),
    (
        ["-m", "hydra.launcher.halving.eta=1"],
        "hydra.launcher.halving.eta=1 is not allowed: expected an integer >= 2",
    ),
    (
        [
            "-m",
            "hydra.launcher.halving.rungs=3",
        ],  # Hydra: "Could not override ... Key 'rungs' is not in struct"
        "hydra.launcher.halving.rungs is not a key of hydra.launcher.halving: expected one of eta, min_epochs",
    ),
    (["lr='0.01'"], 'lr="0.01" is a string: expected a number > 0'),
    # Hydra's parse errors (its grammar's functions, --cfg with -m, a key under a value), before Hydra parses
    (
        ["-m", "lr=interval(0.1,0.2)"],
        "lr=interval(0.1,0.2) is not allowed: interval() is a range for a search sweeper",
    ),
    (
        ["-m", "lr=glob(*)"],
        "lr=glob(*) is not allowed: glob() chooses among the files of a config group",
    ),
    (["-m", "--cfg", "job"], "--multirun and --cfg cannot be given together"),
    (
        ["lr.x=1"],
        "lr.x is not a key: lr is one value (a number > 0), not a group of keys: write lr=VALUE",
    ),
]


@pytest.mark.parametrize("args, error", HYDRA, ids=[" ".join(a) for a, _ in HYDRA])
def test_hydra_errors_are_seen_first(args, error):
    with pytest.raises(ConfigError) as e:
        check_overrides(args, whole=True)
    assert str(e.value).startswith(error), str(e.value)


def test_a_sweep_with_m_and_the_right_keys_passes():
    check_overrides(
        [
            "-m",
            "depth=1,2",
            "hydra.launcher.max_group_bytes=1000",
            "hydra/launcher=basic",
            "++lr=0.1",
        ],
        whole=True,
    )


def test_hydra_errors_on_the_command_line_are_one_line_exit_2(tmp_path):
    proc = cli(tmp_path, "depth=1,2")
    assert proc.returncode == 2 and "add -m" in one_line(proc.stderr)
