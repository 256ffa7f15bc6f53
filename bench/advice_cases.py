"""The per-slice checks of bench/advice_eval.py (issue 39): contradictions
of the advisor's per-slice rules, counted by code of its own;
constructed slice-structured cases (no training); the next commands against
their round's budget; the baselines' cost on the bundled data sets."""

from __future__ import annotations

import itertools
import shlex
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ABOUT = {"divergence": {"lr"}, "overfitting": {"epochs", "patience"}, "under_training": {"epochs"}}


def _points(command: str) -> dict[str, list[str]]:
    return {
        k: v.split(",") for k, _, v in (a.partition("=") for a in shlex.split(command)[3:]) if _
    }


def _slice_moved(s, key: str) -> str | None:
    """A slice along ``key`` in which the key moved the score, by
    a one-way ANOVA on that slice's own seeds at 5% (Bonferroni over
    the slices); None when every slice agrees (or none has seeds)."""
    from scipy import stats

    slices: dict[tuple, dict[str, list[float]]] = {}
    for c, values in s.scores.items():
        if values:
            other = tuple(kv for kv in c if kv[0] != key)
            slices.setdefault(other, {})[dict(c)[key]] = values
    tested = {o: v for o, v in slices.items() if len(v) > 1 and all(len(x) > 1 for x in v.values())}
    for o, by in tested.items():
        if (
            any(statistics.pstdev(x) == 0 for x in by.values())
            and len({round(statistics.fmean(x), 12) for x in by.values()}) == 1
        ):
            continue
        p = stats.f_oneway(*by.values()).pvalue
        if p < 0.05 / len(tested):
            return (
                f"{key} moved the score at {o} (one-way ANOVA p={p:.2g} < {0.05 / len(tested):.2g})"
            )
    return None


def _subjects(f) -> set[str]:
    return {*f.add, *f.drop, *(k for k in f.set if k not in ("seed", "device"))} | ABOUT.get(
        f.kind, set()
    )


def sliced_contradiction(s, advice, f, grid: str = "", skipped: tuple[str, ...] = ()) -> str | None:
    """Why the sweep's runs contradict finding ``f`` under
    the per-slice rules (None: they do not)."""
    top = s.ranked()[:2]
    if f.kind == "divergence":
        keep = [(tuple(kv for kv in c if kv[0] != "lr"), dict(c).get("lr")) for c in top]
        for v in f.drop.get("lr", []):
            if any(dict(c).get("lr") == v for c in s.configs if s.mean(c)):
                return f"lr={v} left out everywhere, but it finished somewhere"
        for where, values in f.drop_where:
            o = tuple(sorted(where.items()))
            if any(tuple(sorted(other)) == o and lr in values for other, lr in keep):
                return f"lr={values} left out at {where}: the chosen or runner-up configuration"
            if not any(
                r["status"] == "FAILED"
                and r["params"].get("lr") in values
                and all(r["params"].get(k) == v for k, v in where.items())
                for r in s.records
            ):
                return f"lr={values} left out at {where}, where nothing diverged"
    # "not measured: a, b": neither said to matter nor not to
    measured = f.tag.startswith("unmeasured:")
    if f.kind == "no_effect" and "@" not in f.tag and not measured and s.seeded:
        why = _slice_moved(s, f.tag)
        if why:
            return f"'{f.title}' but {why}"
    if f.kind == "no_effect":
        for key in (
            f.tag.removeprefix("unmeasured:").split(",") if measured else [f.tag.split("@")[0]]
        ):
            also = [
                g.kind
                for g in advice.findings
                if g is not f and g.kind != "no_effect" and key in _subjects(g)
            ]
            if also:
                return f"'{f.title}' beside a {also[0]} finding about {key}"
    if "seed" in f.set and any(g.kind == "saturation" for g in advice.findings):
        return "seeds added to configurations tied at the metric's edge"
    if (
        f.kind == "saturation"
        and advice.command
        and all(
            set(_points(c)) <= {"seed", "resume"} | set(s.keys)
            and _points(c).get("seed", []) != s.tried("seed")
            for c in advice.commands
        )
    ):
        return "a seeds-only command for ties at the edge"
    missing = any(line.partition(": ")[2].startswith("device=gpu") for line in skipped)
    if (
        missing
        and f is advice.findings[0]
        and any("gpu" in _points(c).get("device", []) for c in advice.commands)
    ):
        # said once a sweep, on its first finding
        return "the command keeps device=gpu, whose jobs were SKIPPED"
    if f.kind == "noise" and top and s.failed.get(top[0]):
        from scipy import stats

        for c in s.ranked()[1:]:
            if not s.failed.get(c) and len(s.scores[c]) > 1 and len(s.scores[top[0]]) > 1:
                if stats.ttest_ind(s.scores[top[0]], s.scores[c], equal_var=False).pvalue >= 0.05:
                    return (
                        f"{top[0]} (a FAILED seed) ranked ahead of the fully finished {c} "
                        "inside the noise"
                    )
    return None


