"""``resume=true`` never mixes two versions of a data file (issue 55, finding 1): a run's fingerprint holds its file's
content (a SHA-256, read once a sweep), so a FINISHED run of the same configuration on an older version of the file is
not reused; the job says how many it did not reuse and why, and the sweep counts them."""

from __future__ import annotations


import numpy as np
import pytest

from conftest import FAST_ARGS, all_runs, command, run_once


def _write(path, scale: float = 1.0, shift: float = 0.0) -> None:
    """A small regression table; ``y := scale * y + shift`` rewrites its target."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    y = scale * (X @ [1.0, -2.0] + 0.1 * rng.normal(size=60)) + shift
    np.savetxt(path, np.c_[X, y], delimiter=",", header="a,b,y", comments="", fmt="%.6f")


def test_resume_reuses_only_a_run_of_the_same_file_content(tmp_path, store):
    """Before: the second run (the target rewritten as 2y + 5) was SKIPPED, 'already FINISHED' as the first run, and
    ranked against runs on the new target."""
    path = tmp_path / "houses.csv"
    _write(path)
    args = ("data=csv", f"data.path={path}", *FAST_ARGS)
    first = run_once(tmp_path, *args, store=store)
    assert first["status"] == "FINISHED"
    _write(path, scale=2.0, shift=5.0)
    second = run_once(tmp_path, *args, "resume=true", store=store)
    # trained again, on the new content
    assert second["status"] == "FINISHED" and not second.get("resumed_from")
    assert (
        second["fingerprint"] != first["fingerprint"]
        and second["config_fingerprint"] == first["config_fingerprint"]
    )
    assert (
        f"resume: 1 FINISHED run(s) of this configuration ({first['run_id']})"
        in second["not_reused"]
    )
    third = run_once(tmp_path, *args, "resume=true", store=store)  # the same content again: reused
    assert third["status"] == "SKIPPED" and third["resumed_from"] == second["run_id"]
    tags = {r.info.run_id: r.data.tags for r in all_runs(store)}
    import hashlib

    assert tags[second["run_id"]]["data_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_sweeps_fingerprints_read_each_data_file_once(tmp_path, monkeypatch):
    """The content is hashed once a sweep (and again only when the file changes), not once a job."""
    import hashlib

    from sweeper.base import state
    from sweeper.contract.fingerprint import fingerprint

    path = tmp_path / "t.csv"
    _write(path)
    reads = []
    real = hashlib.file_digest
    monkeypatch.setattr(
        state.hashlib, "file_digest", lambda f, name: reads.append(name) or real(f, name)
    )
    state.begin()
    cfg = {"lr": 0.1, "epochs": 10, "data": {"name": "csv", "path": str(path)}}
    prints = {fingerprint({**cfg, "lr": lr}) for lr in (0.1, 0.2, 0.3) for _ in range(3)}
    assert len(prints) == 3 and len(reads) == 1
    before = fingerprint(cfg)
    _write(path, scale=3.0)
    assert fingerprint(cfg) != before and len(reads) == 2
    assert fingerprint(cfg, content=False) == fingerprint(
        {**cfg, "data": {**cfg["data"], "path": str(path)}}, False
    )


@pytest.mark.slow
def test_a_resumed_sweep_on_a_rewritten_file_trains_again_and_counts_it(tmp_path, store):
    """The sweep as a user types it: the second sweep's line counts the jobs not reused, and the third reuses them."""
    path = tmp_path / "houses.csv"
    _write(path)

    def sweep(folder: str, *extra: str) -> str:
        out = command(
            "sweeper",
            "-m",
            "data=csv",
            f"data.path={path}",
            "lr=0.01,0.02",
            *FAST_ARGS,
            "baselines=none",
            f"tracking.uri=sqlite:///{store}",
            f"hydra.sweep.dir={tmp_path / folder}",
            *extra,
            cwd=tmp_path,
            timeout=600,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout

    sweep("s1")
    _write(path, scale=2.0, shift=5.0)
    assert "NOT REUSED 2 job(s) (resume=true)" in sweep("s2", "resume=true")
    assert "REUSED 2 job(s)" in sweep("s3", "resume=true")
    children = [r for r in all_runs(store) if "fingerprint" in r.data.tags]
    assert len(children) == 4 and len({r.data.tags["data_sha256"] for r in children}) == 2
