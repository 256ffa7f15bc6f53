"""``python -m sweeper.promote --experiment NAME``: freeze the best
finished runs as ``conf/best/*.yaml``.

Runs are ranked by a validation metric — never a test one, since choosing on the test split leaks it
into the choice. With several seeds per configuration the configurations rank by their mean, and
the one promoted is the configuration's run closest to that mean (``pinned.over_seeds`` records
n, mean and std). Each written file re-runs its run with ``python -m sweeper +best=NAME`` and
pins the run's val_/test_ metrics, which ``pytest`` (tests/test_best.py) then guards.
"""

from __future__ import annotations

import math
import re
import shlex
import tempfile
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from omegaconf import OmegaConf

from sweeper import tracking
from sweeper.base.fmt import text_cell
from sweeper.base.tags import model_name
from sweeper.contract.config import (
    GROUPS,
    METADATA,
    NOT_FINGERPRINTED,
    TOP_LEVEL,
    ConfigError,
    check_overrides,
    validate,
)
from sweeper.contract.config import ADDED_DEFAULTS, DATA_ADDED_DEFAULTS
from sweeper.insight import pinned
from sweeper.job import crossval, metrics

__all__ = [
    "check_overrides",
    "not_allowed",
    "over_seeds",
    "promote",
    "PromoteError",
    "rerun_args",
]

# a config-group option Hydra's override parser takes as written
NAME = re.compile(r"[A-Za-z0-9_]+")
GROUP = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")  # a folder name it takes as a config group


class PromoteError(ValueError):
    """A request that cannot be served; the message is one line naming
    the option and what is allowed."""


@dataclass(frozen=True)
class Promoted:
    name: str
    path: Path
    run_id: str
    metric: str
    value: float
    knobs: str
    rerun: list[str]  # the arguments of python -m sweeper that re-run it
    # how the runs were narrowed to one model (said by the command), "" when they hold one
    among: str = ""


def rerun_args(out_dir: Path, name: str) -> list[str]:
    """The arguments of ``python -m sweeper`` that re-run ``out_dir/NAME.yaml``;
    PromoteError for a folder Hydra cannot be told to find.

    In conf/best the file is the option NAME of the group ``best``: ``+best=NAME``. Any
    other folder D becomes a group of its own: its parent joins Hydra's search path and
    D's name is the group, ``hydra.searchpath=[file://<D's parent>] +<D's name>=NAME``.
    A folder named like one of the project's groups (``best`` elsewhere, ``data``, ...)
    would merge with it, and the project's files win.
    """
    if out_dir.resolve() == pinned.BEST_DIR.resolve():
        return [f"+best={name}"]
    group = out_dir.resolve().name
    if not GROUP.fullmatch(group):
        raise not_allowed(
            "--out-dir",
            out_dir,
            f"python -m sweeper finds a promoted file as +FOLDER=NAME, and '{group}' "
            "cannot be a config group: expected conf/best or a folder named with letters, "
            "digits, _ and -",
        )
    if group in (*GROUPS, *TOP_LEVEL, *METADATA, "hydra"):
        raise not_allowed(
            "--out-dir",
            out_dir,
            f"a folder named {group} would merge with the project's own {group} "
            "(conf/), whose files win: expected conf/best or a folder of another name",
        )
    uri = f"file://{out_dir.resolve().parent.as_posix()}"  # not as_uri(): Hydra reads no %20
    if not re.fullmatch(r"[A-Za-z0-9_/.:-]+", uri):
        uri = '"' + uri.replace("\\", "\\\\").replace('"', '\\"') + '"'  # Hydra's quoted string
    return [f"hydra.searchpath=[{uri}]", f"+{group}={name}"]


def not_allowed(option: str, value: Any, why: str) -> PromoteError:
    return PromoteError(f"{option}={value} is not allowed: {why}")


def _finished(client: Any, experiment: str) -> tuple[list | None, list[str]]:
    """The store's reads: the experiment's finished runs (None where it has no such
    experiment), and then the experiments it has."""
    exp = client.get_experiment_by_name(experiment)
    if exp is None or exp.lifecycle_stage == "deleted":
        return None, sorted(e.name for e in client.search_experiments())
    return tracking.search(client, [exp.experiment_id], "attributes.status = 'FINISHED'"), []


