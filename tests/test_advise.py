"""The sweep advisor on real sweeps: each finding fires on a sweep made to show it and stays silent on one
that does not; the printed next command runs as is and trains only new configurations."""

import json
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from sweeper.contract.config import check_overrides
from conftest import all_runs, cli, client_for, command

FAST = ("log_every=10", "tracking.log_model=false")
SWEEPS = {
    "lr_top": ("lr=0.001,0.003,0.01", "epochs=200"),  # under-trained: the largest lr is best
    "lr_diverges": ("lr=0.001,0.01,0.1,3", "epochs=200"),  # best inside the grid; lr=3 diverges
    "overfits": ("lr=0.05", "width=64", "epochs=2000"),  # best val loss near epoch 260 of 2000
    # the same linear model thrice, one job at a time (the next command keeps the launcher)
    "width_at_depth0": (
        "hydra/launcher=basic",
        "depth=0",
        "width=4,16,64",
        "lr=0.05",
        "epochs=300",
    ),
    "seeds_overlap": ("lr=0.005,0.01", "seed=0,1,2", "epochs=300"),
    "seeds_distinct": ("lr=0.0003,0.01", "seed=0,1,2", "epochs=300"),
    "binary": ("data=breast_cancer", "lr=0.01,0.03,0.1", "epochs=200"),  # one best accuracy
    "binary_ties": (
        "data=breast_cancer",
        "width=4,8,16",
        "lr=0.1",
        "epochs=300",
    ),  # three at 0.9737
}


@dataclass
class Done:
    tmp: Path
    store: Path
    stdout: str
    parent: object  # the parent run, read after the sweep

    @property
    def tags(self) -> dict:
        return {k: v for k, v in self.parent.data.tags.items() if k.startswith("advice.")}

    @property
    def command(self) -> str:
        return self.tags["advice.next_command"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, _template_store):
    """``sweep(name)``: the real multirun SWEEPS[name] in its own store, run once per module."""
    done: dict[str, Done] = {}

    def get(name: str) -> Done:
        if name not in done:
            tmp = tmp_path_factory.mktemp(name)
            store = tmp / "mlruns" / "mlflow.db"
            store.parent.mkdir()
            shutil.copy(_template_store, store)
            proc = cli(tmp, "-m", *SWEEPS[name], *FAST, store=store)
            assert proc.returncode == 0, proc.stderr[-3000:]
            (parent,) = [r for r in all_runs(store) if "mlflow.parentRunId" not in r.data.tags]
            done[name] = Done(tmp, store, proc.stdout, parent)
        return done[name]

    return get


def advice_of(stdout: str) -> str:
    """The advice a sweep printed: from its "Advice:" line to the line before "browse with"."""
    start = stdout.index("Advice: ")
    return stdout[start : stdout.index("browse with:", start)]


@pytest.mark.slow
def test_advice_is_printed_after_the_leaderboard_and_logged_on_the_parent(sweep):
    s = sweep("lr_top")
    out = s.stdout
    assert out.index("best: lr=0.01,cpu") < out.index("Advice: ") < out.index("browse with:")
    c = client_for(s.store)
    md = Path(c.download_artifacts(s.parent.info.run_id, "advice.md")).read_text()
    assert md.startswith("# Sweep advice") and f"```bash\n{s.command}\n```" in md
    assert s.tags["advice.count"] == str(
        md.count("\n## ") - 1
    )  # the findings and the command's section
    assert s.command in advice_of(out)


@pytest.mark.slow
def test_edge_of_the_grid(sweep):
    fires, silent = sweep("lr_top"), sweep("lr_diverges")
    assert fires.tags["advice.edge"] == "lr:up"
    assert "extend lr upward (log-spaced, ×3.16 a step): add 0.03, 0.1" in advice_of(fires.stdout)
    assert "lr=0.001,0.003,0.01,0.03,0.1 " in fires.command
    assert "advice.edge" not in silent.tags  # best lr=0.01 of 0.001..3
    # val_accuracy 0.92, 0.96, 0.97: the last step is one validation row of 114, within the stated 2% default noise
    assert "advice.edge" not in sweep("binary").tags


