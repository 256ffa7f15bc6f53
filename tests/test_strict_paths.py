"""Every GPU code path on the strict device stand-in (``SWEEPER_FAKE_GPU=strict``): nothing CuPy would refuse, nothing
crossing to the host inside an epoch, and the CPU's metrics (float64: 1e-12; the CPU's activations in NumPy's own
form, as the GPU's: ``SWEEPER_ACTIVATION_FORMS=library``, see :mod:`sweeper.models.forms`).

In this process: one configuration (:func:`sweeper.job.record._compute`: the MLP, a model of the interface alone, a
function trainer, folds, text) and batched groups (:func:`sweeper.sweep.launch.compute_group`: gradient descent,
momentum, Adam, mini-batches, early stopping, divergence, trajectories, folds, text sparse and dense, a user's model
stacked). From the command line (slow): a mixed ``device=cpu,gpu`` sweep with its speedups, halving's rungs and the
logged model's scoring.
"""

import json
import re
import sys

import numpy as np
import pytest

from sweeper import ROOT, data
from sweeper.base.backend import FAKE_GPU_ENV, resolve
from sweeper.base.strict import LEDGER, LEDGER_ENV, DeviceArray, describe
from sweeper.job.metrics import TIMINGS
from sweeper.models.forms import ENV as FORMS_ENV
from sweeper.models.optim import row_orders
from conftest import all_runs, cli, make_cfg
from test_text import SMS, needs_sms

RTOL = 1e-12
NETS = str(ROOT / "examples" / "my_nets")
LOOP = str(ROOT / "examples" / "my_loop")


@pytest.fixture
def strict_gpu(monkeypatch):
    """The strict stand-in as this process's device=gpu, with a fresh ledger; a user's examples importable."""
    monkeypatch.setenv(FAKE_GPU_ENV, "strict")
    # the CPU's activations in NumPy's own form, as CuPy's (models.forms)
    monkeypatch.setenv(FORMS_ENV, "library")
    monkeypatch.syspath_prepend(NETS)
    monkeypatch.syspath_prepend(LOOP)
    LEDGER.reset()
    yield resolve("gpu")
    LEDGER.reset()


def _same(cpu, gpu, what=""):
    """Two outcomes (:class:`sweeper.job.compute.Outcome`) with the same metrics, curves and weights to RTOL."""
    assert gpu.reason == cpu.reason, what
    assert set(gpu.scores) == set(cpu.scores), what
    for k, v in cpu.scores.items():
        if k not in TIMINGS:
            np.testing.assert_allclose(gpu.scores[k], v, rtol=RTOL, atol=0, err_msg=f"{what} {k}")
    for name, (steps, values) in cpu.curves.items():
        np.testing.assert_array_equal(gpu.curves[name][0], steps)
        np.testing.assert_allclose(gpu.curves[name][1], values, rtol=RTOL, err_msg=f"{what} {name}")
    for a, b in zip(cpu.params, gpu.params):
        assert type(b) is np.ndarray  # the weights left the device
        np.testing.assert_allclose(b, a, rtol=RTOL, atol=1e-14, err_msg=what)
    if cpu.test_pred is not None:
        np.testing.assert_allclose(
            gpu.test_pred, cpu.test_pred, rtol=RTOL, atol=1e-14, err_msg=what
        )


def _nothing_inside_epochs():
    inside = LEDGER.inside()
    assert not inside, "host reads inside the epoch loop:\n" + describe(inside[:5])


ONE = {
    "regression": ("depth=2", "width=8"),
    "binary-adam-patience": ("data=breast_cancer", "optimizer=adam", "lr=0.01", "patience=20"),
    "classes-momentum-minibatch": (
        "data=iris",
        "optimizer=momentum",
        "nesterov=true",
        "batch_size=32",
        "weight_decay=0.001",
    ),
    "linear": ("depth=0",),
    "diverges": ("lr=50",),
    "folds": ("data.folds=3", "optimizer=adam", "lr=0.01"),
    "a-users-model-alone": ("model._target_=my_nets.TwoLayerNet", "+model.hidden=8", "patience=20"),
    "a-users-model-minibatch": (
        "model._target_=my_nets.TwoLayerNet",
        "+model.hidden=8",
        "batch_size=64",
    ),
    "a-function-trainer": ("model._target_=my_loop.fit",),
}


