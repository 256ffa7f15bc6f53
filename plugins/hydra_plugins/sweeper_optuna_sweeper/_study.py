"""The study's storage: where it lives (``auto``: beside the MLflow store), opening it
(shared by several processes: SQLite under a lock, in WAL mode, waiting for each other's
writes), and the trials' curves written as intermediate values in one transaction."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from sweeper import tracking
from sweeper.contract.config import ConfigError
from sweeper.base.process import exclusive

__all__ = ["one_line", "open_study", "quiet", "report", "shown", "storage_url"]

log = logging.getLogger("sweeper")


def storage_url(storage: str | None, tracking_uri: str) -> str | None:
    """``auto``: ``optuna.db`` beside the embedded MLflow store (a sqlite:/// tracking URI),
    else in the working directory; None: in memory; anything else is an Optuna RDB URL."""
    if storage is None or str(storage).lower() in ("null", "none", "memory", ""):
        return None
    if storage != "auto":
        return str(storage)
    db = tracking.sqlite_path(tracking_uri)
    folder = db.parent if db is not None else Path.cwd()
    return f"sqlite:///{(folder / 'optuna.db').absolute()}"


def shown(url: str | None) -> str:
    """The storage URL without its password, for logs and tags."""
    if url is None:
        return "memory (hydra.sweeper.storage=null: lost at the end)"
    # lazy: saves ~172 ms at this module's import (measured)
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):  # open_study says what is wrong with it
        return url


@contextmanager
def quiet() -> Iterator[None]:
    """Optuna's own INFO lines ("A new study created in ...") held back: the
    search names its study in a line of its own, and each round's in-memory
    mirror (``_core.ask``) is no news. Warnings still show."""
    logger = logging.getLogger("optuna")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


def open_study(plan: dict[str, Any]) -> Any:
    """Create or load the study (``load_if_exists``). A SQLite file is created
    under a lock (two processes creating one race in the schema's creation), in
    WAL mode (readers do not block the writer), and each connection waits up to 60
    s for another process's write instead of failing with "database is locked"."""
    # lazy: saves ~71 ms at this module's import (measured)
    import optuna

    url, name = plan["storage"], plan["study_name"]
    kwargs = dict(
        study_name=name, sampler=plan["sampler"], direction=plan["direction"], load_if_exists=True
    )
    if url is None:
        return optuna.create_study(**kwargs)
    db = Path(url[len("sqlite:///") :]) if url.startswith("sqlite:///") else None
    try:
        if db is None:
            return _checked(
                optuna.create_study(storage=optuna.storages.RDBStorage(url), **kwargs), plan
            )
        db.parent.mkdir(parents=True, exist_ok=True)
        with exclusive(db.with_name(db.name + ".lock")):
            if not db.exists() or db.stat().st_size == 0:
                # here: only a new study file needs them (~0 ms either way, measured)
                import sqlite3
                from contextlib import closing

                with closing(sqlite3.connect(db)) as con:
                    con.execute("PRAGMA journal_mode=WAL")
            storage = optuna.storages.RDBStorage(
                url, engine_kwargs={"connect_args": {"timeout": 60}}
            )
            _commit_without_fsync(storage)
            return _checked(optuna.create_study(storage=storage, **kwargs), plan)
    except ConfigError:
        raise
    # a URL no driver reads, a server that does not answer, a bad file
    except Exception as e:  # noqa: BLE001
        raise ConfigError(
            f"hydra.sweeper.storage={plan['shown_storage']} cannot be used: {one_line(e)}"
        ) from None


def _commit_without_fsync(storage: Any) -> None:
    """SQLite in WAL mode: commit with synchronous=NORMAL (consistent
    after a crash; no fsync per commit)."""
    # lazy: saves ~157 ms at this module's import (measured)
    from sqlalchemy import event

    def tune(dbapi_connection: Any, record: Any) -> None:
        if dbapi_connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
            dbapi_connection.execute("PRAGMA synchronous=NORMAL")

    engine = getattr(storage, "engine", None)
    if engine is not None:
        event.listen(engine, "connect", tune)
        engine.dispose()  # the connection made while creating the schema is replaced by tuned ones


def _checked(study: Any, plan: dict[str, Any]) -> Any:
    """A loaded study must optimise in this task's direction."""
    have = study.direction.name.lower()
    if have != plan["direction"]:
        raise ConfigError(
            f"hydra.sweeper.study_name={study.study_name} is not allowed: that study {have[:-1]}"
            "es, "
            f"this task's {plan['metric']} is {plan['verb'][:-3]}ed: choose another study name"
        )
    _same_space(study, plan)
    return study


def _same_space(study: Any, plan: dict[str, Any]) -> None:
    """A continued study's trials must have drawn each key from a distribution
    of the same kind (Optuna refuses a categorical whose choices changed, as a
    traceback on the first trial, with the round's runs opened)."""
    # lazy: saves ~70 ms at this module's import (measured)
    from optuna.distributions import check_distribution_compatibility

    space = plan.get("space")
    if space is None:
        return
    for trial in study.get_trials(deepcopy=False):
        for name, new in space.distributions.items():
            old = trial.distributions.get(name)
            if old is None:
                continue
            try:
                check_distribution_compatibility(old, new)
            except ValueError as e:
                raise ConfigError(
                    f"hydra.sweeper.params.{name}={space.written.get(name, new)} is not allowed "
                    "in study "
                    f"'{study.study_name}': its trials drew {name} from {_spelled(old)} ("
                    f"{one_line(e).rstrip('.')}): "
                    f"keep that space, or start another study with hydra.sweeper.study_name=NAME"
                ) from None


def _spelled(d: Any) -> str:
    """An Optuna distribution as the search space writes it."""
    choices = getattr(d, "choices", None)
    if choices is not None:
        return f"choice({', '.join(map(str, choices))})"
    return f"interval({d.low}, {d.high})" + (" on a log scale" if getattr(d, "log", False) else "")


def report(curves: list[tuple[Any, np.ndarray, np.ndarray]], study: Any) -> None:
    """Every curve point as an intermediate value (what ``trial.report`` stores), in one
    transaction on an RDB storage (``trial.report`` commits each point: ~1.5 ms, 1.5 s for
    a round of 16 trials of 60 points); Optuna's own calls where its internals differ."""
    # lazy: saves ~60 ms at this module's import (measured)
    from optuna.storages import RDBStorage

    backend = getattr(study._storage, "_backend", study._storage)
    if isinstance(backend, RDBStorage):
        try:
            # lazy: saves ~258 ms at this module's import (measured)
            from optuna.storages._rdb import models
            from optuna.storages._rdb.storage import _create_scoped_session

            model = models.TrialIntermediateValueModel
            # the trials are new: inserts only
            with _create_scoped_session(backend.scoped_session) as session:
                for trial, steps, values in curves:
                    for step, value in zip(steps.tolist(), values.tolist()):
                        stored, kind = model.intermediate_value_to_stored_repr(float(value))
                        session.add(
                            model(
                                trial_id=trial._trial_id,
                                step=int(step),
                                intermediate_value=stored,
                                intermediate_value_type=kind,
                            )
                        )
            return
        except Exception as e:  # noqa: BLE001  (another Optuna's internals: the public calls below)
            log.debug("intermediate values one at a time: %s", e)
    for trial, steps, values in curves:
        for step, value in zip(steps.tolist(), values.tolist()):
            trial.report(float(value), int(step))


def one_line(e: BaseException, most: int = 300) -> str:
    """``Type: message`` on one line (a message's lines joined), at most ``most`` characters."""
    text = f"{type(e).__name__}: {' '.join(str(e).split())}"
    return text if len(text) <= most else text[: most - 3] + "..."
