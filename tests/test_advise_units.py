"""The sweep advisor's findings on synthetic run records: each fires where it must and not where it must not."""

import shlex
import subprocess
import sys

import numpy as np
import pytest
from conftest import command

from sweeper.insight.advice import advisor as advise
from sweeper.insight.advice.advisor import advise as run_advisor, next_command
from sweeper.insight.advice.evidence import Sweep, extend, nice

BASE = {
    "lr": "0.01",
    "epochs": "200",
    "depth": "1",
    "width": "16",
    "seed": "0",
    "patience": "0",
    "log_every": "10",
    "data.name": "diabetes",
    "device": "cpu",
}
ARGV = ["lr=0.001,0.01,0.1", "epochs=200", "tracking.uri=sqlite:////tmp/x.db"]


def rec(val=None, status="FINISHED", reason=None, metrics=None, **params):
    """A run record; ``val`` is its val_mse (val_accuracy when a float < 1 and ``val_log_loss`` is in metrics)."""
    p = {**BASE, **{k: str(v) for k, v in params.items()}}
    name = ",".join(f"{k}={v}" for k, v in params.items()) or "cpu"
    m = dict(metrics or {})
    if val is not None:
        m.setdefault("val_accuracy" if "val_log_loss" in m else "val_mse", val)
    m.setdefault("best_epoch", 190.0)
    m.setdefault("epochs_run", float(p["epochs"]))
    return {
        "run": name,
        "run_id": f"id-{name}",
        "status": status,
        "reason": reason,
        "params": p,
        "metrics": m,
    }


def ranked(records, lower=True):
    """Records best first, as the leaderboard ranks them (finished by score, then the rest)."""
    key = "val_mse" if lower else "val_accuracy"
    ok = [r for r in records if r["status"] == "FINISHED" and key in r["metrics"]]
    rest = [r for r in records if r not in ok]
    return (
        sorted(ok, key=lambda r: (r["metrics"][key] if lower else -r["metrics"][key], r["run"]))
        + rest
    )


def kinds(advice):
    return [f.kind for f in advice.findings]


def only(advice, kind):
    (f,) = [f for f in advice.findings if f.kind == kind]
    return f


# --- edge of the grid ------------------------------------------------------------------------------


def test_edge_fires_when_the_best_lr_is_the_largest_tried_and_extends_log_spaced():
    runs = ranked([rec(5000, lr=0.001), rec(4000, lr=0.01), rec(3000, lr=0.1)])
    a = run_advisor(runs, ARGV)
    f = only(a, "edge")
    assert f.tag == "lr:up" and f.add == {"lr": ["1.0", "10.0"]}
    assert "0.001: 5000, 0.01: 4000, 0.1: 3000" in f.evidence[0]
    assert "lr=0.001,0.01,0.1,1.0,10.0" in a.command
    assert a.tags()["advice.edge"] == "lr:up"


def test_edge_fires_downward_and_not_for_an_interior_best_or_a_flat_edge():
    down = run_advisor(ranked([rec(3000, lr=0.001), rec(4000, lr=0.01), rec(5000, lr=0.1)]), ARGV)
    assert only(down, "edge").tag == "lr:down" and only(down, "edge").add == {
        "lr": ["0.0001", "1e-05"]
    }
    interior = run_advisor(
        ranked([rec(5000, lr=0.001), rec(3000, lr=0.01), rec(4000, lr=0.1)]), ARGV
    )
    assert "edge" not in kinds(interior)
    flat = run_advisor(ranked([rec(5000, lr=0.001), rec(3000.5, lr=0.01), rec(3000, lr=0.1)]), ARGV)
    assert "edge" not in kinds(flat)  # 0.02% better at the edge: within what counts as the same


def test_edge_grid_spacing_per_key_and_range():
    assert extend("depth", ["1", "2", "3"], up=True)[0] == ["4", "5"]  # stepped
    assert extend("depth", ["0", "1", "2"], up=False)[0] == []  # depth >= 0
    assert extend("width", ["16", "64"], up=True)[0] == ["256", "1024"]  # log-spaced
    assert extend("epochs", ["100", "200", "400"], up=True)[0] == ["800", "1600"]
    assert extend("lr", ["0.001", "0.003", "0.01"], up=True) == (
        ["0.03", "0.1"],
        "log-spaced, ×3.16 a step",
    )
    assert extend("lr", ["0.0001", "0.1"], up=True)[0] == ["1.0", "10.0"]  # at most a decade a step
    assert nice(0.0316) == 0.03 and nice(0.016) == 0.016
    best_at_zero = run_advisor(
        ranked([rec(3000, depth=0), rec(3500, depth=1), rec(4000, depth=2)]), ["depth=0,1,2"]
    )
    assert "edge" not in kinds(best_at_zero)  # nothing below depth=0 to try