@pytest.mark.slow
def test_overfitting_and_under_training(sweep):
    overfits, short = sweep("overfits"), sweep("lr_top")
    assert (
        overfits.tags["advice.overfitting"].startswith("best_epoch=")
        and "advice.under_training" not in overfits.tags
    )
    best_epoch = int(overfits.tags["advice.overfitting"].split("=")[1].split("/")[0])
    assert best_epoch < 1000 and "patience=" in overfits.command
    assert "or epochs≈" in advice_of(overfits.stdout)
    # lr=0.01's val loss fell 1.2% over the last quarter of its 200 epochs: within the stated 2% default noise, so
    # no "train longer" (the unit tests show it firing); the lr edge carries the sweep on
    assert "advice.under_training" not in short.tags and "advice.overfitting" not in short.tags
    assert "epochs=200" in short.command.split()


def test_divergence_boundary(sweep):
    fires, silent = sweep("lr_diverges"), sweep("lr_top")
    assert fires.tags["advice.divergence"] == "lr:0.1..3"
    text = advice_of(fires.stdout)
    assert (
        "diverged: lr=3,cpu (diverged at epoch" in text
        and "largest lr that did not diverge: 0.1" in text
    )
    lrs = (
        next(w for w in shlex.split(fires.command) if w.startswith("lr=")).split("=")[1].split(",")
    )
    assert "3" not in lrs and "0.1" in lrs  # lr=3 would only diverge again
    to_train = int(fires.tags["advice.next_to_train"])
    # the 4 runs this sweep trained
    assert 0 < to_train <= int(fires.tags["advice.next_budget"]) == 4
    assert "advice.divergence" not in silent.tags


@pytest.mark.slow
def test_keys_that_did_not_matter(sweep):
    fires = sweep("width_at_depth0")
    assert fires.tags["advice.no_effect"] == "width"
    assert "val_mse by width: 4: 3092, 16: 3092, 64: 3092" in advice_of(fires.stdout)
    assert "advice.no_effect" not in sweep("lr_top").tags  # lr moved val_mse by 28%
    # same accuracy, but width moved the log loss
    assert "advice.no_effect" not in sweep("binary_ties").tags


@pytest.mark.slow
def test_noise_and_significance(sweep):
    overlap, distinct, unseeded = sweep("seeds_overlap"), sweep("seeds_distinct"), sweep("lr_top")
    assert overlap.tags["advice.noise"] == "overlap"
    text = advice_of(overlap.stdout)
    assert (
        "lr=0.01: val_mse 3184 ± 156 (n=3)" in text
        and "paired t-test over their 3 shared seeds" in text
    )  # 3 inits
    assert "seed=0,1,2,3,4,5" in overlap.command
    assert distinct.tags["advice.noise"] == "distinct"
    # the seeds come after the lr edge and would pass the budget (6 runs to train): said under the command
    assert unseeded.tags["advice.noise"] == "none" and "seed=0,1,2" not in unseeded.command
    assert "left out of the next command for its budget" in advice_of(unseeded.stdout)
    assert "no noise estimate" in advice_of(unseeded.stdout)


def test_ties_on_a_small_validation_split(sweep):
    fires, silent = sweep("binary_ties"), sweep("binary")
    assert fires.tags["advice.ties"] == "3"
    text = advice_of(fires.stdout)
    # the leaderboard breaks ties by the lower val_log_loss (then the earlier run): the advisor says so
    assert "3 runs at val_accuracy=0.9737: width=8,cpu (val_log_loss=" in text
    assert "ordered them by val_log_loss (lower first)" in text
    assert "advice.ties" not in silent.tags


