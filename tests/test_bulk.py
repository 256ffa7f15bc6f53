"""sweeper.tracking.bulk: a store transaction of the client is one deferred section."""

from __future__ import annotations

import os
import time

import pytest
from mlflow import MlflowClient

from sweeper import tracking


def test_a_ctrl_c_inside_a_store_transaction_lands_after_its_commit(store):
    """Before: a Ctrl-C that landed inside SQLAlchemy (the launching process records runs) broke the session and its
    pool: 4 of 40 hostile tries of a 3-job sweep Ctrl-C'd 0.36-0.46 s after "Launching" left its parent (and once
    every run) RUNNING after 'database is locked', or printed "Exception ignored ... InstanceState._cleanup" blocks.
    Here the signal comes while MLflow's INSERT holds the write lock: the transaction commits, then it is raised."""
    import signal

    from sqlalchemy import event

    from sweeper.base import stop
    from sweeper.tracking import bulk

    uri = f"sqlite:///{store}"
    c = tracking.client(uri)
    run = c.create_run(tracking.experiment_id(c, "x", uri)).info.run_id
    engine = bulk.sql_store(c).engine

    def hit(conn, cursor, statement, *args):
        if statement.startswith("INSERT INTO metrics"):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler runs here, inside the transaction

    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    event.listen(engine, "after_cursor_execute", hit)
    stop.install()
    try:
        with pytest.raises(KeyboardInterrupt):
            c.log_metric(run, "m", 1.0)
    finally:
        event.remove(engine, "after_cursor_execute", hit)
        stop.reset()
        for s, h in old.items():
            signal.signal(s, h)
    assert [m.value for m in MlflowClient(uri).get_metric_history(run, "m")] == [1.0]
    c.set_tag(run, "after", "1")  # nothing holds the store's lock