def test_edge_of_one_key_among_several_uses_each_values_best():
    runs = [
        rec(v, lr=lr, depth=d)
        for (lr, d), v in {
            (0.001, 1): 5000,
            (0.01, 1): 4000,
            (0.001, 2): 4500,
            (0.01, 2): 3900,
        }.items()
    ]
    a = run_advisor(ranked(runs), ["lr=0.001,0.01", "depth=1,2"])
    assert {f.tag for f in a.findings if f.kind == "edge"} == {"lr:up", "depth:up"}
    # within the budget (the 4 runs this sweep trained): depth's edge takes it, lr's is left out and said
    assert "lr=0.001,0.01 depth=1,2,3,4 " in a.command and a.sizes[0] - a.sizes[1] == a.budget == 4
    assert "left out of the next command for its budget: extend lr upward" in a.note


# --- overfitting / under-training ----------------------------------------------------------------


def curve(values, every=10):
    return [(i * every, v) for i, v in enumerate(values)]


def test_overfitting_fires_when_val_rises_after_an_early_best_and_train_keeps_falling():
    run = rec(4700, lr=0.05, epochs=2000, metrics={"best_epoch": 260.0, "epochs_run": 2000.0})
    val = [1.4 - 0.9 * min(i, 26) / 26 + 0.0015 * max(0, i - 26) for i in range(200)]
    train = [1.5 - 0.007 * i for i in range(200)]
    a = run_advisor(
        [run], ["lr=0.05", "epochs=2000"], {"val_loss": curve(val), "train_loss": curve(train)}
    )
    f = only(a, "overfitting")
    assert f.set == {"patience": "50"} and "epochs≈" in f.step and "epoch 260" in f.evidence[0]
    assert "under_training" not in kinds(a)
    assert "patience=50" in a.command


def test_overfitting_does_not_fire_on_a_plateau_or_after_early_stopping():
    # +0.03%: a plateau
    val = [1.4 - 0.9 * min(i, 14) / 14 + 0.00002 * max(0, i - 14) for i in range(30)]
    train = [1.5 - 0.01 * i for i in range(30)]
    plateau = rec(3000, metrics={"best_epoch": 140.0, "epochs_run": 300.0}, epochs=300)
    assert kinds(
        run_advisor([plateau], [], {"val_loss": curve(val), "train_loss": curve(train)})
    ) == ["noise"]
    rising = [1.4 - 0.9 * min(i, 14) / 14 + 0.01 * max(0, i - 14) for i in range(30)]
    stopped = rec(
        3000, metrics={"best_epoch": 140.0, "epochs_run": 290.0}, epochs=2000, patience=150
    )
    assert kinds(
        run_advisor([stopped], [], {"val_loss": curve(rising), "train_loss": curve(train)})
    ) == ["noise"]


def test_under_training_fires_while_val_still_falls_at_the_last_epoch():
    val = [1.8 / (1 + 0.2 * i) + 0.5 for i in range(20)]
    train = [v - 0.05 for v in val]
    a = run_advisor(
        [rec(3171)], ["epochs=200"], {"val_loss": curve(val), "train_loss": curve(train)}
    )
    f = only(a, "under_training")
    assert (
        f.set == {"epochs": "400"} and "epochs=400" in a.command and "overfitting" not in kinds(a)
    )
    swept = run_advisor(
        ranked([rec(3500, epochs=100), rec(3171, epochs=200)]),
        ["epochs=100,200"],
        {"val_loss": curve(val), "train_loss": curve(train)},
    )
    assert (
        only(swept, "under_training").add == {"epochs": ["400"]}
        and "epochs=100,200,400" in swept.command
    )
    flat = [0.54] * 20  # converged: the last 25% moved nothing
    assert "under_training" not in kinds(
        run_advisor([rec(3171)], [], {"val_loss": curve(flat), "train_loss": curve(flat)})
    )


