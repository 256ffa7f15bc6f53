"""sweeper's shortcuts past a framework's public API (``sweeper.base.environment.SHORTCUTS``), each turned off by name
with ``SWEEPER_PUBLIC_ONLY``: the public path then runs, and a sweep records the same runs either way."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

import sweeper
from sweeper.base import environment, tested
from sweeper.base.environment import problem, shortcuts_off

NAMES = {
    "jobrun",
    "compose",
    "bulk",
    "writer",
    "painter",
    "exit",
    "pyfunc_cache",
    "ui_view",
}


@pytest.fixture
def turned_off(monkeypatch):
    """``turned_off("jobrun,bulk")``: this process's SWEEPER_PUBLIC_ONLY, its answers asked afresh."""

    def set_(value: str) -> None:
        monkeypatch.setenv(tested.PUBLIC_ONLY, value)
        tested.shortcut.cache_clear()

    monkeypatch.delenv("SWEEPER_WRITER", raising=False)
    set_("")
    yield set_
    tested.shortcut.cache_clear()


def test_each_shortcut_is_turned_off_by_name_and_a_name_sweeper_lacks_is_refused():
    assert set(environment.SHORTCUTS) == NAMES
    assert shortcuts_off({}) == shortcuts_off({"SWEEPER_PUBLIC_ONLY": "0"}) == frozenset()
    assert shortcuts_off({"SWEEPER_PUBLIC_ONLY": "1"}) == NAMES
    assert shortcuts_off({"SWEEPER_PUBLIC_ONLY": "jobrun, bulk"}) == {"jobrun", "bulk"}
    # the writer's older switch, the same one
    assert shortcuts_off({"SWEEPER_WRITER": "off"}) == {"writer"}
    assert problem({"SWEEPER_PUBLIC_ONLY": "painter,exit"}) is None
    said = problem({"SWEEPER_PUBLIC_ONLY": "jobrun,bluk"})
    assert said.startswith(
        "the environment variable SWEEPER_PUBLIC_ONLY=jobrun,bluk is not allowed: expected 1, 0"
    )
    assert all(n in said for n in NAMES)
    assert problem({"SWEEPER_PUBLIC_ONLY": "yes"}) is not None


def test_one_shortcut_off_leaves_the_others_on_and_says_which_once(turned_off, caplog):
    for name in sorted(NAMES):
        turned_off(name)
        with caplog.at_level(logging.INFO, logger="sweeper"):
            caplog.clear()
            assert [n for n in sorted(NAMES) if not tested.shortcut(n)] == [name]
            assert not tested.shortcut(name)
        said = [r.getMessage() for r in caplog.records]
        assert said == [
            f"SWEEPER_PUBLIC_ONLY={name}: the shortcut {name} is off: {environment.SHORTCUTS[name][2]}"
        ]


def test_jobrun_bulk_writer_and_painter_off_take_the_public_path(turned_off, store, monkeypatch):
    from conftest import client_for
    from sweeper.base import hydra_internals, state
    from sweeper.insight import plots
    from sweeper.tracking import bulk, writer

    # a sweep's new store (a copy of the session's template: no migrations run again)
    c = client_for(store)
    assert hydra_internals.fast() and bulk.sql_store(c) is not None
    n = writer.MIN_JOBS_BATCHED["sqlite"]
    assert writer.wanted(n, ["sqlite:///x.db"], "sweeper.BatchedLauncher")
    turned_off("jobrun,bulk,writer,painter")
    assert not hydra_internals.fast() and bulk.sql_store(c) is None and not bulk.creates_in_bulk(c)
    assert not writer.wanted(n, ["sqlite:///x.db"], "sweeper.BatchedLauncher")
    # a sweep of its own: a painter an earlier test's in-process sweep left current is not this one's
    monkeypatch.setattr(state, "_current", state.SweepState())
    plots.start()
    assert plots.current() is None and state.current().painter is None  # the report draws here


