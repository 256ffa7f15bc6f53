"""Packed groups (models.packed): members of several widths, depths and activations trained as one computation give
what each gives alone (float64: 1e-9), every optimizer, task, early stopping and divergence."""

import numpy as np
import pytest

from sweeper import data
from sweeper.base.backend import Backend
from sweeper.models.batched import Member, stacked_params, train_packed
from sweeper.models.optim import Optimizer
from sweeper.models.packed import Layout, Shape
from conftest import make_cfg
from test_batched import _alone, _same

CPU = Backend("cpu", np)


def _data(name, seed=0):
    return data.load(make_cfg(f"data={name}").data, seed)


def _packed(ds, blocks, log_every, dtype="float64", opt=None, batch_size=0, threads=1, backend=CPU):
    """``blocks``: (depth, width, activation, members) each; returns the group's fit and its members in order."""
    shaped, members = [], []
    for depth, width, activation, ms in blocks:
        sizes = [ds.n_features] + [width] * depth + [ds.n_outputs]
        shaped.append(
            (
                Shape(tuple(sizes), activation),
                stacked_params(sizes, activation, [m.seed for m in ms], dtype),
            )
        )
        members += ms
    arrays = [a.astype(dtype) for a in (ds.X_train, ds.y_train, ds.X_val, ds.y_val)]
    fit = train_packed(
        backend,
        shaped,
        ds.task,
        *arrays,
        members,
        log_every=log_every,
        opt=opt,
        batch_size=batch_size,
        threads=threads,
    )
    return fit, [(d, w, a, m) for d, w, a, ms in blocks for m in ms]


def _each_alone(ds, group, who, log_every, rtol=1e-9, **kw):
    for (depth, width, activation, m), fit, params in zip(who, group.fits, group.params):
        _same(fit, params, *_alone(ds, depth, width, activation, m, log_every, **kw), rtol=rtol)


def _grid(activations):
    """Widths 4, 16, 64 at depths 1 and 2 (and one depth-0 block), two members each (other rates, seeds, epochs,
    and patience)."""
    out, i = [], 0
    for depth in (1, 2):
        for width in (4, 16, 64):
            out.append(
                (
                    depth,
                    width,
                    activations[i % len(activations)],
                    [
                        Member(0.02 / depth, 120, seed=i),
                        Member(0.05 / depth, 90, patience=20, seed=i + 1),
                    ],
                )
            )
            i += 1
    return out + [(0, 16, "tanh", [Member(0.1, 100, seed=9)])]


