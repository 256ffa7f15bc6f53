"""The batched trainer: K configurations in one pass give what each gives alone (to rounding)."""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse

from sweeper import data, models
from sweeper.base.backend import Backend
from sweeper.models.batched import Member, stacked_params, train_group
from sweeper.models.mlp import MLP, init_params
from sweeper.models.optim import Optimizer
from conftest import NO_BASELINES, all_runs, make_cfg, one_line, running_children, wait_for
from test_text import needs_sms

CPU = Backend("cpu", np)


def _data(name, seed=0):
    return data.load(make_cfg(f"data={name}").data, seed)


def _alone(ds, depth, width, activation, m, log_every, dtype="float64", opt=None, batch_size=0):
    sizes = [ds.n_features] + [width] * depth + [ds.n_outputs]
    model = MLP(np, init_params(sizes, activation, m.seed, dtype), activation, ds.task)
    cast = [a.astype(dtype) for a in (ds.X_train, ds.y_train, ds.X_val, ds.y_val)]
    fit = models.train(
        CPU,
        model,
        *cast,
        lr=m.lr,
        epochs=m.epochs,
        log_every=log_every,
        patience=m.patience,
        opt=opt,
        batch_size=batch_size,
        seed=m.seed,
    )
    return fit, [p.copy() for p in model.params]


def _together(
    ds,
    depth,
    width,
    activation,
    members,
    log_every,
    dtype="float64",
    per_member=None,
    threads=1,
    opt=None,
    batch_size=0,
    backend=CPU,
):
    sizes = [ds.n_features] + [width] * depth + [ds.n_outputs]
    params = stacked_params(sizes, activation, [m.seed for m in members], dtype)
    if per_member is None:
        arrays = [a.astype(dtype) for a in (ds.X_train, ds.y_train, ds.X_val, ds.y_val)]
    else:  # each member its own split
        arrays = [
            np.stack([getattr(d, name) for d in per_member]).astype(dtype)
            for name in ("X_train", "y_train", "X_val", "y_val")
        ]
    return train_group(
        backend,
        params,
        activation,
        ds.task,
        *arrays,
        members,
        log_every=log_every,
        threads=threads,
        opt=opt,
        batch_size=batch_size,
    )


def _same(fit, params, alone_fit, alone_params, rtol):
    assert fit.diverged_at == alone_fit.diverged_at
    assert fit.epochs_run == alone_fit.epochs_run and fit.best_epoch == alone_fit.best_epoch
    np.testing.assert_array_equal(fit.steps, alone_fit.steps)
    np.testing.assert_allclose(fit.train_loss, alone_fit.train_loss, rtol=rtol)
    np.testing.assert_allclose(fit.val_loss, alone_fit.val_loss, rtol=rtol)
    if fit.diverged_at is None:
        for a, b in zip(params, alone_params):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * 1e-3)


GRID = [
    Member(0.01, 400),
    Member(0.05, 250, seed=1),
    Member(0.02, 400, patience=30),
    Member(0.005, 130, seed=2),
]


@pytest.mark.parametrize(
    "name,depth,activation",
    [
        ("diabetes", 1, "tanh"),
        ("diabetes", 2, "relu"),
        ("breast_cancer", 0, "tanh"),
        ("breast_cancer", 2, "sigmoid"),
    ],
)
def test_a_group_matches_each_member_trained_alone(name, depth, activation):
    ds = _data(name)
    group = _together(ds, depth, 8, activation, GRID, log_every=10)
    # patience: every log_every
    assert len(group.fits) == len(GRID) and group.host_reads <= 10 + len(GRID) + 40
    for m, fit, params in zip(GRID, group.fits, group.params):
        _same(fit, params, *_alone(ds, depth, 8, activation, m, 10), rtol=1e-9)


KNOBS = [  # data, depth, activation, update rule: every optimizer, weight decay at every depth, k classes
    ("diabetes", 1, "tanh", Optimizer("momentum")),
    (
        "breast_cancer",
        2,
        "relu",
        Optimizer("momentum", momentum=0.8, nesterov=True, weight_decay=1e-3),
    ),
    ("diabetes", 1, "relu", Optimizer("adam", beta1=0.8, beta2=0.99)),
    ("breast_cancer", 0, "tanh", Optimizer("adam", weight_decay=1e-2)),
    ("diabetes", 1, "sigmoid", Optimizer("gd", weight_decay=1e-2)),
    ("iris", 2, "sigmoid", Optimizer("gd")),
    ("iris", 1, "tanh", Optimizer("momentum", nesterov=True, weight_decay=1e-3)),
    ("wine", 2, "relu", Optimizer("adam", weight_decay=1e-3)),
]


