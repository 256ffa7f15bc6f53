"""``python -m sweeper.check my_nets.TwoLayerNet [hidden=32 ...]``: hold a model of your own to
the interface before you sweep it, as scikit-learn's ``check_estimator`` does for estimators.

Checks, in seconds: the three methods; ``init`` draws a dict of arrays, the same from the same
seed; ``forward`` gives ``(n, n_out)``; ``backward`` gives one gradient per parameter, of its
shape; every gradient against central finite differences of ``sum(out · R)``
(so ``dout = R``), naming the parameter and its worst relative error; the model batched
(parameters stacked over members) equal to each member alone; NumPy equal to CuPy where a CUDA
device exists. Exits 0 when all pass, 1 on a failed check, 2 on a model that cannot be loaded.
From Python (your pytest): ``sweeper.check.check_model("my_nets:TwoLayerNet", hidden=32)``
raises ``AssertionError`` naming the check.
"""

from __future__ import annotations

import inspect
import shutil
import sys
import textwrap
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sweeper.base.backend import BackendUnavailable, fake_gpu, resolve
from sweeper.base.output import first_line
from sweeper.models import gradcheck
from sweeper.models.generic import init_host
from sweeper.models.gradcheck import FD_RTOL, N_ROWS
from sweeper.models.interface import ModelError, check_class, load_target
from sweeper.models.usercode import UserCodeError, call_user

__all__ = ["Check", "check_model", "main", "run_checks"]

N_IN = 5


@dataclass
class Check:
    name: str
    ok: bool | None  # None: not run here (e.g. no CUDA device), or advice rather than a failure
    detail: str


def run_checks(cls: Any, path: str, kwargs: dict[str, Any]) -> list[Check]:
    """Every check of a model class with its hyperparameters, in order;
    stops after the first that leaves nothing to check further."""
    # lazy: saves ~13 ms at this module's import (measured)
    from sweeper.models import stacked

    check_class(cls, path, kwargs)
    out: list[Check] = [Check("methods", True, "init, forward, backward")]
    net = cls(**kwargs)
    try:
        p1 = init_host(net, N_IN, 3, 7, "float64", path)
        p2 = init_host(net, N_IN, 3, 7, "float64", path)
    except ModelError as e:
        return out + [Check("init", False, str(e))]
    same = all(np.array_equal(p1[k], p2[k]) for k in p1)
    out.append(
        Check(
            "init",
            same,
            f"{len(p1)} parameters: "
            + ", ".join(f"{k} {p1[k].shape}" for k in p1)
            + (
                ""
                if same
                else " — not the same from the same seed: draw from the rng argument only"
            ),
        )
    )
    for n_out in (1, 3):
        got = gradcheck.check_gradients(net, N_IN, n_out, path)
        where = (got.problem or "").partition(" ")[0]
        if where in ("forward", "init"):
            return out + [Check(f"forward (n_out={n_out})", False, got.problem)]
        out.append(
            Check(
                f"forward (n_out={n_out})",
                True,
                f"out {(N_ROWS, n_out)}, expected {(N_ROWS, n_out)}",
            )
        )
        if got.problem:
            return out + [
                Check(f"backward (n_out={n_out})", False, got.problem.removeprefix("backward "))
            ]
        for k, err in got.errors.items():
            out.append(
                Check(
                    f"gradient {k} (n_out={n_out})",
                    err <= FD_RTOL,
                    f"worst relative error {err:.2g} against finite differences (allowed "
                    f"{FD_RTOL:g})",
                )
            )
    for task, n_out in (("regression", 1), ("multiclass", 3)):
        why = stacked.batches(net, N_IN, n_out, task)
        out.append(
            Check(
                f"batched = alone ({task})",
                True if why is None else None,
                "stacked members equal each alone: configurations of one shape train as one group"
                if why is None
                else f"does not batch ({why}): its configurations train one at a time",
            )
        )
    out.append(_gpu_check(net, path))
    return out