def _candidates(
    found: list | None,
    names: list[str],
    uri: str,
    experiment: str,
    run_ids: Sequence[str],
    latest: bool,
) -> list:
    """The experiment's finished CPU job runs (a sweep's parent run
    has no fingerprint and no val_ metrics), of what :func:`_finished` read."""
    if found is None:
        raise not_allowed(
            "--experiment",
            experiment,
            f"no such experiment in {uri}: expected one of {', '.join(names) or '(none)'}",
        )
    # CPU only: the suite re-runs on the CPU, and a GPU run's float sums are
    # not the CPU's. A cross-validated sweep's refit (sweeper.insight.refit)
    # is not ranked: its val_* are of its training rows
    runs = [
        r
        for r in found
        if "fingerprint" in r.data.tags
        and r.data.params.get("device", "cpu") == "cpu"
        and "refit_of" not in r.data.tags
    ]
    if run_ids:
        unknown = sorted(set(run_ids) - {r.info.run_id for r in runs})
        if unknown:
            raise not_allowed(
                "--run-id", unknown[0], f"expected a finished CPU run of experiment {experiment}"
            )
        runs = [r for r in runs if r.info.run_id in run_ids]
    if not runs:
        raise not_allowed(
            "--experiment",
            experiment,
            "it has no finished CPU runs: expected an experiment with a finished sweep",
        )
    return [max(runs, key=lambda r: r.info.start_time)] if latest else runs


def _metric(runs: list, metric: str | None, experiment: str) -> str:
    """The ranking metric: the one asked for, which the runs must
    have, or the task's primary one."""
    have = sorted(
        {k for r in runs for k in r.data.metrics if k.startswith("val_") and pinned.direction(k)}
    )
    if metric is None:
        primary = {metrics.PRIMARY[metrics.task_of(r.data.metrics)][0] for r in runs}
        if len(primary) > 1:
            raise not_allowed(
                "--experiment",
                experiment,
                "it mixes regression and classification runs: pass --metric, one of "
                f"{', '.join(have)}",
            )
        metric = "val_" + primary.pop()
    if metric not in have:
        raise not_allowed(
            "--metric",
            metric,
            f"the finished runs of experiment {experiment} have no such validation metric: "
            f"expected one of {', '.join(have)}",
        )
    return metric


def _config(run: Any) -> tuple:
    """A run's configuration: its params but the seeds (``seed``,
    ``data.split_seed``), where and how it ran, and the keys added later at their
    defaults (so a run from before a key groups with one at its default)."""
    # lazy: saves ~18 ms at this module's import (measured)
    from sweeper.insight.leaderboard import SEEDS

    defaults = {
        **{k: str(v) for k, v in ADDED_DEFAULTS.items()},
        **{f"data.{k}": str(v) for k, v in DATA_ADDED_DEFAULTS.items()},
    }
    skip = (*NOT_FINGERPRINTED, "pinned.", "tracking.", "hydra")
    return tuple(
        sorted(
            (k, v)
            for k, v in run.data.params.items()
            if k not in SEEDS and not k.startswith(skip) and defaults.get(k) != v
        )
    )


def _ranked(runs: list, metric: str, top: int) -> list:
    """The ``top`` best configurations by the mean of ``metric`` over their seeds (``seed``,
    ``data.split_seed``), each as its run closest to that mean: a configuration, not a lucky
    seed, wins. Without seeds that is the best run of each configuration (fingerprint).

    Ties — common for accuracy on a small validation set — go to the lower validation loss
    (``val_log_loss``, binary tasks), then to the earlier run.
    """
    # lazy: saves ~20 ms at this module's import (measured)
    from sweeper.insight.leaderboard import group

    lower = pinned.direction(metric) == "lower"
    scored = [r for r in runs if math.isfinite(r.data.metrics.get(metric, math.nan))]
    scored.sort(
        key=lambda r: metrics.rank_key(
            r.data.metrics[metric], lower, r.data.metrics.get(metrics.TIE_BREAK), r.info.start_time
        )
    )
    unique, seen = [], set()
    for r in scored:  # one run a fingerprint (a re-run of a configuration computes the same)
        if r.data.tags["fingerprint"] not in seen:
            seen.add(r.data.tags["fingerprint"])
            unique.append(r)
    ranked = group(unique, _config, lambda r: r.data.metrics[metric], lower)
    return [g["items"][0] for g in ranked][:top]


