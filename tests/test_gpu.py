"""device=gpu: the same training code on CuPy, honest timing, speedups, and clear behaviour without a GPU.

Where no CUDA device exists (CI), the GPU code path runs with NumPy as its array namespace: a "gpu"
backend whose copies and synchronisations are counted, and ``SWEEPER_FAKE_GPU=numpy`` for whole
multiruns; the strict device stand-in (``SWEEPER_FAKE_GPU=strict``) runs every GPU path in tests/test_strict_paths.py
and tests/test_syncs.py. Tests marked ``gpu`` need real CuPy and skip with the reason otherwise, except under
``SWEEPER_FAKE_GPU=strict`` (``bench/gpu_check.sh --dry-run``), where they run on the stand-in.
"""

import json
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse

from sweeper import data
from sweeper import models
from conftest import all_runs, cli, client_for, make_cfg, no_gpu_here, requires_gpu, run_once
from sweeper.models.train import MAX_CHECKS
from sweeper.insight import speedup
from sweeper.base.backend import FAKE_GPU_ENV, Backend, fake_gpu, resolve
from sweeper.job.metrics import TIMINGS

FAST = ("epochs=300", "log_every=10")


class Counter:
    """Wraps a backend's boundary functions and counts every call."""

    def __init__(self, base: Backend):
        self.copies_in = self.copies_out = self.syncs = 0
        self.base = base

    def backend(self) -> Backend:
        def to_device(a):
            self.copies_in += 1
            return self.base.to_device(a)

        def to_numpy(a):
            self.copies_out += 1
            return self.base.to_numpy(a)

        def sync():
            self.syncs += 1
            self.base.synchronize()

        return Backend("gpu", self.base.xp, to_device, to_numpy, sync)


def fit_counting(
    base: Backend, epochs: int, sync_every_epoch: bool = False, dtype: str = "float64"
):
    cfg = make_cfg("depth=2", "width=8", f"dtype={dtype}")
    ds = data.load(cfg.data, 0)
    counter = Counter(base)
    backend = counter.backend()
    X, y, Xv, yv = (
        backend.to_device(a.astype(dtype)) for a in (ds.X_train, ds.y_train, ds.X_val, ds.y_val)
    )
    model = models.build(cfg, ds.n_features, ds.task, backend)
    counter.copies_in = counter.copies_out = counter.syncs = 0
    fit = models.train(
        backend,
        model,
        X,
        y,
        Xv,
        yv,
        lr=0.01,
        epochs=epochs,
        log_every=10,
        sync_every_epoch=sync_every_epoch,
    )
    counts = {
        "syncs": counter.syncs,
        "copies_out": counter.copies_out,
        "copies_in": counter.copies_in,
    }
    return counts, fit, backend.to_numpy(model.predict(Xv))


def _assert_nothing_per_epoch(base: Backend):
    short, fit_short, _ = fit_counting(base, epochs=500)
    long, fit_long, _ = fit_counting(base, epochs=4000)
    # The host only looks between segments (at most MAX_CHECKS of them), never per epoch or per sample.
    assert long == short
    assert long["copies_in"] == 0 and long["copies_out"] <= MAX_CHECKS
    # every 10th epoch, and the last (4000): a curve ends where training ended
    assert len(fit_long.train_loss) == 401
    naive, _, _ = fit_counting(base, epochs=500, sync_every_epoch=True)
    assert naive["copies_out"] >= 500  # the seed's loop: a host read of the loss every epoch


def test_no_copy_or_sync_inside_the_epoch_loop_on_the_gpu_code_path():
    _assert_nothing_per_epoch(Backend("gpu", np))


def test_gpu_code_path_on_numpy_gives_the_cpu_results():
    _, cpu_fit, cpu_pred = fit_counting(Backend("cpu", np), epochs=300)
    _, gpu_fit, gpu_pred = fit_counting(Backend("gpu", np), epochs=300)
    np.testing.assert_array_equal(cpu_pred, gpu_pred)
    np.testing.assert_array_equal(cpu_fit.train_loss, gpu_fit.train_loss)
    assert cpu_fit.warmup_time_s > 0 and cpu_fit.train_time_s > 0


