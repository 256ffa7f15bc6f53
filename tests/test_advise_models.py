"""The advisor on what a model of yours does: a training loss that rises under plain full-batch gradient descent is the
step or the gradient, never overfitting; a model deterministic in seed gets no seeds proposed."""

from __future__ import annotations

import pytest
from test_advise_units import curve, kinds, only, ranked, rec

from conftest import cli, user_folder
from sweeper import ROOT
from sweeper.insight.advice.advisor import advise as run_advisor

# an early best, then up
VAL = [1.4 - 0.9 * min(i, 26) / 26 + 0.0015 * max(0, i - 26) for i in range(200)]
RISING_TRAIN = [1.5 - 0.9 * min(i, 26) / 26 + 0.002 * max(0, i - 26) for i in range(200)]


def _rising(**params):
    run = rec(
        4700, lr=0.05, epochs=2000, metrics={"best_epoch": 260.0, "epochs_run": 2000.0}, **params
    )
    return run_advisor(
        [run],
        ["lr=0.05", "epochs=2000"],
        {"val_loss": curve(VAL), "train_loss": curve(RISING_TRAIN)},
    )


def test_a_rising_training_loss_under_full_batch_descent_is_the_step_or_the_gradient_not_overfitting():
    a = _rising()
    f = only(a, "rising_loss")
    assert "overfitting" not in kinds(a) and "under_training" not in kinds(a)
    assert "the step is too large or the gradient is wrong" in f.summary
    assert f.set == {"lr": "0.025"} and "lr=0.025" in a.command and "patience" not in a.command
    assert "train_loss 0.6 at epoch 260 (its minimum)" in f.evidence[0]
    # momentum, mini-batches or weight decay may raise it without a fault: no such finding (and the rise is no
    # overfitting either: the training loss did not fall)
    for other in ({"optimizer": "momentum"}, {"batch_size": 32}, {"weight_decay": 0.01}):
        assert "rising_loss" not in kinds(_rising(**other)) and "overfitting" not in kinds(
            _rising(**other)
        )


def test_for_a_model_of_yours_the_finding_gives_its_check_command():
    a = _rising(**{"model._target_": "my_nets.TwoLayerNet", "model.hidden": 8})
    f = only(a, "rising_loss")
    assert "python -m sweeper.check my_nets.TwoLayerNet hidden=8" in f.step
    run = rec(
        4700,
        lr=0.05,
        epochs=2000,
        metrics={"best_epoch": 260.0, "epochs_run": 2000.0},
        **{"model._target_": "wrong.Net"},
    )
    run["gradient_check"] = "failed"  # trained under model.check=false
    a = run_advisor([run], ["lr=0.05"], {"val_loss": curve(VAL), "train_loss": curve(RISING_TRAIN)})
    f = only(a, "rising_loss")
    assert f.summary.endswith("the gradient is wrong (its check failed)") and not f.set
    assert f.step.startswith(
        "fix the model's backward pass (python -m sweeper.check wrong.Net names the parameter)"
    )


def test_a_model_deterministic_in_seed_gets_no_seeds():
    runs = ranked(
        [
            rec(v, seed=s, **{"model._target_": "ridge.fit", "model.l2": l2})
            for l2, v in ((0.1, 3130.0), (10, 3070.0))
            for s in (0, 1)
        ]
    )
    a = run_advisor(runs, ["model._target_=ridge.fit", "model.l2=0.1,10", "seed=0,1"])
    f = only(a, "noise")
    assert (
        f.tag == "deterministic" and "deterministic in seed" in f.summary and f.set == {"seed": "0"}
    )
    assert "no noise from seed" in f.evidence[0] and "sweep seed=0,1,2" not in a.text()
    assert "ties" not in kinds(a)  # a configuration's seeds tie by design
    assert not a.command or "seed=0,1" not in a.command
    noisy = ranked(
        [
            rec(v + s, seed=s, **{"model.l2": l2})
            for l2, v in ((0.1, 3130.0), (10, 3070.0))
            for s in (0, 1)
        ]
    )
    assert only(run_advisor(noisy, ["model.l2=0.1,10", "seed=0,1"]), "noise").tag != "deterministic"