@pytest.mark.parametrize("name,depth,activation,opt", KNOBS, ids=lambda v: getattr(v, "name", v))
def test_a_group_with_an_optimizer_weight_decay_or_classes_matches_each_member_alone(
    name, depth, activation, opt
):
    """Members stop at three epoch counts and by patience: a frozen member's velocity or moments stop with it."""
    ds = _data(name)
    group = _together(ds, depth, 8, activation, GRID, log_every=10, opt=opt)
    for m, fit, params in zip(GRID, group.fits, group.params):
        _same(fit, params, *_alone(ds, depth, 8, activation, m, 10, opt=opt), rtol=1e-9)
    assert group.params[0][-1].shape == (1, ds.n_outputs)
    if opt.name != "gd":
        assert group.fits[2].epochs_run < GRID[2].epochs  # patience stopped it


@pytest.mark.parametrize(
    "name,depth,opt,batch_size",
    [
        ("diabetes", 1, Optimizer("gd"), 32),
        ("iris", 1, Optimizer("adam", weight_decay=1e-3), 50),
        ("wine", 2, Optimizer("momentum", nesterov=True), 16),
        ("digits", 1, Optimizer("momentum"), 256),
    ],
    ids=["diabetes-gd", "iris-adam", "wine-momentum", "digits-momentum"],
)
def test_a_mini_batch_group_sharing_its_seed_matches_each_member_alone(
    name, depth, opt, batch_size
):
    ds = _data(name, 3)
    members = [
        Member(0.01, 60, seed=3),
        Member(0.05, 40, seed=3),
        Member(0.02, 60, patience=10, seed=3),
        Member(0.003, 30, seed=3),
    ]
    assert len(ds.X_train) % batch_size  # a last, shorter step too
    group = _together(ds, depth, 8, "tanh", members, log_every=5, opt=opt, batch_size=batch_size)
    for m, fit, params in zip(members, group.fits, group.params):
        _same(
            fit,
            params,
            *_alone(ds, depth, 8, "tanh", m, 5, opt=opt, batch_size=batch_size),
            rtol=1e-9,
        )


def test_a_mini_batch_group_of_several_seeds_is_refused():
    ds = _data("diabetes")
    with pytest.raises(ValueError, match="share their seed"):
        _together(
            ds,
            1,
            4,
            "tanh",
            [Member(0.01, 10), Member(0.01, 10, seed=1)],
            log_every=5,
            batch_size=32,
        )


@pytest.mark.parametrize(
    "opt", [None, Optimizer("momentum", nesterov=True, weight_decay=1e-3)], ids=["gd", "momentum"]
)
def test_a_diverging_member_is_frozen_and_leaves_its_group_mates_alone(opt):
    ds = _data("diabetes")
    members = [Member(0.01, 300), Member(5.0, 300), Member(0.02, 300)]
    group = _together(ds, 1, 8, "tanh", members, log_every=10, opt=opt)
    assert group.fits[1].diverged_at is not None and group.fits[0].diverged_at is None
    without = _together(ds, 1, 8, "tanh", [members[0], members[2]], log_every=10, opt=opt)
    for i, j in ((0, 0), (2, 1)):
        np.testing.assert_allclose(group.fits[i].val_loss, without.fits[j].val_loss, rtol=1e-12)
        for a, b in zip(group.params[i], without.params[j]):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    alone = _alone(ds, 1, 8, "tanh", members[1], 10, opt=opt)[0]
    assert group.fits[1].diverged_at == alone.diverged_at


def test_members_with_their_own_split_match_alone():
    """A seed sweep: each member's seed draws its weights and its split, so each has its own data."""
    members = [Member(0.01, 200, seed=s) for s in range(3)]
    splits = [_data("diabetes", s) for s in range(3)]
    group = _together(splits[0], 1, 8, "tanh", members, log_every=10, per_member=splits)
    for m, ds, fit, params in zip(members, splits, group.fits, group.params):
        _same(fit, params, *_alone(ds, 1, 8, "tanh", m, 10), rtol=1e-9)