@pytest.mark.parametrize("overrides", list(ONE.values()), ids=list(ONE))
def test_one_configuration_on_the_stand_in_gives_the_cpus_metrics(strict_gpu, overrides):
    from sweeper.job.record import _compute

    cfg = make_cfg(*overrides, "epochs=120", "log_every=10")
    ds = data.load(cfg.data, 0)
    cpu = _compute(cfg, ds, resolve("cpu"))
    LEDGER.reset()
    gpu = _compute(cfg, ds, strict_gpu)
    _same(cpu, gpu, str(overrides))
    # a function trainer's loop is its own (my_loop reads its losses: counted)
    if "my_loop" not in str(overrides):
        _nothing_inside_epochs()
        assert LEDGER.counts("segment end")["d2h"] >= 1 and not LEDGER.counts("segment end")["sync"]


@pytest.mark.slow
@needs_sms
@pytest.mark.parametrize("sparse", ["true", "false"], ids=["sparse", "dense"])
def test_text_on_the_stand_in_gives_the_cpus_metrics_alone_and_in_a_group(strict_gpu, sparse):
    """cupyx CSR (the stand-in's) through the one-configuration trainer's and the group's sparse first layer; a
    dense text matrix as any other."""
    from sweeper.job.compute import train_and_score

    text = (
        f"data.path={SMS}",
        "data=sms",
        "data.max_features=300",
        f"data.sparse={sparse}",
        "epochs=30",
        "log_every=10",
    )
    cfg = make_cfg(*text, "lr=1.0", "patience=10")
    ds = data.load(cfg.data, 0)
    gpu_arrays = LEDGER.events
    _same(train_and_score(cfg, ds, resolve("cpu")), train_and_score(cfg, ds, strict_gpu), "alone")
    assert any(e.what == "to_device" for e in gpu_arrays)
    _nothing_inside_epochs()
    _group_as_on_the_cpu(
        [(*text, f"lr={lr}", f"patience={p}") for lr in (0.5, 1.0) for p in (0, 10)]
    )


def _jobs(grid, device):
    from sweeper.contract.compose import plain as plain_config
    from sweeper.sweep import launch

    return [
        launch.Job(
            i, [*o, f"device={device}"], None, plain_config(make_cfg(*o, f"device={device}"))
        )
        for i, o in enumerate(grid)
    ]


def _group_as_on_the_cpu(grid, groups=1):
    """The grid's batched groups on the CPU and on the stand-in: the same outcome per job, nothing in the epochs."""
    from sweeper.sweep import launch

    out = {}
    for device in ("cpu", "gpu"):
        planned, alone = launch.plan(_jobs(grid, device))
        assert not alone and len(planned) == groups, (device, [len(g) for g in planned], len(alone))
        LEDGER.reset()
        out[device] = {i: c for g in planned for i, c in launch.compute_group(g).items()}
        assert sorted(out[device]) == list(range(len(grid))), (
            "a group fell back to one job at a time"
        )
    _nothing_inside_epochs()
    # a segment's samples leave in a copy (tests/test_syncs.py)
    assert not LEDGER.counts("segment end")["sync"]
    for i, overrides in enumerate(grid):
        _same(out["cpu"][i].outcome, out["gpu"][i].outcome, str(overrides))
    return out


GROUPS = {
    "gd-trajectories": [
        ("depth=2", "width=8", f"lr={lr}", f"epochs={e}", "log_every=10")
        for lr in (0.01, 0.05)
        for e in (60, 90, 120)
    ],
    "momentum-decay": [
        (
            "optimizer=momentum",
            "nesterov=true",
            "weight_decay=0.001",
            f"lr={lr}",
            f"seed={s}",
            "epochs=100",
            "log_every=10",
        )
        for lr in (0.01, 0.02)
        for s in (0, 1)
    ],
    "adam-classes": [
        ("data=iris", "optimizer=adam", f"lr={lr}", "epochs=100", "log_every=10")
        for lr in (0.01, 0.05)
    ],
    "mini-batches": [
        (
            "data=breast_cancer",
            "batch_size=64",
            "optimizer=adam",
            f"lr={lr}",
            f"epochs={e}",
            "log_every=10",
        )
        for lr in (0.001, 0.01)
        for e in (40, 80)
    ],
    "early-stopping": [
        ("patience=20", f"lr={lr}", "epochs=150", "log_every=10", "width=8")
        for lr in (0.02, 0.1, 0.3)
    ],
    "divergence": [(f"lr={lr}", "epochs=100", "log_every=10") for lr in (0.01, 40.0, 0.02)],
    "folds": [("data.folds=3", f"lr={lr}", "epochs=80", "log_every=10") for lr in (0.01, 0.05)],
    "a-users-model-stacked": [
        (
            "model._target_=my_nets.TwoLayerNet",
            "+model.hidden=8",
            "optimizer=adam",
            f"lr={lr}",
            f"epochs={e}",
            "log_every=10",
        )
        for lr in (0.01, 0.03)
        for e in (50, 100)
    ],
}


