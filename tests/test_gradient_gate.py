"""A model of yours is checked before it trains: its gradients against finite differences, once per model source,
hyperparameters and data shape. A wrong one refuses the sweep in one line, with nothing in the store;
``model.check=false`` trains it anyway and tags (and marks) every run; a right one trains as before."""

from __future__ import annotations

import pytest

from conftest import all_runs, cli, run_once, user_folder
from sweeper import ROOT
from sweeper.base import state
from sweeper.contract.config import ConfigError

EXAMPLE = ROOT / "examples" / "my_nets" / "my_nets.py"
# A sign lost in one bias's gradient: the rest of the backward pass is right
WRONG = """
from my_nets import TwoLayerNet

class SignBias(TwoLayerNet):
    def backward(self, xp, params, cache, dout):
        g = super().backward(xp, params, cache, dout)
        g["b1"] = -g["b1"]
        return g
"""


@pytest.fixture
def user(tmp_path, monkeypatch):
    return user_folder(
        tmp_path, monkeypatch, {"my_nets.py": EXAMPLE.read_text(), "wrong.py": WRONG}
    )


@pytest.fixture(autouse=True)
def _fresh_verdicts(tmp_path, monkeypatch):
    """Each test checks afresh: this process's verdicts emptied, a cache folder of its own."""
    monkeypatch.setattr(state.process(), "gradchecks", {})
    monkeypatch.setenv("SWEEPER_CACHE_DIR", str(tmp_path / "cache"))


def _refusal(proc) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert lines[-1].startswith("sweeper: error: "), proc.stderr[-3000:]
    return lines[-1]


def test_a_wrong_gradient_refuses_the_sweep_in_one_line_naming_the_parameter(user, tmp_path):
    store = tmp_path / "mlruns" / "mlflow.db"
    proc = cli(
        user,
        "-m",
        "model._target_=wrong.SignBias",
        "model.hidden=4,8",
        "lr=0.01,0.02",
        "epochs=20",
        store=store,
    )
    line = _refusal(proc)
    assert "the gradient of b1 is wrong" in line and "worst relative error" in line, line
    assert "python -m sweeper.check wrong.SignBias hidden=4 shows the whole check" in line
    assert "model.check=false" in line
    assert not store.exists() and not (tmp_path / "sweep").exists()


def test_a_single_run_of_a_wrong_gradient_is_refused_before_the_store(user, tmp_path, store):
    before = all_runs(store)
    with pytest.raises(
        ConfigError, match=r"model._target_=wrong.SignBias: the gradient of b1 is wrong"
    ):
        run_once(
            tmp_path, "model._target_=wrong.SignBias", "++model.hidden=3", "epochs=10", store=store
        )
    assert all_runs(store) == before