def over_seeds(runs: list, run: Any, metric: str) -> dict[str, Any] | None:
    """The seeds of ``run``'s configuration among ``runs``:
    ``{n, mean, std}`` of ``metric``; None for one seed."""
    # lazy: saves ~6.5 ms at this module's import (measured)
    import statistics

    values = {
        r.data.tags["fingerprint"]: r.data.metrics[metric]
        for r in runs
        if _config(r) == _config(run) and math.isfinite(r.data.metrics.get(metric, math.nan))
    }
    v = list(values.values())
    if len(v) < 2:
        return None
    return {"n": len(v), "mean": statistics.fmean(v), "std": statistics.stdev(v)}


def _refit_of(client: Any, run: Any) -> Any:
    """The run to pin for a chosen ``run``: itself, or for a cross-validated one
    (tag ``folds``) its refit on every non-test row (:mod:`sweeper.insight.refit`:
    the one its sweep made, else trained now), so that the pin re-runs what the
    sweep's best_run is. Raises PromoteError when the refit cannot be made."""
    if not crossval.of_run(run.data.tags):
        return run
    # lazy: saves ~2.0 ms at this module's import (measured)
    from sweeper.insight import refit

    parent_id = run.data.tags.get("mlflow.parentRunId")
    try:  # the refit its sweep made, else one trained now (refit.refit looks for it first)
        done = (
            refit.refit(client, client.get_run(parent_id), run)
            if parent_id
            else refit.existing(client, run)
        )
    except Exception as e:  # noqa: BLE001  (its data, its store: said in one line)
        raise PromoteError(
            f"run {run.info.run_id} is cross-validated and its refit failed: "
            f"{tracking.first_line(e)}"
        ) from None
    if done is None:
        raise PromoteError(
            f"run {run.info.run_id} is cross-validated and has no refit on every non-test row "
            "(its sweep "
            "folder or config_resolved.yaml is gone, or the refit did not finish): promote its "
            f"configuration with {crossval.OFF}, or re-run its sweep"
        )
    return done


def _pinned(
    run: Any, name: str, experiment: str, metric: str, rank: int, rtol: float
) -> dict[str, Any]:
    tags, params, m = run.data.tags, run.data.params, run.data.metrics
    return {
        "name": name,
        "run_id": run.info.run_id,
        "experiment": experiment,
        "date": datetime.fromtimestamp(run.info.start_time / 1000, timezone.utc).isoformat(
            timespec="seconds"
        ),
        "promoted": date.today().isoformat(),
        "git_commit": tags.get("mlflow.source.git.commit"),
        "data": params.get("data.name"),
        "task": metrics.task_of(m),
        "metric": metric,
        "rank": rank,
        "fingerprint": tags["fingerprint"],
        "train_time_s": round(m.get("train_time_s", math.nan), 4),
        "expected": pinned.expected_metrics(m, rtol),
        # a model of yours: where its module imports from and its source's digest
        # (a re-run reaches it without PYTHONPATH; a changed source is said)
        **{k: tags[k] for k in ("model_dir", "model_source") if tags.get(k)},
    }


def _verify(text: str, name: str, out_dir: Path, run: Any, pins: dict[str, Any]) -> None:
    """Compose the file as its re-run command would (``+best=NAME``, or
    ``+GROUP=NAME`` with the search path of :func:`rerun_args`, through the
    command line's own checks) and check it reproduces the run's params exactly.

    Outside conf/best the file is tried in a folder beside
    ``out_dir``, so the search path has the same characters."""
    # lazy: saves ~68 ms at this module's import (measured)
    from hydra import compose, initialize_config_dir

    best = out_dir.resolve() == pinned.BEST_DIR.resolve()
    if not best:
        out_dir.resolve().parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=None if best else out_dir.resolve().parent) as tmp:
        folder = Path(tmp) / out_dir.resolve().name
        folder.mkdir()
        path = folder / f"{name}.yaml"
        path.write_text(text)
        if best:
            cfg = pinned.compose_file(path)
        else:
            args = rerun_args(folder, name)
            try:
                check_overrides(args)
                with initialize_config_dir(config_dir=str(pinned.CONF_DIR), version_base="1.3"):
                    cfg = compose(config_name="config", overrides=args)
            # (one that a Ctrl-C caused on its way through Hydra: the command says it is the
            # interruption, sweeper.promote.main)
            except Exception as e:
                raise PromoteError(
                    f"the re-run command for run {run.info.run_id} does not compose: "
                    f"{tracking.first_line(e)} (a bug in sweeper.promote)"
                ) from None
    plain = OmegaConf.to_container(cfg, resolve=True)
    try:
        validate(plain)
    except ConfigError as e:  # e.g. a data file that is not on this machine
        raise PromoteError(f"run {run.info.run_id} cannot be re-run here: {e}") from None
    flat = tracking.flatten(plain)
    keys = [
        k
        for k in run.data.params
        if (k in TOP_LEVEL and k not in NOT_FINGERPRINTED) or k.startswith("data.")
    ]
    differ = [k for k in keys if str(flat.get(k)) != run.data.params[k]]
    what = (
        f"{differ[0]}={flat.get(differ[0])} instead of {run.data.params[differ[0]]}"
        if differ
        else f"device={plain['device']}"
        if plain["device"] != "cpu"
        else "pinned: reads back differently"
        if plain.get("pinned") != pins
        else None
    )
    if what:
        raise PromoteError(
            f"the file written for run {run.info.run_id} would not re-run it: {what} (a bug in "
            "sweeper.promote)"
        )


