"""No silent wrong results (issue 55, finding 10): what would rank unlike scores, train on nothing, drop a column a
user named, accept outputs that are no probabilities, or set halving that does nothing is refused in one line (or,
for one configuration under halving, said); an epochs count past the stated ceiling is refused."""

from __future__ import annotations


import pytest

from conftest import command, run_once, user_folder
from sweeper import data
from sweeper.contract.config import TOP_LEVEL, ConfigError, check_value
from test_data_files import refused

FIVE = """
def fit(data, report, *, lr, epochs, seed):
    return predict


def predict(X):
    return X[:, :1] * 0 + 5.0


predict.outputs = "probabilities"
"""


def _refused_sweep(tmp_path, *args: str) -> str:
    """A multirun refused before anything starts: its one line (exit 2, no sweep folder, no store)."""
    out = command(
        "sweeper",
        "-m",
        *args,
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"tracking.uri=sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}",
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 2, (out.stdout + out.stderr)[-2000:]
    assert not (tmp_path / "sweep").exists() and not (tmp_path / "mlruns").exists()
    (line,) = out.stderr.strip().splitlines()
    return line


def test_folds_swept_over_two_protocols_are_refused(tmp_path):
    """Before: data.folds=0,3 ranked a one-split score against a 3-fold mean in one leaderboard."""
    line = _refused_sweep(tmp_path, "data=iris", "data.folds=0,3", "epochs=20")
    assert line.startswith(
        "sweeper: error: data.folds=0,3 is not allowed in one sweep of experiment iris: expected one "
        "value"
    )


def test_a_table_whose_features_are_all_missing_is_refused(tmp_path):
    """Before: trained on the missing-value indicators and reported a score. An empty column beside a real one is
    left out, said in its line."""
    path = tmp_path / "t.csv"
    rows = [f",NA,{i % 5},{i}" for i in range(30)]
    path.write_text("a,b,c,y\n" + "\n".join(rows) + "\n")
    report = {r["column"]: r.get("detail") for r in __import__("test_data_files").load(path).report}
    assert report["a"] == report["b"] == "every cell missing: left out" and report["c"] == "number"
    path.write_text(
        "a,b,y\n" + "\n".join(r.rsplit(",", 2)[0] + "," + r.rsplit(",", 1)[1] for r in rows) + "\n"
    )
    message = refused(path)
    assert message.endswith(
        "no feature column is left: a: every cell missing: left out; b: every cell missing: "
        "left out"
    )


def test_data_categorical_on_a_column_of_fractions_is_refused(tmp_path):
    """Before: the column became 30 one-row categories, left out as 'text' past data.max_categories, with no word of
    the key the user set."""
    path = tmp_path / "t.csv"
    path.write_text("a,b,y\n" + "".join(f"{i * 0.37:.2f},{i % 3},{i}\n" for i in range(60)))
    assert (
        "data.categorical names column a, whose value '0.37' (row 2) is no integer code"
        in refused(path, "data.categorical=[a]")
    )
    ds = data.load(
        __import__("conftest")
        .make_cfg("data=csv", f"data.path={path}", "data.categorical=[b]")
        .data
    )
    assert ds.encoder["columns"][1]["categories"] == [
        "0",
        "1",
        "2",
    ]  # integer codes: encoded, as before


def test_a_predict_whose_probabilities_are_none_fails_its_run(tmp_path, store, monkeypatch):
    """Before: predict.outputs='probabilities' returning 5.0 was scored (accuracy, a log loss of clipped values)."""
    user_folder(tmp_path, monkeypatch, {"five.py": FIVE})
    result = run_once(
        tmp_path, "data=breast_cancer", "model._target_=five.fit", "epochs=5", store=store
    )
    assert result["status"] == "FAILED"
    assert result["reason"] == (
        "five.fit's predict says outputs='probabilities', but it returned values from 5 to 5, "
        "outside [0, 1]: return probabilities, or logits without predict.outputs"
    )


@pytest.mark.parametrize(
    "args, line",
    [
        (
            [
                "hydra.launcher.halving.eta=3",
                "hydra.launcher.halving.min_epochs=500",
                "epochs=100",
                "lr=0.1,0.2",
            ],
            "hydra.launcher.halving.min_epochs=500 is not allowed: expected below the sweep's largest epochs (100)",
        ),
        (
            ["hydra.launcher.halving.eta=3", "epochs=100", "log_every=50", "lr=0.1,0.2"],
            "hydra.launcher.halving.eta=3 is not allowed here: its first rung (at least 2 x log_every = 100 epochs) is not "
            "below the sweep's largest epochs (100)",
        ),
    ],
)
def test_halving_settings_that_stop_nothing_are_refused(tmp_path, args, line):
    """Before: accepted, and every configuration trained its full epochs under 'halving'."""
    assert _refused_sweep(tmp_path, *args).startswith(f"sweeper: error: {line}")


def test_halving_with_a_function_trainer_is_checked_as_any_sweep(tmp_path, monkeypatch):
    """A function trainer is halved through report()'s answer (tests/test_trainer.py): its settings pass the same
    check as a model's (no refusal of the trainer as such; a rung above its epochs still is refused)."""
    from sweeper.sweep import pruning

    user_folder(tmp_path, monkeypatch, {"five.py": FIVE})
    plain = {
        "lr": 0.1,
        "epochs": 400,
        "log_every": 10,
        "seed": 0,
        "model": {"_target_": "five.fit"},
        "data": {"name": "diabetes"},
        "tracking": {},
    }
    pruning.check({"halving": {"eta": 3}}, [plain, {**plain, "lr": 0.2}])
    with pytest.raises(Exception, match="min_epochs=500 is not allowed"):
        pruning.check({"halving": {"eta": 3, "min_epochs": 500}}, [plain, {**plain, "lr": 0.2}])


def test_halving_over_one_configuration_is_said(caplog):
    from sweeper.sweep import pruning

    plain = {
        "lr": 0.1,
        "epochs": 900,
        "log_every": 10,
        "seed": 0,
        "model": {"_target_": "sweeper.models.mlp.MLP"},
        "data": {"name": "iris"},
        "tracking": {},
    }
    with caplog.at_level("WARNING", logger="sweeper"):
        pruning.check(
            {"halving": {"eta": 3}}, [plain, {**plain, "seed": 1}]
        )  # two seeds of one configuration
    assert "halving: one configuration is swept, so there is none to rank it against" in caplog.text


def test_epochs_past_the_ceiling_are_refused(tmp_path):
    """Before: epochs=99999999999999999999999 was accepted and trained forever."""
    from sweeper.contract.config import MAX_EPOCHS

    with pytest.raises(ConfigError, match=f"expected an integer from 1 to {MAX_EPOCHS:,}"):
        check_value("epochs", 99999999999999999999999, TOP_LEVEL["epochs"])
    check_value("epochs", MAX_EPOCHS, TOP_LEVEL["epochs"])
    line = _refused_sweep(tmp_path, "epochs=99999999999999999999999")
    assert (
        line
        == f"sweeper: error: epochs=99999999999999999999999 is not allowed: expected an integer from 1 to "
        f"{MAX_EPOCHS:,}"
    )