def _gpu_check(net: Any, path: str) -> Check:
    """Forward and backward on the GPU (or, with ``SWEEPER_FAKE_GPU=strict``,
    on the strict device stand-in, which refuses what CuPy refuses) against
    NumPy; a refusal names the line of the model's code that made it."""

    name = "NumPy = CuPy"
    try:
        gpu = resolve("gpu")
    except BackendUnavailable as e:
        return Check(
            name,
            None,
            f"not run: {e} (SWEEPER_FAKE_GPU=strict checks the device's rules without one)",
        )
    if gpu.fake and fake_gpu() != "strict":
        return Check(
            name,
            None,
            "not run: no CUDA device (a fake GPU namespace; SWEEPER_FAKE_GPU=strict checks the "
            "device's rules)",
        )
    if gpu.fake:
        name = "NumPy = CuPy (the strict device stand-in)"
    params = init_host(net, N_IN, 2, 3, "float64", path)
    rng = np.random.default_rng(2)
    X, R = rng.standard_normal((N_ROWS, N_IN)), rng.standard_normal((N_ROWS, 2))
    cpu_out, cache = net.forward(np, params, X)
    cpu_grads = net.backward(np, params, cache, R)
    dev = {k: gpu.to_device(v) for k, v in params.items()}
    try:
        out, cache = net.forward(gpu.xp, dev, gpu.to_device(X))
        grads = net.backward(gpu.xp, dev, cache, gpu.to_device(R))
        host = [k for k, g in [("out", out), *grads.items()] if isinstance(g, np.ndarray)]
        if host:
            return Check(
                name,
                False,
                f"{'forward' if host[0] == 'out' else 'backward'} gave a NumPy array "
                f"({host[0]}) on the device: make every array with xp",
            )
        gpu_out, gpu_grads = gpu.to_numpy(out), {k: gpu.to_numpy(g) for k, g in grads.items()}
    except Exception as e:  # noqa: BLE001  (CuPy's refusal, or the model's own error on the device)
        return Check(
            name,
            False,
            f"raised {first_line(e)}"
            f"{_where(e, net)}: on the device, every array forward and backward use must be "
            "xp's (a NumPy array mixed in, or np.asarray of a device array, is refused)",
        )
    ok = bool(np.allclose(cpu_out, gpu_out, rtol=1e-10, atol=1e-12)) and all(
        np.allclose(cpu_grads[k], gpu_grads[k], rtol=1e-10, atol=1e-12) for k in cpu_grads
    )
    return Check(
        name,
        ok,
        "forward and backward equal on both namespaces"
        if ok
        else "forward or backward differs between NumPy and CuPy",
    )


def _where(e: BaseException, net: Any) -> str:
    """`` (at my_nets.py:12 in forward)``: the innermost frame of the model's own module, or ""."""

    try:
        source = inspect.getsourcefile(type(net))
    except TypeError:
        return ""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == source]
    return f" (at {Path(source).name}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""


def check_model(target: Any, **hyperparameters: Any) -> list[Check]:
    """The checks for pytest: raise ``AssertionError`` naming the first
    failed check; return them all otherwise. ``target`` is a class or an
    import path (``my_nets:TwoLayerNet`` or ``my_nets.TwoLayerNet``)."""
    path = target if isinstance(target, str) else f"{target.__module__}:{target.__qualname__}"
    cls = load_target(path) if isinstance(target, str) else target
    try:
        checks = call_user(run_checks, cls, path, hyperparameters)
    except UserCodeError as e:
        raise AssertionError(f"{path}: {e}") from None
    failed = [c for c in checks if c.ok is False]
    if failed:
        raise AssertionError(f"{path}: {failed[0].name}: {failed[0].detail}")
    return checks


def _value(text: str) -> Any:
    # lazy: saves ~38 ms at this module's import (measured)
    import yaml

    return yaml.safe_load(text)


def _help() -> str:
    """The module's docstring, each paragraph filled to the terminal's width (as argparse's
    help is), so that what ``--help`` prints does not depend on how the source wraps it."""
    width = max(40, min(100, shutil.get_terminal_size().columns - 2))
    paragraphs = (" ".join(p.split()) for p in __doc__.strip().split("\n\n"))
    return "\n\n".join(textwrap.fill(p, width) for p in paragraphs)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(
            "sweeper.check: error: no model given: expected python -m sweeper.check MODULE.CLASS "
            "[NAME=VALUE ...] "
            "(--help says more)",
            file=sys.stderr,
        )
        return 2
    if argv[0] in ("-h", "--help"):
        print(_help())
        return 0
    path, kwargs = argv[0], {}
    for arg in argv[1:]:
        key, eq, value = arg.partition("=")
        if not eq:
            print(
                f"sweeper.check: error: {arg} is not allowed: expected NAME=VALUE (a "
                "hyperparameter)",
                file=sys.stderr,
            )
            return 2
        kwargs[key.removeprefix("model.")] = _value(value)
    try:
        cls = load_target(path, key="the model")
        # a model that would end this process: one line, exit 1
        checks = call_user(run_checks, cls, path, kwargs)
    except ModelError as e:
        print(f"sweeper.check: error: {e}", file=sys.stderr)
        return 2
    except UserCodeError as e:
        print(f"sweeper.check: FAIL {path}: {e}", file=sys.stderr)
        return 1
    for c in checks:
        mark = {True: "ok  ", False: "FAIL", None: "note"}[c.ok]
        print(f"{mark}  {c.name}: {c.detail}")
    failed = [c for c in checks if c.ok is False]
    passed, notes = sum(c.ok is True for c in checks), sum(c.ok is None for c in checks)
    print(
        f"{path}: {passed} checks passed"
        + (f", {len(failed)} FAILED" if failed else "")
        + (f", {notes} notes" if notes else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    from sweeper import main_exit

    # Ctrl-C through sweeper's handler: told apart from a model's own KeyboardInterrupt
    main_exit(main)
