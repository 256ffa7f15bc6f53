"""The seed's lesson as an assertion, on the strict device stand-in: inside the epochs of a run or a group nothing
crosses between host and device and nothing waits for it; each segment end (loss sampling, divergence, early
stopping) takes one copy of its samples and waits for nothing more; the end waits once (the clock).

Counted per epoch and per segment end (:meth:`sweeper.base.strict.ledger.Ledger.per_phase`) for every optimizer,
task and early-stopping mode, one configuration (:func:`sweeper.models.train.train`), a batched group
(:func:`sweeper.models.batched.train_group`) and a user's model stacked (:func:`sweeper.models.stacked.train_stacked`).
A failure names the call site (``path:line in function``). ``python bench/strict_counts.py`` prints the table.
"""

from functools import lru_cache

import pytest

from sweeper import ROOT, data, models
from sweeper.base.backend import FAKE_GPU_ENV, resolve
from sweeper.base.strict import LEDGER, describe
from sweeper.models.optim import Optimizer
from sweeper.models.train import MAX_CHECKS
from conftest import make_cfg

OPTIMIZERS = {
    "gd": Optimizer(),
    "momentum": Optimizer("momentum"),
    "nesterov": Optimizer("momentum", nesterov=True),
    "adam": Optimizer("adam", weight_decay=1e-3),
}
TASKS = {"regression": "diabetes", "binary": "breast_cancer", "multiclass": "iris"}
MODES = {
    "no-stop": (0, 0),
    "early-stop": (20, 0),
    "mini-batches": (0, 32),
    "mini-batches-early-stop": (20, 32),
}
EPOCHS, LOG_EVERY = 200, 10


@pytest.fixture
def gpu(monkeypatch):
    monkeypatch.setenv(FAKE_GPU_ENV, "strict")
    LEDGER.reset()
    yield resolve("gpu")
    LEDGER.reset()


@lru_cache(maxsize=None)
def _dataset(name):
    return data.load(make_cfg(f"data={name}").data, 0)


def _arrays(backend, name):
    ds = _dataset(name)
    return ds, [backend.to_device(a) for a in (ds.X_train, ds.y_train, ds.X_val, ds.y_val)]


def one_run(backend, task, opt, patience, batch_size, epochs=EPOCHS, lr=0.02, **kwargs):
    """One configuration (depth 1, width 4) trained by :func:`models.train` on ``backend``; the ledger counts it."""
    ds, arrays = _arrays(backend, TASKS[task])
    host = models.init_params([ds.n_features, 4, ds.n_outputs], "tanh", 0, "float64")
    model = models.MLP(
        backend.xp, [backend.to_device(p) for p in host], "tanh", ds.task, opt.weight_decay
    )
    LEDGER.reset()
    return models.train(
        backend,
        model,
        *arrays,
        lr=lr,
        epochs=epochs,
        log_every=LOG_EVERY,
        patience=patience,
        opt=opt,
        batch_size=batch_size,
        seed=0,
        **kwargs,
    )


