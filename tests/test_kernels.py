"""Each kernel the trainers share, against an independent reference: a plain NumPy formula or central finite
differences, never another path of the same code.

The batched trainer is checked against each member trained alone (tests/test_batched.py), and both use these
kernels: a wrong derivative they share passes every such comparison. Here each activation, loss and update rule is
checked on its own (on a stacked ``(K, ...)`` array, as the batched trainer calls it), and a whole group's steps
against a NumPy trainer written from the textbook formulas (its gradient itself checked by finite differences).
"""

import numpy as np
import pytest

from sweeper.base.backend import Backend
from sweeper.models import losses
from sweeper.models.activations import ACTIVATIONS
from sweeper.models.batched import Member, member_params, stacked_params, train_group
from sweeper.models.optim import Optimizer, State

RNG = np.random.default_rng(56)
EPS = 1e-6  # central differences in float64: error ~EPS² · f''' plus rounding ~1e-16 / EPS


def run(calls):
    for c in calls:
        c()


def central(f, x):
    """d(sum of f)/dx elementwise, for an f applied elementwise, by central differences."""
    return (f(x + EPS) - f(x - EPS)) / (2 * EPS)


def numeric_grad(scalar, x):
    """The gradient of ``scalar(x)`` (a float) by central differences, one coordinate at a time."""
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + EPS
        up = scalar(x)
        x[idx] = old - EPS
        down = scalar(x)
        x[idx] = old
        g[idx] = (up - down) / (2 * EPS)
    return g


# --- activations -----------------------------------------------------------------------------------------------

PLAIN = {
    "relu": lambda z: np.where(z > 0, z, 0.0),
    "tanh": lambda z: np.sinh(z) / np.cosh(z),
    "sigmoid": lambda z: 1.0 / (1.0 + np.exp(-z)),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_each_activation_and_its_derivative_match_the_formula_and_finite_differences(name):
    act, plain = ACTIVATIONS[name], PLAIN[name]
    Z = RNG.standard_normal((3, 4, 5)) * 2  # a group's (K, width, n)
    Z[np.abs(Z) < 1e-3] = 0.5  # relu's kink: no finite difference across it
    A = plain(Z)
    np.testing.assert_allclose(act.f(np, Z), A, rtol=1e-13, atol=1e-15)
    inplace = Z.copy()
    run(act.f_calls(np, inplace))
    np.testing.assert_allclose(inplace, A, rtol=1e-13, atol=1e-15)
    slope = central(plain, Z)
    np.testing.assert_allclose(act.grad(np, Z, A), slope, rtol=1e-7, atol=1e-9)
    dA = RNG.standard_normal(Z.shape)  # the gradient flowing back, multiplied by f'(Z) in place
    out, tmp = dA.copy(), np.empty_like(Z)
    run(act.grad_calls(np, out, A, tmp))
    np.testing.assert_allclose(out, dA * slope, rtol=1e-7, atol=1e-9)


# --- losses ----------------------------------------------------------------------------------------------------


def plain_loss(task, z, y):
    """The mean loss of logits ``z`` (n, k) against ``y`` (n, 1) from the textbook formulas."""
    if task == "regression":
        return float(np.mean((z - y) ** 2))
    if task == "binary":
        p = 1.0 / (1.0 + np.exp(-z))
        return float(np.mean(-(y * np.log(p) + (1 - y) * np.log(1 - p))))
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    return float(np.mean(-np.log(p[np.arange(len(y)), y.ravel().astype(int)])))


def problem(task, n=11, k=3):
    z = RNG.standard_normal((n, k if task == "multiclass" else 1))
    y = {
        "regression": RNG.standard_normal((n, 1)),
        "binary": (RNG.random((n, 1)) > 0.5).astype(float),
        "multiclass": RNG.integers(0, k, (n, 1)).astype(float),
    }[task]
    return z, y


@pytest.mark.parametrize("task", ["regression", "binary", "multiclass"])
def test_each_loss_and_its_gradient_match_the_formula_and_finite_differences(task):
    z, y = problem(task)
    assert float(losses.loss(np, task, z, y)) == pytest.approx(plain_loss(task, z, y), rel=1e-12)
    numeric = numeric_grad(lambda x: plain_loss(task, x, y), z.copy())
    np.testing.assert_allclose(losses.grad(np, task, z, y), numeric, rtol=1e-6, atol=1e-9)
    # the fused epoch's in-place calls: feature-major (k, n), the factor folded in (scale = -lr)
    Y = losses.one_hot(np, y, z.shape[1]) if task == "multiclass" else y
    zt, yt, g = z.T.copy(), Y.T.copy(), np.empty_like(z.T)
    col = np.empty((1, z.shape[0]))
    run(losses.grad_calls(np, task, zt, yt, g, -0.3, n=z.shape[0], col=col))
    np.testing.assert_allclose(g, -0.3 * numeric.T, rtol=1e-6, atol=1e-9)
    assert float(losses.grad_constant(task, 8)) == {"regression": 0.25}.get(task, 0.125)


@pytest.mark.parametrize("task", ["regression", "binary", "multiclass"])
def test_a_groups_losses_and_gradients_are_each_members_own(task):
    """Stacked over K members as the batched trainer holds them ((K, k, n) logits): per member, the formula."""
    K, n, k = 4, 9, 3
    pairs = [problem(task, n, k) for _ in range(K)]
    z = np.stack([p[0].T for p in pairs])  # (K, k, n)
    Y = np.stack([(losses.one_hot(np, p[1], k) if task == "multiclass" else p[1]).T for p in pairs])
    if task == "multiclass":
        per = losses.cross_entropy(np, z, Y, classes=1, axis=-1)
    else:
        per = losses.loss(np, task, z, Y, axis=(1, 2))
    np.testing.assert_allclose(per, [plain_loss(task, *p) for p in pairs], rtol=1e-12)
    g, col = np.empty_like(z), np.empty((K, 1, n))
    scale = -np.array([0.1, 0.2, 0.3, 0.4]).reshape(K, 1, 1)  # each member's -lr
    run(losses.grad_calls(np, task, z, Y, g, 1.0, col=col))
    g *= scale
    for m, (zm, ym) in enumerate(pairs):
        numeric = numeric_grad(lambda x, ym=ym: plain_loss(task, x, ym), zm.copy())
        np.testing.assert_allclose(g[m], scale[m] * numeric.T, rtol=1e-6, atol=1e-9)


def test_softmax_in_place_over_a_groups_classes_is_the_formula():
    z = RNG.standard_normal((2, 4, 6)) * 30  # large logits: the max is taken out first
    out, col = np.empty_like(z), np.empty((2, 1, 6))
    run(losses.softmax_calls(np, z, out, col))
    e = np.exp(z - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-13)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-14)


