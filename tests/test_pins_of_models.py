"""Pins of any model pass the pinned suite as printed: a class of yours and a function trainer, swept and promoted from
a folder of their own, re-run by ``python -m pytest tests/test_best.py --best-dir DIR`` from a fresh shell without
PYTHONPATH (the pin says where the module lives); conf/best is never touched."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys

import pytest
import yaml

from conftest import cli, user_folder
from sweeper import ROOT
from sweeper.insight import pinned


def _conf_best() -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(pinned.BEST_DIR.iterdir())
    }


@pytest.mark.slow
def test_pins_of_a_class_and_a_function_trainer_pass_the_suite_from_a_fresh_shell(
    tmp_path, monkeypatch
):
    user = user_folder(
        tmp_path,
        monkeypatch,
        {
            "my_nets.py": (ROOT / "examples" / "my_nets" / "my_nets.py").read_text(),
            "my_loop.py": (ROOT / "examples" / "my_loop" / "my_loop.py").read_text(),
        },
    )
    before = _conf_best()
    store = tmp_path / "mlruns" / "mlflow.db"
    fresh = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    pins = tmp_path / "pins"
    for name, grid in (
        (
            "mynet",
            ("model._target_=my_nets.TwoLayerNet", "model.hidden=4,8", "lr=0.02", "log_every=10"),
        ),
        ("myloop", ("model._target_=my_loop.fit", "lr=0.01,0.05")),
    ):
        proc = cli(
            user,
            "-m",
            *grid,
            "epochs=150",
            f"tracking.experiment={name}",
            f"hydra.sweep.dir={tmp_path / name}",
            store=store,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        # promote from another folder, without PYTHONPATH: its check of the pin reaches the module where the run says
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "sweeper.promote",
                "--experiment",
                name,
                "--name",
                name,
                "--tracking-uri",
                f"sqlite:///{store}",
                "--out-dir",
                str(pins),
            ],
            cwd=elsewhere,
            capture_output=True,
            text=True,
            env=fresh,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert (
            f"check them all: python -m pytest tests/test_best.py --best-dir {pins}" in proc.stdout
        )
        doc = yaml.safe_load((pins / f"{name}.yaml").read_text())
        assert doc["pinned"]["model_dir"] == str(user) and len(doc["pinned"]["model_source"]) == 32
        assert not {"depth", "width", "activation"} & set(doc)
    # the suite as printed, from sweeper's checkout, in a fresh environment: nothing but the pins says where the
    # modules are (the tests that re-run pins, the file checks, and the fingerprint check of test_interface.py)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "tests/test_best.py",
            "tests/test_interface.py::test_every_pin_keeps_its_fingerprint_with_the_model_group",
            "--best-dir",
            str(pins),
            "-k",
            "pinned or perturbed or improvements or reruns or fingerprint or guards",
            "-rs",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=fresh,
        timeout=1200,
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-5000:]
    assert " failed" not in out.splitlines()[-1], out[-3000:]
    # each pin re-run, in a group (the class), perturbed, its file and fingerprint checked, the CLI's re-run of each kind
    assert int(re.search(r"(\d+) passed", out.splitlines()[-1]).group(1)) >= 15, out[-3000:]
    skipped = [ln for ln in out.splitlines() if ln.startswith("SKIPPED")]
    assert all(
        "a function trainer" in ln or "pin folder of one's own" in ln or "no pin of a" in ln
        for ln in skipped
    ), skipped
    assert any(
        "[myloop-another seed" in ln or "a function trainer may draw nothing" in ln
        for ln in skipped
    )
    assert _conf_best() == before  # the repository's own pins untouched