# --- divergence ----------------------------------------------------------------------------------


def test_divergence_reports_the_boundary_and_the_next_command_leaves_the_diverged_lr_out():
    runs = ranked(
        [
            rec(4000, lr=0.001),
            rec(3100, lr=0.01),
            rec(3300, lr=0.1),
            rec(status="FAILED", reason="diverged at epoch 10", lr=3),
        ]
    )
    a = run_advisor(runs, ["lr=0.001,0.01,0.1,3"])
    f = only(a, "divergence")
    assert (
        f.tag == "lr:0.1..3"
        and "lr=3 on" in f.summary
        and "largest lr that did not diverge: 0.1" in f.evidence[1]
    )
    # lr=3 left out; to fit the budget (4 runs), lr=0.001 (worse) leaves and the seeds go to the best two
    assert "lr=0.01,0.1 seed=0,1,2 " in a.command and "edge" not in kinds(a) and a.sizes == (6, 2)
    assert "divergence" not in kinds(
        run_advisor(ranked([rec(4000, lr=0.001), rec(3100, lr=0.01)]), ARGV)
    )


def test_divergence_next_to_the_chosen_lr_adds_the_log_midpoint_and_slices_are_shown():
    runs = ranked(
        [
            rec(4000, lr=0.01),
            rec(3100, lr=0.1),
            rec(status="FAILED", reason="diverged at epoch 20", lr=1),
        ]
    )
    f = only(run_advisor(runs, ["lr=0.01,0.1,1"]), "divergence")
    assert f.add == {"lr": ["0.3"]} and f.drop == {"lr": ["1"]}
    by_depth = ranked(
        [
            rec(3100, lr=0.1, depth=1),
            rec(3000, lr=0.5, depth=1),
            rec(3200, lr=0.1, depth=2),
            rec(status="FAILED", reason="diverged at epoch 20", lr=0.5, depth=2),
        ]
    )
    f = only(run_advisor(by_depth, ["lr=0.1,0.5", "depth=1,2"]), "divergence")
    assert "depends on the other keys" in f.summary
    assert "depth=2: diverged from lr=0.5, finished up to lr=0.1" in f.evidence
    everything = [rec(status="FAILED", reason="diverged at epoch 10", lr=v) for v in (1, 3)]
    f = only(run_advisor(everything, ["lr=1,3"]), "divergence")
    assert f.summary.startswith("every run diverged") and f.add == {"lr": ["0.3", "0.1"]}


# --- keys that did not matter ----------------------------------------------------------------------


def test_a_key_that_changes_nothing_is_reported_and_fixed_in_the_next_command():
    runs = ranked([rec(3091.648, depth=0, width=w) for w in (4, 16, 64)])
    a = run_advisor(runs, ["depth=0", "width=4,16,64"])
    f = only(a, "no_effect")
    assert f.tag == "width" and f.set == {"width": runs[0]["params"]["width"]}
    assert f"width={runs[0]['params']['width']} " in a.command and "edge" not in kinds(a)
    matters = run_advisor(ranked([rec(3091, width=4), rec(3300, width=16)]), ["width=4,16"])
    assert "no_effect" not in kinds(matters)


def _widths(std):
    """lr × depth × 5 widths, 4 seeds of offsets ±0.5, ±1.5 × ``std``/1.29 (a seed std of ``std``; another seed takes
    each offset in each configuration); width moves the score by up to 350 (within Tukey's range of 5 means at std
    200), depth not at all."""
    offsets = [x * std / 1.2910 for x in (-1.5, -0.5, 0.5, 1.5)]
    by_lr = {0.001: 2000, 0.01: 0, 0.1: 1500}
    by_width = dict(zip((4, 8, 16, 32, 64), (0, 87.5, 175, 262.5, 350)))
    return ranked(
        [
            rec(
                3000 + by_lr[lr] + by_width[w] + offsets[(s + d + i) % 4],
                lr=lr,
                depth=d,
                width=w,
                seed=s,
            )
            for lr in by_lr
            for d in (1, 2)
            for i, w in enumerate(by_width)
            for s in range(4)
        ]
    )