# --- update rules ----------------------------------------------------------------------------------------------


def textbook_steps(opt, lr, P, grads, decayed):
    """The parameter after each gradient in ``grads`` (each the objective's gradient without weight decay) from
    the rules as scikit-learn's SGD and Adam state them; weight decay adds ``λ W`` where ``decayed`` (a weight)."""
    P, V, m, v = P.copy(), np.zeros_like(P), np.zeros_like(P), np.zeros_like(P)
    for t, g in enumerate(grads, start=1):
        g = g + opt.weight_decay * P * decayed
        if opt.name == "gd":
            P = P - lr * g
        elif opt.name == "momentum":
            V = opt.momentum * V - lr * g
            P = P + (opt.momentum * V - lr * g if opt.nesterov else V)
        else:
            m = opt.beta1 * m + (1 - opt.beta1) * g
            v = opt.beta2 * v + (1 - opt.beta2) * g * g
            step = lr * np.sqrt(1 - opt.beta2**t) / (1 - opt.beta1**t)
            P = P - step * m / (np.sqrt(v) + opt.eps)
    return P


RULES = [
    Optimizer("gd"),
    Optimizer("gd", weight_decay=0.1),
    Optimizer("momentum", momentum=0.8),
    Optimizer("momentum", nesterov=True, weight_decay=0.05),
    Optimizer("adam", beta1=0.8, beta2=0.95),
    Optimizer("adam", weight_decay=0.1),
]