def test_compose_off_has_hydra_compose_every_job_the_same(turned_off):
    """On, one shape is composed once and its jobs' configs are its values set; off, Hydra composes each: the same."""
    from sweeper.contract import compose as composing

    jobs = [["lr=0.01", "depth=1"], ["lr=0.02", "depth=2"], ["lr=0.05", "depth=3"]]
    got = {}
    for value in ("", "compose"):
        turned_off(value)
        with initialize_config_dir(config_dir=str(sweeper.CONF_DIR), version_base="1.3"):
            master = compose(config_name="config", return_hydra_config=True)
            loader = GlobalHydra.instance().config_loader()
            calls, load = [], loader.load_sweep_config
            loader.load_sweep_config = lambda cfg, o, calls=calls, load=load: (
                calls.append(o) or load(cfg, o)
            )
            once = composing.compose_once(loader)
            got[value] = ([once.plain(master, job) for job in jobs], len(calls), type(once))
    assert got[""][0] == got["compose"][0] and [p["depth"] for p in got[""][0]] == [1, 2, 3]
    assert got[""][1:] == (1, composing.Once) and got["compose"][1:] == (3, composing._Public)


def test_exit_off_is_pythons_own_exit_with_the_same_code(tmp_path):
    """On, the process ends by ``os._exit`` once atexit ran (no interpreter teardown: a global's ``__del__`` never
    runs); off, by ``sys.exit``, whose teardown runs it."""
    program = tmp_path / "p.py"
    program.write_text(
        "import atexit, os, sweeper\nclass D:\n    def __del__(self):\n        os.write(1, b'teardown')\n"
        "d = D()\natexit.register(lambda: os.write(1, b'atexit '))\nsweeper.main_exit(lambda: 3)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != tested.PUBLIC_ONLY}
    on = subprocess.run(
        [sys.executable, str(program)], capture_output=True, text=True, env=env, timeout=120
    )
    off = subprocess.run(
        [sys.executable, str(program)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, tested.PUBLIC_ONLY: "exit"},
    )
    assert (on.returncode, on.stdout) == (3, "atexit ")
    assert (off.returncode, off.stdout) == (3, "atexit teardown")


# Records that say when, where or by which process a run was made (they differ between any two sweeps), a group's
# and a trajectory's ids (random), the packing planner's estimate (from this machine's timings), and metrics that are
# timings
WHEN = {
    "sweeper.heartbeat",
    "sweeper.pid",
    "sweeper.pid_start",
    "sweeper.batch_group",
    "sweeper.trajectory",
    "batch_packed",
}
TIMING = re.compile(r"(_time_s|_fit_s|_per_s)$|^system/")


def _untimed(text: str) -> str:
    """``text`` with the cells of a Markdown table's timing columns (a run's description lists ``train_time_s``)
    blanked, padding included."""
    out, timed = [], None
    for line in text.split("\n"):
        cells = line.split("|")
        if not line.startswith("|"):
            timed = None
        elif timed is None:  # a table's header
            timed = {i for i, c in enumerate(cells) if TIMING.search(c.strip())}
        out.append("|".join("<time>" if i in (timed or ()) else c for i, c in enumerate(cells)))
    return "\n".join(out)


def _records(db: Path, folder: Path) -> dict:
    """Every run of the store, by name, as MLflow's client reads it: its status, params, metrics (timings by name
    only), tags (without :data:`WHEN`), artifact files and logged models' files; the sweep's folder, the run ids,
    the model ids and the ids of batched groups and trajectories replaced by what they stand for."""
    from conftest import client_for

    c = client_for(db)
    runs = [r for e in c.search_experiments() for r in c.search_runs([e.experiment_id])]
    names = {r.info.run_id: r.info.run_name for r in runs}
    models = [m for e in c.search_experiments() for m in c.search_logged_models([e.experiment_id])]
    names |= {m.model_id: f"model of {names[m.source_run_id]}" for m in models}
    shared = {}  # a group's or a trajectory's id -> the runs that carry it
    for r in runs:
        for key in ("batch_group", "trajectory"):
            if key in r.data.tags:
                shared.setdefault(r.data.tags[key], set()).add(r.info.run_name)

    def plain(value: str) -> str:
        value = _untimed(value.replace(str(folder), "<folder>"))
        for id_, name in names.items():
            value = value.replace(id_, f"<{name}>")
        return ",".join(sorted(shared[value])) if value in shared else value

    def files(lister, path=None) -> list[str]:
        out = []
        for f in lister(path):
            out += files(lister, f.path) if f.is_dir else [f.path]
        return sorted(out)

    out = {}
    for r in runs:
        out[plain(r.info.run_name)] = {
            "status": r.info.status,
            "params": {k: plain(v) for k, v in r.data.params.items()},
            "metrics": {k: None if TIMING.search(k) else v for k, v in r.data.metrics.items()},
            "tags": {k: plain(v) for k, v in r.data.tags.items() if k not in WHEN},
            "artifacts": files(lambda p, r=r: c.list_artifacts(r.info.run_id, p)),
            "models": sorted(
                (
                    m.name,
                    m.status,
                    tuple(files(lambda p, m=m: c.list_logged_model_artifacts(m.model_id, p))),
                )
                for m in models
                if m.source_run_id == r.info.run_id
            ),
        }
    return out


LAUNCHES = {  # (overrides, jobs, what the shortcuts' log says only when they are on)
    # 16 jobs: the writer (SWEEPER_WRITER=on below), the pyfunc models (log_model), the painter
    "batched": (
        # packing off: whether shapes pack is decided by a timing probe, not by a shortcut
        [
            "lr=0.01,0.02,0.05,0.1",
            "depth=1,2",
            "width=4,8",
            "epochs=30",
            "hydra.launcher.pack=false",
        ],
        16,
        "from a writer process",
    ),
    # joblib's worker processes: each asks for bulk and pyfunc_cache (nothing said only when on)
    "joblib": (
        [
            "lr=0.01,0.05",
            "depth=1,2",
            "epochs=30",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2",
        ],
        4,
        None,
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("launch", list(LAUNCHES))
def test_a_sweep_with_every_shortcut_off_records_what_it_records_with_every_one_on(
    tmp_path, _template_store, launch
):
    """The same sweep twice into two empty stores, every shortcut on and every one off (SWEEPER_PUBLIC_ONLY=1): the
    same runs, statuses, params, metrics (timings aside), tags (when and where aside), artifacts and logged models,
    read with MLflow's own client; off, one line for each shortcut the sweep asked about, and no template cached."""
    from conftest import cli, copy_store

    overrides, n, on_only = LAUNCHES[launch]
    got, said = {}, {}
    for name, value in (("fast", "0"), ("public", "1")):
        folder = tmp_path / name / "s"  # the same parent run name in both: "sweep s/sweep"
        folder.mkdir(parents=True)
        db = copy_store(_template_store, folder)
        if name == "public":  # the first sweep's probes (the activations' forms, packing's costs):
            # a form is decided by timing, so the same measurements for both
            (folder / "cache").mkdir()
            for probe in (tmp_path / "fast" / "s" / "cache").glob("*.json"):
                shutil.copy(probe, folder / "cache" / probe.name)
        env = {
            tested.PUBLIC_ONLY: value,
            "SWEEPER_CACHE_DIR": str(folder / "cache"),
            "SWEEPER_WRITER": "on",  # the writer in this short sweep too (unless public: off)
            "SWEEPER_PLOTS": "on",  # the figures drawn by the painter, or here: the same files
        }
        proc = cli(folder, "-m", *overrides, "tracking.log_model=true", store=db, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        got[name], said[name] = _records(db, folder), proc.stdout + proc.stderr
        models = sorted((folder / "cache" / "model-templates").glob("*/MLmodel"))
        # the pyfunc template cache, used only when on
        assert len(models) == (name == "fast"), models
    fast, public = got["fast"], got["public"]
    assert len(fast) == n + 1 and fast.keys() == public.keys()
    assert {r["status"] for r in fast.values()} == {"FINISHED"}
    for run in fast:
        a, b = fast[run], public[run]
        # each job's model, none on the parent
        assert bool(a["models"]) == run.startswith("lr="), run
        for part in ("status", "params", "tags", "artifacts", "models"):
            assert a[part] == b[part], (run, part)
        assert a["metrics"].keys() == b["metrics"].keys(), run
        for k, v in a["metrics"].items():
            assert b["metrics"][k] == (
                v if v is None else pytest.approx(v, rel=1e-12, abs=1e-12)
            ), (run, k)
    assert on_only is None or (on_only in said["fast"] and on_only not in said["public"])
    asked = NAMES - (set() if launch == "batched" else {"writer", "jobrun", "compose"})
    # once a process that asks (joblib's workers ask for bulk and pyfunc_cache)
    for name in sorted(asked):
        assert f"SWEEPER_PUBLIC_ONLY=1: the shortcut {name} is off" in said["public"], (
            name,
            said["public"][-3000:],
        )
    assert "is off" not in said["fast"] and "public calls are used" not in said["fast"]
