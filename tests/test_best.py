"""The promoted configurations as a regression suite, proof that it can fail, and the promote command.

Every ``conf/best/*.yaml`` is one test case: it is re-run on the CPU through the CLI's code path (compose
``+best=NAME``, then ``run()``) into a fresh store, and fails with a table of expected vs got when a pinned
metric is worse than its value by more than its relative tolerance. Improvements pass with a warning.
Cases whose original training took more than ``pinned.SLOW_S`` seconds are marked ``slow``.
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml

from conftest import all_runs, cli, client_for, command, make_cfg, run_once
from sweeper import ROOT, promote
from sweeper.insight import pinned, promotion
from sweeper.contract.config import ConfigError, check_overrides
from sweeper.job.context import JobContext
from sweeper.job.record import run

# A pin folder of one's own: python -m pytest tests/test_best.py --best-dir DIR (conftest.py), or SWEEPER_BEST_DIR=DIR
BEST_DIR = Path(os.environ.get("SWEEPER_BEST_DIR") or pinned.BEST_DIR)
OWN_DIR = BEST_DIR.resolve() != pinned.BEST_DIR.resolve()
BEST = pinned.pinned_files(BEST_DIR)
COMMITTED_DATA = {"xor", "diabetes", "breast_cancer"}  # the suite guards these from day one


def problem(path: Path) -> str | None:
    """Why a pinned file cannot be read as one (None when it can): collecting the suite must never fail on
    one file, which would abort every pinned test without naming it; its own tests fail instead."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        return f"{path.name} cannot be read: {type(e).__name__}: {' '.join(str(e).split())}"
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("pinned"), dict)
        or not isinstance(doc.get("data"), dict)
    ):
        return f"{path.name} is not a promoted config: expected a mapping with pinned: and data: (python -m sweeper.promote)"
    return None


def readable(path: Path) -> None:
    """Fail this test, naming the file and its problem, when the pinned file is broken."""
    why = problem(path)
    if why:
        pytest.fail(why, pytrace=False)


GOOD = [p for p in BEST if problem(p) is None]


class Improvement(UserWarning):
    """A pinned metric got better: re-pin to keep the gain (python -m sweeper.promote ... --force)."""


def _case(path: Path):
    slow = problem(path) is None and pinned.read_pinned(path).get("train_time_s", 0) > pinned.SLOW_S
    return pytest.param(path, id=path.stem, marks=[pytest.mark.slow] if slow else [])


def compose_pin(path: Path, *overrides: str, store: Path | None = None):
    """The config ``python -m sweeper`` composes for the pin: ``+best=NAME`` in conf/best, else the file as the only
    ``best`` option of a copy of conf/ (a folder of one's own)."""
    if not OWN_DIR:
        return make_cfg(f"+best={path.stem}", *overrides, store=store)
    return pinned.compose_file(
        path, *overrides, *([f"tracking.uri=sqlite:///{store}"] if store else [])
    )


def pin_kind(path: Path) -> str:
    """``mlp`` (sweeper's), ``model`` (a class of yours) or ``trainer`` (a function trainer of yours): what the pin
    trains, its module reached where the pin says it lives (``pinned.model_dir``)."""
    from sweeper.contract.model import reach
    from sweeper.models.interface import ModelError, kind

    doc = yaml.safe_load(path.read_text())
    reach(doc)
    try:
        return kind(doc.get("model"))
    except ModelError as e:  # its module is nowhere to be had: its own re-run says so in one line
        pytest.fail(f"{path.stem}: {e}", pytrace=False)


def missing_data(cfg) -> str | None:
    """Why a config cannot be re-run on this machine: a data file that is not here (else None)."""
    path = cfg.data.get("path")
    if path and not Path(path).is_file():
        return f"data.path={path} is absent on this machine: the pinned run read a file this checkout lacks"
    return None


def rerun(path: Path, tmp_path: Path, store: Path, *overrides: str):
    """``python -m sweeper +best=NAME [overrides]`` in-process: the CLI's checks, composition and run()."""
    # another folder: no option of conf/best
    check_overrides([*([] if OWN_DIR else [f"+best={path.stem}"]), *overrides])
    cfg = compose_pin(path, *overrides, store=store)
    reason = missing_data(cfg)
    if reason:
        pytest.skip(reason)
    try:
        return cfg, run(cfg, JobContext(output_dir=tmp_path / "job"))
    # e.g. a pin of a user's model whose module is not importable here: one line naming it
    except ConfigError as e:
        pytest.fail(f"{path.stem}: {e}", pytrace=False)


