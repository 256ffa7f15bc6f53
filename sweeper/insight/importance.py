"""How much each swept key moved the validation metric: its main-effect
share of the variance between configurations, with an interval, for the
parent run (``importance.json``, ``plots/importance.png``).

The method is stated with the numbers:

- **full grid** (every combination of the swept values has a finished run; seeds aside): the
  exact main-effect decomposition of the configurations' mean scores, with no model: a key's
  share is the variance of its marginal means over the variance of the configurations' means
  (the first-order terms of the functional ANOVA under a uniform measure on the grid, which
  fANOVA estimates with a random forest where no grid exists: Hutter, Hoos and Leyton-Brown,
  ICML 2014). The shares and the interactions' remainder sum to 1.
- **partial grid** (a few values a key, some combinations missing: failures, halving, a search
  sweeper's repeats): the additive main-effects model fitted by least squares, each key's share
  the variance of its fitted effects over the variance of the configurations' means (model-based).
- otherwise (a key with more than :data:`MAX_LEVELS` values, fewer
  configurations than the model's terms): omitted, with the reason.

Uncertainty: a parametric bootstrap with the sweep's noise
(:meth:`sweeper.insight.advice.evidence.Sweep.slice_noise` over every configuration:
the seed-to-seed std pooled over configurations, a fold mean's std from the folds' residual,
or without either the advisor's stated default that scores within 2 % are the same): each of
:data:`REPLICATES` replicates adds that noise to every configuration's mean and estimates
the shares again. Noise inflates a share, so the share reported is bias-corrected (twice the
estimate less the replicates' mean) and its interval is the basic bootstrap's (the estimate
less the replicates' 97.5th and 2.5th percentile deviations), both within [0, 1]: a key that
does nothing has an interval from 0, as the advice's "did not matter".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sweeper.base.fmt import number
from sweeper.insight.advice.evidence import SAME, SEEDS, Sweep

__all__ = ["compute", "spec"]

# a key with more distinct values than this is no grid key (a search sweeper's continuous values)
MAX_LEVELS = 12
REPLICATES = 400
LEVEL = 0.95


def compute(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The importance of each swept key of a sweep (the advisor's records, best first):
    ``{"method", "metric", "noise": {"std", "source"}, "keys": [{"key", "share", "low", "high",
    "observed"}] (largest share first), "interactions"}``, or ``{"omitted": reason}``."""

    s = Sweep(records)
    keys = [k for k in s.keys if k not in SEEDS]
    configs = [c for c in s.configs if s.mean(c)]
    if not keys:
        return {"omitted": "no key was swept (seeds aside)"}
    if len(configs) < 3:
        return {"omitted": f"{len(configs)} configuration(s) finished: too few to tell keys apart"}
    levels = {k: sorted({dict(c)[k] for c in configs}, key=_order) for k in keys}
    wide = [k for k in keys if len(levels[k]) > MAX_LEVELS]
    if wide:
        return {
            "omitted": f"{', '.join(wide)} took more than {MAX_LEVELS} values (not a grid): use "
            "optuna.importance.get_param_importances on such a search"
        }
    y = np.array([s.mean(c)[0] for c in configs])
    n = np.array([s.mean(c)[1] for c in configs], dtype=float)
    index = {k: np.array([levels[k].index(dict(c)[k]) for c in configs]) for k in keys}
    full = len(configs) == math.prod(len(v) for v in levels.values())
    terms = 1 + sum(len(v) - 1 for v in levels.values())
    if not full and len(configs) <= terms:
        return {
            "omitted": f"{len(configs)} configurations for an additive model of {terms} terms (a "
            "partial grid): "
            "too few"
        }
    pooled = None if s.deterministic and not s.seeded else s.slice_noise(configs)
    if pooled is not None and pooled[0] > 0:
        std, source = (
            pooled[0] / np.sqrt(1 if s.folded else n),
            (
                "a fold mean's std, from the configuration × fold residual"
                if s.folded
                else "the seed-to-seed std pooled over configurations"
            ),
        )
        noise = {"std": float(pooled[0]), "source": source}
    # the advisor's stated default: two scores within SAME of each
    # other are the same (a 5 % two-sided test)
    else:
        one = SAME * abs(s.mean(s.config(s.best))[0]) / (1.96 * math.sqrt(2))
        std = np.full(len(configs), one)
        noise = {
            "std": one,
            "source": f"no seed sweep: the advisor's stated default (scores within {SAME:.0%} "
            "count "
            "as the same: a std of that over 1.96·√2)",
        }
    shares = _exact if full else _additive(index, levels)
    observed = shares(y[None, :], index, levels)[0]
    rng = np.random.default_rng(0)
    replicas = shares(y[None, :] + rng.normal(size=(REPLICATES, len(y))) * std, index, levels)
    tail = (1 - LEVEL) / 2
    lo_q, hi_q = np.quantile(replicas, [tail, 1 - tail], axis=0)
    clip = lambda x: float(min(1.0, max(0.0, x)))  # a share lies in [0, 1]
    rows = [
        {
            "key": k,
            "share": clip(2 * observed[i] - replicas[:, i].mean()),
            "low": clip(2 * observed[i] - hi_q[i]),
            "high": clip(2 * observed[i] - lo_q[i]),
            "observed": float(observed[i]),
        }
        for i, k in enumerate(keys)
    ]
    rows.sort(key=lambda r: -r["share"])
    method = (
        "exact main-effect variance decomposition of a full grid (no model)"
        if full
        else "additive main-effects model fitted by least squares on a partial grid (model-based)"
    )
    return {
        "method": method,
        "metric": s.metric,
        "configurations": len(configs),
        "noise": noise,
        "interval": f"{LEVEL:.0%} basic parametric bootstrap, {REPLICATES} replicates",
        "keys": rows,
        "interactions": float(1 - observed.sum()) if full else None,
    }