DEFAULTS = {
    "lr": "0.01",
    "epochs": "200",
    "depth": "1",
    "width": "16",
    "seed": "0",
    "patience": "0",
    "log_every": "10",
    "optimizer": "gd",
    "device": "cpu",
}


def _rec(val=None, status="FINISHED", reason=None, metrics=None, **params):
    """A run record as :func:`sweeper.insight.advice.evidence.record`
    makes it (val: val_accuracy beside a log loss)."""
    given = {k: str(v) for k, v in params.items()}
    score = (
        {}
        if val is None
        else {("val_accuracy" if metrics and "val_log_loss" in metrics else "val_mse"): val}
    )
    return {
        "run": ",".join(f"{k}={v}" for k, v in given.items()),
        "run_id": str(sorted(given.items())),
        "status": status,
        "reason": reason,
        "params": DEFAULTS | given,
        "metrics": {"best_epoch": 190.0, "epochs_run": float((DEFAULTS | given)["epochs"])}
        | score
        | (metrics or {}),
    }


def _order(records, key="val_mse", lower=True):
    ok = [r for r in records if r["status"] == "FINISHED" and key in r["metrics"]]
    return sorted(ok, key=lambda r: r["metrics"][key] * (1 if lower else -1)) + [
        r for r in records if r not in ok
    ]


def _seeded(effects: dict[str, float], noisy: dict[str, float]) -> list[dict]:
    import numpy as np

    rng, out = np.random.default_rng(0), []
    for opt in effects:
        for width in ("16", "64"):
            z = rng.standard_normal(4)
            z = (z - z.mean()) / z.std(ddof=1)
            out += [
                _rec(
                    33.1 + effects[opt] * (width == "64") + noisy[opt] * z[i],
                    optimizer=opt,
                    width=width,
                    seed=i,
                )
                for i in range(4)
            ]
    return _order(out)