def judge(name: str, expected, result: dict) -> list[pinned.Row]:
    """Fail with the table when a pinned metric is worse beyond its rtol; warn when some improved."""
    rows = pinned.check(expected, result["metrics"])
    better = [r.metric for r in rows if r.verdict == "better"]
    if better:
        warnings.warn(
            stacklevel=2,
            message=Improvement(
                f"{name}: {', '.join(better)} improved; re-pin to keep the gain\n{pinned.table(rows)}"
            ),
        )
    worse = [r for r in rows if r.failed]
    if worse:
        why = f" ({result['reason']})" if result.get("reason") else ""
        pytest.fail(
            f"{name}: {len(worse)} of {len(rows)} pinned metrics are worse beyond their tolerance; "
            f"the re-run {result['status']}{why}\n{pinned.table(rows)}\n"
            f"If the change is intended, re-pin it: python -m sweeper +best={name} && python -m sweeper.promote "
            f"--experiment {result.get('experiment') or '<experiment>'} --latest --name {name} --force",
            pytrace=False,
        )
    return rows


# --- the regression suite ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [_case(p) for p in BEST])
def test_pinned_config_is_not_worse(path, tmp_path, store):
    readable(path)
    cfg, result = rerun(path, tmp_path, store)
    rows = judge(path.stem, cfg.pinned.expected, result)
    assert result["status"] == "FINISHED" and len(rows) == len(cfg.pinned.expected) > 0


@pytest.mark.parametrize("path", [_case(p) for p in BEST])
def test_pinned_config_reproduces_inside_a_batched_group(path, tmp_path, store):
    """The batched launcher's compute half: the pin trained in a group beside a companion (half its lr,
    another seed and split seed: each member has its own split; the same seed with mini-batches, whose order it draws, and
    with text data, whose features it fits) scores what it pinned."""
    from sweeper.contract.compose import plain as plain_config
    from sweeper.sweep import launch

    from sweeper.models.group import per_member

    readable(path)
    if pin_kind(path) == "trainer":
        pytest.skip(
            "a function trainer runs its own loop, one configuration a call: it never trains in a group"
        )
    pin = compose_pin(path, store=store)
    if missing_data(pin):
        pytest.skip(missing_data(pin))
    plain = plain_config(pin)
    own = not (pin.batch_size or launch.split_features(plain))
    # its own split where the model's group path trains one per member (the MLP's); a model of yours shares it
    split = pin.data.split_seed + (own and "data.split_seed" in per_member(plain.get("model")))
    companion = compose_pin(
        path, f"lr={pin.lr / 2}", f"seed={pin.seed + own}", f"data.split_seed={split}", store=store
    )
    jobs = [launch.Job(i, [], c, plain_config(c)) for i, c in enumerate((pin, companion))]
    computed = launch.compute_group(jobs)
    if not computed and pin_kind(path) == "model":
        from sweeper.models import stacked

        pytest.skip(
            f"{pin.model._target_} does not batch: {next(iter(stacked.verdicts().values()), '')} (it trains one "
            "configuration at a time)"
        )
    assert set(computed) == {0, 1} and computed[0].tags["sweeper.group_size"] == "2"
    judge(
        path.stem,
        pin.pinned.expected,
        {"metrics": computed[0].outcome.scores, "status": "computed"},
    )


@pytest.mark.skipif(
    OWN_DIR, reason="a pin folder of one's own: the committed data sets are conf/best's to guard"
)
def test_the_suite_guards_the_committed_data_sets():
    assert COMMITTED_DATA <= {pinned.read_pinned(p)["data"] for p in GOOD}


