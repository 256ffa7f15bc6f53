"""Findings from outside the grid's scores: the baselines fitted on the same rows (is the network worth it?) and the
devices a sweep could not use (their jobs SKIPPED: the next command leaves them out)."""
from __future__ import annotations

from typing import Any

from sweeper.base.fmt import cell
from sweeper.insight.advice.evidence import Finding, Sweep, _label

MISSING_DEVICE = ("device=gpu",)  # how a job SKIPPED for a missing device begins its reason (sweeper.base.backend)


def devices(argv: list[str], skipped: list[str]) -> list[Finding]:
    """A device whose jobs were all SKIPPED for want of it (``skipped``: "overrides: reason" lines of the parent):
    the next command leaves it out of the sweep's ``device=`` list."""
    missing = {}
    for line in skipped:
        _, _, reason = line.partition(": ")
        if reason.startswith(MISSING_DEVICE):
            missing.setdefault("gpu", reason)
    arg = next((a for a in argv if a.lstrip("+").startswith("device=")), None)
    if not missing or arg is None:
        return []
    tried = [v.strip() for v in arg.partition("=")[2].split(",")]
    left = [v for v in tried if v not in missing] or ["cpu"]
    gone = [v for v in tried if v in missing]
    if not gone:
        return []
    n = sum(1 for line in skipped if line.partition(": ")[2].startswith(MISSING_DEVICE))
    return [Finding("device", "a device this machine does not have",
                    f"{n} job(s) with device={','.join(gone)} were SKIPPED: {missing[gone[0]]}",
                    [f"the sweep's {arg}"], f"the next command runs device={','.join(left)} only",
                    ",".join(gone), set={"device": ",".join(left)})]


def reference(s: Sweep, baselines: dict[str, dict[str, float]]) -> list[Finding]:
    """Whether any configuration beats the linear reference beyond the noise, and whether gradient boosting beats
    every configuration beyond it (validation metric only; the test split is shown, never used)."""
    top = s.ranked()
    if not top or not baselines:
        return []
    a, na = s.mean(top[0])
    test = f"test_{s.metric[4:]}"
    tests = [r["metrics"].get(test) for r in s.configs[top[0]] if r["status"] == "FINISHED" and test in r["metrics"]]
    shown = f"{s.metric} {cell(a)} ({s.n_text(top[0])})" + (f", {test} {cell(sum(tests) / len(tests))}" if tests else "")
    found = []
    lin = baselines.get("linear", {}).get(s.metric)
    if lin is not None and not (s.better(a, lin) and not s.same(a, lin, na, 1)):
        how = "scores better than" if s.better(lin, a) and not s.same(a, lin, na, 1) else "ties with"
        found.append(Finding(
            "baseline", "the network does not beat the linear reference",
            f"no configuration beats the linear reference beyond the noise: it {how} the best ({_label(top[0])})",
            [f"linear reference (same split and rows): {s.metric} {cell(lin)}"
             + (f", {test} {cell(baselines['linear'][test])}" if test in baselines["linear"] else ""),
             f"best configuration: {shown}", s.noise_text],
            f"prefer {_linear(s)} unless a configuration beats it beyond the noise", "linear"))
    boost = baselines.get("boosting", {}).get(s.metric)
    if boost is not None and s.better(boost, a) and not s.same(a, boost, na, 1):
        found.append(Finding(
            "baseline", "a tree model fits this table better",
            f"a tree model fits this table better: HistGradientBoosting scores {s.metric} {cell(boost)} against the best "
            f"configuration's {cell(a)}, beyond the noise",
            [f"HistGradientBoosting (same split and rows, its defaults): {s.metric} {cell(boost)}"
             + (f", {test} {cell(baselines['boosting'][test])}" if test in baselines["boosting"] else ""),
             f"best configuration: {shown}", s.noise_text],
            "use gradient boosting for this table, or give the network what trees exploit (more data, features)",
            "boosting"))
    return found


def _linear(s: Sweep) -> str:
    """The linear model in the sweep's own terms, as its model offers one (sweeper's MLP: depth=0); else (a model of
    yours, a function trainer) the reference itself."""
    from sweeper.models.interface import offer

    path = next((p for r in s.records if (p := r["params"].get("model._target_"))), None)
    linear = offer({"_target_": path} if path else None, quiet=True).linear
    return f"the linear model ({', '.join(f'{k}={v}' for k, v in linear)})" if linear else "the linear reference"


def skipped_lines(tags: dict[str, Any]) -> list[str]:
    """A parent run's SKIPPED jobs, "overrides: reason" each (its ``skipped.<job>`` tags, else ``skipped_jobs``)."""
    lines = [v for k, v in tags.items() if k.startswith("skipped.")]
    return lines or [x for x in str(tags.get("skipped_jobs", "")).splitlines() if x]
