"""The model interface: the MLP through it equals its fused kernels, a user's class from a folder outside the package
is checked, trained alone and stacked (equal), swept, recorded, logged as a model that loads without sweeper, promoted
and re-run; a class whose batched code is wrong trains one at a time; bad models are one-line refusals."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import all_runs, cli, user_folder
from sweeper import ROOT
from sweeper.base.backend import resolve
from sweeper.contract.fingerprint import fingerprint
from sweeper.models import MLP, init_params, train
from sweeper.models.generic import Interfaced, init_host
from sweeper.models.mlp_net import MLPNet
from sweeper.models.optim import Optimizer
from sweeper.models.stacked import Member, batches, train_stacked
from sweeper.insight.pinned import read_pinned
from sweeper.models.interface import MLP_TARGET
from sweeper.contract.compose import plain as _plain

EXAMPLE = ROOT / "examples" / "my_nets" / "my_nets.py"

# A user's mistakes, each in a module of its own (written into the test's folder)
WRONG_BATCH = '''
import numpy as np
from my_nets import TwoLayerNet

class AxisZero(TwoLayerNet):
    """Right alone, wrong stacked: sums the bias gradient over axis 0 (the member axis, once stacked)."""
    def backward(self, xp, params, cache, dout):
        g = super().backward(xp, params, cache, dout)
        X, Z1, A1 = cache
        g["b2"] = dout.sum(axis=0, keepdims=True) if dout.ndim == 2 else dout.sum(axis=0, keepdims=True).repeat(dout.shape[0], 0)[:, :1]
        return g
'''
WRONG_GRAD = """
from my_nets import TwoLayerNet

class HalfBias(TwoLayerNet):
    def backward(self, xp, params, cache, dout):
        g = super().backward(xp, params, cache, dout)
        g["b1"] = 0.5 * g["b1"]
        return g

class NoBackward:
    def __init__(self, hidden=4):
        pass
    def init(self, n_in, n_out, rng):
        return {}
    def forward(self, xp, params, X):
        return X, None
