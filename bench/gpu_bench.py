"""CPU-vs-GPU table for the trainer: the same models.train on NumPy and on CuPy, in one process.

    python bench/gpu_bench.py                  # W1 and W4, cpu, gpu and the naive per-epoch-sync
                                               # gpu loop
    python bench/gpu_bench.py --devices cpu --quick   # smoke test on a machine without a GPU
    python bench/gpu_bench.py --batched 1,16,256,1024,4096   # also the batched trainer, K members
                                                             # of W1
    python bench/gpu_bench.py --workloads W1 --batched 64 --optimizer adam
        # another update rule (+wd: decay)

Workloads (issue 3): W1 diabetes, depth 1, width 16; W4 synthetic 200,000 x 500, depth 2, width 512.
Each row is the median of ``--repeats`` runs from identical initial weights; ``speedup`` is
the CPU row's median train time over this row's. Train time excludes the warm-up pass (CuPy
compiles kernels on first use) and the host→device copy, both shown on their own. Needs
only NumPy, scikit-learn (for diabetes) and, for the GPU rows, CuPy: no Hydra or MLflow.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

# run from a checkout without installing
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sweeper import data  # noqa: E402
from sweeper import models  # noqa: E402
from sweeper.base.backend import BackendUnavailable, resolve  # noqa: E402

WORKLOADS = {
    "W1": dict(data=dict(name="diabetes"), depth=1, width=16, lr=0.005, epochs=5000, log_every=50),
    "W4": dict(
        data=dict(
            name="synthetic", task="regression", n_samples=200_000, n_features=500, noise=0.1
        ),
        depth=2,
        width=512,
        lr=0.01,
        epochs=10,
        log_every=1,
    ),
}
QUICK = {"W1": dict(epochs=500), "W4": dict(epochs=3, data=dict(n_samples=20_000))}


def workload(name: str, quick: bool, dtype: str) -> SimpleNamespace:
    spec = {**WORKLOADS[name], "data": dict(WORKLOADS[name]["data"])}
    if quick:
        spec["data"].update(QUICK[name].get("data", {}))
        spec.update({k: v for k, v in QUICK[name].items() if k != "data"})
    spec["data"].update(val_fraction=0.2, test_fraction=0.2)
    return SimpleNamespace(
        **{**spec, "data": SimpleNamespace(**spec["data"])}, activation="tanh", seed=0, dtype=dtype
    )


def run_once(
    cfg: SimpleNamespace, ds: data.Dataset, backend, naive: bool, opt=None
) -> dict[str, float]:
    t0 = backend.clock()
    X, y, Xv, yv, Xt = (
        backend.to_device(a.astype(cfg.dtype))
        for a in (ds.X_train, ds.y_train, ds.X_val, ds.y_val, ds.X_test)
    )
    model = models.build(cfg, ds.n_features, ds.task, backend)
    h2d = backend.clock() - t0
    fit = models.train(
        backend,
        model,
        X,
        y,
        Xv,
        yv,
        lr=cfg.lr,
        epochs=cfg.epochs,
        log_every=cfg.log_every,
        sync_every_epoch=naive,
        opt=opt,
    )
    pred = ds.to_original(backend.to_numpy(model.predict(Xt)).astype(np.float64))
    mse = float(np.mean((pred - ds.to_original(ds.y_test)) ** 2))
    return {
        "train": fit.train_time_s,
        "warmup": fit.warmup_time_s,
        "h2d": h2d,
        "mse": mse,
        "epochs": fit.epochs_run,
    }


def batched_rows(
    ks: list[int], devices: list[str], dtype: str, epochs: int, repeats: int, opt=None
) -> list[list[str]]:
    """Configuration-epochs/s of K members of W1 trained as one group, per
    device; the ratio is against the CPU's best configuration-epochs/s
    over the K tried (the goal: K=1024 on the GPU >= 20x that)."""
    from sweeper.models.batched import Member, stacked_params, train_group

    cfg = workload("W1", False, dtype)
    ds = data.load(cfg.data, cfg.seed)
    rates: dict[tuple[str, int], float] = {}
    notes: dict[str, str] = {}
    for device in devices:
        try:
            backend = resolve(device)
        except BackendUnavailable as e:
            notes[device] = f"skipped: {e}"[:60]
            continue
        arrays = [
            backend.to_device(a.astype(dtype)) for a in (ds.X_train, ds.y_train, ds.X_val, ds.y_val)
        ]
        for k in ks:
            members = [Member(cfg.lr * (1 + i / k), epochs, seed=i) for i in range(k)]
            times = []
            for _ in range(repeats):
                params = stacked_params(
                    [ds.n_features, cfg.width, 1], "tanh", [m.seed for m in members], dtype
                )
                times.append(
                    train_group(
                        backend,
                        params,
                        "tanh",
                        ds.task,
                        *arrays,
                        members,
                        log_every=cfg.log_every,
                        opt=opt,
                    ).train_time_s
                )
            rates[device, k] = k * epochs / statistics.median(times)
            print(
                f"  batched {device} K={k}: {rates[device, k]:,.0f} configuration-epochs/s",
                flush=True,
            )
    cpu_best = max((r for (d, _), r in rates.items() if d == "cpu"), default=None)
    rows = []
    for (device, k), rate in rates.items():
        rows.append(
            [
                "W1 batched",
                f"{device} K={k}",
                "-",
                f"{rate:,.0f} cfg-epochs/s",
                "-",
                "-",
                f"{rate / cpu_best:.2f}x" if cpu_best else "-",
                "-",
                "vs the CPU's best K",
            ]
        )
    rows += [["W1 batched", d, "-", "-", "-", "-", "-", "-", n] for d, n in notes.items()]
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--workloads", default="W1,W4")
    ap.add_argument("--devices", default="cpu,gpu")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    ap.add_argument(
        "--batched", default="", help="comma-separated K: also train K members of W1 as one group"
    )
    ap.add_argument(
        "--optimizer",
        default="gd",
        help="gd, momentum (Nesterov's) or adam, +wd for weight decay 1e-3",
    )
    ap.add_argument("--out", type=Path, help="also write the table to this file")
    args = ap.parse_args(argv)
    from sweep_bench import update_rule

    opt = update_rule(args.optimizer)

    variants = [(d, False) for d in args.devices.split(",")]
    if "gpu" in args.devices.split(","):
        variants.append(("gpu", True))
    rows = []
    for name in args.workloads.split(","):
        cfg = workload(name, args.quick, args.dtype)
        t = time.perf_counter()
        ds = data.load(cfg.data, cfg.seed)
        print(
            f"{name}: {len(ds.X_train)} x {ds.n_features} train rows, depth {cfg.depth}, width "
            f"{cfg.width}, "
            f"{cfg.epochs} epochs, {args.dtype} (data {time.perf_counter() - t:.1f} s)",
            flush=True,
        )
        cpu_median = None
        for device, naive in variants:
            label = f"{device}{' naive sync' if naive else ''}"
            try:
                backend = resolve(device)
            except BackendUnavailable as e:
                rows.append([name, label, "-", "-", "-", "-", "-", "-", f"skipped: {e}"[:60]])
                continue
            runs = [run_once(cfg, ds, backend, naive, opt) for _ in range(args.repeats)]
            train = statistics.median(r["train"] for r in runs)
            cpu_median = train if device == "cpu" else cpu_median
            rate = runs[0]["epochs"] / train
            rows.append(
                [
                    name,
                    label,
                    f"{train:.4f}",
                    f"{rate:,.{0 if rate >= 100 else 2}f}",
                    f"{statistics.median(r['warmup'] for r in runs):.4f}",
                    f"{statistics.median(r['h2d'] for r in runs):.4f}",
                    f"{cpu_median / train:.2f}x" if cpu_median else "-",
                    f"{runs[0]['mse']:.6g}",
                    "",
                ]
            )
            print(f"  {label}: median train {train:.4f} s over {args.repeats} runs", flush=True)

    if args.batched:
        ks = [int(k) for k in args.batched.split(",")]
        rows += batched_rows(
            ks, args.devices.split(","), args.dtype, 500 if args.quick else 2000, args.repeats, opt
        )

    header = [
        "workload",
        "variant",
        "train s (median)",
        "epochs/s",
        "warmup s",
        "h2d s",
        "speedup vs cpu",
        "test mse",
        "note",
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    table = "\n".join(line.format(*r).rstrip() for r in [header, ["-" * w for w in widths], *rows])
    about = (
        f"numpy {np.__version__}, python {platform.python_version()}, {platform.machine()}, "
        f"update {args.optimizer}"
    )
    print(f"\n{about}\n{table}")
    if args.out:
        args.out.write_text(f"{about}\n{table}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
