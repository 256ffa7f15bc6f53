"""hydra.launcher.cpu_workers (sweeper.sweep.cores): CPU groups computed by worker processes side by side, a group
split into chunks of whole trajectories when there are fewer groups than workers, a lost worker's group retried."""

from __future__ import annotations

from pathlib import Path
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import NO_BASELINES, all_runs, cli, copy_store

FAST = (
    "log_every=10",
    "tracking.log_model=false",
    "tracking.system_metrics=false",
    "dtype=float64",
)
# 16 configurations, 4 groups of 2 trajectories (one a shape: packing them is tests/test_packing.py's)
GRID = ("lr=0.001,0.003", "depth=1,2", "width=4,8", "epochs=200,400", "hydra.launcher.pack=false")
ONE_GROUP = ("lr=0.001,0.002,0.003,0.004,0.005", "epochs=200,300")  # one group of 5 trajectories


def children(store: Path) -> list:
    return [r for r in all_runs(store) if "mlflow.parentRunId" in r.data.tags]


def sweep(
    tmp_path: Path, template: Path, name: str, *args: str, env: dict | None = None
) -> tuple[list, str]:
    folder = tmp_path / name
    folder.mkdir()
    store = copy_store(template, folder)
    proc = cli(folder, "-m", *args, *FAST, store=store, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return children(store), proc.stdout + proc.stderr


def assert_same(runs: list, reference: list) -> None:
    got = {r.data.tags["fingerprint"]: r.data.metrics for r in runs}
    ref = {r.data.tags["fingerprint"]: r.data.metrics for r in reference}
    assert got.keys() == ref.keys()
    for key, metrics in ref.items():
        names = [m for m in metrics if m.startswith(("val_", "test_", "train_loss", "epochs_run"))]
        assert names
        for name in names:
            assert got[key][name] == pytest.approx(metrics[name], rel=1e-12, abs=1e-12), (key, name)


@pytest.mark.slow
def test_four_groups_on_two_workers_equal_one_worker_and_say_where_they_ran(
    tmp_path, _template_store
):
    one, _ = sweep(tmp_path, _template_store, "one", *GRID, "hydra.launcher.cpu_workers=1")
    two, out = sweep(tmp_path, _template_store, "two", *GRID, "hydra.launcher.cpu_workers=2")
    assert len(one) == len(two) == 16
    assert all(r.info.status == "FINISHED" for r in one + two)
    assert_same(two, one)
    assert {r.data.tags["sweeper.batch_worker"] for r in one} == {"main"}
    assert {r.data.tags["sweeper.batch_worker"] for r in two} == {"cpu0", "cpu1"}
    assert len({r.data.tags["sweeper.worker_pid"] for r in two}) == 2
    assert len({r.data.tags["sweeper.batch_group"] for r in two}) == 4
    assert "computed on 2 worker processes" in out


@pytest.mark.slow
def test_a_single_group_split_into_chunks_equals_the_unsplit_group(tmp_path, _template_store):
    whole, _ = sweep(tmp_path, _template_store, "whole", *ONE_GROUP, "hydra.launcher.cpu_workers=1")
    split, out = sweep(
        tmp_path, _template_store, "split", *ONE_GROUP, "hydra.launcher.cpu_workers=2"
    )
    assert len(whole) == len(split) == 10 and all(
        r.info.status == "FINISHED" for r in whole + split
    )
    assert len({r.data.tags["sweeper.batch_group"] for r in whole}) == 1
    # chunks of 3 and 2 trajectories
    assert len({r.data.tags["sweeper.batch_group"] for r in split}) == 2
    assert sorted(r.data.tags["sweeper.group_size"] for r in split) == ["4"] * 4 + ["6"] * 6
    assert "split into 2 chunks" in out
    assert_same(split, whole)


@pytest.mark.slow
def test_a_worker_killed_mid_group_has_its_group_retried_and_every_run_recorded(
    tmp_path, _template_store
):
    die = tmp_path / "died"  # the first worker to take a group kills itself (SIGKILL) once
    runs, out = sweep(
        tmp_path,
        _template_store,
        "killed",
        *GRID,
        "hydra.launcher.cpu_workers=2",
        env={"SWEEPER_TEST_DIE_ONCE": str(die)},
    )
    assert die.is_file() and "lost with its worker" in out
    assert len(runs) == 16 and {r.info.status for r in runs} == {"FINISHED"}
    dead = die.read_text().strip()
    # the retry's worker says it computed the group
    assert dead not in {r.data.tags["sweeper.worker_pid"] for r in runs}
    assert len({r.data.tags["sweeper.batch_group"] for r in runs}) == 4


def test_chunks_keep_trajectories_whole_and_cover_every_job():
    from sweeper.sweep.cores import chunked
    from sweeper.sweep.groups import Job

    def job(i, lr, epochs, device="cpu"):
        return Job(
            i, [], None, {"lr": lr, "epochs": epochs, "device": device, "depth": 1, "width": 8}
        )

    # 4 trajectories of 2
    group = [job(i, 0.001 * (1 + i // 2), 100 * (1 + i % 2)) for i in range(8)]
    gpu = [job(10, 0.1, 5, "gpu"), job(11, 0.2, 5, "gpu")]
    # beside a GPU group, CPU groups stay whole: the speedup pairs a CPU group with a GPU group of its size
    assert chunked([group, gpu], 3) == [group, gpu]
    chunks = chunked([group], 3)
    assert len(chunks) == 3  # one CPU group: 3 chunks
    assert sorted(j.idx for c in chunks for j in c) == list(range(8))
    for c in chunks:  # a trajectory (same lr) never straddles two chunks
        assert all(
            {j.plain["lr"] for j in c}.isdisjoint({j.plain["lr"] for j in d})
            for d in chunks
            if d is not c
        )
    other = [job(20 + i, 0.001 * (1 + i // 2), 100 * (1 + i % 2)) for i in range(8)]
    assert chunked([group, other], 2) == [
        group,
        other,
    ]  # two groups of equal work on two workers: unchanged
    small = [job(30, 0.5, 100), job(31, 0.6, 100)]
    # one group of 4 trajectories of 200 epochs dwarfs one of 2 of 100: it splits
    out = chunked([group, small], 2)
    assert [len(c) for c in out] == [4, 4, 2] and out[-1] is small


@pytest.mark.parametrize("value", ["0", "-2"])
def test_a_bad_cpu_workers_is_one_line_and_nothing_is_written(tmp_path, store, value):
    proc = cli(
        tmp_path,
        "-m",
        "lr=0.001,0.002",
        "epochs=5",
        f"hydra.launcher.cpu_workers={value}",
        store=store,
    )
    assert proc.returncode == 2, proc.stderr
    assert f"hydra.launcher.cpu_workers={value} is not allowed" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not children(store)


@pytest.mark.slow
def test_successive_halving_trains_its_rungs_on_the_workers_and_equals_one_worker(
    tmp_path, _template_store
):
    halved = ("hydra.launcher.halving.eta=3", "hydra.launcher.halving.min_epochs=20")
    grid = ("lr=0.0003,0.001,0.003,0.01,0.03,0.1", "depth=1,2", "epochs=180")
    one, _ = sweep(tmp_path, _template_store, "one", *grid, *halved, "hydra.launcher.cpu_workers=1")
    two, out = sweep(
        tmp_path, _template_store, "two", *grid, *halved, "hydra.launcher.cpu_workers=2"
    )
    assert len(one) == len(two) == 12 and all(r.info.status == "FINISHED" for r in one + two)
    pruned = {r.data.tags["fingerprint"]: r.data.tags.get("pruned_at_epoch") for r in one}
    # rungs 20, 60: 12 → 4 → 2
    assert sorted(filter(None, pruned.values())) == ["20"] * 8 + ["60"] * 2
    assert {r.data.tags["fingerprint"]: r.data.tags.get("pruned_at_epoch") for r in two} == pruned
    assert_same(two, one)
    assert {r.data.tags["sweeper.batch_worker"] for r in one} == {"main"}
    assert {r.data.tags["sweeper.batch_worker"] for r in two} <= {"cpu0", "cpu1"}
    # the first rung's 12 configurations on both workers
    assert out.count("computed on 2 worker processes") >= 1


def test_the_group_that_would_end_last_on_one_worker_is_split_when_that_ends_the_whole_sooner():
    from sweeper.sweep.cores import chunked
    from sweeper.sweep.groups import Job

    # epochs: fake jobs (nothing trains), each group's work far above a chunk's own cost
    big = 10**8

    def group(first, trajs, depth):
        return [
            Job(
                first + i,
                [],
                None,
                {"lr": 0.001 * (i + 1), "epochs": big, "device": "cpu", "depth": depth, "width": 8},
            )
            for i in range(trajs)
        ]

    a, b, c = (
        group(0, 2, 2),
        group(10, 2, 2),
        group(20, 2, 1),
    )  # work 5 : 5 : 1 (depth 2 adds a width x width layer)
    out = chunked([a, b, c], 2)
    # handed out costliest first: a and b on the two workers, then c alone on one while the other waits; c in halves
    # (one trajectory each) ends the whole sooner
    assert [sorted(j.idx for j in x) for x in out] == [[0, 1], [10, 11], [20], [21]]
    small = [
        group(30, 2, 2),
        group(40, 2, 2),
        [
            Job(
                50 + i,
                [],
                None,
                {"lr": 0.1 * (i + 1), "epochs": 10, "device": "cpu", "depth": 1, "width": 8},
            )
            for i in range(2)
        ],
    ]
    assert chunked(small, 2) == small  # a split that saves less than a chunk's own cost is not made


def _plain(lr: float, epochs: int, width: int = 16, depth: int = 1) -> dict:
    return {
        "lr": lr,
        "epochs": epochs,
        "device": "cpu",
        "depth": depth,
        "width": width,
        "data": {"name": "diabetes", "val_fraction": 0.2, "test_fraction": 0.2},
    }


def test_worker_processes_start_only_where_they_shorten_the_training(monkeypatch):
    from sweeper.sweep import cores

    monkeypatch.setattr(cores, "cores", lambda: 2)
    quick = [_plain(0.001, 5000), _plain(0.005, 5000)]  # README's first sweep: ~0.5 s of training
    # ~10 s a configuration
    heavy = [_plain(0.001 * i, 20000, width=256, depth=2) for i in range(1, 9)]
    auto = {"engine": "local", "cpu_workers": None}
    assert cores.estimated_s(quick) < cores.WORKERS_PAY_S < cores.estimated_s(heavy) / 2
    assert cores.workers(auto, quick) == 1
    assert "trained here (~" in cores.declined(
        auto, quick, 1
    ) and "cpu_workers=2 uses them" in cores.declined(auto, quick, 1)
    assert cores.workers(auto, heavy) == 2 and cores.declined(auto, heavy, 2) == ""
    asked = {"engine": "local", "cpu_workers": 2}
    # asked for: given, unsaid
    assert cores.workers(asked, quick) == 2 and cores.declined(asked, quick, 2) == ""
    assert cores.workers({"engine": "ray", "cpu_workers": None}, heavy) == 1
    # a trajectory trains once, to its longest epochs: epochs=1000,5000 of one lr costs what 5000 alone does
    assert cores.estimated_s([_plain(0.001, 1000), _plain(0.001, 5000)]) == cores.estimated_s(
        [_plain(0.001, 5000)]
    )
    assert cores.estimated_s([_plain(0.001, 5000, width=64)]) > cores.estimated_s(
        [_plain(0.001, 5000)]
    )


@pytest.mark.skipif(
    len(__import__("os").sched_getaffinity(0)) < 2,
    reason="one core: no worker processes to decline",
)
def test_a_small_sweep_trains_in_the_launching_process_and_says_so(tmp_path, store):
    proc = cli(tmp_path, "-m", "lr=0.001,0.005", "epochs=100", *FAST, store=store)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert "worker processes started" not in out
    assert "trained here (~" in out, out
    runs = children(store)
    assert len(runs) == 2 and {r.data.tags["sweeper.batch_worker"] for r in runs} == {"main"}


@pytest.mark.skipif(
    not Path("/proc/self/status").is_file(), reason="reads signal masks from /proc (Linux)"
)
def test_the_cpu_workers_start_with_the_stopping_signals_blocked(tmp_path, store):
    """Before: a terminal's Ctrl-C in a sweep's first second reached its CPU workers while Python started in them,
    before they could ignore it: 21-46 lines of 'Fatal Python error: init_import_site ... KeyboardInterrupt' above
    the sweep's one line (2 of 2 hostile tries). Starting multiprocessing's resource tracker also unblocked the
    signals again for the first worker. Now each worker starts with SIGINT, SIGTERM and SIGHUP blocked."""
    import signal

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sweeper",
            "-m",
            NO_BASELINES,
            "lr=0.001,0.002,0.003",
            "epochs=3000000",
            "log_every=1000",
            "hydra.launcher.cpu_workers=2",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
            f"tracking.uri=sqlite:///{store}",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        masks: dict[int, int] = {}
        deadline = time.monotonic() + 120
        while len(masks) < 2 and time.monotonic() < deadline:
            for pid in subprocess.run(
                ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True
            ).stdout.split():
                try:
                    if "multiprocessing.spawn" in Path(f"/proc/{pid}/cmdline").read_text():
                        status = Path(f"/proc/{pid}/status").read_text()
                        masks[int(pid)] = int(re.search(r"SigBlk:\s*([0-9a-f]+)", status)[1], 16)
                except OSError:
                    continue
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert len(masks) == 2, masks
    wanted = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGHUP - 1))
    assert all(m & wanted == wanted for m in masks.values()), {p: hex(m) for p, m in masks.items()}


def test_an_error_while_the_workers_compute_fails_the_launcher_in_one_line_and_ends_them(
    tmp_path, store, monkeypatch
):
    """An error in the launching process while the CPU workers compute (here: taking a group for a
    worker) is the launcher failed as a whole (its boundary, sweeper.sweep.resuming_sweeper): one line,
    the parent KILLED, and the workers ended then, not left for the process's exit (a notebook's kernel
    goes on)."""
    import sweeper
    from sweeper.base import state
    from sweeper.sweep import cores, launch

    started = []
    start = cores._start

    def starting(n, plains):
        pool = start(n, plains)
        started.extend(w.proc for w in pool.workers)
        return pool

    def fails(plain):
        raise RuntimeError("boom")

    monkeypatch.setattr(cores, "_start", starting)
    monkeypatch.setattr(launch, "_in_bulk", fails)
    with pytest.raises(ValueError) as refused:  # exit 2 on the command line
        sweeper.multirun(
            [
                "lr=0.001,0.002",
                "depth=1,2",
                "hydra.launcher.pack=false",
                "hydra.launcher.cpu_workers=2",
                *FAST,
                NO_BASELINES,
                f"hydra.sweep.dir={tmp_path / 'sweep'}",
                f"tracking.uri=sqlite:///{store}",
            ]
        )
    assert str(refused.value).startswith("the launcher failed: RuntimeError: boom; parent run(s) ")
    assert len(started) == 2 and state.process().pool is None
    assert not [p for p in started if p.is_alive()]
    (parent,) = [r for r in all_runs(store) if "mlflow.parentRunId" not in r.data.tags]
    assert parent.info.status == "KILLED"


def test_the_launchers_copy_of_data_it_cannot_read_is_none_and_a_bug_is_raised(
    tmp_path, monkeypatch
):
    """cores._loaded: no data node, a file gone (OSError), bad data (DataError, a ValueError) are None (the
    group fails in its own words later); an error that is no data's (a bug) is raised."""
    from sweeper import data
    from sweeper.sweep import cores

    node = {"name": "csv", "path": str(tmp_path / "gone.csv"), "target": "y"}
    assert cores._loaded(None) is None
    for raised in (FileNotFoundError(2, "No such file"), data.DataError("data.path=x: no rows")):
        monkeypatch.setattr(data, "load_plain", lambda n, s, e=raised: (_ for _ in ()).throw(e))
        assert cores._loaded(node) is None
    monkeypatch.setattr(data, "load_plain", lambda n, s: (_ for _ in ()).throw(TypeError("ours")))
    with pytest.raises(TypeError, match="ours"):
        cores._loaded(node)