@pytest.mark.parametrize("path", BEST, ids=[p.stem for p in BEST])
def test_pinned_file_is_a_complete_promoted_config(path):
    readable(path)
    text = path.read_text()
    doc = yaml.safe_load(text)
    pins = doc["pinned"]
    assert text.startswith("# @package _global_\n")
    assert (
        doc["defaults"] == [{"override /data": doc["data"]["name"]}]
        and pins["data"] == doc["data"]["name"]
    )
    assert doc["device"] == "cpu" and "tracking" not in doc
    assert {"lr", "epochs", "seed", "dtype", "log_every", "patience"} <= set(doc)
    mlp = {"depth", "width", "activation"}
    # a model of yours: its import path and hyperparameters, where it lives; no MLP key
    if "model" in doc:
        assert (
            doc["model"]["_target_"]
            and not mlp & set(doc)
            and pins.get("model_dir")
            and pins.get("model_source")
        )
    else:
        assert mlp <= set(doc)
    assert pins["name"] == path.stem and len(pins["run_id"]) == 32
    assert {"experiment", "date", "git_commit", "fingerprint", "train_time_s"} <= set(pins)
    assert pins["metric"].startswith("val_") and pins["metric"] in pins["expected"]
    for metric, e in pins["expected"].items():
        assert e["direction"] == pinned.direction(metric), metric
        assert 0 <= e["rtol"] < 1 and math.isfinite(e["value"]), metric


# --- proof that the suite can fail -----------------------------------------------------------------------

MUTATIONS = {
    "lr x100": lambda c: [f"lr={c.lr * 100}"],
    "epochs div 100": lambda c: [f"epochs={max(1, c.epochs // 100)}"],
    "another seed (initial weights)": lambda c: [f"seed={c.seed + 1}"],
    "another split": lambda c: [f"data.split_seed={c.data.split_seed + 1}"],
}
# Mutated: the configs with a held-out split. XOR has none (train = val = test, the seed only moves the
# initial weights) and is learned at almost any rate: lr x100 there improves every metric, which the
# check rightly passes (and reports as an improvement).
SPLIT = [p for p in GOOD if yaml.safe_load(p.read_text())["data"].get("val_fraction", 0) > 0]


@pytest.mark.parametrize("mutation", MUTATIONS)
@pytest.mark.parametrize("path", [_case(p) for p in SPLIT])
def test_a_perturbed_pinned_config_fails_the_check(path, mutation, tmp_path, store):
    if mutation == "another seed (initial weights)" and pin_kind(path) == "trainer":
        pytest.skip(
            "a function trainer may draw nothing from seed (a closed form, zeros to start): no proof either way"
        )
    base = compose_pin(path)
    cfg, result = rerun(path, tmp_path, store, *MUTATIONS[mutation](base))
    with (
        pytest.raises(pytest.fail.Exception, match="worse beyond their tolerance") as failure,
        warnings.catch_warnings(),
    ):
        # a mutant may better a metric or two; not news here
        warnings.simplefilter("ignore", Improvement)
        judge(path.stem, base.pinned.expected, result)
    assert "WORSE" in str(failure.value) or "MISSING" in str(failure.value)


def test_improvements_pass_and_are_reported(tmp_path, store):
    path = min(GOOD, key=lambda p: pinned.read_pinned(p)["train_time_s"])
    cfg, result = rerun(path, tmp_path, store)
    got = result["metrics"]
    # Pin every metric 10 % worse than the re-run: the re-run must pass and be reported as better.
    # (``abs`` keeps the doctored value on the bad side for metrics that can be negative, like R².)
    worse_pin = {
        m: {
            **e,
            "value": got[m] + (0.1 if e["direction"] == "lower" else -0.1) * (abs(got[m]) or 1),
        }
        for m, e in cfg.pinned.expected.items()
    }
    with pytest.warns(Improvement, match="improved"):
        rows = judge(path.stem, worse_pin, result)
    assert {r.verdict for r in rows} == {"better"}