def group(backend, task, opt, patience, batch_size, epochs=EPOCHS):
    """Four members (their own rates, epoch counts, patience; one diverges on regression
    but with Adam, whose step is bounded by its rate) trained by
    :func:`train_group`."""
    from sweeper.models.batched import Member, stacked_params, train_group

    ds, arrays = _arrays(backend, TASKS[task])
    members = [
        Member(0.01, epochs, patience),
        Member(0.05, epochs // 2, patience, reads=(epochs // 4,)),
        Member(0.02, epochs, 0),
        Member(60.0, epochs, patience),
    ]
    params = stacked_params([ds.n_features, 4, ds.n_outputs], "tanh", [0] * 4, "float64")
    LEDGER.reset()
    return train_group(
        backend,
        params,
        "tanh",
        ds.task,
        *arrays,
        members,
        log_every=LOG_EVERY,
        opt=opt,
        batch_size=batch_size,
    )


def stacked(backend, task, opt, epochs=EPOCHS):
    """The example's TwoLayerNet stacked over three members (one read at two counts)."""
    import sys

    sys.path.insert(0, str(ROOT / "examples" / "my_nets"))
    from my_nets import TwoLayerNet

    from sweeper.models.stacked import Member, train_stacked

    ds, arrays = _arrays(backend, TASKS[task])
    members = [
        Member(0.01, 0, (epochs,)),
        Member(0.02, 1, (epochs // 2, epochs)),
        Member(0.05, 2, (epochs // 4,)),
    ]
    LEDGER.reset()
    return train_stacked(
        backend,
        TwoLayerNet(hidden=4),
        ds.task,
        *arrays,
        members,
        n_out=ds.n_outputs,
        log_every=LOG_EVERY,
        opt=opt,
        dtype="float64",
    )


def assert_the_design(copies_a_segment=1, waits_at_end=1):
    """Nothing inside an epoch; at most ``copies_a_segment`` copies and no wait at a segment end; ``waits_at_end``
    waits at the end (the clock). A failure names every offending call site."""
    inside = LEDGER.inside("epoch")
    assert not inside, f"{len(inside)} host transfer(s) or sync(s) inside the epochs:\n" + describe(
        inside[:5]
    )
    counts = LEDGER.per_phase()
    assert counts["epoch"]["marks"] >= 1
    seg = counts.get("segment end", {"sync": 0, "d2h_max": 0})
    waits = [e for e in LEDGER.events if e.phase == "segment end" and e.kind == "sync"]
    assert not waits, "a segment end waits for the device:\n" + describe(waits)
    copies = [e for e in LEDGER.events if e.phase == "segment end" and e.kind == "d2h"]
    assert seg["d2h_max"] <= copies_a_segment, "more than one copy at a segment end:\n" + describe(
        copies
    )
    end = [e for e in LEDGER.events if e.phase == "end" and e.kind == "sync"]
    assert len(end) == waits_at_end, "the end waits other than on the clock:\n" + describe(end)
    return counts


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("task", list(TASKS))
@pytest.mark.parametrize("opt", list(OPTIMIZERS))
def test_one_configuration_reads_the_device_only_at_segment_ends(gpu, opt, task, mode):
    patience, batch_size = MODES[mode]
    fit = one_run(gpu, task, OPTIMIZERS[opt], patience, batch_size)
    counts = assert_the_design()
    seg = counts["segment end"]
    assert seg["d2h"] == seg["marks"]  # one copy each: the segment's samples
    assert counts["epoch"]["marks"] >= fit.epochs_run
    if not patience:
        assert seg["marks"] <= MAX_CHECKS
    else:  # a host decision every log_every epochs
        assert seg["marks"] == -(-counts["epoch"]["marks"] // LOG_EVERY)


@pytest.mark.parametrize(
    "mode", [pytest.param(m, marks=pytest.mark.slow if "mini" in m else ()) for m in MODES]
)
@pytest.mark.parametrize("task", list(TASKS))
@pytest.mark.parametrize("opt", list(OPTIMIZERS))
def test_a_group_reads_the_device_only_at_segment_ends(gpu, opt, task, mode):
    patience, batch_size = MODES[mode]
    fit = group(gpu, task, OPTIMIZERS[opt], patience, batch_size)
    # the diverging member is frozen: its group carries on
    if task == "regression" and opt != "adam":
        assert fit.fits[3].diverged_at is not None
    counts = assert_the_design()
    seg = counts["segment end"]
    # + the last sample's
    assert seg["d2h"] == seg["marks"] and seg["d2h"] <= fit.host_reads <= seg["d2h"] + 1
    if not patience:  # MAX_CHECKS, plus the members' own epoch counts and reads
        assert seg["marks"] <= MAX_CHECKS + 3


@pytest.mark.parametrize("task", list(TASKS))
@pytest.mark.parametrize("opt", list(OPTIMIZERS))
def test_a_users_stacked_model_reads_the_device_only_at_its_end(gpu, opt, task):
    stacked(gpu, task, OPTIMIZERS[opt])
    counts = assert_the_design(copies_a_segment=0)
    # the samples in one copy; each count's weights (4 arrays, 3 counts)
    assert counts["end"]["d2h"] == 1 + 4 * 3


def test_the_naive_loop_reads_every_epoch_and_the_assertion_names_its_line(gpu):
    """``sync_every_epoch=true`` is the seed's loop, kept to measure its cost: a copy of the loss every epoch."""
    one_run(gpu, "regression", Optimizer(), 0, 0, epochs=30, sync_every_epoch=True)
    with pytest.raises(
        AssertionError,
        match=r"30 host transfer\(s\) or sync\(s\) inside the epochs:\n\s*"
        r"d2h cupy.asnumpy at models/train.py:(\d+) in train",
    ) as failed:
        assert_the_design()
    line = int(str(failed.value).split("models/train.py:")[1].split()[0])
    assert (
        "float(backend.to_numpy(loss))"
        in (ROOT / "models" / "train.py").read_text().splitlines()[line - 1]
    )


def test_a_planted_float_of_the_loss_fails_naming_the_line(gpu, monkeypatch):
    from sweeper.models import mlp

    epoch = mlp.FullBatch.epoch

    def planted(self):
        epoch(self)
        float(self.loss())  # the planted host read

    monkeypatch.setattr(mlp.FullBatch, "epoch", planted)
    one_run(gpu, "binary", Optimizer("adam"), 0, 0, epochs=30)
    with pytest.raises(
        AssertionError, match="sync float\\(\\) at tests/test_syncs.py:(\\d+) in planted"
    ) as failed:
        assert_the_design()
    line = int(str(failed.value).split("tests/test_syncs.py:")[1].split()[0])
    assert (
        "the planted host read"
        in (ROOT / "tests" / "test_syncs.py").read_text().splitlines()[line - 1]
    )


def test_a_planted_read_in_a_groups_sampling_fails_naming_the_line(gpu, monkeypatch):
    from sweeper.models import batched

    sample = batched._Part.sample

    def planted(self, t):
        sample(self, t)
        if bool(self.hist[self.slot[t]].max() > 1e9):  # the planted host read
            pass

    monkeypatch.setattr(batched._Part, "sample", planted)
    group(gpu, "regression", Optimizer(), 0, 0, epochs=60)
    with pytest.raises(
        AssertionError, match="sync bool\\(\\) at tests/test_syncs.py:\\d+ in planted"
    ):
        assert_the_design()


def test_a_segment_end_that_reads_twice_fails(gpu, monkeypatch):
    """The other half of the promise: one copy a segment end (a second one planted in the host's read)."""
    import importlib

    train = importlib.import_module("sweeper.models.train")
    take = train._Reading.take

    def planted(self, block, k0, ends, candidate):
        gpu.to_numpy(gpu.to_device(block))  # the planted second copy
        return take(self, block, k0, ends, candidate)

    monkeypatch.setattr(train._Reading, "take", planted)
    one_run(gpu, "regression", Optimizer(), 20, 0, epochs=60)
    with pytest.raises(AssertionError, match="more than one copy at a segment end"):
        assert_the_design()