def cases() -> dict[str, tuple[list[dict], list[str], dict]]:
    """Slice-structured sweeps, one for each rule of issue 39: name →
    (records best first, argv, advise kwargs)."""
    div = []
    for opt, width, lr in itertools.product(("gd", "adam"), ("16", "64"), ("0.01", "0.1", "0.3")):
        if (opt, width, lr) == ("gd", "64", "0.3"):
            div.append(
                _rec(
                    status="FAILED",
                    reason="diverged at epoch 12",
                    optimizer=opt,
                    width=width,
                    lr=lr,
                )
            )
        else:
            div.append(
                _rec(
                    3000 - 1000 * float(lr) * (opt == "adam") - 10 * (width == "16"),
                    optimizer=opt,
                    width=width,
                    lr=lr,
                )
            )
    failed = [_rec(v, lr="0.1", seed=i) for i, v in enumerate((100.0, 101.0, 99.0))]
    failed += [_rec(status="FAILED", reason="diverged at epoch 40", lr="0.1", seed=3)]
    failed += [_rec(v, lr="0.01", seed=i) for i, v in enumerate((101.0, 100.5, 102.0, 101.5))]
    sat = [
        _rec(1.0, metrics={"val_log_loss": 0.01 * (w + i)}, width=w, seed=i)
        for w in (4, 8, 16)
        for i in (0, 1)
    ]
    over = _order([_rec(3000, epochs=200), _rec(3000.5, epochs=400)])
    bump = [(e * 10, 1.0 - 0.002 * e if e < 20 else 0.96 + 0.004 * (e - 20)) for e in range(41)]
    curves = {
        r["run_id"]: {"val_loss": bump, "train_loss": [(e * 10, 1.0 - 0.01 * e) for e in range(41)]}
        for r in over
    }
    gpu = [f"lr={lr} device=gpu: device=gpu: CuPy found no CUDA device" for lr in ("0.001", "0.01")]
    return {
        "divergence_in_one_slice": (
            _order(div),
            ["optimizer=gd,adam", "width=16,64", "lr=0.01,0.1,0.3"],
            {},
        ),
        "noisy_slices_elsewhere": (
            _seeded(
                {"gd": 8.1, "adam": 0.0, "momentum": 0.0},
                {"gd": 2.0, "adam": 17.0, "momentum": 17.0},
            ),
            ["optimizer=gd,adam,momentum", "width=16,64", "seed=0,1,2,3"],
            {},
        ),
        "matters_in_two_of_three": (
            _seeded(
                {"gd": 8.1, "adam": 9.0, "momentum": 0.0}, {"gd": 2.0, "adam": 2.0, "momentum": 2.0}
            ),
            ["optimizer=gd,adam,momentum", "width=16,64", "seed=0,1,2,3"],
            {},
        ),
        "epochs_and_overfitting": (over, ["epochs=200,400"], {"curves": curves}),
        "saturated": (_order(sat, "val_accuracy", lower=False), ["width=4,8,16", "seed=0,1"], {}),
        "skipped_gpu": (
            _order([_rec(3000, lr=0.001), _rec(2000, lr=0.01)]),
            ["lr=0.001,0.01", "device=cpu,gpu"],
            {"skipped": gpu},
        ),
        "diverged_seed": (_order(failed), ["lr=0.01,0.1", "seed=0,1,2,3"], {}),
    }


def constructed() -> None:
    """Run the advisor on :func:`cases` and print each case's
    findings, contradictions and command."""
    from tabulate import tabulate

    from sweeper.insight.advice.advisor import advise
    from sweeper.insight.advice.evidence import Sweep

    rows, per_kind, rounds = [], {}, []
    for name, (records, argv, kw) in cases().items():
        advice = advise(records, argv, **kw)
        s = Sweep(records, kw.get("curves"))
        bad = []
        for f in advice.findings:
            why = sliced_contradiction(s, advice, f, skipped=tuple(kw.get("skipped", ())))
            k = per_kind.setdefault(f.kind, [0, 0])
            k[0] += 1
            if why:
                k[1] += 1
                bad.append(f"{f.kind}: {why}")
        rounds.append((name, advice, s))
        rows.append(
            [
                name,
                ",".join(f.kind for f in advice.findings),
                len(bad),
                f"{len(advice.commands)} command(s)"
                if advice.command
                else "none: " + advice.note[:60],
            ]
        )
        for b in bad:
            print(f"  CONTRADICTED [{name}] {b}")
    print("\nconstructed slice-structured cases (issue 39; no training):")
    print(
        tabulate(
            rows,
            headers=["case", "findings", "contradicted", "next command"],
            disable_numparse=True,
        )
    )
    print(
        tabulate(
            [[k, v[0], v[1]] for k, v in sorted(per_kind.items())],
            headers=["finding", "found (constructed)", "contradicted"],
            disable_numparse=True,
        )
    )
    print("\n" + budgets(rounds))