def promote(
    experiment: str,
    uri: str = tracking.DEFAULT_URI,
    metric: str | None = None,
    top: int = 1,
    name: str | None = None,
    force: bool = False,
    out_dir: Path = pinned.BEST_DIR,
    rtol: float | None = None,
    run_ids: Sequence[str] = (),
    latest: bool = False,
    before_write: Any = None,
    model: str | None = None,
) -> list[Promoted]:
    """Write ``out_dir/NAME.yaml`` for the ``top`` best finished runs
    of ``experiment``; raise PromoteError.

    With ``top == 1`` the file is ``NAME.yaml``, else ``NAME_1.yaml`` … ``NAME_<top>.yaml`` by rank.
    ``name`` defaults to the experiment's name. ``run_ids`` or ``latest`` (the newest
    finished run only) narrow the candidates, e.g. to re-pin a config after an intended
    change. Nothing is written unless every file can be; ``before_write(best_run)`` (e.g.
    registering its model) runs after every check, before any file is written, and a
    PromoteError it raises leaves them unwritten. ``model``: rank the runs of this model
    only (its short name, ``mlp``, or its import path; ``all``: every model together); by
    default, when the runs trained several models, those of the best run's model.
    """
    name = _checked_name(experiment, top, rtol, name, out_dir, metric)
    client, runs = _open_candidates(uri, experiment, run_ids, latest)
    metric = _metric(runs, metric, experiment)
    runs, among = _one_model(runs, model, metric, experiment)
    best = _ranked(runs, metric, top)
    names = [name] if top == 1 else [f"{name}_{i}" for i in range(1, len(best) + 1)]
    taken = [n for n in names if (out_dir / f"{n}.yaml").exists()]
    if taken and not force:
        raise not_allowed(
            "--name",
            name,
            f"{out_dir / taken[0]}.yaml already exists: choose another --name "
            "or pass --force to re-pin it",
        )
    files = [
        _pin_file(client, runs, chosen, n, rank, experiment, metric, rtol, out_dir)
        for rank, (chosen, n) in enumerate(zip(best, names), start=1)
    ]
    if before_write is not None:
        before_write(files[0][0])
    out_dir.mkdir(parents=True, exist_ok=True)
    done = []
    for run, n, text, rerun, chosen in files:
        path = out_dir / f"{n}.yaml"
        path.write_text(text)
        p = run.data.params
        # a model of yours'
        own = [k for k in sorted(p) if k.startswith("model.") and k != "model._target_"]
        knobs = " ".join(
            f"{k}={text_cell(p[k])}"
            for k in (
                "data.name",
                "data.path",
                "lr",
                "epochs",
                "depth",
                "width",
                "activation",
                *own,
                "seed",
                "dtype",
            )
            if k in p
        )
        knobs = f"model={model_name(run.data.tags)} " + knobs.replace("data.name=", "data=")
        # the value is the chosen run's fold mean; the pinned run is its refit
        if run is not chosen:
            knobs += (
                f"  (the refit of cross-validated run {chosen.info.run_id}, whose "
                f"{crossval.of_run(chosen.data.tags)}-fold "
                f"mean this {metric} is)"
            )
        done.append(
            Promoted(
                n, path, run.info.run_id, metric, chosen.data.metrics[metric], knobs, rerun, among
            )
        )
    return done


