"""The findings read from validation curves: overfitting of any of the top configurations (where
its validation loss bottomed out, and the patience that keeps that epoch), and under-training of
the chosen one — never when the grid holds a longer run of the same trajectory (the same
configuration but ``epochs``) that did no better. A full-batch run's curve is evidence for every
epoch count below its own: ``epochs=800`` is a prefix of ``epochs=5000``."""

from __future__ import annotations

from typing import Any

from sweeper.base.fmt import cell
from sweeper.insight.advice.evidence import (
    FLOOR,
    Finding,
    LATE,
    OVERFIT_AT,
    RISE,
    STILL_FALLING,
    TOP,
    Sweep,
    _label,
    _nice_int,
    _pct,
    extend,
    nice,
)


__all__ = ["at_best_epoch", "overfitting", "rising_loss", "under_training"]

PATIENT_SAMPLES = 4


def _at(curve: list[tuple[int, float]], step: float) -> tuple[int, float]:
    """The sample of ``curve`` nearest ``step``."""
    return min(curve, key=lambda p: abs(p[0] - step))


def _stopped(s: Sweep, r: dict[str, Any]) -> bool:
    """Whether early stopping ended the run (it then kept its best weights: nothing to report)."""
    epochs, patience, run = (
        s.param(r, "epochs"),
        s.param(r, "patience"),
        r["metrics"].get("epochs_run"),
    )
    return bool(patience) and run is not None and run < epochs


def trajectory(s: Sweep, r: dict[str, Any]) -> tuple:
    """The configuration of ``r`` but its epoch count (and patience):
    runs that follow one trajectory."""
    return tuple(kv for kv in s.config(r) if kv[0] not in ("epochs", "patience"))


def longer(s: Sweep, r: dict[str, Any]) -> list[tuple[tuple, float]]:
    """Configurations of ``r``'s trajectory with more epochs than it,
    that finished: (config, mean score)."""
    out = []
    for c in s.configs:
        m, lead = s.mean(c), s.lead(c)
        if (
            m
            and lead is not None
            and trajectory(s, lead) == trajectory(s, r)
            and s.param(lead, "epochs") > s.param(r, "epochs")
        ):
            out.append((c, m[0]))
    return out


def overfit(s: Sweep, r: dict[str, Any]) -> tuple[int, float, int, float] | None:
    """(epoch of the validation minimum, that minimum, last epoch, last value) when
    the run's validation loss bottomed out in the first OVERFIT_AT of the run and
    then rose by more than RISE and above the loss's floor, while its training loss
    did not rise (a training loss that rose is another story: :func:`rising`)."""
    val = s.curve(r)
    if len(val) < 3 or _stopped(s, r):
        return None
    min_step, v_min = min(val, key=lambda p: p[1])
    last_step, v_last = val[-1]
    if (
        min_step <= OVERFIT_AT * last_step
        and v_last > v_min * (1 + RISE)
        and v_last - v_min > FLOOR
    ):
        train = s.curve(r, "train_loss")
        if train and _risen(_at(train, min_step)[1], train[-1][1]):
            return None
        return min_step, v_min, last_step, v_last
    return None


def _risen(before: float, after: float) -> bool:
    return after > before * (1 + RISE) and after - before > FLOOR


def plain_descent(s: Sweep, r: dict[str, Any]) -> bool:
    """Whether sweeper's loop trained ``r`` by plain full-batch gradient descent
    (optimizer=gd, batch_size=0, no weight decay): its training loss then falls
    at every step when the step is small enough and the gradient right."""
    return (
        r["params"].get("optimizer", "gd") == "gd"
        and not s.param(r, "batch_size")
        and not s.param(r, "weight_decay")
        and r.get("model_kind") != "function trainer"
    )


def rising(s: Sweep, r: dict[str, Any]) -> tuple[int, float, int, float] | None:
    """(epoch of the training loss's minimum, that minimum, last epoch, last
    value) when a run of plain full-batch gradient descent (:func:`plain_descent`)
    ended with its training loss more than RISE above its minimum."""
    train = s.curve(r, "train_loss")
    if len(train) < 3 or not plain_descent(s, r):
        return None
    min_step, t_min = min(train, key=lambda p: p[1])
    last_step, t_last = train[-1]
    return (
        (min_step, t_min, last_step, t_last)
        if min_step < last_step and _risen(t_min, t_last)
        else None
    )


