"""Which model, everywhere: sweeper.runs, report, the leaderboard and promote name each run's model (short: ``mlp``,
``my_nets.TwoLayerNet``); promote ranks within one model unless asked otherwise."""

from __future__ import annotations

import pytest
import yaml

from conftest import all_runs, cli, run_once, user_folder
from sweeper import ROOT, promote, runs
from sweeper.base.tags import model_name
from sweeper.insight import leaderboard


def test_a_runs_model_is_named_short():
    assert (
        model_name({}) == "mlp"
        and model_name({"model": "my_nets.TwoLayerNet"}) == "my_nets.TwoLayerNet"
    )
    assert model_name({"model": "lab.nets.resnets:ResTanh"}) == "resnets.ResTanh"


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """One experiment holding a sweep of a model of yours and single runs of sweeper's MLP, the MLP the best."""
    tmp = tmp_path_factory.mktemp("mixed")
    mp = pytest.MonkeyPatch()
    user = user_folder(
        tmp, mp, {"my_nets.py": (ROOT / "examples" / "my_nets" / "my_nets.py").read_text()}
    )
    store = tmp / "mlruns" / "mlflow.db"
    proc = cli(
        user,
        "-m",
        "model._target_=my_nets.TwoLayerNet",
        "model.hidden=2,4",
        "lr=0.001",
        "epochs=30",
        "log_every=10",
        store=store,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for i, lr in enumerate((0.01, 0.02)):
        assert (
            run_once(tmp / f"mlp{i}", f"lr={lr}", "epochs=300", "log_every=10", store=store)[
                "status"
            ]
            == "FINISHED"
        )
    yield store, proc.stdout + proc.stderr
    mp.undo()


@pytest.mark.slow
def test_runs_report_and_leaderboard_name_the_model(mixed, capsys):
    store, swept = mixed
    head = next(ln for ln in swept.splitlines() if ln.startswith("run "))
    # the leaderboard's model column
    assert head.split()[:2] == ["run", "model"] and "model._target_" not in head
    assert sum("my_nets.TwoLayerNet" in ln for ln in swept.splitlines()) >= 2
    assert runs.main(["--experiment", "diabetes", "--tracking-uri", f"sqlite:///{store}"]) == 0
    out = capsys.readouterr().out
    sweep_row = next(ln for ln in out.splitlines() if "my_nets.TwoLayerNet" in ln)
    assert "2" in sweep_row.split()  # its jobs
    singles = [ln for ln in out.splitlines() if " mlp " in f" {ln} "]
    assert len(singles) == 2  # each single run of the MLP, named
    mine = [r for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId")]
    board = leaderboard.build(mine)
    assert board.columns[:2] == ["run", "model"] and {r["model"] for r in board.rows} == {
        "my_nets.TwoLayerNet"
    }
    assert (
        "model"
        not in leaderboard.build(
            [
                r
                for r in all_runs(store)
                if "model" not in r.data.tags and "fingerprint" in r.data.tags
            ]
        ).columns
    )  # the MLP's board as before


@pytest.mark.slow
def test_promote_ranks_within_one_model_unless_asked(mixed, tmp_path, capsys):
    store, _ = mixed
    args = ["--experiment", "diabetes", "--tracking-uri", f"sqlite:///{store}"]
    assert promote.main([*args, "--out-dir", str(tmp_path / "a"), "--top", "2", "--name", "p"]) == 0
    out = capsys.readouterr().out
    assert (
        "within model mlp, the best run's (the experiment's runs trained my_nets.TwoLayerNet too"
        in out
    )
    docs = [yaml.safe_load((tmp_path / "a" / f"p_{i}.yaml").read_text()) for i in (1, 2)]
    # both the MLP's: the other model is not the runner-up
    assert all("model" not in d for d in docs)
    assert (
        promote.main(
            [
                *args,
                "--out-dir",
                str(tmp_path / "b"),
                "--model",
                "my_nets.TwoLayerNet",
                "--name",
                "q",
            ]
        )
        == 0
    )
    assert (
        yaml.safe_load((tmp_path / "b" / "q.yaml").read_text())["model"]["_target_"]
        == "my_nets.TwoLayerNet"
    )
    assert "model=my_nets.TwoLayerNet" in capsys.readouterr().out
    assert (
        promote.main(
            [*args, "--out-dir", str(tmp_path / "c"), "--model", "all", "--top", "4", "--name", "r"]
        )
        == 0
    )
    assert len(list((tmp_path / "c").glob("r_*.yaml"))) == 4
    capsys.readouterr()
    assert promote.main([*args, "--out-dir", str(tmp_path / "d"), "--model", "nope"]) == 2
    assert (
        "--model=nope is not allowed: no finished CPU run of experiment diabetes trained it: expected one of mlp, "
        "my_nets.TwoLayerNet, or all" in capsys.readouterr().err
    )
