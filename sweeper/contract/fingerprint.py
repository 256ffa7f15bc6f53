"""The fingerprint of a run: the hash of what it computes — its resolved config without
where and how it runs, and the content of its data file. CPU and GPU runs of one
fingerprint pair up (speedup); ``resume=true`` reuses a FINISHED run of the same
fingerprint; a promoted config records its run's."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from sweeper.base.tags import CONFIG_FINGERPRINT, DATA_SHA256
from sweeper.base.state import digest
from sweeper.contract.config import ADDED_DEFAULTS, DATA_ADDED_DEFAULTS, NOT_FINGERPRINTED
from sweeper.models.interface import offer, top_level_keys


__all__ = ["content_tags", "fingerprint"]


def fingerprint(cfg: Mapping[str, Any], content: bool = True) -> str:
    """Hash of the resolved config without where it runs (device, tracking, hydra):
    pairs CPU and GPU runs.

    A data file (``data.path``) enters with its content (:func:`sweeper.base.state.digest`,
    read once a sweep), not its path alone: ``resume=true`` reuses only a run that read the
    same version of the file. ``content=False``: the configuration's hash alone, as runs
    from before had it (:func:`content_tags`).

    ``data.split_seed`` is hashed only when it differs from ``seed``: a run from before the
    split seed existed drew its split with its ``seed``, so it is the run
    of ``data.split_seed=seed`` and keeps its fingerprint (resume, ``conf/best``
    pins); ``seed=3`` with the default ``data.split_seed=0`` is another split, another hash."""
    kept = {
        k: v for k, v in cfg.items() if k not in NOT_FINGERPRINTED and not _at_added_default(k, v)
    }

    # its hyperparameters are the top-level keys (sweeper's MLP:
    if offer(kept.get("model"), quiet=True).top_level:
        kept.pop("model", None)  # runs from before the model group keep their fingerprint)
    # a model of the interface: its import path and hyperparameters; the default model's
    # keys do not apply
    else:
        # and model.check is no hyperparameter:
        kept = {k: v for k, v in kept.items() if k not in top_level_keys()}
        kept["model"] = {k: v for k, v in kept["model"].items() if k != "check"}
    if isinstance(kept.get("data"), Mapping):
        d = {
            k: v
            for k, v in kept["data"].items()
            if k not in DATA_ADDED_DEFAULTS or v != DATA_ADDED_DEFAULTS[k]
        }
        if "split_seed" in d and d["split_seed"] == kept.get("seed", 0):
            d.pop("split_seed")
        kept["data"] = {**d, "sep": ","} if d.get("sep") == "auto" else d
        if content and d.get("path") is not None:
            kept["data"]["content"] = digest(d["path"])
    blob = json.dumps(kept, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _at_added_default(key: str, value: Any) -> bool:
    """Whether ``key`` is one of :data:`ADDED_DEFAULTS` at its default (``0`` and
    ``0.0`` alike, not ``false``)."""
    if key not in ADDED_DEFAULTS:
        return False
    default = ADDED_DEFAULTS[key]
    return value == default and isinstance(value, bool) == isinstance(default, bool)


def content_tags(cfg: Mapping[str, Any]) -> dict[str, str]:
    """A run's tags on a data file (none for a bundled data set): its content's SHA-256 and
    the fingerprint of its configuration alone (``fingerprint(cfg, content=False)``)."""
    path = cfg.get("data", {}).get("path") if isinstance(cfg.get("data"), Mapping) else None
    if path is None:
        return {}
    return {
        DATA_SHA256: digest(path) or "unreadable",
        CONFIG_FINGERPRINT: fingerprint(cfg, content=False),
    }