# At lr=0.05 Adam's loss oscillates, which amplifies float32 rounding past 1e-4 (lr / 5 here)
@pytest.mark.parametrize(
    "opt,lr", [(None, 1), (Optimizer("adam", weight_decay=1e-3), 0.2)], ids=["gd", "adam"]
)
def test_float32_group_matches_alone_to_float32_tolerance(opt, lr):
    ds = _data("diabetes")
    members = [Member(m.lr * lr, m.epochs, m.patience, m.seed) for m in GRID]
    group = _together(ds, 1, 16, "tanh", members, log_every=10, dtype="float32", opt=opt)
    for m, fit, params in zip(members, group.fits, group.params):
        _same(fit, params, *_alone(ds, 1, 16, "tanh", m, 10, dtype="float32", opt=opt), rtol=1e-4)


def test_host_reads_do_not_grow_with_epochs_or_members():
    ds = _data("diabetes")
    reads = [
        _together(
            ds, 1, 4, "tanh", [Member(0.01, e, seed=s) for s in range(k)], log_every=5
        ).host_reads
        for e, k in ((100, 2), (2000, 2), (2000, 16))
    ]
    assert reads[0] <= 11 and reads[1] == reads[2] <= 11


class _Counting(Backend):
    """The GPU code path on NumPy (a fake "gpu" backend) that counts device→host copies and waits."""

    def __init__(self):
        super().__init__("gpu", np, fake=True)
        object.__setattr__(self, "counts", {"copies": 0, "syncs": 0})

    def to_numpy(self, a):
        self.counts["copies"] += 1
        return super().to_numpy(a)

    def synchronize(self):
        self.counts["syncs"] += 1


@pytest.mark.parametrize(
    "epochs,k,opt,batch_size",
    [
        (200, 2, None, 0),
        (4000, 2, None, 0),
        (4000, 32, None, 0),
        (1000, 3, Optimizer("adam", weight_decay=1e-3), 128),
    ],
)
def test_the_gpu_path_copies_and_waits_the_same_whatever_the_epochs_or_members(
    epochs, k, opt, batch_size
):
    """Adam's step count and the mini-batches' order stay on the device too."""
    ds = _data("diabetes")
    backend = _Counting()
    members = [Member(0.01, epochs, seed=s if not batch_size else 0) for s in range(k)]
    params = stacked_params([ds.n_features, 4, 1], "tanh", [m.seed for m in members], "float32")
    arrays = [a.astype("float32") for a in (ds.X_train, ds.y_train, ds.X_val, ds.y_val)]
    fit = train_group(
        backend,
        params,
        "tanh",
        ds.task,
        *arrays,
        members,
        log_every=10,
        opt=opt,
        batch_size=batch_size,
    )
    # one copy per segment (at most MAX_CHECKS) and one at the end (every member's parameters: one flat array);
    # three clock waits
    assert backend.counts["copies"] == fit.host_reads + 1 <= 10 + 1
    assert backend.counts["syncs"] == 3


@pytest.mark.parametrize("opt", [None, Optimizer("adam", weight_decay=1e-3)], ids=["gd", "adam"])
def test_a_group_split_across_threads_matches_one_thread(opt):
    ds = _data("breast_cancer")
    members = [Member(0.01 * (1 + i), 120, patience=20 * (i % 2), seed=i % 3) for i in range(17)]
    sizes = [ds.n_features, 8, 1]
    arrays = [a.astype("float64") for a in (ds.X_train, ds.y_train, ds.X_val, ds.y_val)]
    fits = [
        train_group(
            CPU,
            stacked_params(sizes, "tanh", [m.seed for m in members], "float64"),
            "tanh",
            ds.task,
            *arrays,
            members,
            log_every=10,
            threads=t,
            opt=opt,
        )
        for t in (1, 2)
    ]
    for a, b, pa, pb in zip(fits[0].fits, fits[1].fits, fits[0].params, fits[1].params):
        assert (a.epochs_run, a.best_epoch, a.diverged_at) == (
            b.epochs_run,
            b.best_epoch,
            b.diverged_at,
        )
        np.testing.assert_allclose(a.val_loss, b.val_loss, rtol=1e-12)
        for x, y in zip(pa, pb):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-15)


