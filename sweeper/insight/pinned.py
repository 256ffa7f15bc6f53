"""Promoted configurations (``conf/best/*.yaml``): write one from a
tracked run, check a re-run against it.

A promoted file is an option of the ``best`` config group: ``python -m sweeper +best=NAME`` re-runs
the run it was promoted from. Besides the knobs it holds ``pinned:`` — provenance and the expected
metrics, each ``{value, rtol, direction}``. A re-run passes when no pinned metric is worse than its
value by more than ``rtol`` relative; improvements pass, and those beyond ``rtol`` are reported.
Used by ``python -m sweeper.promote`` and by the regression suite ``tests/test_best.py``.
"""

from __future__ import annotations

import math
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

import yaml
from omegaconf import DictConfig

from sweeper import CONF_DIR, ROOT
from sweeper.contract.config import NOT_FINGERPRINTED, TOP_LEVEL
from sweeper.job.metrics import LOWER_IS_BETTER
from sweeper.base.fmt import cell, parse_param  # noqa: F401  (parse_param: the pins' reader)

from sweeper.base.omegaconf_internals import dumper

__all__ = [
    "BEST_DIR",
    "CONF_DIR",
    "DEFAULT_RTOL",
    "Row",
    "SLOW_S",
    "check",
    "compose_file",
    "config_from_params",
    "direction",
    "expected_metrics",
    "pinned_files",
    "read_pinned",
    "render",
    "suite_dir",
    "table",
]

BEST_DIR = CONF_DIR / "best"

# Lower is better for errors and losses, higher for scores; val_ and test_ metrics alike.
DIRECTION = MappingProxyType(
    {name: "lower" if lower else "higher" for name, lower in LOWER_IS_BETTER.items()}
)

# The default relative tolerance of a pinned metric, by the run's dtype. On the machine that
# pinned it a CPU re-run reproduces every metric exactly (0 would pass). Another CPU or BLAS
# build sums in another order and differs in the last bits, which gradient descent carries
# through every epoch. Measured over the 66 configurations of the sweeps the committed files
# came from (docs/manual/promote.md): OpenBLAS forced onto another CPU kernel
# (OPENBLAS_CORETYPE=Haswell) moved a float64 metric by at most 9e-15 relative, inputs nudged
# by one ulp by at most 4e-14; in float32 by at most 1.4e-5 and 2.8e-5. The defaults leave
# margins of 10^7-10^8 (float64) and ~35 (float32), and stay far below any change that matters:
# each mutation of tests/test_best.py makes the worst pinned metric 12 % to 350 % worse.
DEFAULT_RTOL = MappingProxyType({"float64": 1e-6, "float32": 1e-3})

# Pinned configs whose original training took longer than this are marked ``slow`` in the suite.
SLOW_S = 2.0


def direction(metric: str) -> str | None:
    """Whether lower or higher is better (``"lower"``/``"higher"``)
    for a val_/test_ quality metric, else None."""
    split, _, name = metric.partition("_")
    return DIRECTION.get(name) if split in ("val", "test") else None


def expected_metrics(metrics: Mapping[str, float], rtol: float) -> dict[str, dict[str, Any]]:
    """The ``pinned.expected`` node of a run's metrics: every finite
    val_/test_ quality metric, val_ first."""
    kept = [k for k, v in metrics.items() if direction(k) and math.isfinite(v)]
    return {
        k: {"value": float(metrics[k]), "rtol": rtol, "direction": direction(k)}
        for k in sorted(kept, key=lambda k: (not k.startswith("val_"), k))
    }


@dataclass(frozen=True)
class Row:
    """One pinned metric against a re-run: the verdict is same, better, within, WORSE or MISSING."""

    metric: str
    expected: float
    got: float | None
    rtol: float
    direction: str
    verdict: str

    @property
    def failed(self) -> bool:
        return self.verdict in ("WORSE", "MISSING")


def verdict(expected: float, got: float | None, rtol: float, direction: str) -> str:
    """Compare one metric against the band ``expected ± rtol·|expected|``: inside it the re-run is
    ``within`` (either way: the band is the noise of another CPU or BLAS build,
    e.g. 8e-16 relative), beyond it ``better`` or ``WORSE`` by the metric's direction.

    ``|expected|`` keeps the band the right way round for metrics that can be negative (R²).
    """
    if got is None or not math.isfinite(got):
        return "MISSING"
    if got == expected:
        return "same"
    if abs(got - expected) <= rtol * abs(expected):
        return "within"
    better = got < expected if direction == "lower" else got > expected
    return "better" if better else "WORSE"


def check(expected: Mapping[str, Mapping[str, Any]], got: Mapping[str, float]) -> list[Row]:
    """Every pinned metric of ``expected`` (a ``pinned.expected``
    node) against the re-run's ``got``."""
    rows = []
    for metric, e in expected.items():
        value = got.get(metric)
        value = None if value is None else float(value)
        rows.append(
            Row(
                metric,
                float(e["value"]),
                value,
                float(e["rtol"]),
                e["direction"],
                verdict(float(e["value"]), value, float(e["rtol"]), e["direction"]),
            )
        )
    return rows


