"""sweeper.tracking.grouped: a batched group's runs ended together in the launching process
(the writer's protocol without its process): together as the group's last member is recorded,
on Ctrl-C, when the end is cut short, and when the store refuses one of them."""

from __future__ import annotations

import json

import pytest

from conftest import client_for
from sweeper import tracking, upload
from sweeper.tracking import grouped, writer
from test_writer import _job


def _own(jobs: list) -> list:
    """The jobs' result.json files as a job of a group recorded here leaves them: recorded by
    this process (``writer.RECORDING``: its pid)."""
    import os

    for _, path, _ in jobs:
        r = json.loads(path.read_text())
        writer.write_result(path, r | {writer.RECORDING: os.getpid()})
    return jobs


def test_a_batched_groups_runs_end_together_when_its_last_member_is_recorded(
    tmp_path, store, monkeypatch
):
    from sweeper.base import state
    from sweeper.tracking import ending

    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    jobs = _own([_job(tmp_path, c, uri, f"0.00{i}") for i in range(1, 4)])
    batches, end_each = [], ending.end_each
    monkeypatch.setattr(
        ending, "end_each", lambda c, ends: batches.append(len(ends)) or end_each(c, ends)
    )
    with grouped.together(True):
        assert isinstance(writer.current(), grouped.Together)
        for run_id, path, end in jobs:
            writer.current().submit(uri, run_id, None, end, path)
        # handed over, not ended yet
        assert {client_for(store).get_run(r).info.status for r, _, _ in jobs} == {"RUNNING"}
    assert writer.current() is None and batches == [3]  # one end_each: one transaction
    for run_id, path, _ in jobs:
        assert client_for(store).get_run(run_id).info.status == "FINISHED"
        r = json.loads(path.read_text())
        assert "pending_upload" not in r and writer.RECORDING not in r
    # a one-member group, or a sweep with a writer process: nothing changes
    with grouped.together(False):
        assert writer.current() is None
    now, process = state.current(), object()
    now.writer = process
    try:
        with grouped.together(True):
            assert writer.current() is process
    finally:
        now.writer = None


def test_ctrl_c_while_a_group_is_recorded_still_ends_the_runs_handed_over(tmp_path, store):
    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    jobs = _own([_job(tmp_path, c, uri, f"0.00{i}") for i in range(1, 3)])
    with pytest.raises(KeyboardInterrupt):
        with grouped.together(True):
            for run_id, path, end in jobs:
                writer.current().submit(uri, run_id, None, end, path)
            raise KeyboardInterrupt
    assert writer.current() is None
    assert {client_for(store).get_run(r).info.status for r, _, _ in jobs} == {"FINISHED"}


def test_a_group_end_cut_short_keeps_its_runs_for_upload_and_says_so(
    tmp_path, store, monkeypatch, caplog
):
    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    jobs = _own([_job(tmp_path, c, uri, f"0.00{i}") for i in range(1, 3)])

    def cut(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(grouped, "_record_all", cut)
    with pytest.raises(KeyboardInterrupt):
        with grouped.together(True):
            for run_id, path, end in jobs:
                writer.current().submit(uri, run_id, None, end, path)
    for _, path, _ in jobs:
        r = json.loads(path.read_text())
        assert r["pending_upload"] and writer.RECORDING not in r
        assert r["tracking_error"] == "interrupted before its run was ended"
        assert upload.pending(path.parent) == [path]
    assert caplog.text.count("interrupted before its run was ended; the result is kept in") == 2


def test_a_failing_store_keeps_a_group_members_run_for_upload(tmp_path, store, caplog):
    uri = f"sqlite:///{store}"
    c = tracking.open_store(uri)
    (ok, bad) = _own([_job(tmp_path, c, uri, f"0.00{i}") for i in range(1, 3)])
    with grouped.together(True):
        writer.current().submit(uri, ok[0], None, ok[2], ok[1])
        writer.current().submit(uri, "no-such-run", None, bad[2], bad[1])  # the store refuses it
    assert client_for(store).get_run(ok[0]).info.status == "FINISHED"
    assert "pending_upload" not in json.loads(ok[1].read_text())
    r = json.loads(bad[1].read_text())
    assert r["pending_upload"] and "failed at the end" in r["tracking_error"]
    assert f"the result is kept in {bad[1].parent}" in caplog.text