FAST_GROUPS = ("mini-batches", "early-stopping", "divergence", "a-users-model-stacked")


@pytest.mark.parametrize(
    "grid",
    [
        pytest.param(g, marks=() if name in FAST_GROUPS else pytest.mark.slow, id=name)
        for name, g in GROUPS.items()
    ],
)
def test_a_batched_group_on_the_stand_in_gives_the_cpus_metrics(strict_gpu, grid):
    out = _group_as_on_the_cpu(grid)
    assert any(c.outcome.reason for c in out["gpu"].values()) == ("40.0" in str(grid))


def test_the_rows_order_is_the_same_on_every_device_and_differs_by_epoch_and_seed(strict_gpu):
    """xp.random's shuffle drew NumPy's order on the CPU and another on the GPU (the stand-in's, as cuRAND's):
    mini-batch runs on the two devices trained on other batches."""
    from sweeper.models.optim import RowOrder

    host = row_orders(50, 3, 4)
    order = strict_gpu.xp.arange(50)
    rows = RowOrder(strict_gpu.xp, order, 3)
    for t in range(4):
        for call in rows.calls:
            call()
        np.testing.assert_array_equal(strict_gpu.to_numpy(order), host[t])
    assert all(sorted(o) == list(range(50)) for o in host)
    assert len({tuple(o) for o in host} | {tuple(row_orders(50, 4, 1)[0])}) == 5
    assert LEDGER.counts() == {"d2h": 4}  # the four reads here: the orders are drawn on the device
    assert type(order) is DeviceArray


# --- from the command line ------------------------------------------------------------------------------------


def _strict_env(tmp_path):
    return {
        FAKE_GPU_ENV: "strict",
        LEDGER_ENV: str(tmp_path / "ledger.jsonl"),
        FORMS_ENV: "library",
        "PYTHONPATH": f"{NETS}:{LOOP}:{ROOT}",
    }


