"""``sweeper.sweep.hydra_run_job.run_job`` (the batched launcher's, for sweeper's own jobs) does what Hydra's ``run_job``
does: the same ``.hydra`` files byte for byte, the same task config and ``HydraConfig`` inside the task, the same
callbacks and ``JobReturn``, the caller's ``HydraConfig`` and working folder restored, a failing task returned."""

from __future__ import annotations

import os
import shutil

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import run_job as hydras_run_job
from hydra.core.utils import setup_globals
from hydra.types import HydraContext
from omegaconf import OmegaConf, open_dict, read_write

import sweeper
from sweeper.contract.compose import compose_once
from sweeper.sweep import hydra_run_job

# one shape: the launcher lends the second job the first one's config with its values set
JOBS = [
    ["lr=0.01", "depth=1"],
    ["lr=0.02", "depth=2"],
    ["lr=0.03", "depth=1", "hydra.job.chdir=true"],
]


class Calls:
    """Hydra's callbacks object, recording what it is called with."""

    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def on_job_start(self, config, task_function) -> None:
        self.seen.append(("start", config.lr, config.hydra.job.num))

    def on_job_end(self, config, job_return) -> None:
        self.seen.append(
            (
                "end",
                config.lr,
                job_return.status.name,
                str(job_return.hydra_cfg.hydra.runtime.output_dir),
            )
        )


def _jobs(tmp_path, runner, lend: bool) -> tuple[list, dict, list]:
    inside, files, returns = [], {}, []

    def task(cfg):
        inside.append(
            (
                OmegaConf.to_container(cfg, resolve=True),
                OmegaConf.to_container(HydraConfig.get(), resolve=True),
                os.getcwd(),
                OmegaConf.is_struct(cfg),
                "hydra" in cfg,
            )
        )
        if cfg.lr > 0.015:
            raise ValueError(f"a failing task at lr={cfg.lr}")
        return cfg.lr * 2

    sweep = tmp_path / "sweep"
    calls = Calls()
    cwd = os.getcwd()
    with initialize_config_dir(config_dir=str(sweeper.CONF_DIR), version_base="1.3"):
        master = compose(
            config_name="config",
            overrides=[f"hydra.sweep.dir={sweep}", f"hydra.run.dir={tmp_path}/run"],
            return_hydra_config=True,
        )  # run.dir: not ${now:...}, which two runs would read apart
        loader = GlobalHydra.instance().config_loader()
        context = HydraContext(config_loader=loader, callbacks=calls)
        fast = compose_once(loader)
        setup_globals()
        for i, job in enumerate(JOBS):
            cfg = fast.lend(master, job) if lend else loader.load_sweep_config(master, job)
            with read_write(cfg.hydra), open_dict(cfg):
                cfg.hydra.job.id = cfg.hydra.job.num = i
            before = HydraConfig.instance().cfg
            memo = {"memo": fast.memo(cfg)} if runner is hydra_run_job.run_job and lend else {}
            ret = runner(
                hydra_context=context,
                task_function=task,
                config=cfg,
                job_dir_key="hydra.sweep.dir",
                job_subdir_key="hydra.sweep.subdir",
                **memo,
            )
            assert HydraConfig.instance().cfg is before and os.getcwd() == cwd
            value = ret.return_value if ret.status.name == "COMPLETED" else repr(ret._return_value)
            returns.append(
                (
                    ret.status.name,
                    value,
                    ret.overrides,
                    ret.working_dir,
                    ret.task_name,
                    OmegaConf.to_container(ret.cfg, resolve=True),
                    str(ret.hydra_cfg.hydra.runtime.output_dir),
                )
            )
    for path in sorted(sweep.rglob("*")):
        if path.is_file():
            files[str(path.relative_to(sweep))] = path.read_bytes()
    shutil.rmtree(sweep)
    return inside + calls.seen, files, returns


