"""The MLflow UI as a person sees it (bench/ui_check.py): a real sweep, ``mlflow server``, headless Chromium. Runs where
Chromium and the playwright driver are installed (``apt-get install -y chromium``; ``python -m pip install --target
/tmp/ui-driver playwright``), and skips, saying which is missing, elsewhere."""

from __future__ import annotations

import importlib.util
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DRIVER = Path("/tmp/ui-driver")


def _missing() -> str | None:
    if not (shutil.which("chromium") or Path("/usr/bin/chromium").is_file()):
        return "no Chromium: apt-get install -y chromium"
    if not (DRIVER / "playwright").is_dir() and importlib.util.find_spec("playwright") is None:
        return f"no playwright driver: python -m pip install --target {DRIVER} playwright"
    return None


@pytest.mark.slow
@pytest.mark.skipif(_missing() is not None, reason=str(_missing()))
def test_the_printed_address_opens_the_best_run_first_with_its_metrics_in_a_real_browser(tmp_path):
    with socket.socket() as s:  # a free port for the server
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "ui_check.py"),
            "--port",
            str(port),
            "--shots",
            str(tmp_path / "shots"),
        ],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and not [ln for ln in lines if ln.startswith("FAIL")], (
        proc.stdout + proc.stderr
    )
    passed = [ln for ln in lines if ln.startswith("PASS")]
    assert any("the printed address opens the runs table" in ln for ln in passed), proc.stdout
    assert any("the best first, and no parent" in ln for ln in passed), proc.stdout