def _ledger(tmp_path):
    """Every process's summary: counts per phase, and the sites of any read inside the epochs."""
    lines = [json.loads(x) for x in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert lines and all(not s["in_epochs"] for s in lines), lines
    return lines


def _pairs(store):
    by_fp: dict = {}
    for r in all_runs(store):
        if "mlflow.parentRunId" in r.data.tags:
            by_fp.setdefault(r.data.tags["fingerprint"], {})[r.data.tags["device"]] = r
    return by_fp


@pytest.mark.slow
def test_a_mixed_sweep_on_the_stand_in_gives_the_cpus_metrics_and_a_speedup_for_every_pair(
    tmp_path, store
):
    grid = (
        "-m",
        "device=cpu,gpu",
        "optimizer=gd,adam",
        "batch_size=0,64",
        "epochs=60,120",
        "lr=0.01,3.0",
        "log_every=10",
        "width=8",
    )
    proc = cli(tmp_path, *grid, store=store, env=_strict_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = proc.stdout + proc.stderr
    assert "failed as a whole" not in said and re.search(
        r"Launching 32 jobs: 32 in \d+ batched group", said
    ), said
    _ledger(tmp_path)
    pairs = _pairs(store)
    assert len(pairs) == 16 and all(set(p) == {"cpu", "gpu"} for p in pairs.values())
    for pair in pairs.values():
        cpu, gpu = pair["cpu"].data, pair["gpu"].data
        assert gpu.tags["fake_gpu"] == "true" and pair["gpu"].info.status == pair["cpu"].info.status
        if pair["gpu"].info.status == "FINISHED":
            assert gpu.metrics["speedup"] == pytest.approx(
                cpu.metrics["train_time_s"] / gpu.metrics["train_time_s"]
            )
        quality = [
            k
            for k in cpu.metrics
            if k.startswith(("val_", "test_")) or k in ("best_epoch", "epochs_run")
        ]
        assert quality and set(quality) <= set(gpu.metrics)
        for k in quality:
            assert gpu.metrics[k] == pytest.approx(cpu.metrics[k], rel=RTOL, abs=0), k
    # lr=3 diverges with gd
    assert sum(p["gpu"].info.status == "FAILED" for p in pairs.values()) >= 2


@pytest.mark.slow
def test_halving_rungs_on_the_stand_in_prune_as_on_the_cpu(tmp_path, store):
    halved = (
        "lr=0.001,0.005,0.02",
        "width=4,8",
        "epochs=180",
        "log_every=20",
        "hydra.launcher.halving.eta=3",
        "hydra.launcher.halving.min_epochs=20",
        "tracking.log_model=false",
    )
    proc = cli(tmp_path, "-m", "device=cpu,gpu", *halved, store=store, env=_strict_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    _ledger(tmp_path)
    pairs = _pairs(store)
    assert len(pairs) == 6
    pruned = 0
    for pair in pairs.values():
        cpu, gpu = pair["cpu"].data, pair["gpu"].data
        assert cpu.tags.get("pruned_at_epoch") == gpu.tags.get("pruned_at_epoch")
        pruned += "pruned_at_epoch" in gpu.tags
        assert gpu.metrics["val_mse"] == pytest.approx(cpu.metrics["val_mse"], rel=RTOL)
    assert pruned >= 3


@pytest.mark.slow
@pytest.mark.parametrize(
    "model", [(), ("model._target_=my_nets.TwoLayerNet", "+model.hidden=8")], ids=["mlp", "users"]
)
def test_a_gpu_runs_logged_model_scores_as_the_run_and_its_cpu_twin_did(
    tmp_path, store, strict_gpu, model
):
    """The weights leave the device as host arrays: the GPU run's logged model loads (on the host) and predicts
    its test rows as the run recorded them, and as the CPU run's model does (1e-12)."""
    import mlflow.pyfunc
    import pandas as pd

    from conftest import client_for, run_once

    args = ("data=breast_cancer", "epochs=80", "log_every=10", *model)
    ds = data.load(make_cfg(*args).data, 0)
    frame = pd.DataFrame(ds.test_inputs(), columns=ds.input_columns)
    pred = {}
    for device in ("cpu", "gpu"):
        result = run_once(tmp_path / device, *args, f"device={device}", store=store)
        assert result["status"] == "FINISHED", result.get("reason")
        model_id = client_for(store).get_run(result["run_id"]).outputs.model_outputs[0].model_id
        mlflow.set_tracking_uri(f"sqlite:///{store}")
        pred[device] = np.asarray(
            mlflow.pyfunc.load_model(f"models:/{model_id}").predict(frame), float
        ).ravel()
        logged = pd.read_csv(tmp_path / device / "job" / "test_predictions.csv")[
            "y_pred"
        ].to_numpy()
        np.testing.assert_allclose(pred[device], logged, rtol=1e-12)
    np.testing.assert_allclose(pred["gpu"], pred["cpu"], rtol=RTOL)
    _nothing_inside_epochs()


HOST_MIX = '''import numpy as np


class HostMix:
    """A two-layer net whose forward slips a host array into a device expression."""

    def __init__(self, hidden: int = 8):
        self.hidden = hidden

    def init(self, n_in, n_out, rng):
        return {"W1": rng.standard_normal((n_in, self.hidden)) / np.sqrt(n_in), "b1": np.zeros((1, self.hidden)),
                "W2": rng.standard_normal((self.hidden, n_out)) / np.sqrt(self.hidden), "b2": np.zeros((1, n_out))}

    def forward(self, xp, params, X):
        h = xp.tanh(X @ params["W1"] + params["b1"])
        h = h * np.ones(self.hidden)  # a host array: fine on NumPy, refused by CuPy
        return h @ params["W2"] + params["b2"], (X, h)

    def backward(self, xp, params, cache, dout):
        X, h = cache
        dh = (dout @ params["W2"].swapaxes(-1, -2)) * (1 - h * h)
        return {"W2": h.swapaxes(-1, -2) @ dout, "b2": dout.sum(axis=-2, keepdims=True),
                "W1": X.swapaxes(-1, -2) @ dh, "b1": dh.sum(axis=-2, keepdims=True)}
'''


@pytest.mark.slow
def test_a_model_mixing_a_host_array_fails_its_run_in_cupys_words_and_the_check_names_its_line(
    tmp_path, store, strict_gpu, monkeypatch, capsys
):
    """On NumPy (SWEEPER_FAKE_GPU=numpy, or the CPU) the model trains; on the stand-in, as on a GPU, its run is
    FAILED with CuPy's TypeError, and python -m sweeper.check says so, naming the model's line."""
    from conftest import client_for, run_once, user_folder
    from sweeper import check

    user_folder(tmp_path, monkeypatch, {"host_mix.py": HOST_MIX})
    args = ("model._target_=host_mix.HostMix", "epochs=30", "log_every=10")
    assert run_once(tmp_path / "cpu", *args, "device=cpu", store=store)["status"] == "FINISHED"
    # FAILED, not raised (one line a run)
    returned = run_once(tmp_path / "gpu", *args, "device=gpu", store=store)
    result = json.loads((tmp_path / "gpu" / "job" / "result.json").read_text())
    assert returned["status"] == result["status"] == "FAILED"
    line = next(i for i, x in enumerate(HOST_MIX.splitlines(), 1) if "np.ones(self.hidden)" in x)
    assert result["reason"].startswith("TypeError: " + MIXED.replace("\\", "")), result["reason"]
    # the user's line
    assert result["reason"].endswith(f"host_mix.py:{line} in forward)"), result["reason"]
    assert client_for(store).get_run(result["run_id"]).info.status == "FAILED"

    assert check.main(["host_mix.HostMix"]) == 1
    said = capsys.readouterr().out
    assert (
        f"FAIL  NumPy = CuPy (the strict device stand-in): raised TypeError: {MIXED.replace(chr(92), '')} "
        f"(at host_mix.py:{line} in forward)"
    ) in said
    monkeypatch.setenv(FAKE_GPU_ENV, "numpy")  # NumPy as the "device": nothing to see
    assert (
        check.main(["host_mix.HostMix"]) == 0
        and "SWEEPER_FAKE_GPU=strict checks" in capsys.readouterr().out
    )


MIXED = r"Unsupported type <class 'numpy\.ndarray'>"


@pytest.mark.slow
def test_the_gpu_checks_dry_run_runs_its_steps_on_the_stand_in_and_prints_one_table_last(tmp_path):
    """bench/gpu_check.sh --dry-run: its own logic with the strict stand-in in place of CuPy, so the script (and the
    gpu-marked tests it runs) cannot rot where no GPU comes: the tests pass there (none skipped), the benchmarks'
    table comes last, the logs are in $OUT; a wrong argument is one line, exit 2."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEEPER_")} | {
        "OUT": str(tmp_path / "out"),
        "PYTHON": sys.executable,
        FORMS_ENV: "library",
    }
    proc = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_check.sh"), "--dry-run"],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.rstrip().splitlines()
    table = lines.index(next(x for x in lines if x.startswith("workload")))
    assert lines[table + 1].startswith("----------") and lines[-1].startswith("W1 batched  gpu K=4")
    # the table is the last thing printed
    assert all(x.startswith("W1") for x in lines[table + 2 :])
    said = next(x for x in lines if x.startswith("gpu tests: exit 0"))
    sms = SMS.is_file()  # the sparse text test needs the SMS file (../shared)
    assert (
        re.search(rf"\b{8 + sms} passed\b", said)
        and ("skipped" in said) != sms
        and "failed" not in said
    ), said
    assert {"env.txt", "gpu_tests.log", "gpu_bench.log", "gpu_bench.txt"} <= {
        p.name for p in (tmp_path / "out").iterdir()
    }
    assert "strict device stand-in" in (tmp_path / "out" / "env.txt").read_text()
    bad = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_check.sh"), "--dryrun"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stderr.strip() == (
        "bench/gpu_check.sh: error: --dryrun is not allowed: expected --dry-run or --more"
    )
