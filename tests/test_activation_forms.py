"""Each activation's forms (models.forms) against NumPy's own: within 5e-16 in float64 over the whole range, the same
sign, exact at ±0, ±inf and NaN; the probe's choice cached per machine, overridable, and recorded in a run."""

import json

import numpy as np
import pytest

from sweeper.base.environment import ACTIVATION_FORMS, problem
from sweeper.base import state
from sweeper.models import forms

EDGES = np.array(
    [
        0.0,
        -0.0,
        np.inf,
        -np.inf,
        np.nan,
        5e-324,
        -5e-324,
        1e-300,
        -1e-300,
        2.0**-26,
        -(2.0**-26),
        2.0**-27,
        1e-8,
        -1e-8,
        0.5,
        -0.5,
        9.39,
        -9.39,
        19.1,
        -19.1,
        354.0,
        -354.0,
        355.0,
        -355.0,
        709.0,
        -709.0,
        710.0,
        -710.0,
        1e300,
        -1e300,
        np.finfo(float).max,
        -np.finfo(float).max,
    ]
)


def _library(activation, z):
    """NumPy's own: np.tanh, ½ (1 + tanh(½ z)), max(z, 0), computed independently of models.forms."""
    if activation == "tanh":
        return np.tanh(z)
    if activation == "sigmoid":
        return 0.5 * (1.0 + np.tanh(0.5 * z))
    return np.maximum(z, 0)


@np.errstate(over="ignore")  # float32: the largest edges become ±inf
def _dense(dtype):
    rng = np.random.default_rng(7)
    return np.concatenate(
        [
            np.linspace(-40, 40, 800_001),
            rng.standard_normal(400_000) * 4,
            np.geomspace(1e-300, 800, 200_000),
            -np.geomspace(1e-300, 800, 200_000),
            np.linspace(-800, 800, 100_001),
            EDGES,
        ]
    ).astype(dtype)


def _form(activation, form, z):
    out = z.copy()
    build, needs = forms.FORMS[activation][form]
    with np.errstate(over="ignore"):
        for call in build(np, out, forms.scratch_for(np, out) if needs else None):
            call()
    return out


ALL = [(a, f) for a, fs in forms.FORMS.items() for f in fs]


@pytest.mark.parametrize("activation,form", ALL, ids=[f"{a}-{f}" for a, f in ALL])
def test_each_form_is_numpys_own_within_5e16_with_its_sign_and_exact_edges(activation, form):
    z = _dense("float64")
    got, want = _form(activation, form, z), _library(activation, z)
    finite = np.isfinite(want)
    assert np.abs(got[finite] - want[finite]).max() <= 5e-16
    same = (np.sign(got) == np.sign(want)) | (np.isnan(got) & np.isnan(want))
    # ½ (1 + tanh(½ z)) rounds to 0 below z ≈ -38; 1 / (1 + exp(-z)) keeps σ(z) ≈ e^z there
    if activation == "sigmoid":
        kept = (want == 0) & (got > 0)
        np.testing.assert_allclose(got[kept], np.exp(z[kept]), rtol=1e-15)
        same |= kept
    assert same.all()
    edges = _form(activation, form, EDGES)
    expected = _library(activation, EDGES)
    # ±0 (sign bit included below), ±inf, NaN exactly
    np.testing.assert_array_equal(edges[:5], expected[:5])
    np.testing.assert_array_equal(np.signbit(edges[:2]), np.signbit(expected[:2]))
    if (activation, form) == (
        "tanh",
        "exp",
    ):  # where tanh(z) rounds to z, z itself: no loss of relative precision
        tiny = z[(np.abs(z) < 2.0**-26) & (z != 0)]
        np.testing.assert_array_equal(_form(activation, form, tiny), tiny)


@pytest.mark.parametrize("activation,form", ALL, ids=[f"{a}-{f}" for a, f in ALL])
def test_each_form_in_float32_is_within_a_few_of_its_units(activation, form):
    z = _dense("float32")
    with np.errstate(over="ignore"):
        got, want = _form(activation, form, z), _library(activation, z)
    finite = np.isfinite(want)
    assert np.abs(got[finite] - want[finite]).max() <= 4 * np.finfo(np.float32).eps
    assert ((np.sign(got) == np.sign(want)) | np.isnan(want) | ((want == 0) & (got > 0))).all()
    if (activation, form) == ("tanh", "exp"):
        tiny = z[(np.abs(z) < 2.0**-12) & (z != 0)]
        np.testing.assert_array_equal(_form(activation, form, tiny), tiny)


