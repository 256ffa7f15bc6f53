"""The fused full-batch epoch (models.mlp.FullBatch) against the reference path, and against scikit-learn.

The fused epoch reorders floating-point sums (bias inside the matrix product, -lr folded into the loss
gradient, the output unit's weight applied after the product), so it must equal the reference
``gradients`` + ``step`` to rounding (1e-12 relative in float64), never more.
"""

import warnings

import numpy as np
import pytest

from sweeper import models
from sweeper.models.activations import ACTIVATIONS
from sweeper.models.mlp import MLP, FullBatch, init_params, product_flops
from sweeper.base.backend import SMALL_PRODUCT_FLOPS, resolve


def _problem(task, depth, activation, n=37, d=5, width=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = (
        rng.standard_normal((n, 1))
        if task == "regression"
        else (rng.random((n, 1)) > 0.5).astype(float)
    )
    params = init_params([d] + [width] * depth + [1], activation, seed=seed, dtype="float64")
    params = [p + 0.1 * rng.standard_normal(p.shape) for p in params]  # non-zero biases too
    return X, y, params


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
@pytest.mark.parametrize("task", ["regression", "binary"])
@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_fused_epochs_equal_reference_gradient_descent(activation, task, depth):
    X, y, params = _problem(task, depth, activation)
    lr = 0.05
    ref = MLP(np, [p.copy() for p in params], activation, task)
    fused = MLP(np, [p.copy() for p in params], activation, task)
    batch = FullBatch(fused, X, y, lr)
    for _ in range(25):
        batch.forward()
        loss = batch.loss()
        ref_loss, grads = ref.gradients(X, y, with_loss=True)
        assert float(loss) == pytest.approx(float(ref_loss), rel=1e-12)
        batch.backward_and_update()
        ref.step(grads, lr)
    for _ in range(25):
        batch.epoch()
        _, grads = ref.gradients(X, y)
        ref.step(grads, lr)
    moved = sum(float(np.abs(p - q).max()) for p, q in zip(ref.params, params))
    assert moved > 1e-3  # the weights did change
    for a, b in zip(fused.params, ref.params):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_params_are_views_of_the_packed_matrices():
    X, y, params = _problem("regression", 2, "tanh")
    model = MLP(np, params, "tanh", "regression")
    for l, P in enumerate(model.packed):
        W, b = model.params[2 * l], model.params[2 * l + 1]
        assert W.shape == params[2 * l].shape and b.shape == params[2 * l + 1].shape
        assert np.shares_memory(W, P) and np.shares_memory(b, P)
        np.testing.assert_array_equal(P, np.vstack([params[2 * l], params[2 * l + 1]]))
    model.params[1][...] = 7.0  # an in-place change of b_0 is a change of P_0
    assert (model.packed[0][-1] == 7.0).all()


def test_an_epoch_allocates_nothing_and_reuses_its_buffers():
    X, y, params = _problem("binary", 2, "sigmoid")
    model = MLP(np, params, "sigmoid", "binary")
    batch = FullBatch(model, X, y, 0.1)
    buffers = [batch.z, *batch.H, *batch.grads, *model.packed]
    ids = [id(a) for a in buffers]
    before = [a.copy() for a in model.packed]
    for _ in range(3):
        batch.epoch()
    assert [id(a) for a in [batch.z, *batch.H, *batch.grads, *model.packed]] == ids
    assert all(not np.array_equal(a, b) for a, b in zip(before, model.packed))
    # every call writes into an array it was given (its out): none returns a fresh array
    for call in batch.epoch_calls:
        out = call()
        given = [*call.args, *call.keywords.values()]
        assert out is None or any(out is a for a in given), call


def test_validation_batch_builds_only_the_forward_pass():
    X, y, params = _problem("regression", 1, "relu")
    model = MLP(np, params, "relu", "regression")
    val = FullBatch(model, X, y)
    assert val.backward_calls == [] and val.update_calls == []
    ref_z, _ = model.logits(X)
    np.testing.assert_allclose(val.forward().ravel(), ref_z.ravel(), rtol=1e-13)
    assert float(val.loss()) == pytest.approx(float(model.loss(X, y)), rel=1e-13)


@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-6), ("float32", 1e-3)])
def test_training_follows_scikit_learns_gradient_descent(dtype, rtol):
    """MLPRegressor set to plain full-batch gradient descent, from our initial weights, lands on our test MSE.

    scikit-learn minimises ½·MSE (+ 0 penalty): the same steps need learning_rate_init = 2·lr.
    """
    pytest.importorskip("sklearn")
    from sklearn.neural_network import MLPRegressor

    rng = np.random.default_rng(3)
    X = rng.standard_normal((120, 6)).astype(dtype)
    y = (np.sin(X @ rng.standard_normal((6, 1)))).astype(dtype)
    Xt = rng.standard_normal((40, 6)).astype(dtype)
    yt = np.sin(Xt @ rng.standard_normal((6, 1))).astype(dtype)
    lr, epochs = 0.05, 300
    params = init_params([6, 8, 8, 1], "tanh", seed=0, dtype=dtype)

    ref = MLPRegressor(
        hidden_layer_sizes=(8, 8),
        activation="tanh",
        solver="sgd",
        batch_size=len(X),
        learning_rate="constant",
        learning_rate_init=2 * lr,
        momentum=0.0,
        nesterovs_momentum=False,
        alpha=0.0,
        shuffle=False,
        tol=0.0,
        n_iter_no_change=10**9,
        max_iter=epochs,
        random_state=0,
    )
    ref.partial_fit(X, y.ravel())  # creates coefs_ (one step), which are then overwritten with ours
    ref.coefs_ = [p.copy() for p in params[::2]]
    ref.intercepts_ = [p.ravel().copy() for p in params[1::2]]
    ref.warm_start = True  # fit continues from coefs_ and counts its own iterations
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning: max_iter reached on purpose
        ref.fit(X, y.ravel())
    assert ref.n_iter_ == epochs

    backend = resolve("cpu")  # the real CPU backend, with its BLAS thread policy
    model = MLP(np, [p.copy() for p in params], "tanh", "regression")
    models.train(backend, model, X, y, X, y, lr=lr, epochs=epochs, log_every=50)
    ours = float(np.mean((model.predict(Xt) - yt) ** 2))
    theirs = float(np.mean((ref.predict(Xt).reshape(-1, 1) - yt) ** 2))
    assert ours == pytest.approx(theirs, rel=rtol)
    for a, b in zip(model.params[::2], ref.coefs_):
        np.testing.assert_allclose(a, b, rtol=100 * rtol, atol=100 * rtol)


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def test_the_cpu_backend_thread_policy(monkeypatch):
    backend, before = resolve("cpu"), _blas_threads()
    assert before, "NumPy's BLAS is not visible to threadpoolctl"
    with backend.host_threads(SMALL_PRODUCT_FLOPS / 2, 100) as (
        parts,
        pool,
    ):  # small: one block, one BLAS thread
        assert (parts, pool) == (1, None)
        assert _blas_threads() == [1] * len(before)
    assert _blas_threads() == before
    monkeypatch.setenv("SWEEPER_THREADS", "3")
    with backend.host_threads(SMALL_PRODUCT_FLOPS * 2, 100) as (
        parts,
        pool,
    ):  # large: 3 blocks, 1 BLAS thread each
        assert parts == 3 and pool.submit(lambda: 42).result() == 42
        assert _blas_threads() == [1] * len(before)
    assert _blas_threads() == before
    with backend.host_threads(SMALL_PRODUCT_FLOPS * 2, 1) as (
        parts,
        pool,
    ):  # too few rows to split: BLAS keeps its threads
        assert (parts, pool) == (1, None)
        assert _blas_threads() == before
    monkeypatch.setenv("SWEEPER_THREADS", "4")
    with backend.host_threads(SMALL_PRODUCT_FLOPS * 2, 2) as (
        parts,
        pool,
    ):  # 2 blocks share 4 threads
        assert parts == 2
        assert _blas_threads() == [2] * len(before)
    monkeypatch.setenv("SWEEPER_THREADS", "0")
    with pytest.raises(
        ValueError, match="SWEEPER_THREADS=0 is not allowed: expected an integer >= 1"
    ):
        with backend.host_threads(SMALL_PRODUCT_FLOPS * 2, 100):
            pass
    assert _blas_threads() == before