@pytest.mark.parametrize(
    "direction, expected, got, verdict",
    [
        ("lower", 100.0, 100.0, "same"),
        ("lower", 100.0, 90.0, "better"),
        ("lower", 100.0, 100.0 + 1e-5, "within"),  # rtol 1e-6 of 100 allows 1e-4
        ("lower", 100.0, 100.0 - 1e-5, "within"),  # better, but inside the band: no news, no re-pin
        (
            "lower",
            0.0795,
            0.0795 * (1 - 8.3e-16),
            "within",
        ),  # breast_cancer_2's val_log_loss on another BLAS
        ("higher", 0.9, 0.9 + 1e-7, "within"),
        ("lower", 100.0, 100.1, "WORSE"),
        ("higher", 0.9, 0.95, "better"),
        ("higher", 0.9, 0.8, "WORSE"),
        ("higher", -0.5, -0.4, "better"),  # R² below zero: up is still better
        ("higher", -0.5, -0.5000001, "within"),
        ("higher", -0.5, -0.6, "WORSE"),
        ("lower", 1.0, None, "MISSING"),  # a failed re-run logs no quality metric
        ("lower", 1.0, math.nan, "MISSING"),
    ],
)
def test_check_is_direction_aware(direction, expected, got, verdict):
    (row,) = pinned.check(
        {"m": {"value": expected, "rtol": 1e-6, "direction": direction}},
        {"m": got} if got is not None else {},
    )
    assert row.verdict == verdict and row.failed == (verdict in ("WORSE", "MISSING"))


def test_a_data_file_that_is_absent_is_a_skip_reason(tmp_path):
    absent = make_cfg("data=csv", f"data.path={tmp_path / 'gone.csv'}")
    (tmp_path / "here.csv").write_text("a,b\n1,2\n")
    present = make_cfg("data=csv", f"data.path={tmp_path / 'here.csv'}")
    assert "gone.csv is absent" in missing_data(absent) and missing_data(present) is None


def test_params_come_back_with_their_types_and_a_repo_path_stays_portable():
    params = {
        "lr": "5e-05",
        "epochs": "300",
        "activation": "tanh",
        "device": "gpu",
        "seed": "0",
        "data.name": "csv",
        "data.header": "True",
        "data.target": "-1",
        "data.path": str(ROOT / "data" / "my.csv"),
        "tracking.uri": "sqlite:////x.db",
        "pinned.name": "old",
    }
    cfg = pinned.config_from_params(params)
    assert (
        cfg["lr"] == 5e-05
        and cfg["epochs"] == 300
        and cfg["activation"] == "tanh"
        and cfg["device"] == "cpu"
    )
    assert cfg["data"] == {
        "name": "csv",
        "header": True,
        "target": -1,
        "path": "${sweeper_root:}/data/my.csv",
    }
    assert "tracking" not in cfg and "pinned" not in cfg
    assert (
        pinned.config_from_params({**params, "data.path": "/elsewhere/my.csv"})["data"]["path"]
        == "/elsewhere/my.csv"
    )


# --- promote, on a real store filled by real runs --------------------------------------------------------


@pytest.fixture(scope="module")
def swept(tmp_path_factory, _template_store) -> Path:
    """A store with finished diabetes and breast_cancer runs (one config twice) and an experiment of a diverged run."""
    import shutil

    tmp = tmp_path_factory.mktemp("swept")
    db = tmp / "mlflow.db"
    shutil.copy(_template_store, db)
    fast = ("epochs=200", "log_every=20", "width=4")
    jobs = [
        (f"data={d}", f"depth={depth}", f"lr={lr}")
        for d in ("diabetes", "breast_cancer")
        for depth in (0, 1)
        for lr in (0.05, 0.5)
    ]
    # the same configuration again: promoted once
    jobs.append(("data=diabetes", "depth=1", "lr=0.05"))
    for i, job in enumerate(jobs):
        run_once(tmp / str(i), *job, *fast, store=db)
    diverged = run_once(
        tmp / "d", "depth=0", "lr=50", "epochs=300", "tracking.experiment=diverged", store=db
    )
    assert diverged["status"] == "FAILED"
    return db


def finished_jobs(db: Path, experiment: str) -> list:
    return [
        r
        for r in all_runs(db)
        if r.info.status == "FINISHED"
        and "fingerprint" in r.data.tags
        and r.info.experiment_id == client_for(db).get_experiment_by_name(experiment).experiment_id
    ]


def promote_cli(db: Path, out_dir: Path, *args: str) -> int:
    return promote.main(["--tracking-uri", f"sqlite:///{db}", "--out-dir", str(out_dir), *args])


