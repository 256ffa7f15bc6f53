"""The advisor's noise model (sweeper.insight.advice.noise) against hand-computed cases and SciPy's own tests: each
comparison's difference, standard error, degrees of freedom and p-value, the 90% interval, the pooled std."""

import math

import numpy as np
import pytest
from scipy import stats

from sweeper.insight.advice import noise
from sweeper.insight.advice.noise import Diff


def test_configurations_sharing_seeds_are_compared_paired_as_scipys_ttest_rel():
    a, b = {0: 1.0, 1: 2.0, 2: 4.5}, {0: 0.5, 1: 2.5, 2: 3.0, 3: 9.0}
    d = noise.between(a, b, "folds")
    # the shared 0, 1, 2: differences 0.5, -0.5, 1.5, mean 0.5, sample std 1; b's mean over all of its 4: 3.75
    assert (d.a, d.b, d.dof, d.how) == (4.25, 3.75, 2, "paired t-test over their 3 shared folds")
    assert d.se == pytest.approx(1 / math.sqrt(3), rel=1e-15) and d.d == 0.5
    ref = stats.ttest_rel([1.0, 2.0, 4.5], [0.5, 2.5, 3.0])
    assert d.p() == pytest.approx(ref.pvalue, rel=1e-12) and ref.pvalue > 0.05 and not d.beyond()
    lo, hi = map(float, ref.confidence_interval(0.90))
    assert d.interval() == (pytest.approx(lo, rel=1e-12), pytest.approx(hi, rel=1e-12))
    # inside ±margin: both ends within it
    assert d.within(max(-lo, hi) * 1.001) is True and d.within(max(-lo, hi) * 0.999) is False
    assert d.within(hi * 1.001) is (hi > -lo) and d.within(-lo * 1.001) is (-lo > hi)
    assert (
        d.text() == f"difference 0.5, paired t-test over their 3 shared folds: p={ref.pvalue:.2g}"
    )
    # at the interval's own ends: inside (inclusive); the other way round, its lower end decides
    assert d.within(hi) is True and hi > -lo
    m = noise.between(b, a, "folds")
    lo2, hi2 = m.interval()
    assert m.within(-lo2) is True and -lo2 > hi2 and m.within((-lo2 + hi2) / 2) is False
    # two shared seeds are a pairing: differences -0.5, -1, se = std / sqrt(2) = 0.25, 1 dof
    two = noise.between({0: 1.0, 1: 2.0}, {0: 1.5, 1: 3.0})
    assert (two.d, two.se, two.dof) == (-0.75, pytest.approx(0.25, rel=1e-15), 1)
    assert two.how == "paired t-test over their 2 shared seeds"
    # a clear difference: beyond the noise
    far = noise.between({0: 10.0, 1: 11.0, 2: 12.5}, {0: 1.0, 1: 2.1, 2: 3.4})
    assert far.p() == pytest.approx(stats.ttest_rel([10, 11, 12.5], [1, 2.1, 3.4]).pvalue)
    assert far.p() < 0.05 and far.beyond() and far.how.endswith("3 shared seeds")


def test_configurations_without_shared_seeds_are_compared_by_welchs_t_test():
    a, b = {0: 1.0, 1: 2.0, 2: 6.0}, {5: 3.0, 6: 5.0}  # one seed in common: not paired
    d = noise.between(a, b)
    # variances 7 (of 1, 2, 6) and 2 (of 3, 5): se² = 7/3 + 2/2 = 10/3; Welch-Satterthwaite's dof
    # (10/3)² / ((7/3)²/2 + 1²/1) = 200/67 = 2.99, truncated to 2
    assert (d.a, d.b, d.dof, d.how) == (3.0, 4.0, 2, "Welch t-test (3 and 2 seeds)")
    assert d.se == pytest.approx(math.sqrt(10 / 3), rel=1e-15)
    ref = stats.ttest_ind([1.0, 2.0, 6.0], [3.0, 5.0], equal_var=False)
    assert d.d / d.se == pytest.approx(ref.statistic, rel=1e-12)
    assert d.p() == pytest.approx(2 * stats.t.sf(1 / math.sqrt(10 / 3), 2), rel=1e-12)
    # one shared seed is not a pairing either; large samples keep their fractional dof's floor
    one = noise.between({0: 1.0, 1: 2.0, 2: 6.0}, {0: 3.0, 6: 5.0})
    assert one.how == "Welch t-test (3 and 2 seeds)" and one.dof == 2
    big = noise.between(dict(enumerate([1.0, 2.0, 3.0, 4.0, 9.0])), {9: 1.0, 8: 1.5, 7: 2.5})
    va, vb = stats.tstd([1.0, 2.0, 3.0, 4.0, 9.0]) ** 2, stats.tstd([1.0, 1.5, 2.5]) ** 2
    welch = (va / 5 + vb / 3) ** 2 / ((va / 5) ** 2 / 4 + (vb / 3) ** 2 / 2)
    assert big.dof == int(welch) == 4 and big.se == pytest.approx(math.sqrt(va / 5 + vb / 3))
    mirror = noise.between({9: 1.0, 8: 1.5, 7: 2.5}, dict(enumerate([1.0, 2.0, 3.0, 4.0, 9.0])))
    assert mirror.dof == 4 and mirror.d == -big.d
    # (0.5/2 + 200/2)² / ((0.5/2)² + (200/2)²) = 1.005: one dof, not fewer
    tiny = noise.between({0: 1.0, 1: 2.0}, {5: 10.0, 6: 30.0})
    assert tiny.dof == 1 and tiny.how == "Welch t-test (2 and 2 seeds)"