@pytest.mark.parametrize(
    "opt", RULES, ids=lambda o: f"{o.name}{'-nesterov' if o.nesterov else ''}-wd{o.weight_decay}"
)
def test_each_update_rule_over_a_group_follows_its_textbook_formula(opt):
    """A group's stacked parameters as the batched trainer holds them: ``Q_0 = [W_0; b_0].T`` (K, fo, d + 1), the bias
    its last column, and a bias-only ``b_1`` (K, fo, 1); each member its own rate."""
    K = 3
    lr = np.array([0.01, 0.1, 0.5]).reshape(K, 1, 1)
    P0 = [RNG.standard_normal((K, 4, 6)), RNG.standard_normal((K, 4, 1))]
    decayed = [np.arange(6) < 5, np.zeros(1, dtype=bool)]  # weights, not biases
    grads = [[RNG.standard_normal(p.shape) for p in P0] for _ in range(4)]
    P, G = [p.copy() for p in P0], [np.empty_like(p) for p in P0]
    calls = State(np, P, opt, lr, [(Ellipsis, slice(None, -1)), None]).calls(G)
    # the backward pass leaves G = grad_scale · ∇ (the update adds the weight decay)
    for step in grads:
        for buf, g in zip(G, step):
            buf[...] = opt.grad_scale(lr) * g
        run(calls)
    for i, p in enumerate(P):
        expected = textbook_steps(opt, lr, P0[i], [step[i] for step in grads], decayed[i])
        np.testing.assert_allclose(p, expected, rtol=1e-12, atol=1e-14)


# --- a whole group against a NumPy trainer ------------------------------------------------------------------------


def reference_loss_and_grads(params, X, y, activation, task, weight_decay=0.0):
    """The objective and its gradient for one MLP (``[W_0, b_0, ...]``) by backpropagation written from the formulas."""
    f = PLAIN[activation]
    slope = {
        "relu": lambda z: (z > 0) * 1.0,
        "tanh": lambda z: 1.0 / np.cosh(z) ** 2,
        "sigmoid": lambda z: np.exp(-z) / (1.0 + np.exp(-z)) ** 2,
    }[activation]
    L = len(params) // 2
    A, Zs, As = X, [], [X]
    for i in range(L):
        Z = A @ params[2 * i] + params[2 * i + 1]
        Zs.append(Z)
        if i < L - 1:
            A = f(Z)
            As.append(A)
    z, n = Zs[-1], len(X)
    if task == "regression":
        dz = 2 * (z - y) / n
    elif task == "binary":
        dz = (1.0 / (1.0 + np.exp(-z)) - y) / n
    else:
        p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        dz = (p - np.eye(z.shape[1])[y.ravel().astype(int)]) / n
    loss = plain_loss(task, z, y) + weight_decay / 2 * sum(float((W**2).sum()) for W in params[::2])
    grads = [None] * len(params)
    for i in reversed(range(L)):
        grads[2 * i] = As[i].T @ dz + weight_decay * params[2 * i]
        grads[2 * i + 1] = dz.sum(axis=0, keepdims=True)
        if i:
            dz = (dz @ params[2 * i].T) * slope(Zs[i - 1])
    return loss, grads


def test_the_reference_trainers_gradient_is_the_finite_difference_of_its_objective():
    X, y = RNG.standard_normal((7, 3)), RNG.integers(0, 3, (7, 1)).astype(float)
    params = [RNG.standard_normal(s) for s in ((3, 4), (1, 4), (4, 3), (1, 3))]
    for activation in PLAIN:
        _, grads = reference_loss_and_grads(params, X, y, activation, "multiclass", 0.1)
        for p, g in zip(params, grads):
            numeric = numeric_grad(
                lambda _, a=activation: reference_loss_and_grads(
                    params, X, y, a, "multiclass", 0.1
                )[0],
                p,
            )
            np.testing.assert_allclose(g, numeric, rtol=1e-6, atol=1e-9)


CASES = [
    ("regression", "tanh", 2, Optimizer("gd")),
    ("binary", "sigmoid", 1, Optimizer("gd")),
    ("binary", "sigmoid", 2, Optimizer("momentum", nesterov=True, weight_decay=0.01)),
    ("multiclass", "relu", 2, Optimizer("adam", weight_decay=0.01)),
    ("regression", "sigmoid", 1, Optimizer("momentum")),
    ("multiclass", "tanh", 1, Optimizer("adam")),
]


