"""Cross-validation (``data.folds=k``): a configuration trained on each of ``k`` folds, its
fold outcomes made into the one outcome its run records, and that run read back.

Each fold is trained as a configuration of its own (its training rows, its scaler:
:func:`sweeper.data.load_folds`); the run of the configuration gets ``val_<metric>`` = the mean
over the folds, ``val_<metric>_std`` (their standard deviation, ``ddof=0`` as scikit-learn's
``std_test_score``) and ``val_<metric>_fold<i>`` (each fold's), ``test_<metric>`` = the mean of
the fold models' test scores and ``test_<metric>_fold<i>`` each fold model's, the mean loss
curves (``train_loss``, ``val_loss``; each fold's in ``curves.npz`` only, as
``val_loss_fold<i>``), and fold 0's weights and test predictions as its model: the logged
model, ``test_predictions.csv`` and the scaler they use are fold 0's
(:func:`sweeper.job.compute.scored_on`), and ``test_<metric>_fold0`` is what that model scores
on the test rows. One run per configuration rather than a parent with nested fold runs: a
sweep's runs are already children of the sweep's parent, and the MLflow UI shows nesting deeper
than one level flat (mlflow issue 4563), so fold runs would sit beside the configurations they
belong to; one run keeps one row per configuration, sortable by its fold mean.

This module is the one that knows what a fold is; the others ask it without naming one. The
one-job path asks :func:`train`, the batched launcher (which trains each fold as a member of a
group) :func:`outcome`, the job's record :func:`run_tags`, the plan :func:`mixed`; whatever reads a
run back asks :func:`of_run` (its ``k``), the leaderboard its :func:`columns`, :func:`row` and
:func:`legend`, a run's standing :func:`said`, the advisor its per-fold :func:`scores` and
their :data:`UNIT`, promotion :func:`summary` and :data:`OFF`, and the refit
(:mod:`sweeper.insight.refit`) :func:`refit_config`, :func:`refit_overrides` and
:func:`described`. Which rows a fold holds is
:mod:`sweeper.data`'s, and the key's rule :mod:`sweeper.contract.config`'s. It imports neither
:mod:`sweeper.data` nor the job's compute at its top: the report commands read runs through it,
and those two are ~60-260 ms of their start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from sweeper.base.fmt import finite

if TYPE_CHECKING:
    from sweeper import data
    from sweeper.job.compute import Outcome

__all__ = [
    "OFF",
    "REFIT_OVERRIDES",
    "UNIT",
    "columns",
    "combine",
    "described",
    "legend",
    "mixed",
    "of_run",
    "outcome",
    "refit_config",
    "refit_overrides",
    "row",
    "run_tags",
    "said",
    "scores",
    "summary",
    "train",
]

# the refit of a cross-validated configuration (GridSearchCV(refit=True)): every non-test row
# trains; the overrides it sets, and those of the cross-validated run it leaves out (or that say
# where it ran)
OFF = "data.folds=0"  # one validation split: the override that turns cross-validation off
REFIT_OVERRIDES = (OFF, "data.val_fraction=0")
_DROPPED = ("data.folds=", "data.val_fraction=", "hydra.", "resume=")

# a cross-validated run's tag, and a leaderboard row's column: its k
TAG = "folds"
KEY = "folds"  # the data node's key (data.folds)
# the unit of a cross-validated configuration's repeated scores, as the advice says it
UNIT = "folds"

# scores that are times: a configuration's is the sum over its folds (they train one after another,
# or each takes its share of a group); group_train_time_s is the group's, the same for every member
SUMMED = ("train_time_s", "warmup_time_s", "h2d_time_s")
KEPT = ("group_train_time_s",)


def scored(key: str) -> bool:
    """A quality metric (``val_mse``, ``test_accuracy``): averaged
    over folds; ``val_*`` also gets std and folds."""
    return key.startswith(("val_", "test_"))


def combine(outcomes: Sequence[Outcome]) -> Outcome:
    """The configuration's outcome from its folds' (in fold order). A fold that
    failed (diverged) fails the configuration, with that fold named in the reason."""
    first = outcomes[0]
    failed = next(((i, o) for i, o in enumerate(outcomes) if o.reason), None)
    scores: dict[str, float] = {}
    for key in SUMMED:
        if all(key in o.scores for o in outcomes):
            scores[key] = float(sum(o.scores[key] for o in outcomes))
    for key in KEPT:
        if key in first.scores:
            scores[key] = first.scores[key]
    epochs = [o.scores.get("epochs_run", 0) for o in outcomes]
    # counts stay integers: the longest fold's, and the folds' mean best epoch
    scores["epochs_run"] = max(epochs)
    scores["best_epoch"] = int(
        round(float(np.mean([o.scores.get("best_epoch", 0) for o in outcomes])))
    )
    train = scores.get("train_time_s", 0.0)
    scores["epochs_per_s"] = float(sum(epochs)) / train if train > 0 else 0.0
    curves, fold_curves = _curves(outcomes)
    if failed is not None:
        i, o = failed
        # type(first): the job's compute Outcome, not imported here (see the module's docstring)
        return type(first)(
            scores, curves, f"fold {i}: {o.reason}", fold_curves=fold_curves, error=o.error
        )
    for key in first.scores:
        if not scored(key) or not all(key in o.scores for o in outcomes):
            continue
        values = np.array([o.scores[key] for o in outcomes], dtype=np.float64)
        scores[key] = float(values.mean())
        if key.startswith("val_"):
            scores[f"{key}_std"] = float(values.std())
        # test_<metric>_fold0: what the run's model (fold 0's) scores on the test rows
        for i, v in enumerate(values):
            scores[f"{key}_fold{i}"] = float(v)
    return type(first)(
        scores,
        curves,
        None,
        first.params,
        first.test_pred,
        first.param_names,
        first.predict,
        fold_curves=fold_curves,
    )


def _curves(
    outcomes: Sequence[Outcome],
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The mean curves over the folds (on the steps every fold sampled: early
    stopping may end one sooner), and each fold's own (``<curve>_fold<i>``)."""
    mean, own = {}, {}
    for name in outcomes[0].curves:
        parts = [o.curves[name] for o in outcomes if name in o.curves]
        # the steps every fold sampled: the shortest fold's
        steps = min((s for s, _ in parts), key=len)
        n = len(steps)
        mean[name] = (
            steps,
            np.mean([np.asarray(v[:n], dtype=np.float64) for _, v in parts], axis=0),
        )
        for i, (s, v) in enumerate(parts):
            own[f"{name}_fold{i}"] = (s, v)
    return mean, own