NEG_OUT = """
from my_nets import TwoLayerNet

class NegOut(TwoLayerNet):
    def backward(self, xp, params, cache, dout):
        g = super().backward(xp, params, cache, dout)
        g["W2"], g["b2"] = -g["W2"], -g["b2"]
        return g
"""
RIDGE = """
def fit(data, report, *, lr, epochs, seed, l2=1.0):
    xp = data.xp
    X, y = data.X_train, data.y_train
    w = xp.linalg.solve(X.T @ X + l2 * xp.eye(X.shape[1]), X.T @ y)
    report(0, train_loss=float(((X @ w - y) ** 2).mean()), val_loss=float(((data.X_val @ w - data.y_val) ** 2).mean()))
    return lambda Z: Z @ w
"""


@pytest.fixture
def user(tmp_path, monkeypatch):
    return user_folder(
        tmp_path,
        monkeypatch,
        {
            "my_nets.py": (ROOT / "examples" / "my_nets" / "my_nets.py").read_text(),
            "neg_out.py": NEG_OUT,
            "ridge.py": RIDGE,
        },
    )


@pytest.mark.slow
def test_a_negated_output_gradient_is_named_the_gradient_not_overfitting(user, tmp_path):
    proc = cli(
        user,
        "-m",
        "model._target_=neg_out.NegOut",
        "lr=0.002,0.005",
        "epochs=300",
        "log_every=10",
        "model.check=false",
        store=tmp_path / "s" / "mlflow.db",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    advice = (proc.stdout + proc.stderr).partition("Advice:")[2]
    assert (
        "training loss rising" in advice and "the gradient is wrong (its check failed)" in advice
    ), advice
    assert "python -m sweeper.check neg_out.NegOut" in advice and "overfitting:" not in advice


@pytest.mark.slow
def test_a_closed_form_trainer_swept_over_seeds_is_deterministic(user, tmp_path):
    proc = cli(
        user,
        "-m",
        "model._target_=ridge.fit",
        "model.l2=0.1,10",
        "seed=0,1",
        store=tmp_path / "s" / "mlflow.db",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    advice = (proc.stdout + proc.stderr).partition("Advice:")[2]
    assert (
        "deterministic in seed" in advice
        and "add seeds" not in advice
        and "seed=0,1,2 to measure" not in advice
    )


BOUNDED = '''
class Net:
    """A net of ``hidden`` units (an integer, >= 3)."""

    def __init__(self, hidden: int = 16, scale=0.5):
        """hidden: units of the hidden layer, >= 3"""
'''


def _edge_down(key, values, **extra):
    runs = ranked([rec(3000.0 + 100 * i, **{key: v}, **extra) for i, v in enumerate(values)])
    return run_advisor(runs, [f"{key}={','.join(map(str, values))}"])


def test_a_models_own_hyperparameter_is_extended_within_its_declared_domain(tmp_path, monkeypatch):
    user_folder(tmp_path, monkeypatch, {"bounded.py": BOUNDED})
    # not importable here, or no bound declared: a grid of positive integers stays at 1 or more (never 0)
    a = _edge_down("model.hidden", [2, 4], **{"model._target_": "nowhere.Net"})
    assert only(a, "edge").add == {"model.hidden": ["1"]}
    # declared: an int >= 3 (the constructor's docstring): nothing below 3, so no edge to extend
    a = _edge_down("model.hidden", [3, 6], **{"model._target_": "bounded.Net"})
    assert "edge" not in kinds(a)
    # its default's type: a float, so halves and quarters
    a = _edge_down("model.scale", [1, 2], **{"model._target_": "bounded.Net"})
    assert only(a, "edge").add == {"model.scale": ["0.5", "0.25"]}


def test_the_linear_reference_finding_speaks_the_models_terms():
    base = {"linear": {"val_mse": 2000.0}}
    mlp = run_advisor(
        ranked([rec(3000.0, lr=0.01), rec(3100.0, lr=0.1)]), ["lr=0.01,0.1"], baselines=base
    )
    assert "prefer the linear model (depth=0)" in only(mlp, "baseline").step
    runs = []
    for lr, v in ((0.01, 3000.0), (0.1, 3100.0)):
        r = rec(v, lr=lr, **{"model._target_": "my_nets.TwoLayerNet"})
        for k in ("depth", "width"):
            # a model of yours has no depth: its runs do not record the MLP's keys
            r["params"].pop(k)
        runs.append(r)
    mine = run_advisor(
        ranked(runs), ["model._target_=my_nets.TwoLayerNet", "lr=0.01,0.1"], baselines=base
    )
    assert (
        "prefer the linear reference unless" in only(mine, "baseline").step
        and "depth" not in mine.text()
    )
