"""The refit of a cross-validated winner (sweeper/insight/refit.py): trained on every non-test row as a run of
its own, named, tagged and placed; the parent's best run pointed to it; a refit that fails or cannot be read said."""

from __future__ import annotations


def test_a_refit_trains_on_every_non_test_row_and_is_its_own_run(tmp_path, store):
    """The refit of a cross-validated run (insight.refit, as a sweep's end calls it): its training rows are all the
    non-test rows (diabetes: 442 rows, 88 test, so 354), none held out for validation, and its test rows the folds'."""
    import json

    from conftest import client_for, run_once
    from sweeper.insight import refit

    result = run_once(
        tmp_path,
        "data=diabetes",
        "data.folds=3",
        "epochs=60",
        "log_every=20",
        "lr=0.05",
        "tracking.log_model=false",
        "tracking.system_metrics=false",
        store=store,
    )
    c = client_for(store)
    cv = c.get_run(result["run_id"])
    cv_rows = {
        i.tags[0].value: json.loads(i.dataset.profile)["num_rows"] for i in cv.inputs.dataset_inputs
    }
    parent = c.create_run(
        cv.info.experiment_id, run_name="sweep", tags={"sweep_dir": str(tmp_path / "sweep")}
    )
    made = refit.refit(c, parent, cv)
    assert (
        made is not None
        and made.info.status == "FINISHED"
        and made.data.tags["refit_of"] == cv.info.run_id
    )
    assert made.data.params["data.val_fraction"] == "0.0" and "data.folds" not in made.data.params
    rows = {
        i.tags[0].value: json.loads(i.dataset.profile)["num_rows"]
        for i in made.inputs.dataset_inputs
    }
    assert rows["training"] == 442 - 88 and rows["test"] == 88 == cv_rows["test"]
    # made once: found again, not retrained
    assert refit.refit(c, parent, cv).info.run_id == made.info.run_id


def test_a_refit_is_named_tagged_placed_and_quiet_and_one_that_fails_or_cannot_be_read_is_said(
    tmp_path, store, caplog
):
    """refit.refit's run, checked on what it records: named ``refit <run>``, tagged with the run and the sweep it
    refits, its note, its folder (the parent's sweep_dir, else the run's job folder's parent, then refit/<run id>),
    the run's own overrides with the folds' replaced, the job's log lines silenced and the level put back; a refit
    that diverges tagged ``refit_failed_of`` and said; a configuration that cannot be read said, no refit."""
    import io
    import logging
    from types import SimpleNamespace as NS

    import yaml

    from pathlib import Path

    from conftest import client_for, run_once
    from sweeper.insight import refit

    result = run_once(tmp_path, "data=iris", "data.folds=2", "epochs=3", "log_every=1", store=store)
    c = client_for(store)
    cv = c.get_run(result["run_id"])
    job_dir = cv.data.tags["hydra.job_dir"]
    overrides = "lr=0.05 data.folds=2 hydra.job.num=3 data.val_fraction=0.1 width=8"

    def run(run_id, job_dir, **tags):
        tags = {"folds": "2", "overrides": overrides, "hydra.job_dir": job_dir} | tags
        tags = {k: v for k, v in tags.items() if v is not None}
        info = NS(run_id=run_id, run_name=f"name of {run_id}", experiment_id=cv.info.experiment_id)
        return NS(info=info, data=NS(tags=tags))

    def sweep(folder=None):
        return NS(info=NS(run_id="p1"), data=NS(tags={"sweep_dir": str(folder)} if folder else {}))

    sweeper_log = logging.getLogger("sweeper")
    with caplog.at_level(15, logger="sweeper"):
        caplog.clear()  # run_once's own job line, logged where an earlier test left the level at INFO
        # no job folder, or none holding its configuration: said, no refit
        assert refit.refit(c, sweep(), run("a", None)) is None
        assert refit.refit(c, sweep(), run("b", str(tmp_path))) is None
        assert [r.getMessage() for r in caplog.records if r.name == "sweeper"] == [
            "no refit of run a: its config_resolved.yaml is not in None",
            f"no refit of run b: its config_resolved.yaml is not in {tmp_path}",
        ]
        # diverged on all the rows: tagged as the failed refit of its run, said, None
        wild = tmp_path / "wild" / "job"
        wild.mkdir(parents=True)
        plain = yaml.safe_load((Path(job_dir) / "config_resolved.yaml").read_text())
        (wild / "config_resolved.yaml").write_text(yaml.safe_dump(plain | {"lr": 1e30}))
        caplog.clear()
        assert refit.refit(c, sweep(tmp_path / "wild"), run("c", str(wild))) is None
        [failed] = c.search_runs([cv.info.experiment_id], "tags.refit_failed_of = 'c'")
        assert failed.info.status == "FAILED" and "refit_of" not in failed.data.tags
        [said] = [r.getMessage() for r in caplog.records if r.name == "sweeper"]
        assert said.startswith("the refit of run c ended FAILED: diverged at epoch "), said
        assert sweeper_log.level == 15

        caplog.clear()
        made = refit.refit(c, sweep(tmp_path / "sw"), run("d", job_dir))
        assert sweeper_log.level == 15 and not [
            r for r in caplog.records if r.name == "sweeper"
        ]  # the refit's job said nothing
    tags = made.data.tags
    assert made.info.run_name == "refit name of d" and made.info.status == "FINISHED"
    assert (tags["refit_of"], tags["refit_sweep"]) == ("d", "p1")
    assert tags["overrides"] == "lr=0.05 width=8 data.folds=0 data.val_fraction=0"
    assert tags["hydra.job_dir"] == str((tmp_path / "sw" / "refit" / "d").resolve())
    assert tags["mlflow.note.content"] == (
        "Refit of run d (cross-validated on 2 folds, the best of sweep p1): trained on every non-test row "
        "(data.folds=0 data.val_fraction=0), scored on the test split; its val_* metrics are of its training rows."
    )
    # no sweep_dir: beside the run's job folder; no overrides tag: the refit's own only
    said = io.StringIO()  # for_parent: the same refit, said nothing when it works
    made = refit.for_parent(c, sweep(), run("e", job_dir, overrides=None), said)
    assert said.getvalue() == ""
    assert made.data.tags["hydra.job_dir"] == str((tmp_path / "refit" / "e").resolve())
    assert made.data.tags["overrides"] == "data.folds=0 data.val_fraction=0"