def test_with_seeds_a_spread_within_the_noise_is_not_measured_and_an_interval_inside_the_margin_did_not_matter():
    # seed std 200, 4 seeds: width's spread (350) passes Tukey's range test, and depth changes nothing; but a 90%
    # interval of a difference is ±1.94·200·sqrt(1/2) = ±275 wide, more than the margin max(200, 2% of ~3000 = 60):
    # neither shown not to matter. Before: "width did not matter" and "depth did not matter", both fixed
    argv = ["lr=0.001,0.01,0.1", "depth=1,2", "width=4,8,16,32,64", "seed=0,1,2,3"]
    a = run_advisor(_widths(200.0), argv)
    assert [f.title for f in a.findings if f.kind == "no_effect"] == ["not measured: depth, width"]
    assert "depth=1,2 width=4,8,16,32,64 " in a.command  # no command fixes a key on no evidence
    assert "edge" not in kinds(a)  # lr's best is inside its grid
    # seed std 2: depth's 90% interval, ±1.94·2·sqrt(1/2)·... inside ±60 everywhere; width moves 350 ≫ the noise
    quiet = run_advisor(_widths(2.0), argv)
    (f,) = [f for f in quiet.findings if f.kind == "no_effect"]
    assert f.title == "depth did not matter"
    assert f.set["depth"] in ("1", "2") and f"depth={f.set['depth']} " in quiet.command
    assert (
        "90% interval of its largest difference" in f.evidence[0] and "inside ±60" in f.evidence[0]
    )


def test_a_key_that_matters_only_elsewhere_is_reported_where_it_did_not():
    runs = [
        rec(3091.6, depth=0, width=4),
        rec(3091.6, depth=0, width=16),
        rec(2900, depth=1, width=4),
        rec(3300, depth=1, width=16),
    ]
    f = only(run_advisor(ranked(runs), ["depth=0,1", "width=4,16"]), "no_effect")
    assert (
        f.title == "width matters in some slices only"
        and f.set == {}
        and f.step == "sweep width only where depth≠0"
    )
    assert "it did not matter at depth=0" in f.summary and "identical scores" in f.evidence[-1]
    nothing = [
        rec(status="FAILED", reason="diverged at epoch 10", lr=3, depth=d, width=w)
        for d in (0, 1)
        for w in (4, 16)
    ]
    f = only(
        run_advisor(ranked([*runs, *nothing]), ["lr=0.01,3", "depth=0,1", "width=4,16"]),
        "no_effect",
    )
    assert f.tag == "width@depth=0"  # slices where every run diverged say nothing about width


def test_a_binary_key_that_left_accuracy_but_moved_log_loss_did_matter():
    def b(acc, ll, **p):
        return rec(acc, metrics={"val_log_loss": ll}, **p)

    moved = run_advisor(
        ranked([b(0.9737, 0.107, width=8), b(0.9737, 0.124, width=16)], lower=False), ["width=8,16"]
    )
    assert "no_effect" not in kinds(moved) and "ties" in kinds(moved)
    same = run_advisor(
        ranked([b(0.9737, 0.107, width=8), b(0.9737, 0.107, width=16)], lower=False), ["width=8,16"]
    )
    assert "no_effect" in kinds(same)


# --- noise and significance -----------------------------------------------------------------------


def seeds(values_by_lr):
    return ranked(
        [rec(v, lr=lr, seed=s) for lr, vs in values_by_lr.items() for s, v in enumerate(vs)]
    )


def test_without_seeds_the_ranking_has_no_noise_estimate_and_seeds_are_suggested():
    a = run_advisor(ranked([rec(3000, lr=0.01), rec(3010, lr=0.1)]), ["lr=0.01,0.1", "seed=4"])
    f = only(a, "noise")
    assert f.tag == "none" and "no noise estimate" in f.summary and kinds(a)[0] == "noise"
    # lr is not shown not to matter (no seeds: no interval), so it is not fixed: the seeds of both fit the budget of
    # 2 new runs as one seed more than tried (before: "lr did not matter" by the 2% default, and lr was fixed)
    assert (
        "seed=0,1,2" in f.step
        and "lr=0.01,0.1 seed=0,1 " in a.command
        and "seed=4" not in a.command
    )
    # an edge first, then the seeds would pass the budget (the sweep's size, at least 6 runs): said, left out
    edge = run_advisor(ranked([rec(3000, lr=0.01), rec(3100, lr=0.1)]), ["lr=0.01,0.1", "seed=4"])
    assert "edge" in kinds(edge) and "seed=0,1,2" in edge.note and "seed=4" in edge.command


