"""The advisor's evidence (sweeper.insight.advice.evidence.Sweep) on hand-made run records: each configuration's
scores by seed or by fold, the noise of a fold mean, the best configuration's relative noise, the order of the
configurations and when two means count as the same; expected values by hand, NumPy or SciPy."""

import math

import numpy as np
import pytest
from scipy import stats

from sweeper.insight.advice.evidence import FLOOR, SAME, Sweep
from test_advise_units import ranked, rec


def _seeds(*configs, **also):
    """A regression sweep: for each (lr, scores) one run a seed, in the leaderboard's order."""
    return Sweep(
        ranked([rec(v, lr=lr, seed=s, **also) for lr, vs in configs for s, v in enumerate(vs)])
    )


def _folded(rows, extra=None, seed=None):
    """A cross-validated regression sweep: one run a configuration (lr=i), val_mse_fold<j> its folds' scores
    (and extra's metric's folds), in the leaderboard's order."""
    records = []
    for i, row in enumerate(rows):
        metrics = {"val_mse": float(np.mean(row))} | {
            f"val_mse_fold{j}": v for j, v in enumerate(row)
        }
        if extra:
            name, by_row = extra
            metrics |= {f"{name}_fold{j}": v for j, v in enumerate(by_row[i])}
        params = {"lr": str(i), "depth": "1", "data.folds": str(len(row))}
        records.append(
            {
                "run": f"lr={i}" + (f",seed={seed[i]}" if seed else ""),
                "run_id": f"id{i}",
                "status": "FINISHED",
                "reason": None,
                "params": params | ({"seed": str(seed[i])} if seed else {}),
                "metrics": metrics,
            }
        )
    records.sort(key=lambda r: r["metrics"]["val_mse"])
    return Sweep(records)


def _config(s, lr):
    return next(c for c in s.configs if dict(c)["lr"] == str(lr))


def test_two_means_are_the_same_within_tukeys_range_of_their_noise_or_within_2_percent_without_one():
    s = _seeds((0.1, [1.0, 1.1]), (0.2, [2.0, 2.2]))
    # Tukey's range for 2 means at 5 %, 6 dof; two single scores: sqrt((1/1 + 1/1) / 2) = 1
    bound = stats.studentized_range.ppf(0.95, 2, 6) * 2.0
    assert s.same(10.0, 10.0 + 0.99 * bound, noise=(2.0, 6))
    assert not s.same(10.0, 10.0 + 1.01 * bound, noise=(2.0, 6))
    # 3 means, 2 such tests (alpha split), means of 2 and 4 seeds
    bound = stats.studentized_range.ppf(1 - 0.05 / 2, 3, 6) * 2.0 * math.sqrt((1 / 2 + 1 / 4) / 2)
    kw = {"among": 3, "tests": 2, "noise": (2.0, 6)}
    assert s.same(10.0, 10.0 + 0.99 * bound, 2, 4, **kw)
    assert not s.same(10.0, 10.0 + 1.01 * bound, 2, 4, **kw)
    assert s.same(5.0, 5.0, noise=(0.0, 6)) and not s.same(5.0, 5.0 + 1e-9, noise=(0.0, 6))
    # no noise: within 2 % of the larger (inclusive), by magnitude
    assert s.same(1.0, 1.0202) and s.same(100.0, 101.0) and not s.same(1.0, 1.5)
    assert not s.same(1.0, -1.0) and not s.same(1.0, 1.0206)
    tie = 1.020408163265306e-12  # exactly 2 % of itself plus the 1e-12 slack away from 0
    assert abs(0.0 - tie) == SAME * tie + 1e-12 and s.same(0.0, tie)
    # a log loss below its floor: any two are the same; at the floor, the 2 % rule again
    assert s.same(2e-4, 9e-4, metric="val_log_loss") and not s.same(2e-4, 9e-4)
    assert not s.same(FLOOR, 0.0, metric="val_log_loss")


def test_a_configurations_samples_are_its_seeds_its_lead_runs_one_score_or_its_folds():
    s = _seeds((0.1, [10.0, 12.0, 14.0]), (0.2, [20.0, 30.0, 40.0]))
    assert s.samples(_config(s, 0.1)) == (
        {("0", None): 10.0, ("1", None): 12.0, ("2", None): 14.0},
        "seeds",
    )
    assert s.samples((("lr", "9"),)) == ({}, "seeds")  # no such configuration
    # deterministic in seed (every seed the same score), no split seeds: one score, its lead run's
    d = _seeds((0.1, [10.0, 10.0]), (0.2, [20.0, 20.0]))
    assert d.deterministic and not d.seeded
    assert d.samples(_config(d, 0.2)) == ({("0", None): 20.0}, "seeds")
    assert d.samples((("lr", "9"),)) == ({}, "seeds") and d.samples(_config(d, 0.2), "val_r2") == (
        {},
        "seeds",
    )
    # deterministic in seed but split seeds swept: each (seed, split) its own score
    runs = [
        rec(v + k, lr=lr, seed=s, **{"data.split_seed": k})
        for lr, v in ((0.1, 10.0), (0.2, 20.0))
        for s in (0, 1)
        for k in (0, 1)
    ]
    both = Sweep(ranked(runs))
    assert both.deterministic and both.seeded
    got, unit = both.samples(_config(both, 0.1))
    assert unit == "seeds" and got == {
        ("0", "0"): 10.0,
        ("1", "0"): 10.0,
        ("0", "1"): 11.0,
        ("1", "1"): 11.0,
    }
    # cross-validated without seeds: its folds, of the metric asked
    f = _folded([[1.0, 2.0, 4.0], [2.0, 2.5, 6.0]], ("val_r2", [[0.5, 0.6, 0.7], [0.1, 0.2, 0.3]]))
    assert f.folded and f.samples(_config(f, 0)) == ({0: 1.0, 1: 2.0, 2: 4.0}, "folds")
    assert f.samples(_config(f, 1), "val_r2") == ({0: 0.1, 1: 0.2, 2: 0.3}, "folds")
    # cross-validated with seeds: by seed
    fs = _folded([[1.0, 2.0, 4.0], [2.0, 2.5, 6.0]], seed=[0, 1])
    assert not fs.folded and fs.samples(_config(fs, 0)) == ({("0", None): 7 / 3}, "seeds")