@pytest.mark.parametrize("task,activation,depth,opt", CASES, ids=lambda v: getattr(v, "name", v))
def test_a_groups_training_follows_a_numpy_trainer_written_from_the_formulas(
    task, activation, depth, opt
):
    """K members, each its own rate and weights, trained E full-batch epochs by the batched trainer, land where the
    reference trainer's E steps take each of them."""
    n, d, width, E = 23, 4, 5, 6
    k = 3 if task == "multiclass" else 1
    X = RNG.standard_normal((n, d))
    y = {
        "regression": RNG.standard_normal((n, 1)),
        "binary": (RNG.random((n, 1)) > 0.5).astype(float),
        "multiclass": RNG.integers(0, k, (n, 1)).astype(float),
    }[task]
    members = [Member(lr, E, seed=s) for s, lr in enumerate((0.05, 0.2, 0.5))]
    params = stacked_params(
        [d] + [width] * depth + [k], activation, [m.seed for m in members], "float64"
    )
    params = [p + 0.2 * RNG.standard_normal(p.shape) for p in params]  # non-zero biases
    fit = train_group(
        Backend("cpu", np),
        [p.copy() for p in params],
        activation,
        task,
        X,
        y,
        X,
        y,
        members,
        log_every=1,
        threads=1,
        opt=opt,
    )
    for m, member in enumerate(members):
        P = member_params(params, m)
        state = [{} for _ in P]
        for t in range(1, E + 1):
            loss, grads = reference_loss_and_grads(P, X, y, activation, task)
            # sampled before the update
            assert fit.fits[m].train_loss[t - 1] == pytest.approx(loss, rel=1e-9)
            P = [
                reference_step(opt, member.lr, p, g, s, t, bias=i % 2 == 1)
                for i, (p, g, s) in enumerate(zip(P, grads, state))
            ]
        for ours, theirs in zip(fit.params[m], P):
            np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)


def reference_step(opt, lr, p, g, s, t, bias):
    """One parameter's update (``s`` its state, ``t`` the step) by the rules :func:`textbook_steps` states."""
    g = g if bias else g + opt.weight_decay * p
    if opt.name == "gd":
        return p - lr * g
    if opt.name == "momentum":
        s["V"] = opt.momentum * s.get("V", 0.0) - lr * g
        return p + (opt.momentum * s["V"] - lr * g if opt.nesterov else s["V"])
    s["m"] = opt.beta1 * s.get("m", 0.0) + (1 - opt.beta1) * g
    s["v"] = opt.beta2 * s.get("v", 0.0) + (1 - opt.beta2) * g * g
    return p - lr * np.sqrt(1 - opt.beta2**t) / (1 - opt.beta1**t) * s["m"] / (
        np.sqrt(s["v"]) + opt.eps
    )


def _bound_arrays(calls):
    return [a for c in calls for a in (*c.args, *c.keywords.values()) if isinstance(a, np.ndarray)]


def test_a_float32_parameter_sets_calls_bind_only_float32_arrays_and_gd_keeps_no_buffers():
    """Every array bound into the calls over float32 arrays (the activations' derivatives, the loss gradient's
    factor, each update rule's rates and Adam's corrections) is float32: a float64 operand makes NumPy compute the
    float32 step in float64 (NEP 50) and round it otherwise. Plain gradient descent keeps nothing beside the
    parameters (it carries its rate in the gradient)."""
    f32, n = np.float32, 6
    A = RNG.random((3, n)).astype(f32)
    dA, tmp = RNG.standard_normal((3, n)).astype(f32), np.empty((3, n), f32)
    for act in ACTIVATIONS.values():
        bound = _bound_arrays(act.grad_calls(np, dA, A, tmp))
        assert bound and {a.dtype for a in bound} == {np.dtype(f32)}
    for task, k in (("regression", 1), ("binary", 1), ("multiclass", 3)):
        z, g, col = (
            RNG.standard_normal((k, n)).astype(f32),
            np.empty((k, n), f32),
            np.empty((1, n), f32),
        )
        y = (
            np.eye(3, dtype=f32)[:, RNG.integers(0, 3, n)]
            if k == 3
            else RNG.random((1, n)).astype(f32)
        )
        bound = _bound_arrays(losses.grad_calls(np, task, z, y, g, -0.1, col=col))
        assert {a.dtype for a in bound} == {np.dtype(f32)}, task
    P, G = [RNG.standard_normal((4, 3)).astype(f32)], [RNG.standard_normal((4, 3)).astype(f32)]
    for opt in (
        Optimizer("gd", weight_decay=0.01),
        Optimizer("momentum", nesterov=True, weight_decay=0.01),
        Optimizer("adam", weight_decay=0.01),
    ):
        state = State(np, [p.copy() for p in P], opt, np.full((), 0.1))
        assert {a.dtype for a in _bound_arrays(state.calls(G))} == {np.dtype(f32)}, opt.name
    gd = State(np, [p.copy() for p in P], Optimizer("gd"), 0.1)
    assert (gd.tmp, gd.buffers, gd.neg_lr, gd.decay) == ([], [], None, None)
    momentum = State(np, [p.copy() for p in P], Optimizer("momentum"), 0.1)
    assert (momentum.neg_lr, momentum.decay, len(momentum.tmp)) == (None, None, 1)