def train(
    cfg: Any,
    backend: Any,
    train_one: Callable[[Any, data.Dataset, Any], Outcome],
    dataset: data.Dataset,
    load: Callable[[int], data.Dataset],
) -> Outcome:
    """The one-job path: ``train_one(cfg, dataset, backend)`` (the job's own compute half),
    or with ``data.folds=k`` each fold trained alone, one after another (``dataset`` is fold
    0's, ``load(i)`` gives fold ``i``), then :func:`combine`."""
    k = _k(cfg.data)
    if not k:
        return train_one(cfg, dataset, backend)
    datasets = [dataset, *(load(i) for i in range(1, k))]
    return combine([train_one(cfg, ds, backend) for ds in datasets])


def outcome(outcomes: Sequence[Outcome]) -> Outcome:
    """A configuration's outcome from its units' (the batched launcher's): its one split's, or
    its folds' :func:`combine`."""
    return combine(outcomes) if len(outcomes) > 1 else outcomes[0]


def run_tags(node: Any) -> dict[str, str]:
    """What a cross-validated run records of its folds (a ``data`` node with ``data.folds=k``):
    the tag ``folds`` = k, which says that its ``val_*`` are fold means; nothing otherwise."""
    k = _k(node)
    return {TAG: str(k)} if k else {}


def of_run(tags: Mapping[str, str]) -> int:
    """``k`` of a run cross-validated on ``k`` folds (its tag, :func:`run_tags`), else 0."""
    return int(tags.get(TAG) or 0)


def described(tags: Mapping[str, str]) -> str:
    """How a cross-validated run (its tags) was scored, as its refit's description says it."""
    return f"cross-validated on {of_run(tags)} folds"


def row(tags: Mapping[str, str], metrics: Mapping[str, Any], metric: str) -> dict[str, Any]:
    """What a leaderboard's row shows of a run's cross-validation (its tags and metrics;
    ``metric`` the board's, without ``val_``): its ``k`` (None for one split) and the std of its
    fold scores."""
    return {TAG: of_run(tags) or None, f"val_{metric}_fold_std": metrics.get(f"val_{metric}_std")}