# --- sparse text features (data=sms): the group shares one CSR matrix ------------------------------------


def _sms(max_features):
    from test_text import sms_cfg

    return data.load(sms_cfg(f"data.max_features={max_features}").data, 0)


SPARSE_GRID = [
    Member(0.5, 50),
    Member(1.0, 50),
    Member(2.0, 50),
    Member(1.0, 40, patience=20),
    Member(0.25, 30),
]


@needs_sms
@pytest.mark.parametrize(
    "depth,activation,backend",
    [
        (0, "tanh", CPU),
        (1, "tanh", CPU),
        (2, "relu", CPU),
        (1, "tanh", Backend("gpu", np, fake=True)),
    ],
    ids=["depth0", "depth1", "depth2-relu", "depth1-gpu-path"],
)
def test_a_sparse_text_group_matches_each_member_trained_alone_by_the_sparse_trainer(
    depth, activation, backend
):
    ds = _sms(500)
    assert scipy.sparse.issparse(ds.X_train)
    group = _together(ds, depth, 8, activation, SPARSE_GRID, log_every=10, backend=backend)
    # patience: the best weights (its last, here)
    assert group.fits[3].best_epoch <= group.fits[3].epochs_run
    for m, fit, params in zip(SPARSE_GRID, group.fits, group.params):
        _same(fit, params, *_alone(ds, depth, 8, activation, m, 10), rtol=1e-9)


@pytest.mark.parametrize("per_member,blocks", [(True, 3), (False, 1)], ids=["cpu", "gpu"])
def test_the_sparse_first_layer_reads_views_of_the_stacked_weights(per_member, blocks):
    """The CPU's layout gives one (d + 1, fo) block per member, the GPU's one (d + 1, K·fo) for the group:
    writing into a block writes into the weights (and their gradient: empty_like keeps the layout)."""
    from sweeper.models.batched_pass import first_layer, sparse_layout

    Q0 = stacked_params([5, 4, 1], "tanh", [0, 1, 2], "float64")[0]
    Q = sparse_layout(np, Q0, per_member)
    np.testing.assert_array_equal(Q, Q0)
    for a in (Q, np.empty_like(Q)):
        P = first_layer(np, a)
        assert len(P) == blocks and all(p.flags.c_contiguous and np.shares_memory(p, a) for p in P)
    # column k·fo + j of the group's [W_0; b_0] is member k's unit j: Q_0[k].T
    P = first_layer(np, Q)
    np.testing.assert_array_equal(
        np.concatenate(P, axis=1), np.concatenate([q.T for q in Q0], axis=1)
    )
    P[-1][0, -1] = 7.0  # the last block's first input weight of its last unit: member 2's unit 3
    assert Q[2, 3, 0] == 7.0
    with pytest.raises(ValueError) as refused:
        first_layer(np, Q0)
    assert str(refused.value) == "the first layer's weights on sparse data must be in sparse_layout"


@needs_sms
def test_a_sparse_group_split_across_threads_matches_alone():
    ds = _sms(300)
    members = [Member(0.5 + 0.1 * i, 20, patience=10 * (i % 2)) for i in range(16)]  # 2 parts of 8
    group = _together(ds, 1, 4, "tanh", members, log_every=5, threads=2)
    for m, fit, params in zip(members, group.fits, group.params):
        _same(fit, params, *_alone(ds, 1, 4, "tanh", m, 5), rtol=1e-9)