@pytest.mark.parametrize(
    "experiment, metric", [("diabetes", "val_mse"), ("breast_cancer", "val_accuracy")]
)
def test_promote_writes_the_best_distinct_configs_by_the_validation_metric(
    swept, tmp_path, experiment, metric
):
    assert promote_cli(swept, tmp_path, "--experiment", experiment, "--top", "2") == 0

    runs = finished_jobs(swept, experiment)
    sign = 1 if pinned.direction(metric) == "lower" else -1
    ranked = sorted(
        runs, key=lambda r: (sign * r.data.metrics[metric], r.data.metrics.get("val_log_loss", 0))
    )
    distinct, seen = (
        [],
        set(),
    )  # the best run of each configuration (the store holds one config twice)
    for r in ranked:
        if r.data.tags["fingerprint"] not in seen:
            seen.add(r.data.tags["fingerprint"])
            distinct.append(r)
    docs = [yaml.safe_load((tmp_path / f"{experiment}_{i}.yaml").read_text()) for i in (1, 2)]
    assert [d["pinned"]["metric"] for d in docs] == [
        metric,
        metric,
    ]  # the task's primary validation metric
    assert [d["pinned"]["fingerprint"] for d in docs] == [
        r.data.tags["fingerprint"] for r in distinct[:2]
    ]
    for doc in docs:
        run_ = next(r for r in runs if r.info.run_id == doc["pinned"]["run_id"])
        assert doc["pinned"]["git_commit"] == run_.data.tags.get("mlflow.source.git.commit")
        assert doc["pinned"]["experiment"] == experiment == doc["pinned"]["data"]
        assert {m: e["value"] for m, e in doc["pinned"]["expected"].items()} == {
            m: v for m, v in run_.data.metrics.items() if pinned.direction(m)
        }
        assert doc["lr"] == float(run_.data.params["lr"]) and doc["depth"] == int(
            run_.data.params["depth"]
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"{experiment}_1.yaml",
        f"{experiment}_2.yaml",
    ]


def test_a_promoted_config_reruns_its_run_exactly(swept, tmp_path, store):
    """Determinism: the written file, composed as +best=NAME and re-run here, gives the very same metrics."""
    out = tmp_path / "promoted"
    assert promote_cli(swept, out, "--experiment", "diabetes", "--name", "winner") == 0
    path = out / "winner.yaml"
    cfg = pinned.compose_file(path, f"tracking.uri=sqlite:///{store}")
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))

    original = next(r for r in all_runs(swept) if r.info.run_id == cfg.pinned.run_id)
    (rerun_,) = all_runs(store)
    assert result["fingerprint"] == original.data.tags["fingerprint"]
    quality = {m: v for m, v in original.data.metrics.items() if pinned.direction(m)}
    assert {m: result["metrics"][m] for m in quality} == quality  # exact, not approximate
    assert {r.verdict for r in pinned.check(cfg.pinned.expected, result["metrics"])} == {"same"}
    same_params = lambda p: {
        k: v for k, v in p.items() if not k.startswith(("tracking.", "pinned."))
    }  # noqa: E731
    assert same_params(rerun_.data.params) == same_params(original.data.params)


BAD = [
    (
        ["--experiment", "nope"],
        "--experiment=nope is not allowed: no such experiment",
        "breast_cancer, diabetes",
    ),
    (
        ["--experiment", "diverged"],
        "--experiment=diverged is not allowed: it has no finished CPU runs",
        "",
    ),
    (
        ["--experiment", "diabetes", "--metric", "val_accuracy"],
        "--metric=val_accuracy is not allowed",
        "val_mae, val_mse",
    ),
    (
        ["--experiment", "diabetes", "--metric", "test_mse"],
        "--metric=test_mse is not allowed: selecting on the test",
        "val_",
    ),
    (
        ["--experiment", "diabetes", "--metric", "wall_time_s"],
        "--metric=wall_time_s is not allowed",
        "val_mse",
    ),
    (
        ["--experiment", "diabetes", "--top", "0"],
        "--top=0 is not allowed: expected an integer >= 1",
        "",
    ),
    (
        ["--experiment", "diabetes", "--top", "two"],
        "--top=two is not allowed: expected an integer >= 1",
        "",
    ),
    (["--experiment", "diabetes", "--name", "a/b"], "--name=a/b is not allowed", "+best=NAME"),
    (["--experiment", "diabetes", "--rtol", "2"], "--rtol=2.0 is not allowed", "[0, 1)"),
    (
        ["--experiment", "diabetes", "--run-id", "f" * 32],
        f"--run-id={'f' * 32} is not allowed",
        "finished CPU run",
    ),
]


