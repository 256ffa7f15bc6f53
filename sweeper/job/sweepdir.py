"""What a job reads from its sweep's folder: ``sweep.json`` (the parent run(s), the job
count, the swept keys, written by the launching process: :func:`sweeper.sweep.life.start`)
and the jobs' ``result.json``; a job's one-line outcome."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from sweeper.base.fmt import cell, label
from sweeper.base.tags import PRUNED_AT
from sweeper.base.files import RESULT_FILE, SWEEP_FILE
from sweeper.base.output import masked
from sweeper.base.state import current
from sweeper.job import metrics


__all__ = [
    "folder_lost",
    "job_count",
    "job_line",
    "job_tags",
    "parent_run_id",
    "read_result",
    "results",
    "sweep_state",
    "SweepFileError",
    "swept",
]


def sweep_state(sweep_dir: Path) -> dict[str, Any]:
    """The sweep's sweep.json; read once per version of the file (each job consults it
    several times). In the launching process, what it wrote when the file is gone (the
    sweep folder deleted while the sweep runs): its jobs keep their parent run."""
    path = sweep_dir / SWEEP_FILE
    if path.is_file():
        return _read_state(path, path.stat().st_mtime_ns)

    return current().sweep_files.get(Path(sweep_dir).absolute()) or {"parents": [], "n_jobs": 0}


def folder_lost(sweep_dir: Path) -> bool:
    """Whether this process wrote the sweep's sweep.json and it is
    gone now (the folder deleted under the sweep)."""

    return (
        Path(sweep_dir).absolute() in current().sweep_files
        and not (sweep_dir / SWEEP_FILE).is_file()
    )


class SweepFileError(ValueError):
    """A sweep.json or result.json that cannot be read as the sweep
    wrote it; one line naming the file."""


def read_json(path: Path, keys: Mapping[str, type | tuple[type, ...]]) -> dict[str, Any]:
    """The JSON object of ``path`` with each of ``keys`` of its type, or :class:`SweepFileError`
    (cut short, edited, not an object, a key missing or of another type)."""
    try:
        value = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise SweepFileError(
            f"{path} cannot be read ({type(e).__name__}: {' '.join(str(e).split())[:120]}): "
            "expected the JSON file the sweep wrote; restore it, or move it away"
        ) from None
    if not isinstance(value, dict):
        raise SweepFileError(
            f"{path} holds a JSON {type(value).__name__}, not an object: expected the file the "
            "sweep "
            "wrote; restore it, or move it away"
        )
    for key, kind in keys.items():
        if (
            not isinstance(value.get(key), kind)
            or isinstance(value.get(key), bool)
            and kind is not bool
        ):
            raise SweepFileError(
                f"{path}: its {key} is {json.dumps(value.get(key))[:60]}, expected "
                f"{getattr(kind, '__name__', 'a value of the sweep')}: restore it, or move it away"
            )
    return value


STATE_KEYS = MappingProxyType({"parents": list, "n_jobs": int})
RESULT_KEYS = MappingProxyType(
    {
        "status": str,
        "tracking_uri": str,
        "experiment": str,
        "overrides": list,
        "metrics": dict,
    }
)


def read_result(path: Path) -> dict[str, Any]:
    """A job's result.json, checked (:func:`read_json`); every metric a number."""
    r = read_json(path, RESULT_KEYS)
    bad = [
        k for k, v in r["metrics"].items() if not isinstance(v, (int, float)) or isinstance(v, bool)
    ]
    if bad:
        raise SweepFileError(
            f"{path}: its metric {bad[0]} is {json.dumps(r['metrics'][bad[0]])[:60]}, expected a "
            "number: restore it, or move it away"
        )
    return r


@lru_cache(maxsize=8)
def _read_state(path: Path, mtime_ns: int) -> dict[str, Any]:
    return read_json(path, STATE_KEYS)


def parent_run_id(sweep_dir: Path, uri: str, experiment: str) -> str | None:
    """The sweep's parent run in the store ``uri`` for ``experiment``
    (sweep.json holds its URI masked)."""
    for p in sweep_state(sweep_dir)["parents"]:
        if masked(p["uri"]) == masked(uri) and p["experiment"] == experiment:
            return p["run_id"]
    return None


def job_count(sweep_dir: Path | None) -> int:
    return sweep_state(sweep_dir)["n_jobs"] if sweep_dir is not None else 1


def swept(sweep_dir: Path | None) -> list[str] | None:
    return sweep_state(sweep_dir).get("swept") if sweep_dir is not None else None


def results(sweep_dir: Path) -> list[dict[str, Any]]:
    """Every job's result.json in the sweep folder, in job order."""
    found = []
    for path in sweep_dir.glob(f"*/{RESULT_FILE}"):
        r = read_result(path)
        r["job"], r["path"] = path.parent.name, str(path)
        found.append(r)
    return sorted(
        found,
        key=lambda r: (not r["job"].isdigit(), int(r["job"]) if r["job"].isdigit() else r["job"]),
    )


def _primary(result: dict[str, Any], split: str) -> str:
    """``val_mse=3145`` for a job's primary metric, or ``-``."""
    if result.get("task") is None:
        return "-"
    name = f"{split}_{metrics.PRIMARY[result['task']][0]}"
    value = result["metrics"].get(name)
    return f"{name}={cell(value)}" if value is not None else "-"


def job_line(result: dict[str, Any], num: int, total: int, keys: list[str] | None = None) -> str:
    """``[3/12] lr=0.005,depth=2  val_mse=2901  test_mse=3012  0.41 s  FINISHED``"""
    t = result["metrics"].get("train_time_s")
    parts = [f"[{num + 1}/{total}]", label(result["overrides"], keys=keys)]
    if result.get("task"):
        parts += [_primary(result, "val"), _primary(result, "test")]
    if t is not None:
        parts.append(f"{cell(t)} s")
    parts.append(
        result["status"]
        + (f" ({result['reason']})" if result.get("reason") else "")
        + (f" (pruned at epoch {result[PRUNED_AT]})" if result.get(PRUNED_AT) else "")
    )
    if result.get("run_id"):
        parts.append(f"run {result['run_id']}")
    return "  ".join(parts)


def job_tags(sweep_dir: Path, num: int) -> dict[str, str]:
    """The tags a search sweeper gives job ``num``
    (sweep.json's ``jobs``: its trial number, study, round)."""
    return dict(sweep_state(sweep_dir).get("jobs", {}).get(str(num), {}))
