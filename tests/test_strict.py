"""The strict device stand-in itself (``SWEEPER_FAKE_GPU=strict``, :mod:`sweeper.base.strict`): it refuses what CuPy
refuses, in CuPy's words, lets through what CuPy lets through, and counts every transfer and sync exactly."""

import numpy as np
import pytest
import scipy.sparse

from sweeper.base import strict
from sweeper.base.backend import FAKE_GPU_ENV, resolve
from sweeper.base.environment import problem
from sweeper.base.strict import LEDGER, DeviceArray, DeviceSparse, to_device, to_numpy, xp

IMPLICIT = "Implicit conversion to a NumPy array is not allowed"
MIXED = r"Unsupported type <class 'numpy.ndarray'>"


@pytest.fixture(autouse=True)
def _fresh_ledger():
    LEDGER.reset()
    yield
    LEDGER.reset()


def _dev(*shape):
    return to_device(np.arange(float(np.prod(shape))).reshape(shape))


@pytest.mark.parametrize(
    "convert",
    [
        np.asarray,
        np.array,
        np.ascontiguousarray,
        lambda a: np.zeros(6) + np.asarray(a),
        lambda a: np.mean(np.asarray(a)),
    ],
    ids=["asarray", "array", "contiguous", "inside", "reduce"],
)
def test_an_implicit_conversion_to_numpy_raises_cupys_error(convert):
    with pytest.raises(TypeError, match=IMPLICIT):
        convert(_dev(6))
    with pytest.raises(TypeError, match=IMPLICIT):
        np.asarray(to_device(scipy.sparse.eye(3, format="csr")))


HOST = np.ones((2, 3))


@pytest.mark.parametrize(
    "mix",
    [
        lambda d: d + HOST,
        lambda d: HOST + d,
        lambda d: HOST * d,
        lambda d: d - HOST[0],
        lambda d: np.add(d, HOST),
        lambda d: np.maximum(HOST, d),
        lambda d: d @ HOST.T,
        lambda d: HOST.T @ d,
        lambda d: d * np.asarray(2.0),  # a 0-d host array is an array, not a scalar, to CuPy
        lambda d: np.concatenate([d, HOST]),
        lambda d: xp.stack([d, HOST]),
        lambda d: xp.where(d > 0, d, HOST),
        lambda d: np.add(d, 1.0, out=np.empty((2, 3))),
        lambda d: xp.multiply(HOST, 2.0, xp.empty((2, 3))),
        lambda d: xp.sum(d, axis=0, out=np.empty(3)),
        lambda d: d.dot(HOST.T),
    ],
    ids=[
        "add",
        "radd",
        "rmul",
        "sub-row",
        "np.add",
        "np.maximum",
        "matmul",
        "rmatmul",
        "0-d",
        "concatenate",
        "stack",
        "where",
        "host-out",
        "host-input-device-out",
        "reduce-host-out",
        "dot-method",
    ],
)
def test_a_host_array_in_a_device_expression_raises_cupys_error(mix):
    with pytest.raises(TypeError, match=MIXED):
        mix(_dev(2, 3))


def test_numpy_functions_on_device_arrays_only_dispatch_and_stay_on_the_device():
    d = _dev(2, 3)
    for got in (
        np.maximum(d, 0),
        np.sum(d, axis=0),
        np.sum(d),
        np.mean(d),
        np.concatenate([d, d]),
        np.tanh(d),
        np.isfinite(d),
        d.max(),
        d[0, 1],
        np.stack([d, d]),
        np.swapaxes(d, 0, 1),
        np.linalg.norm(d),
        d + np.float64(2.0),
        2.0 * d,
        d > 1,
    ):
        # a reduction or an element too: a 0-d device array, as CuPy's
        assert type(got) is DeviceArray
    # nothing else crossed
    assert LEDGER.events == [LEDGER.events[0]] and LEDGER.events[0].what == "to_device"
    np.testing.assert_array_equal(to_numpy(np.sum(d, axis=0)), [3.0, 5.0, 7.0])


def test_writing_into_a_device_array_takes_scalars_and_device_arrays_not_host_arrays():
    d = _dev(2, 3)
    d[0] = 7.0
    d[1] = xp.zeros(3)
    d[0, 0] = np.asarray(5.0)  # CuPy fills with a 0-d host array's value
    with pytest.raises(ValueError, match="non-scalar numpy.ndarray cannot be used for fill"):
        d[...] = HOST
    xp.copyto(d, xp.ones((2, 3)))
    with pytest.raises(ValueError, match="non-scalar numpy.ndarray cannot be used for copyto"):
        xp.copyto(d, HOST)
    with pytest.raises(TypeError, match="unexpected keyword"):
        xp.take(d, xp.arange(2), axis=1, mode="wrap")  # CuPy's take has no mode
    np.testing.assert_array_equal(to_numpy(d), np.ones((2, 3)))