def test_seeds_whose_top_two_overlap_are_not_distinguishable():
    a = run_advisor(
        seeds({0.005: [3205, 2764, 2572], 0.01: [3147, 2805, 2581]}),
        ["lr=0.005,0.01", "seed=0,1,2"],
    )
    f = only(a, "noise")
    assert f.tag == "overlap" and "paired t-test over their 3 shared seeds" in f.evidence[-2]
    assert "lr=0.01: val_mse 2844 ± 285 (n=3)" in f.evidence  # mean ± std per configuration
    assert "seed=0,1,2,3,4,5" in a.command
    assert a.tags()["advice.noise"] == "overlap"


def test_a_resumed_sweeps_runs_of_one_configuration_are_one_configuration():
    runs = seeds({0.005: [3205, 2764, 2572], 0.01: [3147, 2805, 2581]})
    for r in runs:  # seeds 0 were reused from a sweep without resume
        r["params"]["resume"] = "False" if r["params"]["seed"] == "0" else "True"
    a = run_advisor(runs, ["lr=0.005,0.01", "seed=0,1,2", "resume=true"])
    assert "lr=0.01: val_mse 2844 ± 285 (n=3)" in only(a, "noise").evidence
    # lr is not measured (its interval is wider than the margin): not fixed; seeds 0-5 of both
    assert a.sizes == (12, 6) and a.command.count("resume=") == 1


def test_the_seed_noise_is_the_pooled_sample_std_and_its_degrees_of_freedom():
    """Configurations of 3, 2 and 4 seeds (and one of 1, which adds nothing): the noise is sqrt(sum of (n_i - 1) s_i²
    over sum of (n_i - 1)), each s_i² the sample variance (ddof=1), with 6 degrees of freedom."""
    values = {
        "0.001": [3200.0, 2700.0, 2500.0],
        "0.003": [3100.0, 2900.0],
        "0.01": [2600.0, 2800.0, 3300.0, 2400.0],
        "0.1": [5000.0],
    }
    runs = ranked([rec(v, lr=lr, seed=s) for lr, vs in values.items() for s, v in enumerate(vs)])
    s = Sweep(runs)
    # the 1-seed one adds 0
    squares = sum(float(np.sum((np.array(v) - np.mean(v)) ** 2)) for v in values.values())
    expected = (squares / (2 + 1 + 3)) ** 0.5
    assert s.slice_noise(list(s.configs)) == (pytest.approx(expected, rel=1e-12), 6)
    # by hand: sums of squares 260000 + 20000 + 447500 = 727500, / 6, its root
    assert round(expected, 1) == 348.2
    # what the findings compare by: their own seeds
    assert "never a spread pooled over the grid" in s.noise_text
    two = [c for c in s.configs if dict(c)["lr"] in ("0.001", "0.003")]
    own = (
        sum(
            float(np.sum((np.array(values[lr]) - np.mean(values[lr])) ** 2))
            for lr in ("0.001", "0.003")
        )
        / 3
    ) ** 0.5
    assert s.slice_noise(two) == (pytest.approx(own, rel=1e-12), 3)


def test_seeds_with_a_clear_winner_are_distinguishable():
    a = run_advisor(
        seeds({0.0003: [5484, 5065, 5347], 0.01: [3147, 2805, 2581]}),
        ["lr=0.0003,0.01", "seed=0,1,2"],
    )
    f = only(a, "noise")
    assert f.tag == "distinct" and "distinguishable" in f.summary and not f.set
    unpaired = run_advisor(
        ranked(
            [
                rec(v, lr=lr, seed=s)
                for lr, pairs in {
                    0.0003: [(0, 5484), (1, 5065)],
                    0.01: [(2, 3147), (3, 2805)],
                }.items()
                for s, v in pairs
            ]
        ),
        [],
    )
    assert "Welch" in only(unpaired, "noise").evidence[-1]


# --- ties --------------------------------------------------------------------------------------------