def _order(v: Any) -> tuple:
    n = number(v)
    return (0, n, "") if n is not None else (1, 0.0, str(v))


def _exact(y: np.ndarray, index: dict[str, np.ndarray], levels: dict[str, list]) -> np.ndarray:
    """Each key's main-effect share of the variance of ``y``
    (replicates × configurations of a full grid)."""
    centred = y - y.mean(axis=1, keepdims=True)
    total = (centred**2).mean(axis=1)
    out = []
    for k, idx in index.items():
        onehot = np.eye(len(levels[k]))[idx]  # configurations × values
        marginal = centred @ onehot / onehot.sum(axis=0)  # each value's mean, centred
        out.append((marginal**2).mean(axis=1))
    return np.stack(out, axis=1) / np.where(total > 0, total, np.inf)[:, None]


def _additive(index: dict[str, np.ndarray], levels: dict[str, list]) -> Any:
    """:func:`_exact` for a partial grid: the additive model's fitted
    effects (one least-squares fit a replicate)."""
    # treatment coding, first value out
    blocks = [np.eye(len(levels[k]))[idx][:, 1:] for k, idx in index.items()]
    X = np.hstack([np.ones((len(next(iter(index.values()))), 1)), *blocks])
    solve = np.linalg.pinv(X)

    def shares(y: np.ndarray, index: dict[str, np.ndarray], levels: dict[str, list]) -> np.ndarray:
        beta = y @ solve.T
        total = ((y - y.mean(axis=1, keepdims=True)) ** 2).mean(axis=1)
        out, at = [], 1
        for k in index:
            effects = np.hstack([np.zeros((len(y), 1)), beta[:, at : at + len(levels[k]) - 1]])
            at += len(levels[k]) - 1
            # over the key's values, each weighed alike (the grid's measure)
            out.append(effects.var(axis=1))
        return np.stack(out, axis=1) / np.where(total > 0, total, np.inf)[:, None]

    return shares


def spec(found: dict[str, Any]) -> dict[str, Any] | None:
    """``plots/importance.png``: each key's share as a bar with its interval (None when omitted)."""
    if "keys" not in found:
        return None
    rows = found["keys"][::-1]  # the largest on top
    share = [r["share"] for r in rows]
    err = [
        [max(0.0, s - r["low"]) for s, r in zip(share, rows)],
        [max(0.0, r["high"] - s) for s, r in zip(share, rows)],
    ]
    return {
        "name": "plots/importance.png",
        "size": [7, 1.6 + 0.45 * len(rows)],
        "axes": [
            {
                "title": f"Importance of each key for {found['metric']} ({LEVEL:.0%} interval)",
                "xlabel": (
                    "share of the variance between configurations ("
                    f"{'exact' if 'exact' in found['method'] else 'model'})"
                ),
                "hbars": [
                    {"y": list(range(len(rows))), "x": share, "xerr": err, "color": "tab:blue"}
                ],
                "vline": 0.0,
                "yticks": list(range(len(rows))),
                "yticklabels": [r["key"] for r in rows],
                "legend": False,
                "xlim": [0.0, 1.0],
            }
        ],
    }