@pytest.mark.parametrize("args, error, allowed", BAD, ids=[" ".join(a) for a, _, _ in BAD])
def test_promote_refuses_in_one_line_and_writes_nothing(
    swept, tmp_path, capsys, args, error, allowed
):
    assert promote_cli(swept, tmp_path / "promoted", *args) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert (
        len(lines) == 1 and lines[0].startswith(f"sweeper: error: {error}") and allowed in lines[0]
    )
    assert not (tmp_path / "promoted").exists()


def test_promote_refuses_a_store_that_does_not_exist_and_does_not_create_it(tmp_path, capsys):
    assert promote_cli(tmp_path / "none.db", tmp_path / "promoted", "--experiment", "diabetes") == 2
    assert (
        "--tracking-uri=sqlite:///" in capsys.readouterr().err
        and not (tmp_path / "none.db").exists()
    )


def test_promote_refuses_an_existing_name_unless_forced_and_re_pins_the_latest_run(
    swept, tmp_path, capsys
):
    assert promote_cli(swept, tmp_path, "--experiment", "diabetes", "--name", "d") == 0
    before = (tmp_path / "d.yaml").read_text()
    assert promote_cli(swept, tmp_path, "--experiment", "diabetes", "--name", "d", "--latest") == 2
    assert (
        "d.yaml already exists" in capsys.readouterr().err
        and (tmp_path / "d.yaml").read_text() == before
    )

    # Re-pin after an intended change: the newest run replaces the file, whatever its rank.
    args = ("--experiment", "diabetes", "--name", "d", "--latest", "--rtol", "0.01", "--force")
    assert promote_cli(swept, tmp_path, *args) == 0
    pins = yaml.safe_load((tmp_path / "d.yaml").read_text())["pinned"]
    newest = max(finished_jobs(swept, "diabetes"), key=lambda r: r.info.start_time)
    assert pins["run_id"] == newest.info.run_id and {
        e["rtol"] for e in pins["expected"].values()
    } == {0.01}


def test_promote_needs_an_experiment(capsys):
    with pytest.raises(SystemExit) as exit_:
        promote.main([])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "sweeper: error: python -m sweeper.promote: the following arguments are "
        "required: --experiment (see python -m sweeper.promote --help)"
    )