def _one_model(runs: list, model: str | None, metric: str, experiment: str) -> tuple[list, str]:
    """The candidates of one model (``model``, else the best run's
    when they trained several; ``all``: every one), and how they were
    narrowed, in words ("" when there was nothing to narrow)."""
    models = sorted({model_name(r.data.tags) for r in runs})
    if model == "all":
        return runs, ""
    if model is not None:
        mine = [r for r in runs if model in (model_name(r.data.tags), r.data.tags.get("model"))]
        if not mine:
            raise not_allowed(
                "--model",
                model,
                f"no finished CPU run of experiment {experiment} trained it: expected one of "
                f"{', '.join(models)}, or all",
            )
        return mine, f"within model {model}" if len(models) > 1 else ""
    if len(models) == 1:
        return runs, ""
    chosen = model_name(_ranked(runs, metric, 1)[0].data.tags)
    others = ", ".join(m for m in models if m != chosen)
    return (
        [r for r in runs if model_name(r.data.tags) == chosen],
        f"within model {chosen}, the best run's (the experiment's runs trained {others} too: "
        "--model NAME ranks "
        "another's, --model all ranks them together)",
    )


def _checked_name(
    experiment: str, top: Any, rtol: Any, name: str | None, out_dir: Path, metric: str | None
) -> str:
    """The pins' name (the experiment's, made a config name, by default), every argument checked
    before the store is opened: one line naming the option, the value and what is allowed."""
    if not (isinstance(top, int) and top >= 1):
        raise not_allowed("--top", top, "expected an integer >= 1")
    if rtol is not None and not (isinstance(rtol, float) and 0 <= rtol < 1):
        raise not_allowed("--rtol", rtol, "expected a relative tolerance in [0, 1)")
    name = name if name is not None else re.sub(r"[^A-Za-z0-9_]+", "_", experiment)
    if not NAME.fullmatch(name):
        raise not_allowed("--name", name, "expected letters, digits and _ (it becomes +best=NAME)")
    # a folder python -m sweeper cannot be told to find is refused before anything
    rerun_args(out_dir, name)
    if metric is not None and metric.startswith("test_"):  # refused before the store is even opened
        raise not_allowed(
            "--metric",
            metric,
            "selecting on the test split leaks it into the choice: "
            "expected a validation metric (val_...)",
        )
    return name


def _open_candidates(
    uri: str, experiment: str, run_ids: Sequence[str], latest: bool
) -> tuple[Any, list]:
    """The store's client and the experiment's candidate runs; a store
    that is not there, or fails, is one line (check_readable's TrackingError: the
    command's, sweeper.promote.main)."""
    # MLflow would create an empty store at a mistyped path, or wait minutes for a server
    tracking.check_readable(uri)
    try:
        client = tracking.client(uri)
        found, names = _finished(client, experiment)
    # a server that is down, a file that is not a store, a database whose driver is not installed
    except tracking.failures(opening=True) as e:
        raise not_allowed("--tracking-uri", uri, tracking.first_line(e)) from None
    return client, _candidates(found, names, uri, experiment, run_ids, latest)


def _pin_file(
    client: Any,
    runs: list,
    chosen: Any,
    n: str,
    rank: int,
    experiment: str,
    metric: str,
    rtol: float | None,
    out_dir: Path,
) -> tuple[Any, str, str, list[str], Any]:
    """The pinned config of the ``rank``-th configuration (``chosen``;
    a cross-validated one as its refit), checked to re-run it: (the pinned run,
    the name, the file's text, the re-run's arguments, the chosen run)."""
    # a cross-validated configuration is pinned as its refit, as the sweep's best is
    run = _refit_of(client, chosen)
    tol = rtol if rtol is not None else pinned.DEFAULT_RTOL[run.data.params.get("dtype", "float64")]
    pins = _pinned(run, n, experiment, metric, rank, tol)
    if run is not chosen:
        pins["cross_validated"] = crossval.summary(chosen, metric)
    seeds = over_seeds(runs, chosen, metric)
    if seeds:  # the configuration won by its mean: say so beside the pinned run's own values
        pins["over_seeds"] = seeds
    rerun = rerun_args(out_dir, n)
    text = pinned.render(
        pinned.config_from_params(run.data.params),
        pins,
        shlex.join(["python", "-m", "sweeper", *rerun]),
        out_dir,
    )
    _verify(text, n, out_dir, run, pins)
    return run, n, text, rerun, chosen