TASKS = [("diabetes", "regression"), ("breast_cancer", "binary"), ("wine", "multiclass")]
OPTS = [
    Optimizer("gd"),
    Optimizer("momentum", nesterov=True, weight_decay=1e-3),
    Optimizer("adam", weight_decay=1e-3),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,task", TASKS, ids=[t for _, t in TASKS])
@pytest.mark.parametrize("opt", OPTS, ids=[o.name for o in OPTS])
def test_a_packed_group_of_widths_depths_and_activations_equals_each_member_alone(name, task, opt):
    ds = _data(name)
    assert ds.task == task
    group, who = _packed(ds, _grid(["tanh", "relu", "sigmoid"]), log_every=10, opt=opt)
    assert len(group.fits) == len(who) == 13
    _each_alone(ds, group, who, 10, opt=opt)
    stopped = [f for (_, _, _, m), f in zip(who, group.fits) if m.patience]
    assert opt.name == "gd" or any(f.epochs_run < 90 for f in stopped)  # patience stopped some


def test_a_packed_group_sharing_its_activation_equals_alone():
    """One activation for every block: the first layer's activation and its derivative are one pass over all rows."""
    ds = _data("diabetes")
    group, who = _packed(ds, _grid(["tanh"]), log_every=10)
    _each_alone(ds, group, who, 10)


def test_a_diverging_member_of_a_packed_group_leaves_the_others_as_they_are_alone():
    ds = _data("diabetes")
    blocks = [
        (1, 4, "tanh", [Member(0.01, 200), Member(8.0, 200, seed=1)]),
        (2, 64, "relu", [Member(0.01, 200, seed=2), Member(0.02, 200, patience=5, seed=3)]),
        (1, 16, "tanh", [Member(5.0, 200, seed=4)]),
    ]
    group, who = _packed(ds, blocks, log_every=10, opt=Optimizer("momentum"))
    diverged = [f.diverged_at is not None for f in group.fits]
    assert diverged == [False, True, False, False, True]
    assert group.fits[3].epochs_run < 200  # and one stopped early
    _each_alone(ds, group, who, 10, opt=Optimizer("momentum"))


@pytest.mark.parametrize("threads", [1, 2])
def test_a_packed_group_split_across_threads_through_a_block_equals_alone(threads):
    """18 members in blocks of 6: two parts of 9 cut the second block in two."""
    ds = _data("breast_cancer")
    blocks = [
        (d, w, a, [Member(0.01 * (1 + j), 60, patience=10 * (j % 2), seed=j) for j in range(6)])
        for d, w, a in ((1, 4, "tanh"), (2, 16, "relu"), (1, 64, "sigmoid"))
    ]
    group, who = _packed(ds, blocks, log_every=5, threads=threads, opt=Optimizer("adam"))
    _each_alone(ds, group, who, 5, opt=Optimizer("adam"))


def test_packed_members_with_their_own_split_or_fold_equal_alone():
    """A seed sweep (or folds): each member its own rows, the first layer one batched product a block."""
    splits = [_data("diabetes", s) for s in range(4)]
    blocks = [
        (1, 4, "tanh", [Member(0.01, 80, seed=0), Member(0.02, 80, seed=1)]),
        (0, 8, "relu", [Member(0.05, 60, seed=2)]),
        (2, 16, "relu", [Member(0.01, 80, seed=3)]),
    ]
    shaped, members = [], []
    for depth, width, activation, ms in blocks:
        sizes = [splits[0].n_features] + [width] * depth + [splits[0].n_outputs]
        shaped.append(
            (
                Shape(tuple(sizes), activation),
                stacked_params(sizes, activation, [m.seed for m in ms], "float64"),
            )
        )
        members += ms
    arrays = [
        np.stack([getattr(d, a) for d in splits]) for a in ("X_train", "y_train", "X_val", "y_val")
    ]
    group = train_packed(CPU, shaped, "regression", *arrays, members, log_every=10, threads=1)
    who = [(d, w, a, m) for d, w, a, ms in blocks for m in ms]
    for ds, (depth, width, activation, m), fit, params in zip(
        splits, who, group.fits, group.params
    ):
        _same(fit, params, *_alone(ds, depth, width, activation, m, 10), rtol=1e-9)


def test_a_mini_batch_packed_group_equals_alone():
    ds = _data("iris", 3)
    blocks = [
        (d, w, "tanh", [Member(0.01, 40, seed=3), Member(0.05, 30, seed=3)])
        for d, w in ((1, 4), (2, 16), (1, 64))
    ]
    group, who = _packed(ds, blocks, log_every=5, batch_size=32, opt=Optimizer("momentum"))
    _each_alone(ds, group, who, 5, opt=Optimizer("momentum"), batch_size=32)


def test_a_packed_group_in_float32_and_on_the_gpu_path_equals_alone_to_float32_tolerance():
    ds = _data("diabetes")
    blocks = [
        (1, 4, "tanh", [Member(0.05, 100)]),
        (2, 16, "relu", [Member(0.02, 100, seed=1)]),
        (1, 64, "sigmoid", [Member(0.1, 100, seed=2)]),
    ]
    group, who = _packed(
        ds, blocks, log_every=10, dtype="float32", backend=Backend("gpu", np, fake=True)
    )
    _each_alone(ds, group, who, 10, rtol=1e-4, dtype="float32")


def test_the_layout_puts_every_first_layer_in_one_matrix_and_each_member_in_views_of_one_array():
    shapes = [Shape((5, 4, 1), "tanh"), Shape((5, 1), "tanh"), Shape((5, 8, 8, 1), "relu")]
    layout = Layout(shapes, [2, 3, 2])
    assert layout.K == 7 and layout.rows == 2 * 4 + 2 * 8
    flat = np.arange(layout.size, dtype=float)
    views = layout.views(flat)
    Q = layout.first(flat)
    # the first block's first layers, then the third's
    np.testing.assert_array_equal(Q[:8].reshape(2, 4, 6), views[0][0])
    np.testing.assert_array_equal(Q[8:].reshape(2, 8, 6), views[2][0])
    assert all(np.shares_memory(v, flat) for vs in views for v in vs)
    assert sum(v.size for vs in views for v in vs) == layout.size  # every element once
    m = layout.member(flat, 6)  # the last member: the third block's second
    assert [v.shape for v in m] == [(8, 6), (8, 8), (8, 1), (1, 8), (1, 1)]
    # the second block's third member is member 4
    np.testing.assert_array_equal(
        layout.expand(np.arange(7.0))[layout.views(np.arange(layout.size))[1][0][2].ravel()], 4.0
    )
    w = layout.weights()
    # biases in Q_0's last column
    assert w[layout.views(np.arange(layout.size))[0][0][:, :, -1].ravel()].sum() == 0
    assert w[layout.views(np.arange(layout.size))[2][2].ravel()].sum() == 0  # b_1
    assert w[layout.views(np.arange(layout.size))[2][3].ravel()].all()  # Wt_2
    sub, cuts = layout.subset(1, 5)
    assert [b.count for b in sub.blocks] == [1, 3] and cuts == [(0, slice(1, 2)), (1, slice(0, 3))]