@needs_sms
def test_a_sparse_group_never_densifies_its_features_and_its_memory_estimate_covers_it():
    """d = every word of the training rows (~6.5k): a dense [X.T; 1] alone would take n·d·8 bytes (~174 MB)."""
    import tracemalloc

    from sweeper.models.batched import group_bytes

    ds = _sms(0)
    n, d = ds.X_train.shape
    members = [Member(1.0, 20), Member(2.0, 20), Member(0.5, 20)]
    sizes = [d, 8, 1]
    params = stacked_params(sizes, "tanh", [m.seed for m in members], "float64")
    tracemalloc.start()
    try:
        train_group(
            CPU,
            params,
            "tanh",
            ds.task,
            ds.X_train,
            ds.y_train,
            ds.X_val,
            ds.y_val,
            members,
            log_every=5,
            threads=1,
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    dense = n * (d + 1) * 8
    estimate = group_bytes(
        len(members), n, ds.X_val.shape[0], sizes, 8, True, nnz=(ds.X_train.nnz, ds.X_val.nnz)
    )
    assert peak < dense / 10, (peak, dense)
    assert peak <= estimate < dense / 5, (peak, estimate, dense)


GROUP = ",".join(f"{0.0001 * (i + 1):.4f}" for i in range(21))  # 21 members: 2 threads on 2 CPUs


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize(
    "sig, code, why", [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")]
)
def test_a_21_member_group_stops_within_seconds_and_is_recorded_killed(
    tmp_path, store, sig, code, why, workers
):
    """Before: the group trained on for its whole training (SIGINT) or the process died leaving its parent
    RUNNING (SIGTERM). 2M epochs: minutes of training, so only a stop ends it within the 15 s allowed. In the
    launching process (cpu_workers=1: the group over 2 threads) and on 2 worker processes (its 2 chunks)."""
    args = [
        sys.executable,
        "-m",
        "sweeper",
        "-m",
        NO_BASELINES,
        f"lr={GROUP}",
        "epochs=2000000",
        "log_every=1000",
        f"hydra.launcher.cpu_workers={workers}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        f"tracking.uri=sqlite:///{store}",
    ]
    env = {**os.environ, "SWEEPER_THREADS": "2"}  # a group split over threads, on any machine
    proc = subprocess.Popen(
        args,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    import threading

    # a line that never comes fails the test, it does not hang it
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    try:
        for line in proc.stdout:  # the launcher's first line, then into the group's training
            if "Launching 21 jobs: 21 in" in line:
                assert f"21 in {workers} batched group" in line, line
                break
        else:
            pytest.fail(f"the sweep ended before its group trained: {proc.communicate()}")
        wait_for(
            lambda: running_children(store) == 21, "the group's 21 runs RUNNING: it trains", proc
        )
        proc.send_signal(sig)
        try:  # a group that does not stop trains on for minutes: a hang, not a verdict on speed
            out, err = proc.communicate(timeout=100)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"hang: the sweep still ran 100 s after {sig.name}: the stop did not reach its group"
            )
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    line = one_line(err)
    assert (
        line.startswith("sweeper: interrupted: 0 finished")
        and "resume with: python -m sweeper -m" in line
    )
    (parent,) = [r for r in all_runs(store) if "mlflow.parentRunId" not in r.data.tags]
    assert parent.info.status == "KILLED" and parent.data.tags["failure_reason"].startswith(
        f"sweep interrupted ({why})"
    )
    assert not [r for r in all_runs(store) if r.info.status == "RUNNING"]


# a hang guard: a part that missed the flag would train its 10^7 epochs (hours)
@pytest.mark.timeout(300)
def test_a_group_part_stops_at_its_next_epoch_once_asked():
    """The stop flag reaches the training threads, not only the main thread: train_group, split over 2 threads
    and 10M epochs long, ends with Stopped once the flag is set (as a signal sets it) while it trains: at its
    first progress report, which a member with patience makes every log_every epochs."""
    import numpy as np

    from sweeper.base import stop
    from sweeper.base.backend import resolve
    from sweeper.models.batched import Member, stacked_params, train_group

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(64, 3)), rng.normal(size=(64, 1))
    members = [Member(0.01, 10**7, patience=10**8) for _ in range(16)]
    params = stacked_params([3, 4, 1], "tanh", [0] * 16, "float64")
    reported = []

    def progress(done: int, total: int) -> None:
        reported.append(done)
        stop.STOP.set()

    try:
        with pytest.raises(stop.Stopped):
            train_group(
                resolve("cpu"),
                params,
                "tanh",
                "regression",
                X,
                y,
                X,
                y,
                members,
                log_every=10,
                threads=2,
                progress=progress,
            )
    finally:
        stop.STOP.clear()
    # it was training when the flag came, and stopped
    assert reported and max(reported) < 16 * 10**7


def test_a_float32_groups_passes_hold_float32_buffers_and_only_training_passes_hold_gradients(
    monkeypatch,
):
    """Every buffer of a float32 group's passes is float32 (a float64 one would compute its layer in float64 and
    round it otherwise than the member alone), each hidden layer's scratch and gradient are shaped as the layer (the
    first one's views of the pass's rows), and the validation pass, which never steps, holds none of them."""
    from sweeper.models import batched_pass

    passes = []
    init = batched_pass._Pass.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        passes.append(self)

    monkeypatch.setattr(batched_pass._Pass, "__init__", spy)
    ds = _data("diabetes")
    members = [Member(0.01, 3, seed=s) for s in (0, 1)]
    _together(ds, 3, 4, "tanh", members, log_every=1, dtype="float32")
    train = [p for p in passes if p.backward_calls]
    val = [p for p in passes if not p.backward_calls]
    assert train and val
    f32 = np.dtype("float32")
    for p in passes:
        arrays = [p.H, p.z, p.A0] + [a for b in p.blocks for a in b.A]
        if p in train:
            arrays += [p.T0, p.D0, p.grads, p.ones, p.g, p.col]
            arrays += [a for b in p.blocks for a in (*b.tmp, *b.D)]
            for b in p.blocks:
                assert [t.shape for t in b.tmp] == [d.shape for d in b.D] == [a.shape for a in b.A]
                assert np.shares_memory(b.tmp[0], p.T0) and np.shares_memory(b.D[0], p.D0)
        else:
            assert p.T0 is None and p.D0 is None
            assert all(t is None and d is None for b in p.blocks for t, d in zip(b.tmp, b.D))
        assert {a.dtype for a in arrays} == {f32}


def test_a_multiclass_group_of_as_many_members_as_classes_matches_each_member_alone():
    """Three members on iris's three classes, each on its own split: the group's targets (K, 1, n) become one-hot
    columns along their class axis, not mistaken for one-hot already because the members number the classes."""
    members = [Member(0.05, 20, seed=s) for s in range(3)]
    splits = [_data("iris", s) for s in range(3)]
    assert splits[0].n_outputs == 3
    group = _together(splits[0], 1, 8, "tanh", members, log_every=5, per_member=splits)
    for m, ds, fit, params in zip(members, splits, group.fits, group.params):
        _same(fit, params, *_alone(ds, 1, 8, "tanh", m, 5), rtol=1e-9)


@pytest.mark.parametrize("width", [1, 2])
def test_a_group_of_one_or_two_unit_layers_matches_each_member_alone(width):
    """Hidden layers of one or two units on three classes: only a layer of one unit backpropagates by the
    broadcast product; one with one input and several units, or two units, is a matrix product."""
    ds = _data("iris")
    members = [Member(0.05, 10, seed=s) for s in range(2)]
    group = _together(ds, 2, width, "tanh", members, log_every=5)
    for m, fit, params in zip(members, group.fits, group.params):
        _same(fit, params, *_alone(ds, 2, width, "tanh", m, 5), rtol=1e-9)


def test_a_part_that_raises_halts_the_other_parts_and_a_group_that_ends_halts_none(monkeypatch):
    """train_packed with parts on threads: a part's error (or Ctrl-C in the waiting thread) sets the parts'
    halt, so the others stop at their next epoch instead of training the whole group first; a group whose
    parts all end leaves it unset."""
    import threading
    import time

    from sweeper.models import batched

    halts, both = [], threading.Barrier(2, timeout=10)

    def part(backend, layout, params, task, arrays, members, log_every, report, rule, halt):
        halts.append(halt)
        if fail:
            both.wait()  # the two parts train side by side
        if fail and members[0].lr == 0.1:  # the first part
            raise RuntimeError("a part failed")
        if fail:
            halt.wait(30)  # a part's training: until its next epoch sees the halt
        return batched.GroupFit([], [], 0.0, 0.0, 0)

    monkeypatch.setattr(batched, "_train_part", part)
    ds = _data("diabetes")
    members = [Member(0.1 * (1 + i // batched.MIN_PART), 5) for i in range(2 * batched.MIN_PART)]
    fail = True
    t = time.perf_counter()
    with pytest.raises(RuntimeError, match="a part failed"):
        _together(ds, 1, 4, "tanh", members, log_every=5, threads=2)
    assert time.perf_counter() - t < 10 and halts and all(h.is_set() for h in halts)
    halts.clear()
    fail = False
    _together(ds, 1, 4, "tanh", members, log_every=5, threads=2)
    assert len(halts) == 2 and not any(h.is_set() for h in halts)