def test_ties_on_accuracy_say_how_they_were_broken_and_which_log_loss_prefers():
    runs = [
        rec(0.9737, metrics={"val_log_loss": ll}, width=w)
        for w, ll in ((16, 0.1237), (4, 0.1265), (8, 0.107))
    ]
    a = run_advisor(ranked(runs, lower=False), ["width=4,8,16"])
    f = only(a, "ties")
    assert f.tag == "3" and "by run name" in f.summary and "prefer width=8" in f.step
    by_log_loss = sorted(runs, key=lambda r: r["metrics"]["val_log_loss"])
    assert "by val_log_loss" in only(run_advisor(by_log_loss, []), "ties").summary
    unique = [rec(0.9825, metrics={"val_log_loss": 0.14}, lr=0.5), *runs]
    assert "ties" not in kinds(run_advisor(ranked(unique, lower=False), []))


# --- validation only, the command, the tags ---------------------------------------------------------


def test_the_test_split_never_changes_the_advice():
    runs = ranked([rec(5000, lr=0.001), rec(4000, lr=0.01), rec(3000, lr=0.1)])
    before = run_advisor(runs, ARGV).text()
    for i, r in enumerate(runs):
        r["metrics"]["test_mse"] = [1.0, 9e9, 5.0][i]
    assert run_advisor(runs, ARGV).text() == before


def test_next_command_keeps_other_overrides_quotes_only_where_needed_and_ends_with_resume():
    runs = ranked([rec(5000, lr=0.001), rec(4000, lr=0.01), rec(3000, lr=0.1)])
    argv = [
        "hydra/launcher=basic",
        "data=csv",
        "data.path=my data.csv",
        'data.sep=";"',
        "+lr=0.001,0.01,0.1",
        "resume=false",
        "~pinned",
    ]
    cmd = next_command(argv, advise.plan(Sweep(runs), run_advisor(runs, argv).findings)[0])
    assert cmd.startswith(
        "python -m sweeper -m hydra/launcher=basic data=csv 'data.path=my data.csv' 'data.sep=\";\"' "
    )
    words = shlex.split(cmd)
    assert words[4:] == [
        "hydra/launcher=basic",
        "data=csv",
        "data.path=my data.csv",
        'data.sep=";"',
        "+lr=0.001,0.01,0.1,1.0,10.0",
        "~pinned",
        "resume=true",
    ]  # seeds: past the budget


def test_the_next_command_counts_its_configurations_and_those_already_finished():
    runs = ranked([rec(5000, lr=0.001), rec(4000, lr=0.01), rec(3000, lr=0.1)])
    a = run_advisor(runs, ARGV)  # lr gets 1.0 and 10.0; seeds 1 and 2 would pass the budget
    assert (
        a.sizes == (5, 3) and "5 configurations: 3 finished already, reused; 2 to train" in a.text()
    )
    assert a.tags()["advice.next_configs"] == "5" and a.tags()["advice.next_to_train"] == "2"
    diverged = ranked(
        [
            rec(4000, lr=0.001),
            rec(3100, lr=0.01),
            rec(status="FAILED", reason="diverged at epoch 10", lr=3),
        ]
    )
    # lr=3 is left out, its log-midpoint with 0.01 added
    a = run_advisor(diverged, ["lr=0.001,0.01,3"])
    # a FAILED run is never reused: lr=3's place goes to its log-midpoint; the seeds do not fit the budget (3 runs)
    assert "lr=0.001,0.01,0.17 " in a.command and "seed" not in a.command and a.sizes == (3, 2)
    assert "left out of the next command for its budget: add seeds" in a.note


def test_search_sweeps_get_findings_but_no_grid_command():
    a = run_advisor(
        ranked([rec(5000, lr=0.001), rec(4000, lr=0.01), rec(3000, lr=0.1)]),
        ["+sweep=optuna"],
        search=True,
    )
    assert a.command is None and "search sweeper" in a.text() and "edge" in kinds(a)
    assert advise.is_search(
        {"sweeper": "hydra_plugins.sweeper_optuna_sweeper.optuna_sweeper.OptunaSweeper"}
    )
    assert not advise.is_search({}) and not advise.is_search({"sweeper": advise_basic()})


def advise_basic():
    from sweeper.base.hydra_internals import BASIC_SWEEPER

    return BASIC_SWEEPER