"""


@pytest.fixture
def user(tmp_path, monkeypatch):
    """The example's module and the mistakes above in a folder outside the package, importable as a user's are."""
    folder = user_folder(
        tmp_path,
        monkeypatch,
        {
            "my_nets.py": EXAMPLE.read_text(),
            "wrong_batch.py": WRONG_BATCH,
            "wrong_grad.py": WRONG_GRAD,
        },
    )
    import my_nets  # noqa: F401  (from the folder, not from the repository)

    assert Path(sys.modules["my_nets"].__file__).parent == folder
    return folder


def _data(task: str, n: int = 60, d: int = 4, k: int = 1):
    rng = np.random.default_rng(5)
    X, Xv = rng.standard_normal((n, d)), rng.standard_normal((n // 2, d))
    w = rng.standard_normal((d, 1))
    if task == "regression":
        return X, X @ w + 0.1 * rng.standard_normal((n, 1)), Xv, Xv @ w
    if task == "binary":
        return X, (X @ w > 0).astype(float), Xv, (Xv @ w > 0).astype(float)
    return (
        X,
        np.digitize(X @ w, [-0.5, 0.5]).astype(float),
        Xv,
        np.digitize(Xv @ w, [-0.5, 0.5]).astype(float),
    )


def _assert_fits_equal(a, b, rtol):
    np.testing.assert_array_equal(a.steps, b.steps)
    np.testing.assert_allclose(a.train_loss, b.train_loss, rtol=rtol, atol=0)
    np.testing.assert_allclose(a.val_loss, b.val_loss, rtol=rtol, atol=0)
    assert (a.epochs_run, a.best_epoch, a.diverged_at) == (
        b.epochs_run,
        b.best_epoch,
        b.diverged_at,
    )


@pytest.mark.parametrize("task,k", [("regression", 1), ("binary", 1), ("multiclass", 3)])
@pytest.mark.parametrize(
    "opt,batch_size",
    [
        (Optimizer(), 0),
        (Optimizer("adam", weight_decay=0.01), 0),
        (Optimizer("momentum", nesterov=True), 16),
    ],
)
def test_the_mlp_through_the_interface_equals_its_fused_kernel(task, k, opt, batch_size):
    backend, (X, y, Xv, yv) = resolve("cpu"), _data(task)
    net = MLPNet(2, 6, "tanh")
    generic = Interfaced(np, net, init_host(net, 4, k, 3, "float64"), task, opt.weight_decay)
    fused = MLP(np, init_params([4, 6, 6, k], "tanh", 3, "float64"), "tanh", task, opt.weight_decay)
    args = dict(lr=0.05, epochs=120, log_every=10, opt=opt, batch_size=batch_size, seed=2)
    a, b = (
        train(backend, generic, X, y, Xv, yv, **args),
        train(backend, fused, X, y, Xv, yv, **args),
    )
    _assert_fits_equal(a, b, 1e-12)
    for p, q in zip(generic.params, fused.params):
        np.testing.assert_allclose(p, q, rtol=1e-12, atol=1e-14)


def test_every_pin_keeps_its_fingerprint_with_the_model_group():
    """Runs made before the model group (the pins' fingerprints were computed then) are found by resume=true; a pin
    of a model of yours (a class, a function trainer) keeps the fingerprint its run had (tests/test_best.py's folder:
    conf/best, or --best-dir)."""
    from test_best import BEST, compose_pin, pin_kind

    checked = 0
    for path in BEST:
        kind = pin_kind(path)
        plain = _plain(compose_pin(path))
        if "path" in plain["data"]:
            continue  # its fingerprint holds the data file's absolute path: the machine's, not the model group's
        checked += 1
        assert fingerprint(plain) == read_pinned(path)["fingerprint"], path.stem
        # sweeper's MLP: the model section adds nothing to the fingerprint of a run made before it
        if kind == "mlp":
            assert plain["model"] == {"_target_": MLP_TARGET}
            assert fingerprint({k: v for k, v in plain.items() if k != "model"}) == fingerprint(
                plain
            )
    assert checked >= min(3, len(BEST))


def test_a_user_model_is_checked_and_its_stacked_group_equals_each_member_alone(user):
    from my_nets import TwoLayerNet
    from sweeper.check import check_model

    net = TwoLayerNet(hidden=5)
    assert any(
        c.name.startswith("gradient W1") and c.ok for c in check_model(TwoLayerNet, hidden=5)
    )
    assert batches(net, 4, 1, "regression") is None
    backend, (X, y, Xv, yv) = resolve("cpu"), _data("regression")
    opt = Optimizer("adam")
    fit = train_stacked(
        backend,
        net,
        "regression",
        X,
        y,
        Xv,
        yv,
        [Member(0.01, 0, (40, 100)), Member(0.03, 1, (100,)), Member(10.0, 2, (100,))],
        n_out=1,
        log_every=10,
        opt=opt,
        dtype="float64",
    )
    for i, (lr, seed, counts) in enumerate(
        [(0.01, 0, (40, 100)), (0.03, 1, (100,)), (10.0, 2, (100,))]
    ):
        for c in counts:
            alone = Interfaced(np, net, init_host(net, 4, 1, seed, "float64"), "regression")
            want = train(backend, alone, X, y, Xv, yv, lr=lr, epochs=c, log_every=10, opt=opt)
            got, params = fit.at[i][c]
            if want.diverged_at is None:
                _assert_fits_equal(got, want, 1e-9)
                for name in alone.names:
                    np.testing.assert_allclose(
                        params[name], alone.dict[name], rtol=1e-9, atol=1e-12
                    )
            else:  # a diverged member: the same epoch of divergence, the others untouched by it
                assert got.diverged_at == want.diverged_at


def test_a_model_whose_batched_code_is_wrong_is_detected(user):
    from wrong_batch import AxisZero

    why = batches(AxisZero(hidden=3), 4, 1, "regression")
    assert why is not None and "b2" in why


def test_a_wrong_gradient_fails_the_check_naming_the_parameter(user, capsys):
    from sweeper import check

    with pytest.raises(AssertionError, match=r"gradient b1 .*relative error"):
        check.check_model("wrong_grad:HalfBias", hidden=3)
    assert check.main(["wrong_grad:HalfBias", "hidden=3"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  gradient b1" in out and "ok    gradient W1" in out
    assert check.main(["wrong_grad.NoBackward"]) == 2
    assert "lacks backward" in capsys.readouterr().err
    assert check.main([]) == 2  # before: its docstring on stdout, exit 2, no error line
    said = capsys.readouterr()
    assert (
        said.out == ""
        and said.err.startswith("sweeper.check: error: no model given")
        and said.err.count("\n") == 1
    )
    assert check.main(["--help"]) == 0 and "check_estimator" in capsys.readouterr().out


def test_check_help_fills_its_docstring_to_the_terminal(capsys, monkeypatch):
    """``python -m sweeper.check --help`` prints its docstring's words, filled to the terminal's width (not
    the source's line breaks, which the line length of the code decides)."""
    from sweeper import check

    monkeypatch.setenv("COLUMNS", "62")
    assert check.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.split() == check.__doc__.split()
    assert max(len(line) for line in out.splitlines()) <= 60
    assert out.count("\n\n") == check.__doc__.strip().count("\n\n")  # its paragraphs kept


@pytest.mark.parametrize(
    "args,says",
    [
        (("model._target_=nowhere.Net",), "model._target_=nowhere.Net cannot be imported"),
        (
            ("model._target_=wrong_grad.NoBackward",),
            "model._target_=wrong_grad.NoBackward lacks backward",
        ),
        (
            ("model._target_=my_nets.TwoLayerNet", "model.hiden=8"),
            "model.hiden is not a hyperparameter of my_nets.TwoLayerNet: expected one of model.hidden, model.init_scale",
        ),
        (("-m", "model._target_=my_nets.TwoLayerNet", "model.hidden=4,abc"), "model.hidden"),
    ],
)
def test_a_bad_model_is_a_one_line_refusal_with_nothing_in_the_store(user, tmp_path, args, says):
    store = tmp_path / "mlruns" / "mlflow.db"
    proc = cli(user, *args, "epochs=20", store=store)
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert errors[-1].startswith("sweeper: error: ") and says in errors[-1], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert not store.exists() or not all_runs(store)


@pytest.mark.slow
def test_a_user_model_sweep_is_batched_recorded_loadable_promoted_and_pinned(user, tmp_path):
    from test_model_records import _isolated

    from sweeper import promote
    from sweeper.insight import pinned

    store = tmp_path / "mlruns" / "mlflow.db"
    grid = (
        "-m",
        "model._target_=my_nets.TwoLayerNet",
        "model.hidden=4,8",
        "lr=0.01,0.05",
        "epochs=120",
        "log_every=10",
    )
    proc = cli(user, *grid, store=store)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = [r for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId")]
    assert len(runs) == 4 and all(r.info.status == "FINISHED" for r in runs)
    assert all(r.data.tags["model"] == "my_nets.TwoLayerNet" for r in runs)
    assert all(r.data.tags["model_batched"].startswith("true") for r in runs)
    # checked before it trained, and passed
    assert all(r.data.tags["gradient_check"] == "passed" for r in runs)
    assert {r.data.params["model.hidden"] for r in runs} == {"4", "8"} and "depth" not in runs[
        0
    ].data.params

    alone_store = tmp_path / "alone" / "mlflow.db"
    (tmp_path / "alone").mkdir()
    proc = cli(
        user,
        *grid,
        "hydra/launcher=basic",
        "hydra.sweep.dir=" + str(tmp_path / "alone-sweep"),
        store=alone_store,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    alone = {
        r.data.tags["fingerprint"]: r
        for r in all_runs(alone_store)
        if r.data.tags.get("mlflow.parentRunId")
    }
    assert all(r.data.tags["model_batched"].startswith("false") for r in alone.values())
    for r in runs:
        other = alone[r.data.tags["fingerprint"]]
        for m in ("val_mse", "test_mse", "val_mae"):
            assert r.data.metrics[m] == pytest.approx(other.data.metrics[m], rel=1e-9)

    best = min(runs, key=lambda r: r.data.metrics["val_mse"])
    job = Path(best.data.tags["hydra.job_dir"])
    logged = pd.read_csv(job / "test_predictions.csv")
    split = json.loads((job / "model" / "model" / "serving_input_example.json").read_text())[
        "dataframe_split"
    ]
    # with -I, from a folder without my_nets on the path: the model's code/ carries it
    out = _isolated(
        tmp_path,
        str(job / "model" / "model"),
        store,
        pd.DataFrame(split["data"], columns=split["columns"]),
    )
    np.testing.assert_allclose(out["data"], logged["y_pred"][: len(split["data"])], rtol=1e-12)

    pins = tmp_path / "pins"
    assert promote.main(
        [
            "--experiment",
            "diabetes",
            "--tracking-uri",
            f"sqlite:///{store}",
            "--out-dir",
            str(pins),
            "--name",
            "mynet",
        ]
    ) in (0, None)
    text = (pins / "mynet.yaml").read_text()
    assert "_target_: my_nets.TwoLayerNet" in text and "depth:" not in text
    rerun_store = tmp_path / "rerun" / "mlflow.db"
    (tmp_path / "rerun").mkdir()
    proc = cli(user, f"hydra.searchpath=[file://{tmp_path}]", "+pins=mynet", store=rerun_store)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (rerun,) = all_runs(rerun_store)
    rows = pinned.check(pinned.read_pinned(pins / "mynet.yaml")["expected"], rerun.data.metrics)
    assert rows and not any(r.failed for r in rows)


@pytest.mark.slow
def test_a_model_that_does_not_batch_trains_one_at_a_time_and_says_so(user, tmp_path):
    store = tmp_path / "mlruns" / "mlflow.db"
    proc = cli(
        user,
        "-m",
        "model._target_=wrong_batch.AxisZero",
        "model.hidden=3",
        "lr=0.01,0.02",
        "epochs=30",
        store=store,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = proc.stdout + proc.stderr
    assert "does not batch" in said and "train one at a time" in said
    runs = [r for r in all_runs(store) if r.data.tags.get("mlflow.parentRunId")]
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    assert all(
        r.data.tags["model_batched"].startswith("false: stacked backward differs") for r in runs
    )


def test_a_model_yaml_of_the_users_own_config_folder_is_a_choice_of_the_model_group(user, tmp_path):
    conf = tmp_path / "myconf" / "model"
    conf.mkdir(parents=True)
    (conf / "twolayer.yaml").write_text("_target_: my_nets.TwoLayerNet\nhidden: 6\n")
    store = tmp_path / "mlruns" / "mlflow.db"
    proc = cli(
        user,
        f"hydra.searchpath=[file://{tmp_path / 'myconf'}]",
        "model=twolayer",
        "model.hidden=5",
        "epochs=30",
        store=store,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = all_runs(store)
    assert (
        run.data.params["model._target_"] == "my_nets.TwoLayerNet"
        and run.data.params["model.hidden"] == "5"
    )


def test_a_user_model_from_python_takes_its_hyperparameters_as_the_command_line_does(
    user, tmp_path
):
    import sweeper

    one = sweeper.run(
        [
            "model._target_=my_nets.TwoLayerNet",
            "model.hidden=3",
            "epochs=20",
            f"tracking.uri=sqlite:///{tmp_path / 'py.db'}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ]
    )
    assert one.status == "FINISHED" and "val_mse" in one.metrics
    with pytest.raises(
        ValueError, match="model.hiden is not a hyperparameter of my_nets.TwoLayerNet"
    ):
        sweeper.run(
            [
                "model._target_=my_nets.TwoLayerNet",
                "model.hiden=3",
                f"tracking.uri=sqlite:///{tmp_path / 'py.db'}",
                f"hydra.run.dir={tmp_path / 'run2'}",
            ]
        )


@pytest.mark.slow
def test_a_user_model_group_trains_each_member_as_it_would_alone(user, tmp_path):
    """patience is no key the stacked path varies per member: members of other patience train apart, whichever comes
    first (before: patience=0 first stacked the patience=20 run for all its epochs; patience=20 first trained the
    whole group one at a time, its verdict cached by shape)."""
    grid = (
        "-m",
        "model._target_=my_nets.TwoLayerNet",
        "lr=0.05,0.03",
        "epochs=400",
        "log_every=10",
    )
    got = {}
    for name, args in (
        ("alone", ("patience=0,20", "hydra/launcher=basic")),
        ("first0", ("patience=0,20",)),
        ("first20", ("patience=20,0",)),
    ):
        store = tmp_path / name / "mlflow.db"
        store.parent.mkdir()
        proc = cli(user, *grid, *args, f"hydra.sweep.dir={tmp_path / name / 'sweep'}", store=store)
        assert proc.returncode == 0, proc.stderr[-3000:]
        got[name] = {
            r.data.tags["fingerprint"]: r
            for r in all_runs(store)
            if r.data.tags.get("mlflow.parentRunId")
        }
        assert len(got[name]) == 4
    for order in ("first0", "first20"):
        stacked = [
            r for r in got[order].values() if r.data.tags["model_batched"].startswith("true")
        ]
        # the patience=0 pair stacks
        assert {r.data.params["patience"] for r in stacked} == {"0"} and len(stacked) == 2
        for fp, r in got[order].items():
            alone = got["alone"][fp]
            assert r.data.metrics["epochs_run"] == alone.data.metrics["epochs_run"]
            for m in ("val_mse", "test_mse"):
                assert r.data.metrics[m] == pytest.approx(alone.data.metrics[m], rel=1e-9, abs=0)
            if r.data.params["patience"] == "20":
                assert r.data.metrics["epochs_run"] < 400  # it stopped early, as alone


SUBCLASS = '''
from sweeper.models import MLPNet

class Shifted(MLPNet):
    """The MLP with its output shifted by one: its own forward, so sweeper's fused kernels are not it."""
    def forward(self, xp, params, X):
        out, cache = super().forward(xp, params, X)
        return out + 1.0, cache
'''


def test_the_system_asks_the_model_what_it_offers(tmp_path, monkeypatch):
    """sweeper's MLP declares its fast path, top-level keys and linear form like any model would; a subclass that
    changes its forward declares nothing and trains through the interface; nothing outside models/ names the MLP."""
    import re

    from sweeper.models import interface

    user_folder(tmp_path, monkeypatch, {"shifted.py": SUBCLASS})
    mlp = interface.offer(None)
    assert (
        mlp.fast_path
        and mlp.top_level == ("depth", "width", "activation")
        and mlp.linear == (("depth", 0),)
    )
    assert interface.offer({"_target_": "sweeper.models.mlp_net:MLPNet"}) == interface.Offer(
        "sweeper.models.mlp_net:MLPNet", False, True, mlp.top_level, mlp.linear
    )
    sub = interface.offer({"_target_": "shifted.Shifted", "depth": 1})
    assert not sub.fast_path and not sub.top_level and sub.kind == "model"
    assert interface.offer({"_target_": "nowhere.Net"}, quiet=True) == interface.Offer(
        "nowhere.Net"
    )
    from omegaconf import OmegaConf

    from sweeper.models import build

    base = {
        "seed": 0,
        "dtype": "float64",
        "depth": 1,
        "width": 4,
        "activation": "tanh",
        "weight_decay": 0.0,
    }
    X = np.random.default_rng(0).standard_normal((5, 3))
    # no model section: the MLP's own kernels
    fused = build(OmegaConf.create(base), 3, "regression", resolve("cpu"))
    own = build(
        OmegaConf.create({**base, "model": {"_target_": "shifted.Shifted", "width": 4}}),
        3,
        "regression",
        resolve("cpu"),
    )
    assert isinstance(own, Interfaced) and not isinstance(fused, Interfaced)
    # its own forward, not the kernel
    np.testing.assert_allclose(own.output(X), fused.predict(X) + 1.0, rtol=1e-12)
    named = [
        f"{p.relative_to(ROOT)}:{i}"
        for folder in ("sweeper", "plugins")
        for p in (ROOT / folder).rglob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"MLPNet|is_mlp\(|MLP_TARGET|\"sweeper\.models\.", line)
    ]
    # the places outside models/ that name the MLP (11 in 9 files before issue 53)
    assert named == []


def test_a_signature_python_cannot_read_is_nothing_known_and_a_readable_empty_one_is_refused():
    """interface.parameters owns 'no signature' (a C class's: dict's): hyperparameters, the trainer check, the
    trainer's keys and the class check read it there (four handlers before, each its own)."""
    from sweeper.contract.model import trainer_keys
    from sweeper.models.interface import ModelError, check_trainer, hyperparameters, parameters

    assert parameters(dict) is None
    assert [p.name for p in parameters(lambda data, report, *, lr=0.1: None)] == [
        "data",
        "report",
        "lr",
    ]
    assert hyperparameters(dict) == {}
    assert trainer_keys(dict) == ()
    assert trainer_keys(lambda data, report, *, patience=0, lr=0.1: None) == ("patience",)
    check_trainer(dict, "builtins.dict", {})  # nothing to check it against
    with pytest.raises(ModelError, match="takes 0 positional arguments"):
        check_trainer(lambda: None, "loops.fit", {})


def test_an_import_path_to_a_name_its_module_lacks_is_one_line_and_a_none_is_had(
    tmp_path, monkeypatch
):
    """load_target reads the name with getattr's default: a module without it is one line; one whose
    attribute is None gives None (the caller says it is no model), not "has no"."""
    from sweeper.models.interface import ModelError, load_target

    (tmp_path / "lacking.py").write_text("Net = None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModelError) as err:
        load_target("lacking.TwoLayerNet")
    assert (
        str(err.value)
        == "model._target_=lacking.TwoLayerNet cannot be imported: module lacking has no TwoLayerNet"
    )
    assert load_target("lacking:Net") is None
    with pytest.raises(
        ModelError, match=r"module lacking has no net \(did you mean lacking.Net\?\)$"
    ):
        load_target("lacking.net")