@pytest.mark.slow  # alone, it runs all the sweeps (~50 s)
@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_every_next_command_parses(sweep, name):
    words = shlex.split(sweep(name).command)
    assert words[:4] == ["python", "-m", "sweeper", "-m"] and words[-1] == "resume=true"
    check_overrides(words[4:])  # the checks the CLI makes before Hydra composes


@pytest.mark.slow
def test_the_next_command_run_as_is_trains_only_new_configurations(sweep, tmp_path):
    s = sweep("width_at_depth0")
    words = shlex.split(s.command)
    # width fixed to the chosen run's (the tie on val_mse goes to the earlier run: width=4), seeds added
    assert "width=4" in words and "seed=0,1,2" in words
    assert words[4] == "hydra/launcher=basic"  # the sweep's launcher (a Hydra override) is kept
    proc = subprocess.run(
        [sys.executable, *words[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(p.read_text()) for p in tmp_path.glob("multirun/*/*/*/result.json")]
    assert len(results) == 3
    reused = [r for r in results if r["status"] == "SKIPPED"]
    assert len(reused) == 1 and reused[0]["reason"].startswith("resume:")
    assert sorted(r["config"]["seed"] for r in results if r["status"] == "FINISHED") == [1, 2]
    parents = [r for r in all_runs(s.store) if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 2
    new = max(parents, key=lambda r: r.info.start_time)
    children = [
        r for r in all_runs(s.store) if r.data.tags.get("mlflow.parentRunId") == new.info.run_id
    ]
    assert len(children) == 2  # trained: only the new seeds
    # as the advice said
    assert s.tags["advice.next_configs"] == "3" and s.tags["advice.next_to_train"] == "2"


@pytest.mark.slow
def test_advise_command_rebuilds_the_advice_from_the_store(sweep):
    s = sweep("lr_diverges")
    c = client_for(s.store)
    parent_id = s.parent.info.run_id
    c.set_tag(parent_id, "advice.ties", "9")  # a stale finding: the rebuild removes it
    uri = f"sqlite:///{s.store}"
    for args in (["--experiment", "diabetes"], ["--experiment", "diabetes", "--parent", parent_id]):
        proc = command("sweeper.advise", *args, "--tracking-uri", uri)
        assert proc.returncode == 0, proc.stderr
        # the very advice printed at the end of the sweep
        assert advice_of(s.stdout).strip() in proc.stdout
    tags = {k: v for k, v in c.get_run(parent_id).data.tags.items() if k.startswith("advice.")}
    assert tags == s.tags
    bad = command("sweeper.advise", "--experiment", "nope", "--tracking-uri", uri)
    assert bad.returncode == 2 and bad.stderr.startswith(
        "sweeper: error: --experiment=nope does not exist"
    )
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_failing_advisor_costs_the_leaderboard_nothing(sweep, monkeypatch):
    import io

    from sweeper.insight import publish
    from sweeper.insight.advice import advisor as advise

    s = sweep("lr_top")

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(advise, "advise", broken)
    out = io.StringIO()
    board, _ = publish.publish(client_for(s.store), s.parent.info.run_id, out=out)
    assert (
        len(board.rows) == 3 and "sweeper: warning: no advice: RuntimeError: boom" in out.getvalue()
    )


def test_publish_reads_the_rows_it_was_not_handed(sweep):
    """A resumed sweep's leaderboard also ranks runs of earlier parents: the advisor reads those rows by id."""
    import io

    from sweeper.insight import publish
    from sweeper.insight import leaderboard
    from sweeper.insight.advice import advisor as advise

    s = sweep("lr_top")
    c = client_for(s.store)
    parent = c.get_run(s.parent.info.run_id)
    order = [row["run_id"] for row in leaderboard.build(publish.children(c, parent)).rows]
    a = advise.publish(c, parent, [], order, io.StringIO())
    assert a.tags() == s.tags