@pytest.mark.parametrize("lend", [True, False], ids=["lent", "composed"])
def test_sweepers_run_job_does_what_hydras_does(tmp_path, lend):
    hydra_inside, hydra_files, hydra_returns = _jobs(tmp_path, hydras_run_job, lend=False)
    inside, files, returns = _jobs(tmp_path, hydra_run_job.run_job, lend=lend)
    assert sorted(files) == sorted(hydra_files)
    # .hydra/{config,hydra,overrides}.yaml
    assert len([f for f in files if "/.hydra/" in f]) == 3 * len(JOBS)
    for name, content in hydra_files.items():
        assert files[name] == content, name
    assert inside == hydra_inside
    assert returns == hydra_returns
    assert [r[0] for r in returns] == ["COMPLETED", "FAILED", "FAILED"]
    assert returns[2][3].endswith("/2")  # hydra.job.chdir=true: the task ran in its output folder


def test_a_hydra_config_written_a_section_at_a_time_is_omegaconfs_document(tmp_path):
    """hydra.yaml from remembered sections: the same document as the whole, also where a long value folds."""
    with initialize_config_dir(config_dir=str(sweeper.CONF_DIR), version_base="1.3"):
        cfg = compose(
            config_name="config",
            return_hydra_config=True,
            overrides=[f"hydra.sweep.dir={tmp_path}/" + "x" * 120, "+hydra.job.env_set.A='a b: c'"],
        )
    holder = OmegaConf.create({"hydra": cfg.hydra})
    memo: dict = {}
    assert hydra_run_job.hydra_yaml(holder, memo) == OmegaConf.to_yaml(holder)
    assert ("sweep",) in memo and (
        "job",
        "num",
    ) not in memo  # hydra.job.num differs between jobs: written each time
    with read_write(holder), open_dict(holder):
        holder.hydra.job.num = 7
        holder.hydra.runtime.output_dir = "/elsewhere"
    assert hydra_run_job.hydra_yaml(holder, memo) == OmegaConf.to_yaml(holder)


def test_the_yaml_is_omegaconfs_document():
    cfg = OmegaConf.create(
        {"a": "1.0", "b": "true", "c": [1, "x: y"], "d": {"e": None, "f": "${a}"}, "g": "ü"}
    )
    assert hydra_run_job.to_yaml(cfg) == OmegaConf.to_yaml(cfg)


def test_a_plain_containers_yaml_is_omegaconfs_document():
    from sweeper.base import yamltext

    plain = {
        "lr": 0.0202,
        "s": "1e-3",
        "n": "null",
        "t": "~",
        "yes": "on",
        "e": 10,
        "f": 1e-300,
        "b": False,
        "l": [0.1, "2", {"k": "v: w"}],
        "u": "é",
        "empty": {},
        "none": None,
        "inf": float("inf"),
    }
    assert yamltext.dump(plain) == OmegaConf.to_yaml(plain)


def test_a_kept_job_return_holds_its_config_as_plain_data_and_reads_as_the_same_config():
    from hydra.core.utils import JobReturn, JobStatus

    cfg = OmegaConf.create(
        {"lr": 0.1, "data": {"name": "iris", "path": "${oc.env:HOME}"}, "l": [1, 2]}
    )
    OmegaConf.set_struct(cfg, True)
    ret = JobReturn(
        overrides=["lr=0.1"],
        cfg=cfg,
        working_dir="/w",
        task_name="t",
        status=JobStatus.COMPLETED,
        _return_value={"status": "FINISHED"},
    )
    kept = hydra_run_job.lean(ret)
    assert isinstance(kept, JobReturn) and "_plain" in kept.__dict__
    assert (
        kept.cfg == cfg
        and OmegaConf.is_struct(kept.cfg)
        and kept.cfg.data._get_node("path")._value() == "${oc.env:HOME}"
    )
    assert (kept.overrides, kept.working_dir, kept.task_name, kept.return_value) == (
        ["lr=0.1"],
        "/w",
        "t",
        {"status": "FINISHED"},
    )
    kept.cfg = None  # set again: what was set
    assert kept.cfg is None