def test_the_noise_of_a_fold_mean_is_the_configuration_by_fold_residual_over_root_k():
    x = np.array([[1.0, 2.0, 4.0], [2.0, 2.5, 6.0], [0.5, 3.0, 3.5]])
    r2 = np.array([[0.5, 0.6, 0.9], [0.1, 0.2, 0.3], [0.4, 0.4, 0.1]])

    def expected(m):
        res = m - m.mean(axis=1, keepdims=True) - m.mean(axis=0, keepdims=True) + m.mean()
        return math.sqrt(float((res**2).sum()) / 4 / 3)

    s = _folded(list(x), ("val_r2", list(r2)))
    configs = [_config(s, i) for i in range(3)]
    assert s.fold_noise(configs) == (pytest.approx(expected(x), rel=1e-12), 4)
    assert s.slice_noise(configs) == (pytest.approx(expected(x), rel=1e-12), 4)
    assert s.slice_noise(configs, "val_r2") == (pytest.approx(expected(r2), rel=1e-12), 4)
    # two configurations: (2 - 1)(3 - 1) dof
    assert s.fold_noise(configs[:2]) == (pytest.approx(expected(x[:2]) * math.sqrt(4 / 2)), 2)
    assert s.fold_noise(configs[:1]) is None and s.fold_noise([]) is None
    # a configuration of another k than the first's is left out
    odd = _folded([*x, [1.0, 9.0]])
    assert odd.fold_noise([_config(odd, i) for i in range(4)]) == (pytest.approx(expected(x)), 4)
    # two folds: (3 - 1)(2 - 1) dof
    two = _folded(list(x[:, :2]))
    assert two.fold_noise([_config(two, i) for i in range(3)]) == (
        pytest.approx(expected(x[:, :2]) * math.sqrt(4 * 3 / 2 / 2)),
        2,
    )
    one_fold = _folded([[1.0], [2.0]])
    assert one_fold.fold_noise([_config(one_fold, i) for i in range(2)]) is None


def test_the_best_configurations_relative_noise_is_its_seeds_std_or_its_fold_means_over_its_mean():
    assert Sweep([]).rel_noise() == SAME  # nothing finished: the stated default
    assert _seeds(
        (0.1, [10.0, 12.0, 14.0]), (0.2, [20.0, 30.0, 40.0])
    ).rel_noise() == pytest.approx(2 / 12, rel=1e-12)
    assert _seeds((0.1, [10.0, 12.0]), (0.2, [20.0, 30.0])).rel_noise() == pytest.approx(
        math.sqrt(2) / 11, rel=1e-12
    )
    assert _seeds((0.1, [10.0]), (0.2, [20.0])).rel_noise() == SAME  # one seed: no spread
    # a mean of 0: the std itself; a spread far below a millionth: a millionth
    assert _seeds((0.1, [-1.0, 1.0]), (0.2, [5.0, 6.0])).rel_noise() == pytest.approx(math.sqrt(2))
    assert _seeds((0.1, [5.0, 5.0, 5.0 + 1e-8]), (0.2, [9.0, 9.5, 9.7])).rel_noise() == 1e-6
    # folds: the std of the fold mean, std / sqrt(k), over the mean
    f = _folded([[1.0, 2.0, 3.0, 6.0], [5.0, 6.0, 7.0, 9.0]])
    assert f.rel_noise() == pytest.approx(np.std([1.0, 2.0, 3.0, 6.0], ddof=1) / 2 / 3, rel=1e-12)


def test_configurations_rank_by_their_mean_best_first_for_a_loss_and_for_an_accuracy():
    acc = {
        0.1: [0.95, 0.60],
        0.2: [0.85, 0.84],
        0.3: [0.80, 0.79],
    }  # the best run's is the worst mean
    runs = [
        rec(v, lr=lr, seed=s, metrics={"val_log_loss": 1 - v})
        for lr, vs in acc.items()
        for s, v in enumerate(vs)
    ]
    s = Sweep(ranked(runs, lower=False))
    assert s.metric == "val_accuracy" and [dict(c)["lr"] for c in s.ranked()] == [
        "0.2",
        "0.3",
        "0.1",
    ]
    first = s.ranked()
    first.clear()  # a copy: the sweep's order stays
    assert len(s.ranked()) == 3
    m = _seeds((0.1, [3.0, 1.0]), (0.2, [1.5, 1.6]), (0.3, [2.5, 2.6]))
    assert [dict(c)["lr"] for c in m.ranked()] == ["0.2", "0.1", "0.3"]


def test_exactly_at_the_threshold_is_not_beyond_it():
    from sweeper.insight.advice.noise import Diff

    x = 4.302652729749464  # 2 P(t_2 > x) is exactly 0.05: not significant at 5 %
    assert 2 * stats.t.sf(x, 2) == 0.05 and not Diff(x, 0.0, 1.0, 2, "").beyond()
    assert Diff(x * 1.001, 0.0, 1.0, 2, "").beyond()
    tie = 1.020408163265306e-12  # exactly 2 % of itself plus 1e-12 from 0: the same, not beyond
    assert not Diff(0.0, tie, None, 0, "").beyond() and Diff(0.0, tie * 1.01, None, 0, "").beyond()