def rising_loss(s: Sweep) -> list[Finding]:
    """Top configurations whose training loss rose under plain full-batch
    gradient descent: the step is too large or the gradient is wrong (never
    overfitting, which is a falling training loss under a rising validation loss)."""
    hits = [
        (c, r, o) for c in s.ranked()[:TOP] if (r := s.lead(c)) is not None and (o := rising(s, r))
    ]
    if not hits:
        return []
    c, r, (step, t_min, last, t_last) = hits[0]
    evidence = [
        f"#{s.ranked().index(c2) + 1} {_label(c2)} ({r2['run']}): train_loss {cell(tm)} at epoch "
        f"{st} (its "
        f"minimum) → {cell(tl)} at epoch {la} ({_pct(tl / tm - 1)})"
        for c2, r2, (st, tm, la, tl) in hits
    ]
    evidence.append(
        "plain gradient descent on the full batch (optimizer=gd, batch_size=0, no weight decay) "
        "lowers the "
        "training loss at every step when the step is small enough and the gradient right: a "
        "rise is "
        "neither overfitting nor noise"
    )
    check = _check_command(r)
    wrong = r.get("gradient_check") == "failed"
    if check:
        said = (
            "its gradient check FAILED (it trained under model.check=false)"
            if wrong
            else "check it"
        )
        evidence.append(f"the gradient is the model's own backward: {said}: {check}")
    why = "the step is too large or the gradient is wrong"
    summary = (
        f"{_label(c)} ({r['run']}): its training loss rose under full-batch gradient descent, "
        f"from epoch {step} to "
        f"{last}: "
        + ("the gradient is wrong (its check failed)" if wrong and check else why)
        + (
            f"; {len(hits) - 1} more of the top {TOP} configurations did the same"
            if len(hits) > 1
            else ""
        )
    )
    if wrong and check:  # a smaller step cannot mend a wrong gradient
        return [
            Finding(
                "rising_loss",
                "training loss rising",
                summary,
                evidence,
                f"fix the model's backward pass ({check} names the parameter), then sweep again",
                f"train_rise={step}/{last}",
            )
        ]
    lr = s.param(r, "lr")
    # one lr: half the run's; a swept lr: extended below the grid's smallest
    lower = [f"{nice(lr / 2):g}"]
    if "lr" in s.keys:
        lower = extend("lr", s.tried("lr"), up=False)[0] or lower
    step_text = f"a smaller step: lr={','.join(lower)}" + (
        f"; and check the gradient: {check}" if check else ""
    )
    return [
        Finding(
            "rising_loss",
            "training loss rising",
            summary,
            evidence,
            step_text,
            f"train_rise={step}/{last}",
            **({"add": {"lr": lower}} if "lr" in s.keys else {"set": {"lr": ",".join(lower)}}),
        )
    ]


def _check_command(r: dict[str, Any]) -> str | None:
    """The command that checks the gradients of a run's model of yours
    (None: sweeper's MLP, or a function trainer)."""
    path = r["params"].get("model._target_")
    if not path or r.get("model_kind") == "function trainer":
        return None
    # lazy: saves ~128 ms at this module's import (measured)
    from sweeper.contract.model import check_command

    kwargs = {
        k.removeprefix("model."): v
        for k, v in r["params"].items()
        if k.startswith("model.") and k != "model._target_"
    }
    return check_command(path, kwargs)