def test_tags_and_markdown():
    runs = ranked([rec(5000, lr=0.001), rec(4000, lr=0.01), rec(3000, lr=0.1)])
    a = run_advisor(runs, ARGV)
    tags = a.tags()
    assert tags["advice.count"] == str(len(a.findings)) == "2"
    assert tags["advice.edge"] == "lr:up" and tags["advice.noise"] == "none"
    assert tags["advice.next_command"] == a.command
    md = a.text(markdown=True)
    assert (
        md.startswith("# Sweep advice")
        and "## 1. noise and significance" in md
        and "## 2. edge of the grid: lr" in md
        and f"```bash\n{a.command}\n```" in md
    )
    assert advise.sweep_argv({"overrides": "lr=0.1 depth=1"}) == ["lr=0.1", "depth=1"]
    assert advise.sweep_argv(
        {"sweep_argv": '["data.path=a b.csv"]', "overrides": "data.path=a b.csv"}
    ) == ["data.path=a b.csv"]


def test_help_and_usage_errors_import_no_mlflow():
    code = (
        "import sys\nfrom sweeper import advise\ntry:\n    advise.main(sys.argv[1:])\nexcept SystemExit as e:\n"
        "    print('exit', e.code, 'mlflow' in sys.modules)"
    )
    for argv, rc in ((["--help"], 0), ([], 2), (["--bogus"], 2)):
        proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
        assert proc.stdout.splitlines()[-1] == f"exit {rc} False", proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
    proc = command("sweeper.advise", "--help")
    assert proc.returncode == 0 and "--experiment" in proc.stdout and "--parent" in proc.stdout


def _fit_one_value_at_a_time(s, trial, limit):
    """The pruning as it was written first: one value cut, then everything counted again (the reference)."""
    trial = dict(trial)
    while advise._to_train(s, trial) > limit:
        for key in s.hyper:
            now = trial[key].split(",") if key in trial else s.tried(key)
            worse = advise._worse_values(s, key, now)
            if worse and len(now) > 2:
                trial[key] = ",".join(v for v in now if v != worse[0])
                break
        else:
            return trial
    return trial


def test_pruning_a_grid_to_its_budget_cuts_what_cutting_one_value_at_a_time_cuts():
    import random

    rng = random.Random(0)
    for case in range(30):
        lrs = [f"{0.001 * (i + 1):g}" for i in range(rng.randint(3, 12))]
        widths = [8, 16, 32, 64][: rng.randint(1, 4)]
        seeds = list(range(rng.randint(1, 3)))
        records = [
            rec(
                3000 + 1e5 * (float(lr) - 0.005) ** 2 + 40 * abs(w - 16) + 5 * rng.random(),
                lr=lr,
                width=w,
                seed=sd,
            )
            for lr in lrs
            for w in widths
            for sd in seeds
            if rng.random() > 0.1
        ]
        if rng.random() < 0.3:  # a value written another way in one run ("0.002" and "0.0020")
            records[0]["params"]["lr"] += "0"
        s = Sweep(ranked(records))
        for trial in ({}, {"seed": "0,1,2"}, {"seed": "0,1,2,3", "epochs": "200,400"}):
            for limit in (2, 6, len(records) // 2, len(records)):
                assert advise._fit(s, trial, limit) == _fit_one_value_at_a_time(s, trial, limit), (
                    case,
                    trial,
                    limit,
                )


def test_the_advisor_says_when_validation_is_the_training_rows_and_when_a_sweep_was_cut():
    from types import SimpleNamespace

    from sweeper.insight.advice.advisor import advise, interrupted_caveats

    records = [
        {
            "run": f"lr={lr}",
            "run_id": str(i),
            "status": "FINISHED",
            "reason": None,
            "params": {"lr": str(lr), "data.val_fraction": "0.0"},
            "metrics": {"val_mse": 1.0 + i},
        }
        for i, lr in enumerate((0.1, 0.2, 0.3))
    ]
    text = advise(records, ["-m", "lr=0.1,0.2,0.3"]).text()
    assert "caveat: validation = the training rows (data.val_fraction=0)" in text
    parent = SimpleNamespace(
        info=SimpleNamespace(status="KILLED"),
        data=SimpleNamespace(
            tags={"n_jobs": "16", "failure_reason": "sweep interrupted (Ctrl-C): x"}
        ),
    )
    runs = [SimpleNamespace(info=SimpleNamespace(status="FINISHED"))] * 3
    (caveat,) = interrupted_caveats(parent, runs)
    assert caveat.startswith(
        "the sweep did not finish (sweep interrupted (Ctrl-C)): 3 of 16 jobs finished"
    )
    assert not interrupted_caveats(
        SimpleNamespace(info=SimpleNamespace(status="FINISHED"), data=parent.data), runs
    )