def test_cpu_threads_respect_omp_num_threads_as_joblib_workers_get_it(monkeypatch):
    from sweeper.base.backend import cpu_threads

    monkeypatch.delenv("SWEEPER_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cpus = cpu_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # what joblib sets in each of cpu_count() workers
    assert cpu_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", str(cpus + 8))
    assert cpu_threads() == cpus
    monkeypatch.setenv("SWEEPER_THREADS", "3")
    assert cpu_threads() == 3  # an explicit choice wins


def test_an_error_in_one_block_waits_for_the_others_and_numpy_errstate_reaches_them():
    import threading
    import warnings
    from concurrent.futures import ThreadPoolExecutor

    from sweeper.models.mlp import _Blocks

    done, failed = threading.Event(), threading.Event()

    def slow():  # still running when the other block fails: it waits for that
        assert failed.wait(60), "the other block never ran"
        done.set()

    def fail():
        failed.set()
        raise RuntimeError("block 0 failed")

    big = np.array([1e308])
    with ThreadPoolExecutor(1) as pool:
        with pytest.raises(RuntimeError, match="block 0 failed"):
            _Blocks(pool, [[fail], [slow]])()
        assert done.is_set()  # the other block had finished before the error came out
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an overflow warning in the worker would raise here
            with np.errstate(over="ignore"):
                _Blocks(pool, [[lambda: big * 10], [lambda: np.multiply(big, 10)]])()


def test_the_gpu_backend_leaves_threads_alone():
    with (
        resolve("cpu").__class__("gpu", np).host_threads(SMALL_PRODUCT_FLOPS * 100) as (parts, pool)
    ):
        assert (parts, pool) == (1, None)


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("depth", [0, 1, 2, 3])
@pytest.mark.parametrize(
    "task, activation", [("regression", "tanh"), ("binary", "sigmoid"), ("regression", "relu")]
)
def test_an_epoch_in_column_blocks_on_threads_equals_the_single_block_epoch(
    task, activation, depth, parts
):
    from concurrent.futures import ThreadPoolExecutor

    X, y, params = _problem(task, depth, activation, n=1000)
    one = MLP(np, [p.copy() for p in params], activation, task)
    blocked = MLP(np, [p.copy() for p in params], activation, task)
    single = FullBatch(one, X, y, 0.05)
    with ThreadPoolExecutor(parts - 1) as pool:
        batch = FullBatch(blocked, X, y, 0.05, parts, pool)
        assert batch.parts == parts
        val = FullBatch(blocked, X[:600], y[:600], parts=parts, pool=pool)
        assert val.parts == 2  # 600 rows make two blocks of at least 256
        for epoch in range(30):
            if epoch % 10:
                single.epoch()
                batch.epoch()
            else:  # a sampled epoch: forward, loss, backward + update
                single.forward()
                batch.forward()
                assert float(batch.loss()) == pytest.approx(float(single.loss()), rel=1e-12)
                single.backward_and_update()
                batch.backward_and_update()
        np.testing.assert_allclose(val.forward(), one.logits(X[:600])[0].T, rtol=1e-9, atol=1e-12)
    # the weights moved
    assert sum(float(np.abs(p - q).max()) for p, q in zip(one.params, params)) > 1e-3
    for a, b in zip(blocked.packed, one.packed):
        # the gradient shares sum in another order
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)