def test_speedup_pairs_runs_by_fingerprint():
    rows = [
        {
            "run_id": "c1",
            "device": "cpu",
            "fingerprint": "a",
            "train_time_s": 4.0,
            "wall_time_s": 6.0,
        },
        {
            "run_id": "c2",
            "device": "cpu",
            "fingerprint": "a",
            "train_time_s": 6.0,
            "wall_time_s": 8.0,
        },
        {
            "run_id": "g1",
            "device": "gpu",
            "fingerprint": "a",
            "train_time_s": 0.5,
            "wall_time_s": 3.5,
        },
        {
            "run_id": "g2",
            "device": "gpu",
            "fingerprint": "b",
            "train_time_s": 0.5,
            "wall_time_s": 3.5,
        },
        {
            "run_id": "c3",
            "device": "cpu",
            "fingerprint": "c",
            "train_time_s": 1.0,
            "wall_time_s": 2.0,
        },
    ]
    found = speedup.pair(rows)
    assert found["g1"] == {
        "speedup": pytest.approx(10.0),
        "speedup_wall": pytest.approx(2.0),
    }  # medians 5 and 7
    assert found["c1"] == found["c2"] == {"speedup": 1.0, "speedup_wall": 1.0}
    assert "g2" not in found and "c3" not in found  # no partner on the other device


def test_speedup_pairs_batched_runs_only_with_groups_of_their_size():
    rows = [
        {
            "run_id": "c1",
            "device": "cpu",
            "fingerprint": "a",
            "train_time_s": 4.0,
            "wall_time_s": 6.0,
        },
        {
            "run_id": "c8",
            "device": "cpu",
            "fingerprint": "a",
            "train_time_s": 1.0,
            "wall_time_s": 2.0,
            "batch_size": 8,
        },
        {
            "run_id": "g8",
            "device": "gpu",
            "fingerprint": "a",
            "train_time_s": 0.5,
            "wall_time_s": 1.0,
            "batch_size": 8,
        },
        {
            "run_id": "g4",
            "device": "gpu",
            "fingerprint": "a",
            "train_time_s": 0.5,
            "wall_time_s": 1.0,
            "batch_size": 4,
        },
    ]
    found = speedup.pair(rows)
    # against the CPU group of 8, not the lone run
    assert found["g8"]["speedup"] == pytest.approx(2.0)
    assert "g4" not in found and "c1" not in found


@no_gpu_here
def test_device_gpu_without_a_gpu_exits_with_one_line(tmp_path, store):
    proc = cli(tmp_path, "device=gpu", store=store)
    assert proc.returncode == 2
    (line,) = [x for x in proc.stderr.splitlines() if x.strip()]
    assert line.startswith("sweeper: error: device=gpu") and "device=cpu" in line
    assert ("cupy" in line) or ("CUDA" in line)
    assert all_runs(store) == []


@pytest.mark.slow
@no_gpu_here
def test_mixed_multirun_without_a_gpu_skips_gpu_jobs_and_finishes(tmp_path, store):
    proc = cli(tmp_path, "-m", "device=cpu,gpu", "depth=1,2", *FAST, store=store)
    assert proc.returncode == 0, proc.stderr
    results = [json.loads(p.read_text()) for p in (tmp_path / "sweep").glob("*/result.json")]
    assert sorted(r["status"] for r in results) == ["FINISHED", "FINISHED", "SKIPPED", "SKIPPED"]
    assert all(
        r["device"] == "gpu" and "device=gpu" in r["reason"]
        for r in results
        if r["status"] == "SKIPPED"
    )
    runs = all_runs(store)
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == 2 and {c.data.tags["device"] for c in children} == {"cpu"}
    assert parent.data.metrics["n_skipped"] == 2 and parent.data.metrics["n_finished"] == 2
    assert [line.split()[0] for line in parent.data.tags["skipped_jobs"].splitlines()] == [
        "device=gpu"
    ] * 2
    assert "SKIPPED 2 job(s): device=gpu" in proc.stdout  # the summary
    # nothing finished at all: the sweep exits 1
    (tmp_path / "only_gpu").mkdir()
    assert (
        cli(tmp_path / "only_gpu", "-m", "device=gpu", "lr=0.001,0.002", store=store).returncode
        == 1
    )