def test_weight_decays_factor_is_minus_lr_times_lambda_in_float64_rounded_once():
    """A float32 rate with float64 parameters: -lr·λ computed in float64 (as Python's floats compute it), not
    rounded to float32 first; Adam's factor is λ itself (its rate is in its step size)."""
    lr = np.float32(0.1)
    P = [np.zeros((3, 2))]
    gd = State(np, P, Optimizer("gd", weight_decay=0.01), np.asarray(lr))
    assert gd.decay == -float(lr) * 0.01 and gd.decay != float(np.float32(-lr * np.float32(0.01)))
    adam = State(np, P, Optimizer("adam", weight_decay=0.01), np.asarray(lr))
    assert adam.decay == 0.01 and adam.neg_lr == -float(lr)


def test_softmax_and_cross_entropy_shift_each_row_by_its_own_maximum():
    """Rows far apart (logits near 0 and near -1000): each row's softmax and log-sum-exp are those of the row
    shifted by any constant, computed here on the shifted rows with plain exp and log."""
    z = np.array([[0.0, 1.0, -2.0], [-1000.0, -999.0, -1001.0]])
    y = np.array([[1.0], [2.0]])
    shifted = np.array([[0.0, 1.0, -2.0], [0.0, 1.0, -1.0]])
    p = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(losses.output(np, "multiclass", z), p, rtol=1e-15)
    lse = np.log(np.exp(shifted).sum(axis=1)) + np.array([0.0, -1000.0])
    want = np.mean(lse - np.array([1.0, -1001.0]))
    assert losses.loss(np, "multiclass", z, y) == pytest.approx(want, rel=1e-15)
    np.testing.assert_allclose(
        losses.grad(np, "multiclass", z, y), (p - np.eye(3)[[1, 2]]) / 2, rtol=1e-14
    )
    # a group of two members of one row each, (K, k, n) = (2, 3, 1): one loss per member
    zk, yk = z.reshape(2, 3, 1), np.eye(3)[[1, 2]].reshape(2, 3, 1)
    got = losses.cross_entropy(np, zk, yk, classes=1, axis=-1)
    np.testing.assert_allclose(got, lse - np.array([1.0, -1001.0]), rtol=1e-15)


def test_one_hot_output_and_the_binary_and_regression_predictions():
    f32 = np.float32
    y = np.array([[2.0], [0.0], [1.0]], f32)
    got = losses.one_hot(np, y, 3)
    assert got.dtype == f32 and got.tolist() == [[0, 0, 1], [1, 0, 0], [0, 1, 0]]
    assert losses.one_hot(np, y.T, 3, classes=0).tolist() == [[0, 1, 0], [0, 0, 1], [1, 0, 0]]
    Y = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert losses.one_hot(np, Y, 2) is Y  # already one-hot: as it is
    assert losses.one_hot(np, np.zeros((2, 1)), 1).tolist() == [
        [1.0],
        [1.0],
    ]  # one class: an index, not one-hot
    z = np.array([[-3.0], [0.0], [2.5]])
    assert losses.output(np, "regression", z) is z
    np.testing.assert_allclose(losses.output(np, "binary", z), 1 / (1 + np.exp(-z)), rtol=1e-13)