def test_the_allocating_path_and_the_in_place_calls_round_alike(monkeypatch):
    """MLPNet.forward's f (evaluation) and the fused epoch's calls (training) use the same form, bit for bit."""
    from sweeper.models.activations import ACTIVATIONS

    monkeypatch.setenv(forms.ENV, "tanh=exp,sigmoid=exp")
    z = np.random.default_rng(3).standard_normal((30_000, 7)) * 4
    for name, act in ACTIVATIONS.items():
        inplace = z.copy()
        with np.errstate(over="ignore"):
            for call in act.f_calls(np, inplace):
                call()
        np.testing.assert_array_equal(act.f(np, z), inplace)
        if name != "relu":
            # the exp form really ran (a few roundings apart)
            assert not np.array_equal(inplace, _library(name, z))


def test_the_forms_are_the_ones_the_environment_variable_names():
    assert {a: tuple(fs) for a, fs in forms.FORMS.items()} == ACTIVATION_FORMS
    assert problem({forms.ENV: "tanh=exp,sigmoid=library"}) is None
    assert problem({forms.ENV: "library"}) is None
    bad = problem({forms.ENV: "tanh=fast"})
    assert bad.startswith(
        "the environment variable SWEEPER_ACTIVATION_FORMS=tanh=fast is not allowed"
    )


def test_the_probe_picks_per_machine_once_and_the_cache_or_the_variable_decide_after(
    monkeypatch, tmp_path
):
    monkeypatch.setenv("SWEEPER_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(forms.ENV, raising=False)
    monkeypatch.setattr(state.process(), "forms", {})
    choice, rates = forms.probe("float64", size=4096, repeats=3)
    assert set(choice) == set(forms.FORMS) and all(rates[a][f] > 0 for a, f in ALL)
    first = forms.chosen(np, "float64")
    known = json.loads((tmp_path / "activation-forms.json").read_text())
    assert known[forms.machine_key("float64")] == first
    # another process of this machine reads the file: a planted choice there is what it uses
    planted = {"tanh": "exp", "sigmoid": "library", "relu": "library"}
    (tmp_path / "activation-forms.json").write_text(
        json.dumps({forms.machine_key("float64"): planted})
    )
    monkeypatch.setattr(state.process(), "forms", {})
    assert forms.chosen(np, "float64") == planted
    monkeypatch.setenv(forms.ENV, "library")
    assert forms.chosen(np, "float64") == {a: "library" for a in forms.FORMS}
    monkeypatch.setenv(forms.ENV, "sigmoid=exp")
    assert (
        forms.chosen(np, "float64")["sigmoid"] == "exp"
        and forms.chosen(np, "float64")["tanh"] == "library"
    )
    # CuPy: its own kernels
    assert forms.chosen(object(), "float64") == {a: "library" for a in forms.FORMS}


def test_a_training_in_either_form_ends_within_rounding_of_the_other(monkeypatch):
    """The choice never changes a metric beyond rounding: 300 epochs of tanh and sigmoid networks, each form."""
    from sweeper import data, models
    from sweeper.base.backend import Backend
    from sweeper.models.mlp import MLP, init_params
    from conftest import make_cfg

    ds = data.load(make_cfg("data=diabetes").data, 0)
    for activation in ("tanh", "sigmoid"):
        losses = []
        for env in ("library", f"{activation}=exp"):
            monkeypatch.setenv(forms.ENV, env)
            model = MLP(
                np,
                init_params([ds.n_features, 16, 16, 1], activation, 0, "float64"),
                activation,
                ds.task,
            )
            fit = models.train(
                Backend("cpu", np),
                model,
                ds.X_train,
                ds.y_train,
                ds.X_val,
                ds.y_val,
                lr=0.05,
                epochs=300,
                log_every=10,
            )
            losses.append(fit.val_loss)
        np.testing.assert_allclose(losses[0], losses[1], rtol=1e-12)


@pytest.mark.parametrize("env", ["library", "tanh=exp"])
def test_a_run_records_the_form_its_activation_was_computed_in(tmp_path, store, monkeypatch, env):
    from conftest import FAST_ARGS, all_runs, run_once

    monkeypatch.setenv(forms.ENV, env)
    run_once(tmp_path, "data=diabetes", "activation=tanh", *FAST_ARGS, store=store)
    (run,) = all_runs(store)
    assert run.data.tags[forms.TAG] == ("tanh=exp" if env == "tanh=exp" else "tanh=library")