def table(rows: list[Row]) -> str:
    """Expected vs got per metric (4 significant digits, as every table of sweeper), aligned;
    the relative change is signed (+ = larger): it shows a difference below the 4th digit."""
    header = ["metric", "expected", "got", "change", "rtol", "better", "verdict"]
    lines = []
    for r in rows:
        change = (
            "-"
            if r.got is None or r.expected == 0
            else f"{(r.got - r.expected) / abs(r.expected):+.3g}"
        )
        lines.append(
            [r.metric, cell(r.expected), cell(r.got), change, f"{r.rtol:g}", r.direction, r.verdict]
        )
    widths = [max(len(x) for x in col) for col in zip(header, *lines)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(
        fmt.format(*row).rstrip() for row in [header, ["-" * w for w in widths], *lines]
    )


def config_from_params(params: Mapping[str, str]) -> dict[str, Any]:
    """The knobs of a run from its params: the fingerprinted top-level
    knobs, ``device: cpu`` and the data node.

    Knobs that change how a run executes but not what it computes (``NOT_FINGERPRINTED``) keep their
    defaults, ``tracking.*`` is left out (the re-run logs wherever it is told to) and so is a
    previous ``pinned.*`` (a re-run of a promoted config logs it too). A data path inside the
    repository is written as ``${sweeper_root:}/...`` so that the file works in any checkout.
    """
    cfg: dict[str, Any] = {
        k: parse_param(params[k]) for k in TOP_LEVEL if k in params and k not in NOT_FINGERPRINTED
    }
    cfg["device"] = "cpu"  # the suite re-runs on the CPU; expected metrics come from CPU runs only
    data = {k[len("data.") :]: parse_param(v) for k, v in params.items() if k.startswith("data.")}
    if isinstance(data.get("path"), str) and Path(data["path"]).is_relative_to(ROOT):
        data["path"] = "${sweeper_root:}/" + Path(data["path"]).relative_to(ROOT).as_posix()
    cfg["data"] = data
    model = {
        k[len("model.") :]: parse_param(v) for k, v in params.items() if k.startswith("model.")
    }
    # a model of the interface: its import path and hyperparameters
    # (the default model's keys do not apply)
    if model:
        # lazy: saves ~30 ms at this module's import (measured)
        from sweeper.models.interface import top_level_keys

        model["_target_"] = params["model._target_"]
        cfg = {k: v for k, v in cfg.items() if k not in top_level_keys()}
        cfg["model"] = {"_target_": model.pop("_target_"), **model}
    return cfg


class _Inline(dict):
    """A mapping written on one line (``{value: 1.0, rtol: 1e-06, direction: lower}``)."""


def _dumper() -> type:
    # OmegaConf's dumper quotes strings its own loader would read as something else (a commit hash
    # such as '1234e567' is a float to it); one line per expected metric keeps the file readable.
    class Dumper(dumper()):
        pass

    Dumper.add_representer(
        _Inline, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v, flow_style=True)
    )
    return Dumper


def render(
    cfg: Mapping[str, Any],
    pinned: Mapping[str, Any],
    rerun: str | None = None,
    out_dir: Path | None = None,
) -> str:
    """The text of ``conf/best/NAME.yaml`` for the knobs ``cfg`` and the
    ``pinned`` metadata; ``rerun``: the command that re-runs a file written
    elsewhere (``out_dir``; see ``sweeper.promote.rerun_args``)."""
    name, data = pinned["name"], cfg["data"]["name"]
    best = rerun in (None, f"python -m sweeper +best={name}")
    head = (
        "# @package _global_\n"
        f"# Promoted from MLflow run {pinned['run_id']} (experiment {pinned['experiment']}) by "
        "python -m sweeper.promote.\n"
        f"#   re-run it:  {rerun or f'python -m sweeper +best={name}'}\n"
        "#   checked by: python -m pytest tests/test_best.py"
        f"{'' if best else f' --best-dir {suite_dir(out_dir)}'} "
        "(fails when a pinned metric is worse beyond its rtol)\n"
        f"defaults:\n  - override /data: {data}\n\n"
    )
    body = {
        **cfg,
        "pinned": {**pinned, "expected": {k: _Inline(v) for k, v in pinned["expected"].items()}},
    }
    return head + yaml.dump(body, Dumper=_dumper(), sort_keys=False, allow_unicode=True)


def suite_dir(out_dir: Path | None) -> str:
    """A pin folder as ``--best-dir`` takes it: absolute (the suite
    runs from sweeper's checkout), quoted for a shell."""

    return shlex.quote(str(Path(out_dir or BEST_DIR).resolve()))


def compose_file(path: Path, *overrides: str) -> DictConfig:
    """Compose ``+best=<stem>`` for a promoted file that may lie
    outside ``conf/best`` (e.g. in tmp_path).

    The project's ``conf/`` is copied to a temporary folder with the file as its
    only ``best`` option, so the composition is the
    one ``python -m sweeper +best=<stem>`` would make, whatever ``conf/best`` holds.
    """
    # lazy: saves ~57 ms at this module's import (measured)
    from hydra import compose, initialize_config_dir

    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "conf"
        shutil.copytree(
            CONF_DIR, conf, ignore=lambda d, names: names if Path(d).name == "best" else []
        )
        # git keeps no empty folder: a checkout may have no conf/best
        (conf / "best").mkdir(exist_ok=True)
        shutil.copy(path, conf / "best" / path.name)
        with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
            return compose(config_name="config", overrides=[f"+best={path.stem}", *overrides])


def pinned_files(directory: Path = BEST_DIR) -> list[Path]:
    """The promoted configs in ``directory``, by name."""
    return sorted(directory.glob("*.yaml"))


def read_pinned(path: Path) -> dict[str, Any]:
    """The ``pinned`` node of a promoted file without composing it (for collecting tests)."""
    return yaml.safe_load(path.read_text()).get("pinned") or {}
