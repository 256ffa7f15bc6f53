"""A run's end, one interface for every caller: :func:`end_runs` ends one run or many (a job's,
the writer's, an upload's, the orphans a sweep marks).

Two implementations write the same records (``tests/test_ending.py`` holds them to it):
MLflow's client calls, a run after another (:func:`sweeper.tracking.records.finish_run`), and
on a SQL store the rows those calls write, every run's in one transaction
(:func:`sweeper.tracking.bulk.finish_runs`). :func:`way` is the one place that picks:
the bulk one where it applies (:func:`sweeper.tracking.bulk.ends_in_bulk`: MLflow's SQL store
within the tested versions, no new run name), else the client calls. A run's logged models are
created and their files copied before its end: in bulk every model's rows in one transaction
(:func:`sweeper.tracking.bulk.logged_models`), their status, metrics and links to the run rows
of the ending's one transaction; through MLflow's calls each model's
(:func:`sweeper.tracking.records.log_models`). What differs is only how a failure leaves the
others: in bulk nothing of the call is in the store but its runs' files and logged models
(PENDING, made once: each run ended alone after it reuses them); the client calls have ended
the runs before the one that failed.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Sequence

from sweeper.tracking import bulk, records

__all__ = ["BULK", "CALLS", "Ending", "end_each", "end_runs", "way"]

BULK = "bulk"  # bulk.finish_runs: one transaction, all or none
CALLS = "calls"  # records.finish_run: MLflow's client calls, a run after another


class Ending(NamedTuple):
    """One run's end: its id and :func:`sweeper.tracking.records.finish_run`'s keyword
    arguments (``metrics``, ``curves``, ``artifacts``, ``models``, ``tags``, ``status``,
    ``curve_points``, ``system``, ``params``, ``datasets``)."""

    run_id: str
    end: Mapping[str, Any]


def way(c: Any, ends: Sequence[Ending]) -> str:
    """Which implementation ends the runs ``ends`` on the client ``c``'s store: :data:`BULK`
    or :data:`CALLS`."""
    return BULK if ends and bulk.ends_in_bulk(c, [e.end for e in ends]) else CALLS


def end_runs(c: Any, ends: Sequence[Ending], made: Mapping[str, Any] | None = None) -> str:
    """End the runs ``ends`` (their last batch, data sets, artifacts, logged models,
    status) the :func:`way` that applies, and say which; a failure raises. ``made``: logged
    models made before (:func:`sweeper.tracking.bulk.logged_models`), by run id."""
    how = way(c, ends)
    if how == BULK:
        bulk.finish_runs(c, list(ends), made)
    else:
        for e in ends:
            records.finish_run(c, e.run_id, **{"metrics": {}, **e.end})
    return how


def end_each(c: Any, ends: Sequence[Ending]) -> list[Exception | None]:
    """End the runs ``ends``, each one's outcome (None: ended) in their order: all in one
    :func:`end_runs` where that is all or none; when it fails (nothing written), or where it
    is not, each run alone, so that one run's failure is its own."""
    if len(ends) < 2 or way(c, ends) != BULK:
        return [_ended(c, [e]) for e in ends]
    # the runs' logged models made once: together; when that fails, each run's alone (its failure)
    made: dict[str, Any] = {}
    failed: dict[str, Exception | None] = dict.fromkeys((e.run_id for e in ends), None)
    if _ended(c, ends, made, made_only=True) is not None:
        failed = {e.run_id: _ended(c, [e], made, made_only=True) for e in ends}
    rest = [e for e in ends if failed[e.run_id] is None]
    if len(rest) > 1 and _ended(c, rest, made) is None:
        return [failed[e.run_id] for e in ends]
    # the one transaction failed (nothing of it was written but the models): each run alone
    return [failed[e.run_id] or _ended(c, [e], made) for e in ends]


def _ended(
    c: Any, ends: Sequence[Ending], made: dict[str, Any] | None = None, made_only: bool = False
) -> Exception | None:
    """:func:`end_runs` (``made_only``: only their logged models made, into ``made``): None,
    or its error (the caller says it; the writer: kept for upload)."""
    try:
        if made_only:
            made.update(bulk.logged_models(c, list(ends)))  # type: ignore[union-attr]
        else:
            end_runs(c, ends, made)
    except Exception as error:  # noqa: BLE001  (the one place an ending's error is kept)
        return error
    return None