def budgets(rounds: list) -> str:
    """Each next command's new runs against its round's budget, and
    the share of printed commands that train nothing."""
    from tabulate import tabulate

    rows, empty, printed = [], 0, 0
    for name, advice, s in rounds:
        total, done = advice.sizes
        if advice.command:
            printed += 1
            empty += (total - done) == 0
        rows.append(
            [
                name,
                s.trained,
                advice.budget or "-",
                (total - done) if advice.command else "-",
                len(advice.commands),
                "yes"
                if advice.command and total - done <= advice.budget
                else ("-" if not advice.command else "NO"),
            ]
        )
    share = f"{empty}/{printed}" if printed else "0/0"
    return (
        tabulate(
            rows,
            headers=[
                "case",
                "trained this round",
                "budget",
                "to train",
                "commands",
                "within budget",
            ],
            disable_numparse=True,
        )
        + f"\nprinted next commands that train nothing: {share}; cases with no command (the grid "
        "answers its "
        f"question, or findings only): {sum(1 for _, a, _ in rounds if not a.command)}/"
        f"{len(rounds)}"
    )


def baseline_costs() -> str:
    """The baselines' fit time (one thread, the import excluded and measured apart) on
    every bundled data set: the linear reference, boosting tuned as the sweep fits it
    (its grid, early stopping on the validation rows) and boosting at scikit-learn's
    defaults (what the sweep fitted before issue 54), with each one's validation
    score; and whether ``baselines=auto`` fits boosting there (its cell bound)."""
    from omegaconf import OmegaConf
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from tabulate import tabulate

    import sweeper.contract.config  # noqa: F401  (registers ${sweeper_root:})
    from sweeper import data
    from sweeper.contract import choices
    from sweeper.insight import baselines

    t = time.perf_counter()
    import sklearn.ensemble  # noqa: F401
    import sklearn.linear_model  # noqa: F401

    imported = time.perf_counter() - t

    def defaults(ds):
        regression = ds.task == "regression"
        kind = HistGradientBoostingRegressor if regression else HistGradientBoostingClassifier
        model = kind(random_state=0).fit(
            ds.X_train, ds.y_train.ravel() if regression else ds.y_train.ravel().astype(int)
        )
        predict = (
            (lambda A: ds.to_original(model.predict(A).reshape(-1, 1)))
            if regression
            else (lambda A: baselines._proba(ds.task, model, A))
        )
        return baselines._scores(ds, predict), ""

    rows = []
    for yaml in sorted((ROOT / "conf" / "data").glob("*.yaml")):
        node = OmegaConf.to_container(choices.option("data", yaml.stem), resolve=True)
        try:
            ds = data.load_plain(node)
        except Exception as e:  # a user-file loader (csv, text) without a file
            rows.append([yaml.stem, "-", f"n/a ({str(e).splitlines()[0][:50]})", "", ""])
            continue
        primary = "val_mse" if ds.task == "regression" else "val_accuracy"
        cells = [
            yaml.stem,
            f"{ds.X_train.shape[0]}×{ds.X_train.shape[1]}",
            f"{baselines.cells(ds):,}",
            "no" if baselines.too_big(ds) else "yes",
        ]
        for fit in (baselines.linear, baselines.boosting, defaults):
            t = time.perf_counter()
            try:
                with baselines._one_thread():
                    metrics, _ = fit(ds)
                cells.append(f"{time.perf_counter() - t:.3f} s ({metrics[primary]:.4g})")
            except Exception as e:
                cells.append(f"n/a ({str(e).splitlines()[0][:40]})")
        cells.append(primary)
        rows.append(cells)
    return (
        f"baselines' cost per data set (one thread; scikit-learn's import, once: {imported:.2f} "
        "s), each with its "
        "validation score:\n"
        + tabulate(
            rows,
            headers=[
                "data",
                "train rows×features",
                "cells",
                "auto fits boosting",
                "linear",
                "boosting (tuned)",
                "boosting (defaults)",
                "scored by",
            ],
            disable_numparse=True,
        )
    )