def overfitting(s: Sweep) -> list[Finding]:
    """Top configurations whose validation loss bottomed out well
    before their last epoch and rose."""
    hits = [
        (c, r, o) for c in s.ranked()[:TOP] if (r := s.lead(c)) is not None and (o := overfit(s, r))
    ]
    if not hits:
        return []
    c, r, (step, v_min, last, v_last) = hits[0]
    # a quarter of the best epoch, and at least PATIENT_SAMPLES loss samples: one bad sample
    # early in training (a transient at a large lr) must not stop a run at its initial weights
    p = max(_nice_int(step / 4), PATIENT_SAMPLES * int(s.param(r, "log_every", 1)))
    stop = _nice_int(step) if _nice_int(step) >= 0.8 * step else step
    evidence = []
    for c2, r2, (st, vm, la, vl) in hits:
        rank = s.ranked().index(c2) + 1
        evidence.append(
            f"#{rank} {_label(c2)} ({r2['run']}): val_loss {cell(vm)} at epoch {st} (its "
            "minimum) → "
            f"{cell(vl)} at epoch {la} ({_pct(vl / vm - 1)})"
        )
    first = s.ranked()[0]
    if c != first and (lead := s.lead(first)) is not None and s.curve(lead):
        v_best = min(v for _, v in s.curve(lead))
        how = (
            "as good as"
            if abs(v_min - v_best) <= s.rel_noise() * max(abs(v_min), abs(v_best))
            else "better than"
            if v_min < v_best
            else "worse than"
        )
        evidence.insert(
            1,
            f"at its best epoch {_label(c)} ({cell(v_min)}) is {how} the chosen {_label(first)} "
            "at its own "
            f"({cell(v_best)})"
            + (
                ""
                if how == "worse than"
                else ": the difference between them at the last epoch is one of training length"
            ),
        )
    train = s.curve(r, "train_loss")
    if train:
        (t0, tv0), (t1, tv1) = _at(train, step), train[-1]
        evidence.append(
            f"train_loss of {r['run']}: {cell(tv0)} at epoch {t0} → {cell(tv1)} at epoch {t1} "
            f"({_pct(tv1 / tv0 - 1) if tv0 else 'n/a'}): "
            + ("still falling: it fits the training rows" if tv1 < tv0 else "not falling")
        )
    evidence.append(
        f"{s.metric} is of the last epoch's weights (patience={int(s.param(r, 'patience'))}); "
        "early stopping keeps the best epoch's"
    )
    total = int(r["metrics"].get("epochs_run") or last)
    where = f"epoch {step} of {total}"
    return [
        Finding(
            "overfitting",
            "overfitting",
            f"{_label(c)} ({r['run']}) was best at {where}: its validation loss bottomed out "
            "there and then rose"
            + (
                f"; {len(hits) - 1} more of the top {TOP} configurations did the same"
                if len(hits) > 1
                else ""
            ),
            evidence,
            f"stop early: patience={p} (keeps the best weights), or epochs≈{stop} for {_label(c)}",
            f"best_epoch={step}/{total}",
            set={"patience": str(p)},
        )
    ]


def under_training(s: Sweep) -> list[Finding]:
    """The chosen run was still improving at its last epoch — unless a longer
    run of its trajectory is in the grid (it did no better: the chosen is the
    best), or the loss is at its floor, or the fall is within the noise."""
    b = s.best
    val = s.curve(b)
    if b is None or len(val) < 3 or _stopped(s, b) or overfit(s, b) or rising(s, b):
        return []
    if not s.lower and s.mean(s.config(b))[0] >= 1 - 1e-12:
        # the chosen configuration is at the metric's ceiling: more epochs cannot raise it
        return []
    best_epoch, run = b["metrics"].get("best_epoch"), b["metrics"].get("epochs_run")
    epochs = s.param(b, "epochs")
    if best_epoch is None or run is None:
        return []
    best_epoch, run = int(best_epoch), int(run)
    last_step, v_last = val[-1]
    ref_step, v_ref = _at(val, last_step - 0.25 * run)
    fell = (v_ref - v_last) / v_ref if v_ref else 0.0
    if not (
        best_epoch >= LATE * last_step
        and run >= epochs
        and fell > max(STILL_FALLING, s.rel_noise())
        and v_ref - v_last > FLOOR
    ):
        return []
    if longer(s, b):
        # the grid tried this trajectory longer: it was not better (the chosen run is the best)
        return []
    if "epochs" in s.keys:  # twice the grid's largest
        more = str(2 * int(max(float(v) for v in s.tried("epochs"))))
        change: dict[str, Any] = {"add": {"epochs": [more]}}
    else:
        more = str(2 * int(epochs))
        change = {"set": {"epochs": more}}
    return [
        Finding(
            "under_training",
            "under-training",
            f"the chosen run ({b['run']}) was still improving when it stopped: its best epoch is "
            f"its last ({best_epoch} of {run})",
            [
                f"val_loss still falling: {cell(v_ref)} at epoch {ref_step} → {cell(v_last)} at "
                f"epoch {last_step} ({_pct(-fell)}), "
                f"more than the noise ({s.rel_noise():.1%})",
                f"no longer run of {_label(trajectory(s, b))} is in the grid",
            ],
            f"train longer: epochs={more}"
            + (" (added to the epochs grid)" if "epochs" in s.keys else ""),
            f"epochs_run={run}",
            **change,
        )
    ]


def at_best_epoch(s: Sweep, better: tuple, worse: tuple) -> bool | None:
    """Whether configuration ``better`` still beats ``worse`` when each is
    read at its best epoch (the minimum of its validation curve, which early
    stopping would keep), beyond the noise; None without both curves."""
    a, b = s.curve(s.lead(better)), s.curve(s.lead(worse))
    if not a or not b:
        return None
    ma, mb = min(v for _, v in a), min(v for _, v in b)
    if max(ma, mb) < FLOOR:
        return False
    return mb - ma > s.rel_noise() * max(abs(ma), abs(mb))