@pytest.mark.slow
def test_with_model_check_false_it_trains_and_every_run_is_tagged_and_marked(user, tmp_path):
    store = tmp_path / "mlruns" / "mlflow.db"
    proc = cli(
        user,
        "-m",
        "model._target_=wrong.SignBias",
        "model.hidden=4",
        "lr=0.01,0.02",
        "epochs=20",
        "model.check=false",
        store=store,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = [r for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId")]
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    assert all(
        r.data.tags["gradient_check"] == "failed"
        and r.data.tags["gradient_check_detail"].startswith("b1: ")
        for r in runs
    )
    assert all(
        "model.check" not in r.data.params and r.data.tags["config.model.check"] == "False"
        for r in runs
    )
    board = proc.stdout + proc.stderr
    assert board.count("FINISHED (gradient check failed)") == 2, board[-3000:]


def test_a_right_model_passes_and_its_runs_say_so(user, tmp_path, store):
    result = run_once(
        tmp_path, "model._target_=my_nets.TwoLayerNet", "++model.hidden=3", "epochs=10", store=store
    )
    assert result["status"] == "FINISHED"
    (run,) = all_runs(store)
    assert (
        run.data.tags["gradient_check"] == "passed" and "gradient_check_detail" not in run.data.tags
    )


def test_the_verdict_is_kept_by_the_models_source(user, monkeypatch):
    """Computed once per model source, hyperparameters and shape; read back in another process (the cache file);
    computed again once the model's module changes."""
    from sweeper.models import gradcheck

    calls = []
    real = gradcheck.check_gradients
    monkeypatch.setattr(
        gradcheck, "check_gradients", lambda *a, **k: calls.append(a[1:3]) or real(*a, **k)
    )
    model = {"_target_": "wrong.SignBias", "hidden": 3}
    assert not gradcheck.verdict(model, 5, 1, "regression").ok
    assert not gradcheck.verdict(model, 5, 1, "regression").ok  # this process's
    state.process().gradchecks.clear()  # as another process: the cache file
    assert not gradcheck.verdict(model, 5, 1, "regression").ok
    assert calls == [(5, 1)]
    gradcheck.verdict(model, 5, 2, "multiclass")  # another shape
    gradcheck.verdict({**model, "hidden": 4}, 5, 1, "regression")  # other hyperparameters
    assert calls == [(5, 1), (5, 2), (5, 1)]
    state.process().gradchecks.clear()
    (user / "wrong.py").write_text(WRONG.replace('g["b1"] = -g["b1"]', "pass"))  # fixed
    import importlib
    import sys

    importlib.reload(sys.modules["wrong"])
    assert gradcheck.verdict(model, 5, 1, "regression").ok
    assert len(calls) == 4


def test_a_kink_is_not_a_wrong_gradient():
    """A ReLU's kink within the step of one pre-activation fails one draw, not two: a right model is not refused."""
    import numpy as np

    from sweeper.models import gradcheck

    X0, R0 = gradcheck._draw(0, 3, 1)
    W = np.random.default_rng(7).standard_normal((3, 1))
    # the first draw's row 0 sits on the kink: its product is 0
    W[0, 0] = -(X0[0, 1:] @ W[1:, 0]) / X0[0, 0]

    class Relu:
        def init(self, n_in, n_out, rng):
            return {"W": W.copy()}

        def forward(self, xp, params, X):
            Z = X @ params["W"]
            return xp.maximum(Z, 0), (X, Z)

        def backward(self, xp, params, cache, dout):
            X, Z = cache
            return {"W": X.swapaxes(-1, -2) @ (dout * (Z > 0))}

    net, params = Relu(), {"W": W.copy()}
    grads = net.backward(np, params, net.forward(np, params, X0)[1], R0)
    # the bad luck is real
    assert gradcheck.fd_error(net, params, X0, R0, "W", grads["W"]) > gradcheck.FD_RTOL
    assert gradcheck.check_gradients(net, 3, 1).ok


@pytest.mark.parametrize(
    "args,says",
    [
        (("model.check=false",), "model.check=False is not allowed with sweeper's MLP"),
        (
            ("model._target_=my_nets.TwoLayerNet", "model.check=maybe"),
            "model.check=maybe is not allowed: expected true or false",
        ),
    ],
)
def test_model_check_where_it_means_nothing_is_refused(user, tmp_path, args, says):
    proc = cli(user, *args, "epochs=5", store=tmp_path / "s" / "mlflow.db")
    assert says in _refusal(proc)


class _Linear:
    """A right linear model; ``broken`` names the step that goes wrong."""

    def __init__(self, broken: str = ""):
        self.broken = broken

    def init(self, n_in, n_out, rng):
        if self.broken == "init":
            raise RuntimeError("no weights\nsecond line")
        return {"W": rng.standard_normal((n_in, n_out))}

    def forward(self, xp, params, X):
        if self.broken == "forward":
            raise ValueError("bad rows")
        if self.broken == "single":
            return X @ params["W"]  # not (out, cache)
        return X @ params["W"], X

    def backward(self, xp, params, cache, dout):
        if self.broken == "backward":
            raise KeyError("W")
        if self.broken == "missing":
            return {}
        return {"W": cache.T @ dout}


@pytest.mark.parametrize(
    "broken, problem",
    [
        ("", None),
        ("init", "init raised RuntimeError: no weights"),
        ("forward", "forward raised ValueError: bad rows"),
        ("single", "forward raised ValueError: too many values to unpack (expected 2)"),
        ("backward", "backward raised KeyError: 'W'"),
        ("missing", "backward gave no gradient of its shape (3, 1) for W"),
    ],
)
def test_what_the_models_code_did_is_the_checks_one_line_problem(broken, problem):
    """check_gradients never raises what the model's own code raised: each step's error (or a
    wrong shape) is the check's problem, one line naming the step."""
    from sweeper.models.gradcheck import check_gradients

    got = check_gradients(_Linear(broken), 3, 1)
    assert got.problem == problem
    assert got.ok is (problem is None)