def test_one_side_with_one_score_is_judged_by_the_others_spread_and_none_by_the_stated_default():
    d = noise.between({0: 1.0, 1: 3.0}, {9: 4.0})
    # the spread of the one with 2 seeds: variance 2, se = sqrt(2 (1/2 + 1/1)) = sqrt(3), 1 dof
    assert (d.a, d.b, d.dof, d.how) == (2.0, 4.0, 1, "t-test on the spread of the one with 2 seeds")
    assert d.se == pytest.approx(math.sqrt(3), rel=1e-15)
    d = noise.between({9: 4.0}, {0: 1.0, 1: 3.0, 2: 8.0}, "folds")
    # b's: variance 13, se = sqrt(13 (1 + 1/3))
    assert (d.a, d.b, d.dof, d.how) == (4.0, 4.0, 2, "t-test on the spread of the one with 3 folds")
    assert d.se == pytest.approx(math.sqrt(13 * 4 / 3), rel=1e-15) and d.p() == 1.0
    d = noise.between({0: 1.0}, {1: 1.019})
    assert (d.se, d.dof) == (None, 0) and not d.measured
    assert d.how == "one score each (no spread): judged by the stated 2% default"
    assert d.p() is None and d.interval() is None and d.within(1.0) is None
    assert (
        d.text() == "difference 0.019, one score each (no spread): judged by the stated 2% default"
    )
    # without a spread: beyond when more than 2 % of the larger apart (0.019 < 0.02038, 0.021 > 0.02042)
    assert not d.beyond() and noise.between({0: 1.0}, {1: 1.021}).beyond()
    assert (
        noise.between({0: -1.021}, {1: -1.0}).beyond()
        and not noise.between({0: 0.0}, {1: 0.0}).beyond()
    )


def test_scores_without_a_spread_on_either_side_have_p_0_when_they_differ_and_1_when_not():
    d = noise.between({0: 1.0, 1: 1.0}, {5: 2.0, 6: 2.0, 7: 2.0})
    assert (d.a, d.b, d.se, d.dof, d.how) == (1.0, 2.0, 0.0, 3, "Welch t-test (2 and 3 seeds)")
    assert d.p() == 0.0 and d.beyond()
    assert Diff(2.0, 2.0, 0.0, 3, "").p() == 1.0
    # a spread of 0 with no dof is not measured
    assert Diff(2.0, 1.0, 0.0, 0, "").p() is None and Diff(2.0, 1.0, 1.0, 0, "").interval() is None


def test_a_configuration_against_a_baseline_is_scipys_one_sample_t_test():
    d = noise.against([1.0, 2.0, 6.0], 2.5, "folds")
    assert (d.a, d.b, d.dof, d.how) == (3.0, 2.5, 2, "one-sample t-test over its 3 folds")
    assert d.se == pytest.approx(math.sqrt(7 / 3), rel=1e-15)
    assert d.p() == pytest.approx(stats.ttest_1samp([1.0, 2.0, 6.0], 2.5).pvalue, rel=1e-12)
    d = noise.against([1.0, 3.0], 0.0)  # two scores: std sqrt(2) over sqrt(2)
    assert (d.a, d.se, d.dof, d.how) == (
        2.0,
        pytest.approx(1.0),
        1,
        "one-sample t-test over its 2 seeds",
    )
    d = noise.against([4.0], 2.0)
    assert (d.a, d.b, d.se, d.dof) == (4.0, 2.0, None, 0)
    assert d.how == "one score (no spread): judged by the stated 2% default"


