"""Keys that would do nothing with a model of yours are refused in one line before anything trains: the MLP's
hyperparameters with another model, sweeper's training-loop keys with a function trainer whose signature does not
name them (one that names them receives them)."""

from __future__ import annotations

import pytest

from conftest import all_runs, cli, run_once, user_folder
from sweeper import ROOT

LOOPS = """
def takes_batch(data, report, *, lr, epochs, seed, batch_size=0):
    raise ValueError(f"received batch_size={batch_size}")
"""


@pytest.fixture
def user(tmp_path, monkeypatch):
    return user_folder(
        tmp_path,
        monkeypatch,
        {
            "my_nets.py": (ROOT / "examples" / "my_nets" / "my_nets.py").read_text(),
            "my_loop.py": (ROOT / "examples" / "my_loop" / "my_loop.py").read_text(),
            "loops.py": LOOPS,
        },
    )


@pytest.mark.parametrize(
    "args,says",
    [
        (
            ("-m", "model._target_=my_nets.TwoLayerNet", "depth=1,2"),
            "depth=2 does nothing with my_nets.TwoLayerNet: depth, width and activation are sweeper's MLP's hyperparameters; "
            "my_nets.TwoLayerNet's are model.hidden, model.init_scale",
        ),
        (
            ("model._target_=my_loop.fit", "activation=relu"),
            "activation=relu does nothing with my_loop.fit",
        ),
        (
            ("model._target_=my_loop.fit", "batch_size=32"),
            "batch_size=32 does nothing with my_loop.fit: a function trainer runs its own loop and receives lr, epochs, seed, "
            "its model.NAME hyperparameters and, of sweeper's training keys, only those its signature names (none)",
        ),
        (
            ("-m", "model._target_=loops.takes_batch", "optimizer=gd,adam"),
            "optimizer=adam does nothing with loops.takes_batch",
        ),
    ],
)
def test_a_key_that_would_do_nothing_is_a_one_line_refusal(user, tmp_path, args, says):
    store = tmp_path / "mlruns" / "mlflow.db"
    proc = cli(user, *args, "epochs=10", store=store)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert lines[-1].startswith("sweeper: error: ") and says in lines[-1], lines[-1]
    assert not store.exists()


def test_a_trainer_receives_the_loop_keys_its_signature_names(user, tmp_path, store):
    result = run_once(
        tmp_path, "model._target_=loops.takes_batch", "batch_size=7", "epochs=10", store=store
    )
    assert result["status"] == "FAILED" and "received batch_size=7" in result["reason"]


def test_a_key_at_its_default_or_one_the_model_uses_is_accepted(user, tmp_path, store):
    result = run_once(
        tmp_path,
        "model._target_=my_nets.TwoLayerNet",
        "depth=1",
        "optimizer=adam",
        "patience=3",
        "epochs=10",
        store=store,
    )  # depth=1 is the default: nothing was asked of it
    assert result["status"] == "FINISHED"
    assert {r.data.params["optimizer"] for r in all_runs(store)} == {"adam"}


NUMPYDOC = '''
class Net:
    """A net.

    Parameters
    ----------
    hidden : int
        units of the hidden layer
    act : str
        its activation
    """

    def __init__(self, hidden: int = 8, act="relu", scale=None):
        pass
'''


def test_help_with_a_model_lists_its_own_hyperparameters(user):
    from sweeper.contract.helptext import main_help

    (user / "numpydoc_net.py").write_text(NUMPYDOC)

    def shown(*args: str) -> str:
        return " ".join(main_help(list(args)).split())

    text = shown("model._target_=my_nets.TwoLayerNet")
    assert "shown for model._target_=my_nets.TwoLayerNet, a model class" in text
    assert "model.hidden default 16; an integer (ReLU units of the hidden layer, >= 1)" in text
    assert (
        "model.init_scale default 1.0; a number (a factor on the He-normal initial weights, > 0)"
        in text
    )
    text = shown("++model._target_=numpydoc_net.Net")
    assert "model.hidden default 8; an integer (int: units of the hidden layer)" in text
    assert (
        "model.act default relu; a string (str: its activation)" in text
        and "model.scale default null; any value" in text
    )
    text = shown("model._target_=my_loop.fit")
    assert (
        "model.l2 default 0.0; a number (the weights' L2 penalty, >= 0)" in text
        and "model.check" not in text
    )
    assert "those its signature names: none" in text
    text = shown("model._target_=nowhere.Net")
    assert (
        "model._target_=nowhere.Net cannot be imported" in text
        and "its hyperparameters cannot be listed" in text
    )
    assert "model._target_=PATH --help lists a model's own" in main_help([])