@pytest.mark.slow
def test_mixed_multirun_logs_a_speedup_for_every_pair(tmp_path, store):
    proc = cli(
        tmp_path,
        "-m",
        "device=cpu,gpu",
        "depth=1,2",
        *FAST,
        store=store,
        env={FAKE_GPU_ENV: "numpy"},
    )
    assert proc.returncode == 0, proc.stderr
    children = [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == 4
    by_fp = {}
    for c in children:
        by_fp.setdefault(c.data.tags["fingerprint"], {})[c.data.tags["device"]] = c
    assert len(by_fp) == 2
    for pair in by_fp.values():
        cpu, gpu = pair["cpu"].data.metrics, pair["gpu"].data.metrics
        assert pair["gpu"].data.tags["fake_gpu"] == "true"
        assert gpu["speedup"] == pytest.approx(cpu["train_time_s"] / gpu["train_time_s"])
        assert gpu["speedup_wall"] == pytest.approx(cpu["wall_time_s"] / gpu["wall_time_s"])
        assert cpu["speedup"] == 1.0 and cpu["speedup_wall"] == 1.0
        assert {"warmup_time_s", "h2d_time_s"} <= set(gpu)
        assert gpu["test_mse"] == cpu["test_mse"]  # the same code on the same numbers
    results = [json.loads(p.read_text()) for p in (tmp_path / "sweep").glob("*/result.json")]
    assert all("speedup" in r["metrics"] for r in results)
    assert proc.stdout.count("speedup") >= 1 and "FINISHED" in proc.stdout


@pytest.mark.slow
def test_compare_pairs_gpu_runs_with_cpu_runs_of_another_sweep(tmp_path, store):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    # one configuration at a time, as the lone GPU job trains: a batched run pairs only with a group of its size
    assert (
        cli(
            tmp_path / "a",
            "-m",
            "device=cpu",
            "lr=0.001,0.002",
            "hydra/launcher=basic",
            *FAST,
            store=store,
        ).returncode
        == 0
    )
    assert (
        cli(
            tmp_path / "b",
            "-m",
            "device=gpu",
            "lr=0.001",
            *FAST,
            store=store,
            env={FAKE_GPU_ENV: "numpy"},
        ).returncode
        == 0
    )
    gpu_run = next(
        r
        for r in all_runs(store)
        if r.data.tags.get("device") == "gpu" and "mlflow.parentRunId" in r.data.tags
    )
    assert "speedup" not in gpu_run.data.metrics  # its own sweep had no CPU partner

    compare = [sys.executable, "-m", "sweeper.compare", "--tracking-uri", f"sqlite:///{store}"]
    proc = subprocess.run([*compare, "--experiment", "diabetes"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    metrics = client_for(store).get_run(gpu_run.info.run_id).data.metrics
    cpu_run = next(
        r
        for r in all_runs(store)
        if r.data.tags.get("device") == "cpu"
        and r.data.tags.get("fingerprint") == gpu_run.data.tags["fingerprint"]
    )
    assert metrics["speedup"] == pytest.approx(
        cpu_run.data.metrics["train_time_s"] / metrics["train_time_s"]
    )
    assert gpu_run.info.run_id in proc.stdout

    missing = subprocess.run([*compare, "--experiment", "nope"], capture_output=True, text=True)
    assert missing.returncode == 2 and "--experiment=nope does not exist" in missing.stderr


# ---- real CuPy ---------------------------------------------------------------------------------------


@pytest.mark.gpu
@requires_gpu
@pytest.mark.parametrize("dataset", ["diabetes", "breast_cancer"])
def test_cpu_and_gpu_agree_in_float32(tmp_path, store, dataset):
    args = (f"data={dataset}", "depth=2", "width=16", "epochs=2000", "dtype=float32")
    cpu = run_once(tmp_path / "cpu", *args, "device=cpu", store=store)
    gpu = run_once(tmp_path / "gpu", *args, "device=gpu", store=store)
    assert cpu["fingerprint"] == gpu["fingerprint"] and gpu["status"] == "FINISHED"
    for name, value in cpu["metrics"].items():
        if name not in TIMINGS and name not in ("best_epoch", "epochs_run"):
            assert gpu["metrics"][name] == pytest.approx(value, rel=1e-4), name


@pytest.mark.gpu
@requires_gpu
def test_no_copy_or_sync_inside_the_epoch_loop_on_cupy():
    _assert_nothing_per_epoch(resolve("gpu"))


@pytest.mark.gpu
@requires_gpu
def test_speedup_on_every_gpu_run_of_a_real_mixed_multirun(tmp_path, store):
    proc = cli(tmp_path, "-m", "device=cpu,gpu", "depth=1,2", "lr=0.001,0.005", *FAST, store=store)
    assert proc.returncode == 0, proc.stderr
    gpu = [r for r in all_runs(store) if r.data.tags.get("device") == "gpu"]
    assert len(gpu) == 4
    assert all(r.data.metrics["speedup"] > 0 and "speedup_wall" in r.data.metrics for r in gpu)
    # bench/gpu_check.sh --dry-run
    assert all(("fake_gpu" in r.data.tags) == (fake_gpu() == "strict") for r in gpu)


@pytest.mark.gpu
@requires_gpu
@pytest.mark.parametrize(
    "name,opt,batch_size",
    [
        ("diabetes", dict(name="gd"), 0),
        ("diabetes", dict(name="adam", weight_decay=1e-3), 0),
        ("iris", dict(name="momentum", nesterov=True), 32),
    ],
    ids=["gd", "adam", "iris-momentum-mini-batches"],
)
def test_batched_cupy_and_batched_numpy_agree_in_float32(name, opt, batch_size):
    from sweeper.base.backend import resolve
    from sweeper.models.batched import Member, stacked_params, train_group
    from sweeper.models.optim import Optimizer

    ds = data.load(make_cfg(f"data={name}").data, 0)
    members = [
        Member(
            0.005 * (1 + i) / (5 if opt["name"] == "adam" else 1),
            300,
            patience=40 * (i % 2),
            seed=0 if batch_size else i % 3,
        )
        for i in range(6)
    ]
    fits = []
    for device in ("cpu", "gpu"):
        backend = resolve(device)
        arrays = [
            backend.to_device(a.astype("float32"))
            for a in (ds.X_train, ds.y_train, ds.X_val, ds.y_val)
        ]
        params = stacked_params(
            [ds.n_features, 16, ds.n_outputs], "tanh", [m.seed for m in members], "float32"
        )
        fits.append(
            train_group(
                backend,
                params,
                "tanh",
                ds.task,
                *arrays,
                members,
                log_every=10,
                threads=1,
                opt=Optimizer(**opt),
                batch_size=batch_size,
            )
        )
    for a, b, pa, pb in zip(fits[0].fits, fits[1].fits, fits[0].params, fits[1].params):
        assert (a.epochs_run, a.diverged_at) == (b.epochs_run, b.diverged_at)
        np.testing.assert_allclose(a.val_loss, b.val_loss, rtol=1e-4)
        for x, y in zip(pa, pb):
            np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@requires_gpu
def test_a_sparse_text_group_on_cupy_matches_its_members_trained_alone_on_cupy():
    """cupyx.scipy.sparse through the batched trainer's sparse first layer: each member as the one-configuration
    sparse trainer gives it on the same device (float64), and the features stay a cupyx sparse matrix."""
    from test_text import SMS, sms_cfg

    from sweeper.base.backend import is_sparse
    from sweeper.models.batched import Member, stacked_params, train_group
    from sweeper.models.mlp import MLP, init_params

    if not SMS.is_file():
        pytest.skip(f"the SMS Spam Collection is not at {SMS}")
    backend = resolve("gpu")
    ds = data.load(sms_cfg("data.max_features=500").data, 0)
    arrays = [backend.to_device(a) for a in (ds.X_train, ds.y_train, ds.X_val, ds.y_val)]
    assert is_sparse(arrays[0]) and not scipy.sparse.issparse(arrays[0])  # cupyx's, on the device
    members = [Member(0.5, 50), Member(1.0, 50), Member(2.0, 40, patience=20)]
    sizes = [ds.n_features, 8, 1]
    group = train_group(
        backend,
        stacked_params(sizes, "tanh", [0] * 3, "float64"),
        "tanh",
        ds.task,
        *arrays,
        members,
        log_every=10,
    )
    for m, fit, params in zip(members, group.fits, group.params):
        model = MLP(
            backend.xp,
            [backend.to_device(p) for p in init_params(sizes, "tanh", 0, "float64")],
            "tanh",
            ds.task,
        )
        alone = models.train(
            backend, model, *arrays, lr=m.lr, epochs=m.epochs, log_every=10, patience=m.patience
        )
        assert (fit.epochs_run, fit.best_epoch) == (alone.epochs_run, alone.best_epoch)
        np.testing.assert_allclose(fit.val_loss, alone.val_loss, rtol=1e-9)
        for x, y in zip(params, model.params):
            np.testing.assert_allclose(x, backend.to_numpy(y), rtol=1e-9, atol=1e-12)


def _user_model_on(backend: Backend):
    """The example's TwoLayerNet (a user's class), stacked K=3 and one member alone, on ``backend``."""
    from sweeper import ROOT

    sys.path.insert(0, str(ROOT / "examples" / "my_nets"))
    from my_nets import TwoLayerNet

    from sweeper.models.generic import Interfaced, init_host
    from sweeper.models.optim import Optimizer
    from sweeper.models.stacked import Member, train_stacked

    rng = np.random.default_rng(3)
    X, Xv = (
        rng.standard_normal((80, 5)).astype("float32"),
        rng.standard_normal((40, 5)).astype("float32"),
    )
    y, yv = X[:, :1] - X[:, 1:2], Xv[:, :1] - Xv[:, 1:2]
    dev = [backend.to_device(a) for a in (X, y, Xv, yv)]
    net = TwoLayerNet(hidden=8)
    fit = train_stacked(
        backend,
        net,
        "regression",
        *dev,
        [Member(0.01, 0, (200,)), Member(0.05, 1, (100, 200))],
        n_out=1,
        log_every=20,
        opt=Optimizer("adam"),
        dtype="float32",
    )
    alone = Interfaced(
        backend.xp,
        net,
        {k: backend.to_device(v) for k, v in init_host(net, 5, 1, 1, "float32").items()},
        "regression",
    )
    one = models.train(
        backend, alone, *dev, lr=0.05, epochs=200, log_every=20, opt=Optimizer("adam")
    )
    return (
        fit.at[1][200][0],
        one,
        {k: backend.to_numpy(v) for k, v in alone.dict.items()},
        fit.at[1][200][1],
    )


def test_a_users_stacked_model_on_the_gpu_code_path_gives_the_cpu_results():
    cpu, gpu = _user_model_on(Backend("cpu", np)), _user_model_on(Backend("gpu", np))
    np.testing.assert_array_equal(cpu[0].val_loss, gpu[0].val_loss)
    # stacked = alone (float32)
    np.testing.assert_allclose(cpu[0].val_loss, cpu[1].val_loss, rtol=1e-5)


@requires_gpu
@pytest.mark.gpu
def test_a_users_stacked_model_on_cupy_matches_numpy_and_its_member_alone():
    cpu, gpu = _user_model_on(resolve("cpu")), _user_model_on(resolve("gpu"))
    np.testing.assert_allclose(gpu[0].val_loss, cpu[0].val_loss, rtol=1e-4)
    np.testing.assert_allclose(gpu[0].val_loss, gpu[1].val_loss, rtol=1e-4)
    for k in gpu[2]:
        np.testing.assert_allclose(gpu[3][k], gpu[2][k], rtol=1e-3, atol=1e-5)


def test_a_job_computed_ahead_leaves_a_missing_device_to_its_own_job(monkeypatch):
    """backend.resolved: a batched group (launch.compute_group) and a trainer's halving (trainer.computed) each
    caught BackendUnavailable themselves to leave the job to the one-job path, which records it SKIPPED."""
    from sweeper.base import backend
    from sweeper.job import trainer

    def missing():
        raise backend.BackendUnavailable("device=gpu needs cupy, which is not installed")

    monkeypatch.delenv(FAKE_GPU_ENV, raising=False)
    monkeypatch.setattr(backend, "_cupy", missing)
    assert backend.resolved("gpu") is None
    assert backend.resolved("cpu").device == "cpu"
    with pytest.raises(backend.BackendUnavailable):
        resolve("gpu")
    plain = {"device": "gpu", "data": {}, "model": {"_target_": "my_loop.fit"}}
    assert trainer.computed(plain) is None  # before anything else is read