def test_a_block_epoch_is_deterministic_and_allocates_nothing():
    from concurrent.futures import ThreadPoolExecutor

    X, y, params = _problem("regression", 2, "tanh", n=2000)
    finals = []
    with ThreadPoolExecutor(1) as pool:
        for _ in range(2):
            model = MLP(np, [p.copy() for p in params], "tanh", "regression")
            batch = FullBatch(model, X, y, 0.05, 2, pool)
            buffers = [batch.z, *batch.H, *batch.grads, *model.packed]
            ids = [id(a) for a in buffers]
            for _ in range(20):
                batch.epoch()
            assert [id(a) for a in [batch.z, *batch.H, *batch.grads, *model.packed]] == ids
            finals.append([p.copy() for p in model.packed])
    for a, b in zip(*finals):
        np.testing.assert_array_equal(a, b)


def test_too_few_rows_make_one_block():
    from sweeper.models.mlp import MIN_BLOCK, column_blocks

    assert column_blocks(MIN_BLOCK * 2 - 1, 4) == [slice(None)]
    assert column_blocks(1000, 3) == [slice(0, 333), slice(333, 667), slice(667, 1000)]
    assert column_blocks(10_000, 1) == [slice(None)]


def test_the_epoch_reports_its_largest_matrix_product():
    X = np.ones((100, 10))
    model = MLP(np, init_params([10, 32, 32, 1], "tanh", 0, "float64"), "tanh", "regression")
    assert product_flops(model, len(X)) == 2 * 100 * 33 * 32  # the (32 + 1) x 32 layer