def test_the_parent_records_its_winners_refit_as_its_best_run_and_says_so(capsys):
    import io
    from types import SimpleNamespace as NS

    from sweeper.insight import refit
    from sweeper.job import crossval

    made = NS(
        info=NS(run_id="r2", run_name="refit lr=0.1", experiment_id="7"),
        data=NS(metrics={"test_accuracy": 0.93751, "val_accuracy": 1.0}),
    )
    best = {"run_id": "r1", "run": "lr=0.1"}
    said = io.StringIO()
    tags, metrics, note = refit.parent_record(best, made, "accuracy", "models:/m-9", said)
    assert tags == {
        "best_cv_run_id": "r1",
        "best_run_id": "r2",
        "best_run": "refit lr=0.1",
        "best_model_uri": "models:/m-9",
    }
    assert metrics == {"best_test_accuracy": 0.93751}
    assert note.startswith(
        "**Refit** on every non-test row: [refit lr=0.1](#/experiments/7/runs/r2?"
    )
    assert note.endswith(") test_accuracy=0.9375, model `models:/m-9`\n\n")
    assert capsys.readouterr().out == "" and said.getvalue() == (
        "refit: lr=0.1 retrained on every non-test row (train + validation, data.folds=0 "
        "data.val_fraction=0) and scored on the test split: test_accuracy=0.9375 (run r2); the "
        "parent's best_run and best_model_uri point to it\n"
    )
    made.data.metrics, made.info.run_name = {}, None  # no test split: no best_test_ metric
    tags, metrics, _ = refit.parent_record(best, made, "accuracy", "models:/m-9", said)
    assert metrics == {} and tags["best_run"] == ""
    plain = {"data": {"name": "iris", "folds": 5, "val_fraction": 0.2}, "lr": 0.1, "resume": True}
    assert crossval.refit_config(plain) == {
        "data": {"name": "iris", "folds": 0, "val_fraction": 0.0},
        "lr": 0.1,
        "resume": False,
    }
    assert plain["data"]["folds"] == 5  # the cross-validated run's config is left as it was


def test_a_refit_that_fails_is_said_in_one_line_and_leaves_the_parent_its_best_run():
    import io
    from types import SimpleNamespace as NS

    from sweeper.insight import refit

    said = io.StringIO()
    assert refit.for_parent(None, None, None, said) is None and said.getvalue() == ""  # no best
    broken = NS(info=NS(run_id="r1"))  # no data: reading its tags raises
    assert refit.for_parent(None, None, broken, said) is None
    assert said.getvalue() == (
        "sweeper: warning: no refit of run r1: AttributeError: "
        "'types.SimpleNamespace' object has no attribute 'data'\n"
    )