def test_the_pooled_std_and_the_margin_and_the_range_quantile_by_hand():
    # variances 7 (3 scores) and 2 (2 scores), the single score adds nothing: sqrt((2·7 + 1·2) / 3), 3 dof
    sd, dof = noise.pooled([[1.0, 2.0, 6.0], [3.0, 5.0], [7.0]])
    assert dof == 3 and sd == pytest.approx(math.sqrt(16 / 3), rel=1e-15)
    assert noise.pooled([[7.0], [8.0]]) is None and noise.pooled([]) is None
    # the larger of the noise and 2 % of the largest score (by magnitude)
    assert noise.margin(None, 10.0, -50.0) == pytest.approx(1.0) and noise.margin(3.0, 10.0) == 3.0
    assert noise.margin(0.1, 10.0) == pytest.approx(0.2) and noise.margin(
        0.0, -5.0
    ) == pytest.approx(0.1)
    # two means' studentized range is sqrt(2) times Student's t at alpha/2
    assert noise.range_quantile(2, 10, 0.05) == pytest.approx(
        math.sqrt(2) * stats.t.ppf(0.975, 10), rel=1e-6
    )
    assert noise.range_quantile(3, 10, 0.05) == pytest.approx(3.877, abs=1e-3)  # Tukey's table


# ---- a cross-validated sweep: configurations compared paired by fold, a key's effect against the folds' noise


def _record(i: int, lr: str, folds: list[float]) -> dict:
    metrics = {
        "val_mse": float(np.mean(folds)),
        "val_mse_std": float(np.std(folds)),
        **{f"val_mse_fold{j}": v for j, v in enumerate(folds)},
    }
    return {
        "run": f"lr={lr}",
        "run_id": f"{i:032x}",
        "status": "FINISHED",
        "reason": None,
        "params": {"lr": lr, "depth": "1", "data.folds": "5"},
        "metrics": metrics,
        "parent": "p",
        "pruned_at": None,
    }


@pytest.mark.parametrize("shift,verdict", [(10.0, "distinct"), (0.0, "overlap")])
def test_the_advisor_compares_configurations_paired_across_folds(shift, verdict):
    """Fold difficulty is shared by every configuration (the same rows): a small but consistent gap is distinguishable
    paired by fold, an inconsistent one is not."""
    from sweeper.insight.advice.evidence import Sweep
    from sweeper.insight.advice.findings import noise

    base = [
        3000.0,
        3400.0,
        2800.0,
        3600.0,
        3100.0,
    ]  # folds far apart: an unpaired test would see only noise
    jitter = [3.0, -4.0, 5.0, -2.0, 1.0]
    better = base
    worse = [b + shift + j for b, j in zip(base, jitter)]
    if shift == 0.0:
        worse = [b + 40 * j for b, j in zip(base, jitter)]
    records = sorted(
        [_record(0, "0.05", better), _record(1, "0.01", worse)],
        key=lambda r: r["metrics"]["val_mse"],
    )
    [finding] = noise(Sweep(records))
    assert finding.tag == verdict, finding.summary
    assert "across the 5 folds" in finding.summary
    # the paired t-test of the evidence's comparison (noise.between), scipy's ttest_rel by hand
    from scipy import stats

    p = stats.ttest_rel(better, worse).pvalue
    assert any(f"paired t-test over their 5 shared folds: p={p:.2g}" in e for e in finding.evidence)


def test_in_a_folds_only_sweep_did_not_matter_is_judged_by_the_fold_noise_not_the_stated_default():
    """Without seeds, the noise of a fold mean is measured from the folds (the configuration × fold residual): a key
    whose effect is small (0.5 %, inside the stated 2 % default) but the same on every fold matters; a key whose
    effect is only fold-to-fold scatter does not."""
    from sweeper.insight.advice.evidence import Sweep
    from sweeper.insight.advice.slices import no_effect

    base = [3000.0, 3400.0, 2800.0, 3600.0, 3100.0]
    lr_jitter = [1.0, -1.0, 0.5, -0.5, 0.0]
    width_scatter = [
        20.0,
        -25.0,
        15.0,
        -5.0,
        -5.0,
    ]  # mean zero: width moves single folds, not the mean
    records = []
    for lr in ("0.05", "0.01"):
        for width in ("8", "16"):
            folds = [
                b * (1.005 if lr == "0.01" else 1.0)
                + (j if lr == "0.01" else 0.0)
                + (w if width == "16" else 0.0)
                for b, j, w in zip(base, lr_jitter, width_scatter)
            ]
            r = _record(len(records), lr, folds)
            r["params"]["width"], r["run"] = width, f"lr={lr},width={width}"
            records.append(r)
    records.sort(key=lambda r: r["metrics"]["val_mse"])
    s = Sweep(records)
    # (n-1)(k-1) over 4 configurations
    assert s.folded and s.slice_noise(list(s.configs))[1] == 3 * 4
    assert "own folds" in s.noise_text and "stated default" not in s.noise_text
    found = {f.tag: f for f in no_effect(s)}
    assert "width" in found, [f.summary for f in found.values()]
    # under the 2 % default lr "did not matter"
    assert "lr" not in found and not any(t.startswith("lr@") for t in found)
    # the fold noise's
    assert all("90% interval of its largest difference" in e for e in found["width"].evidence)