def columns(rows: Sequence[Mapping[str, Any]], metric: str) -> list[str]:
    """The leaderboard's columns of cross-validated runs (:func:`row`) when one of ``rows`` is:
    the std of ``val_<metric>`` over a run's folds, and k; [] otherwise."""
    return [f"val_{metric}_fold_std", TAG] if any(r.get(TAG) for r in rows) else []


def legend(metric: str) -> str:
    """The leaderboard's line on what its :func:`columns` mean."""
    return (
        f"(folds: k-fold cross-validation (data.folds=k): val_{metric} is the mean over a run's k "
        f"folds, ranked by it; val_{metric}_fold_std their std; test_{metric} the fold models' "
        "mean)"
    )


def said(row: Mapping[str, Any], name: str) -> str | None:
    """What a run's standing says of its score ``name`` (``val_<metric>``) when its leaderboard
    ``row`` (:func:`row`) is cross-validated; None otherwise."""
    return f"{name} is the mean over its {row[TAG]} folds" if row.get(TAG) else None


def summary(run: Any, metric: str) -> dict[str, Any]:
    """A cross-validated MLflow ``run`` as a promotion pins it beside its refit: its id, k, and its
    fold mean and std of ``metric`` (``val_<metric>``)."""
    m = run.data.metrics
    return {
        "run_id": run.info.run_id,
        TAG: of_run(run.data.tags),
        metric: m[metric],
        f"{metric}_std": m.get(f"{metric}_std"),
    }


def scores(metrics: Mapping[str, Any], metric: str) -> list[float]:
    """A cross-validated run's ``metric`` of each fold, read back from its metrics
    (``<metric>_fold<i>``, as :func:`combine` records them) in fold order, up to the first one
    missing or not a finite number; [] with fewer than two (a run of one split)."""
    out: list[float] = []
    while (v := finite(metrics.get(f"{metric}_fold{len(out)}"))) is not None:
        out.append(v)
    return out if len(out) >= 2 else []


def mixed(jobs: list[tuple[list[str], dict[str, Any] | None]]) -> str | None:
    """Why the jobs (overrides, resolved config or None) cannot be one sweep, or None: those of
    one experiment must share ``data.folds``, since a run's ``val_<metric>`` is one split's score
    (0) or the mean of k folds' (k), and a leaderboard ranks them against each other."""
    by_experiment: dict[tuple[str, str], set[int]] = {}
    for _, cfg in jobs:
        if cfg is not None:
            where = (str(cfg["tracking"]["uri"]), str(cfg["tracking"]["experiment"]))
            by_experiment.setdefault(where, set()).add(int(cfg["data"].get(KEY) or 0))
    for (_, experiment), seen in by_experiment.items():
        if len(seen) > 1:
            values = ",".join(map(str, sorted(seen)))
            return (
                f"data.folds={values} is not allowed in one sweep of experiment {experiment}: "
                "expected one "
                "value; val_ metrics of one split (0) and of a k-fold mean (k) are no fair "
                "ranking against "
                "each other: sweep each value on its own (or into another tracking.experiment)"
            )
    return None


def refit_config(plain: dict[str, Any]) -> dict[str, Any]:
    """A cross-validated configuration's refit: every non-test row
    trains (no validation rows, no folds)."""
    return {**plain, "data": {**plain["data"], KEY: 0, "val_fraction": 0.0}, "resume": False}


def refit_overrides(overrides: str) -> list[str]:
    """The refit's overrides, from the cross-validated run's (its tag ``overrides``): those it
    keeps, then :data:`REFIT_OVERRIDES`."""
    return [*(o for o in overrides.split() if not o.startswith(_DROPPED)), *REFIT_OVERRIDES]


def _k(node: Any) -> int:
    """``data.folds`` of a ``data`` node (:func:`sweeper.data.folds_of`)."""
    # here, not at the top: sweeper.data is ~30-65 ms of the report commands' start (they read
    # runs through of_run); every caller of this function has it loaded already
    # lazy: saves ~88 ms at this module's import (measured)
    from sweeper import data

    return data.folds_of(node)