@pytest.mark.parametrize("module", ["advise", "compare", "report", "runs", "summary", "upload"])
def test_every_commands_argument_errors_are_one_line(module, capsys):
    """Before: argparse's usage (3-4 lines) above the error, for every command but promote."""
    import importlib

    with pytest.raises(SystemExit) as exit_:
        importlib.import_module(f"sweeper.{module}").main(["--no-such-flag"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"sweeper: error: python -m sweeper.{module}: ") and err.strip().endswith(
        f"(see python -m sweeper.{module} --help)"
    )


# --- the real command lines ------------------------------------------------------------------------------


@pytest.mark.slow
def test_promote_command_line_prints_a_re_run_command_that_works(swept, tmp_path, store):
    out = tmp_path / "my files" / "promoted"  # any folder: its parent joins Hydra's search path
    proc = command(
        "sweeper.promote",
        "--tracking-uri",
        f"sqlite:///{swept}",
        "--experiment",
        "breast_cancer",
        "--name",
        "bc",
        "--out-dir",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "by val_accuracy (higher is better)" in proc.stdout
    pins = yaml.safe_load((out / "bc.yaml").read_text())["pinned"]
    assert pins["name"] == "bc"
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("re-run one: ")]
    python, m, module, *args = shlex.split(line[len("re-run one: ") :])
    assert (python, m, module) == ("python", "-m", "sweeper") and args[-1] == "+promoted=bc"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    rerun_ = cli(elsewhere, *args, store=store)  # the printed command, from another folder
    assert rerun_.returncode == 0, rerun_.stderr
    (run_,) = all_runs(store)
    assert (
        run_.data.tags["fingerprint"] == pins["fingerprint"]
        and run_.data.params["pinned.run_id"] == pins["run_id"]
    )


@pytest.mark.parametrize(
    "folder, why",
    [
        (
            "best",
            "a folder named best would merge with the project's own best (conf/), whose files win",
        ),
        ("data", "a folder named data would merge"),
        ("my best", "'my best' cannot be a config group"),
    ],
)
def test_promote_refuses_a_folder_the_cli_cannot_be_told_to_find(
    swept, tmp_path, capsys, folder, why
):
    assert promote_cli(swept, tmp_path / folder, "--experiment", "diabetes") == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert (
        line.startswith(f"sweeper: error: --out-dir={tmp_path / folder} is not allowed: ")
        and why in line
    )
    assert not (tmp_path / folder).exists()


def test_promote_shows_the_data_file_of_a_csv_run(tmp_path, store, capsys):
    csv = tmp_path / "table.csv"
    rows = [(i % 7, (i * 3) % 5, 2.0 * (i % 7) - (i * 3) % 5 + 0.1 * (i % 2)) for i in range(60)]
    csv.write_text("a,b,y\n" + "\n".join(",".join(map(str, r)) for r in rows))
    result = run_once(
        tmp_path, "data=csv", f"data.path={csv}", "epochs=50", "log_every=10", store=store
    )
    assert promote_cli(store, tmp_path / "promoted", "--experiment", result["experiment"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("  ")]
    assert f"data=csv data.path={csv} lr=" in line


@pytest.mark.parametrize("kind", ["mlp", "model", "trainer"])
def test_the_cli_reruns_a_committed_config_with_its_params(kind, tmp_path, store):
    """The fastest pin of each kind, re-run by its printed command from another folder (without PYTHONPATH: a pin
    of a model of yours says where its module lives)."""
    mine = [p for p in GOOD if pin_kind(p) == kind]
    if not mine:
        pytest.skip(f"no pin of a {kind} in {BEST_DIR}")
    path = min(mine, key=lambda p: pinned.read_pinned(p)["train_time_s"])
    try:
        args = promotion.rerun_args(path.parent, path.stem)
    except promotion.PromoteError as e:
        pytest.skip(f"{path.parent} cannot be named on a command line: {e}")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweeper",
            *args,
            f"hydra.run.dir={tmp_path / 'run'}",
            f"tracking.uri=sqlite:///{store}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    (run_,) = all_runs(store)
    doc = yaml.safe_load(path.read_text())
    knobs = {k: v for k, v in doc.items() if k not in ("defaults", "data", "pinned", "model")}
    knobs |= {f"data.{k}": v for k, v in doc["data"].items()}
    knobs |= {f"model.{k}": v for k, v in (doc.get("model") or {}).items()}
    assert {k: run_.data.params[k] for k in knobs} == {k: str(v) for k, v in knobs.items()}
    judge(
        path.stem,
        doc["pinned"]["expected"],
        {"metrics": run_.data.metrics, "status": run_.info.status},
    )


@pytest.mark.slow
def test_a_broken_pinned_file_fails_its_own_test_naming_it_while_the_other_pins_run(tmp_path):
    """A copy of conf/best with a broken x.yaml (conf/best itself is never touched): collection succeeds, the
    broken file's own tests fail naming x.yaml, every other pin's tests pass."""
    pins = tmp_path / "best"
    shutil.copytree(pinned.BEST_DIR, pins)
    (pins / "x.yaml").write_text("# @package _global_\nlr: [1, 2\n")  # an unclosed list
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(Path(__file__)),
            "-k",
            "complete_promoted_config or guards_the_committed",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "SWEEPER_BEST_DIR": str(pins)},
        timeout=300,
    )
    out = proc.stdout
    # failures, no collection error
    assert proc.returncode == 1 and "error" not in out.splitlines()[-1], out
    # a short summary line is "FAILED <node id> - <message>" on a wide terminal, "FAILED <node id>" on a narrow one
    failed = [line.split(" - ")[0] for line in out.splitlines() if line.startswith("FAILED")]
    assert (
        len(failed) == 1
        and failed[0].endswith("[x]")
        and "x.yaml cannot be read: ParserError" in out
    ), out
    # every other pin's file test passed; the committed data sets are conf/best's to guard (skipped for another folder)
    assert f"{len(pinned.pinned_files())} passed, 1 skipped" in out.splitlines()[-1], out
