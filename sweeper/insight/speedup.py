"""GPU-over-CPU speedup: pair runs by fingerprint (the config without
``device``) and compare their times.

``speedup`` = median CPU ``train_time_s`` / GPU ``train_time_s`` of the same
fingerprint; ``speedup_wall`` does the same with ``wall_time_s`` (which includes data
loading, transfers and tracking). The GPU run gets both; each CPU run of a pair gets
1.0, the reference. Runs pair only with runs trained the same way: a batched group's
members (whose times are the group's per member) with members of groups of the same
size (``batch_size``), a configuration trained alone with one trained alone.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import median
from typing import Any, Iterable, Mapping

from sweeper import tracking


__all__ = ["log", "pair"]


def pair(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Speedups by run id, from rows of finished runs with ``run_id``, ``device``, ``fingerprint``,
    ``train_time_s``, ``wall_time_s`` and (batched runs) ``batch_size``. Runs without a
    partner on the other device get nothing."""
    groups: dict[str, dict[str, list[Mapping[str, Any]]]] = defaultdict(
        lambda: {"cpu": [], "gpu": []}
    )
    for r in rows:
        if r.get("device") in ("cpu", "gpu") and r.get("train_time_s") and r.get("wall_time_s"):
            groups[f"{r['fingerprint']}/{int(r.get('batch_size') or 1)}"][r["device"]].append(r)
    out: dict[str, dict[str, float]] = {}
    for runs in groups.values():
        if not runs["cpu"] or not runs["gpu"]:
            continue
        cpu_train = median(r["train_time_s"] for r in runs["cpu"])
        cpu_wall = median(r["wall_time_s"] for r in runs["cpu"])
        for r in runs["gpu"]:
            out[r["run_id"]] = {
                "speedup": cpu_train / r["train_time_s"],
                "speedup_wall": cpu_wall / r["wall_time_s"],
            }
        for r in runs["cpu"]:
            out[r["run_id"]] = {"speedup": 1.0, "speedup_wall": 1.0}
    return out


def log(uri: str, speedups: Mapping[str, Mapping[str, float]]) -> None:
    """Log each run's speedups as metrics (MLflow accepts metrics on a finished run)."""
    if not speedups:
        return
    c = tracking.client(uri)
    for run_id, values in speedups.items():
        tracking.log_metrics(c, run_id, values)