def test_counts_are_exact_for_a_known_sequence_and_name_their_sites():
    d = to_device(np.ones(4))  # h2d
    loss = (d * d).mean()  # nothing
    strict.mark("epoch", 7)
    host = float(loss)  # sync, in epoch 7
    flag = bool(loss > 0)  # sync
    n = int(xp.sum(d > 0))  # sync
    v = loss.item()  # sync
    strict.mark("segment end", 10)
    h = to_numpy(d)  # d2h
    g = d.get()  # d2h
    lst = d.tolist()  # sync
    e = xp.asarray(np.zeros(2))  # h2d
    d[np.array([0, 1])] = 2.0  # h2d (a host index array goes to the device first)
    d[d > 1.5] = 0.0  # sync (a boolean mask: CuPy counts its entries)
    text = repr(loss)  # sync
    strict.synchronize()  # sync
    with LEDGER.allow_implicit():
        np.asarray(d)  # sync
    assert (host, flag, n, v, h.tolist(), g.tolist(), lst, e.shape) == (
        1.0,
        True,
        4,
        1.0,
        [1.0] * 4,
        [1.0] * 4,
        [1.0] * 4,
        (2,),
    ) and "1." in text
    assert [(e.kind, e.what) for e in LEDGER.events] == [
        ("h2d", "to_device"),
        ("sync", "float()"),
        ("sync", "bool()"),
        ("sync", "int()"),
        ("sync", ".item()"),
        ("d2h", "cupy.asnumpy"),
        ("d2h", ".get()"),
        ("sync", ".tolist()"),
        ("h2d", "xp.asarray(host data)"),
        ("h2d", "a host index array"),
        ("sync", "a boolean mask index"),
        ("sync", "repr()"),
        ("sync", "synchronize()"),
        ("sync", "__array__ (allowed)"),
    ]
    assert LEDGER.counts("epoch") == {"sync": 4} and LEDGER.per_step("epoch") == {7: {"sync": 4}}
    assert LEDGER.counts("segment end") == {"d2h": 2, "sync": 5, "h2d": 2}
    site = LEDGER.inside()[0].site[0]
    assert site.startswith("tests/test_strict.py:") and site.endswith(
        "in test_counts_are_exact_for_a_known_sequence_and_name_their_sites"
    )
    assert int(site.split(":")[1].split()[0]) == _line_of("host = float(loss)")


def _line_of(text):
    from pathlib import Path

    lines = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line and "_line_of" not in line)


def test_what_the_stand_in_does_not_model_raises_naming_it():
    d = _dev(3)
    with pytest.raises(AttributeError, match=r"does not model cupy\.fft"):
        assert xp.fft is None
    with pytest.raises(AttributeError, match=r"does not model ndarray\.partition"):
        d.partition(1)
    with pytest.raises(TypeError, match="no implementation found for 'numpy.unique'"):
        np.unique(d)
    with pytest.raises(TypeError):
        np.add.accumulate(d)  # a ufunc method the table does not name
    with pytest.raises(AttributeError, match="does not model cupyx.scipy.sparse's .multiply"):
        to_device(scipy.sparse.eye(3, format="csr")).multiply(2)


def test_sparse_features_multiply_device_arrays_and_refuse_host_ones():
    host = scipy.sparse.random(6, 4, density=0.5, format="csr", random_state=0)
    X = to_device(host)
    W = to_device(np.arange(8.0).reshape(4, 2))
    assert type(X) is DeviceSparse and X.shape == (6, 4) and X.nnz == host.nnz and X.ndim == 2
    np.testing.assert_allclose(to_numpy(X @ W), host @ np.arange(8.0).reshape(4, 2))
    XT = X.T.tocsr()
    D = to_device(np.ones((2, 6)))
    np.testing.assert_allclose(to_numpy(XT @ D.T), host.T @ np.ones((6, 2)))
    np.testing.assert_allclose(to_numpy(D @ X), np.ones((2, 6)) @ host)
    assert type(X[:3]) is DeviceSparse and X[..., :3, :].shape == (3, 4)
    with pytest.raises(TypeError, match=MIXED):
        X @ np.ones((4, 2))
    with pytest.raises(TypeError):
        host @ W  # SciPy asks the device array for a host copy: CuPy's refusal
    assert scipy.sparse.issparse(X.get()) and type(X.toarray()) is DeviceArray


def test_the_random_state_shuffles_on_the_device_in_its_own_order():
    """cupy.random.RandomState.shuffle sorts cuRAND's keys: not NumPy's order for the same seed."""
    order = xp.arange(50)
    xp.random.RandomState(3).shuffle(order)
    again = xp.arange(50)
    xp.random.RandomState(3).shuffle(again)
    numpy_order = np.arange(50)
    np.random.RandomState(3).shuffle(numpy_order)
    assert to_numpy(order).tolist() == to_numpy(again).tolist() != numpy_order.tolist()
    assert sorted(to_numpy(order).tolist()) == list(range(50))
    with pytest.raises(TypeError, match="The array must be cupy.ndarray"):
        xp.random.RandomState(3).shuffle(np.arange(5))


def test_the_strict_backend_is_chosen_by_the_environment(monkeypatch):
    monkeypatch.setenv(FAKE_GPU_ENV, "strict")
    gpu = resolve("gpu")
    assert gpu.fake and gpu.xp is xp and gpu.device == "gpu"
    a = gpu.to_device(np.ones(3))
    gpu.mark("epoch", 3)
    gpu.clock()
    assert type(a) is DeviceArray and type(gpu.to_numpy(a)) is np.ndarray
    assert [(e.kind, e.phase, e.step) for e in LEDGER.events] == [
        ("h2d", "", -1),
        ("sync", "epoch", 3),
        ("d2h", "epoch", 3),
    ]
    assert resolve("cpu").xp is np
    assert problem({FAKE_GPU_ENV: "strict"}) is None and "numpy or strict" in problem(
        {FAKE_GPU_ENV: "cupy"}
    )
