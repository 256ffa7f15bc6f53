"""Text data: sparse against dense training on the SMS Spam Collection, as the vocabulary cap grows.

    python bench/text_bench.py                          # 1k / 10k / 50k / all terms, sparse and
                                                        # dense (~6 min on 2 cores)
    python bench/text_bench.py --caps 1000 --epochs 20  # a quick look
    python bench/text_bench.py --path /path/to/SMSSpamCollection --device gpu
    python bench/text_bench.py --group 16 --caps 10000,50000  # 16 lr values: one batched group
                                                              # against one at a time
    python bench/text_bench.py --group 16 --layouts           # one epoch: the group's two sparse
                                                              # layouts, one thread

Each cell is one configuration of ``data=sms data.ngram_max=2 depth=1 width=64`` trained by
the project's own path (``sweeper.data.load`` → ``sweeper.job.compute.train_and_score``) in
a fresh subprocess, so that its peak memory (``ru_maxrss``: the data, the vectorizer and
the trainer's buffers) is its own. Columns: the fitted vocabulary (``data.max_features=0``:
every word and word pair of the training rows), epochs/s (``train_time_s``, after
the warm-up pass), peak RSS, test accuracy after the same epochs.

``--group K``: K configurations of that shape (lr from 1/8 to 1, geometric; sparse features),
trained as the batched launcher trains them (``sweeper.sweep.launch.compute_group``: one
group, the sparse first layer shared) against the same K one at a time (``train_and_score``,
the one-configuration sparse trainer), each side in a fresh
subprocess. Columns: configuration-epochs/s (K · epochs over the training time: the group's,
or the sum of the K runs'), the wall time of the compute half (one at a time, each
configuration loads its data as the one-job path does; the group loads them once; both train
and score), peak RSS, and the largest difference in test log loss between the two sides. Both
sides get the same threads, ``--threads`` (default 1: ``SWEEPER_THREADS`` and the BLAS thread
variables in each subprocess); the header says how many. Without it a group of K >= 16 split
across two threads while a configuration alone ran on one: the ratio compared unequal cores.

``--group K --layouts``: one training epoch on one thread, best of 15, per member:
the group with one sparse product per member (the CPU's layout), with one product for
the whole group (the GPU's), and one configuration alone (``models.mlp.FullBatch``).
Shared machines make the subprocess columns noisy; this one is the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PATH = ROOT.parent / "shared" / "data" / "SMSSpamCollection.tsv"


def one(path: str, cap: int, sparse: bool, epochs: int, lr: float, device: str) -> dict:
    """Train one configuration here and return its numbers (run by the parent in a subprocess)."""
    from sweeper import data
    from sweeper.base.backend import resolve
    from sweeper.job.compute import train_and_score

    cfg = _config(path, cap, sparse, epochs, lr, device)
    ds = data.load(cfg.data, cfg.seed)
    out = train_and_score(cfg, ds, resolve(device))
    return {
        "vocabulary": ds.n_features,
        "epochs_per_s": out.scores["epochs_per_s"],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "test_accuracy": out.scores.get("test_accuracy", float("nan")),
    }


def _config(path: str, cap: int, sparse: bool, epochs: int, lr: float, device: str) -> object:
    from hydra import compose, initialize_config_dir

    from sweeper import CONF_DIR

    overrides = [
        "data=sms",
        f"data.path={path}",
        "data.ngram_max=2",
        f"data.max_features={cap}",
        f"data.sparse={str(sparse).lower()}",
        "depth=1",
        "width=64",
        f"lr={lr}",
        f"epochs={epochs}",
        f"log_every={max(1, epochs // 5)}",
        f"device={device}",
    ]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def group_lrs(k: int) -> list[float]:
    """From 1/8 to 1, geometric: above ~1.5 the loss of this net jumps within
    100 epochs, and the curves of any two computations (one at a time,
    batched) part from their last digit up (chaos, not the arithmetic)."""
    return [round(2 ** (3 * i / max(1, k - 1) - 3), 4) for i in range(k)]


def one_group(path: str, cap: int, k: int, epochs: int, device: str, batched: bool) -> dict:
    """K configurations (``group_lrs``) as one batched group, or one
    at a time (run in a subprocess)."""
    from sweeper import data
    from sweeper.contract.compose import plain as plain_config
    from sweeper.sweep import launch
    from sweeper.base.backend import resolve
    from sweeper.job.compute import train_and_score

    cfgs = [_config(path, cap, True, epochs, lr, device) for lr in group_lrs(k)]
    t0 = time.perf_counter()
    if batched:
        out = launch.compute_group(
            [launch.Job(i, [], c, plain_config(c)) for i, c in enumerate(cfgs)]
        )
        scores = [out[i].outcome.scores for i in range(k)]
        train_time = scores[0]["group_train_time_s"]
        vocabulary = data.load_plain(plain_config(cfgs[0])["data"], cfgs[0].seed).n_features
    else:  # as the one-job path: each job loads (vectorises) its data, then trains and scores
        scores = []
        for c in cfgs:
            ds = data.load(c.data, c.seed)
            scores.append(train_and_score(c, ds, resolve(device)).scores)
        train_time = sum(s["train_time_s"] for s in scores)
        vocabulary = ds.n_features
    return {
        "vocabulary": vocabulary,
        "config_epochs_per_s": k * epochs / train_time,
        "wall_s": time.perf_counter() - t0,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "test_log_loss": [s.get("test_log_loss", float("nan")) for s in scores],
    }


def epoch_layouts(path: str, cap: int, k: int, reps: int = 15) -> dict:
    """Seconds per member-epoch (best of ``reps``) of the group's two
    sparse layouts and of one configuration."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    from sweeper import data
    from sweeper.contract.compose import plain as plain_config
    from sweeper.models.activations import ACTIVATIONS
    from sweeper.models.batched import _Pass, stacked_params
    from sweeper.models.mlp import MLP, FullBatch, init_params
    from sweeper.models.optim import Optimizer, State
    from sweeper.models.packed import Layout, Shape

    cfg = _config(path, cap, True, 1, 1.0, "cpu")
    ds = data.load_plain(plain_config(cfg)["data"], cfg.seed)
    sizes, scale = [ds.n_features, 64, 1], np.full((k, 1, 1), -1e-3)
    cells = {}
    for name, per_member in (("per member", True), ("one product", False)):
        layout = Layout([Shape(tuple(sizes), "tanh")], [k], "member" if per_member else "group")
        P = layout.pack([stacked_params(sizes, "tanh", [0] * k, "float64")], "float64")
        p = _Pass(
            np,
            layout,
            P,
            [ACTIVATIONS["tanh"]],
            ds.task,
            ds.X_train,
            ds.y_train,
            scale,
            State(np, [P], Optimizer(), 0.0, [Ellipsis]),
        )
        cells[name] = (p.forward_calls + p.backward_calls + p.update_calls, k)
    model = MLP(np, init_params(sizes, "tanh", 0, "float64"), "tanh", ds.task)
    cells["alone"] = (FullBatch(model, ds.X_train, ds.y_train, lr=1e-3).epoch_calls, 1)
    best = dict.fromkeys(cells, float("inf"))
    with threadpool_limits(1):
        for _ in range(reps):
            for name, (calls, members) in cells.items():
                t = time.perf_counter()
                for call in calls:
                    call()
                best[name] = min(best[name], (time.perf_counter() - t) / members)
    return {"vocabulary": ds.n_features, **best}


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--path", default=str(DEFAULT_PATH))
    ap.add_argument(
        "--caps", default="1000,10000,50000,0", help="data.max_features values (0: no cap)"
    )
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--lr", type=float, default=4.0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument(
        "--group",
        type=int,
        default=0,
        metavar="K",
        help="K lr values: one batched group against the same configurations one at a time",
    )
    ap.add_argument(
        "--layouts",
        action="store_true",
        help="with --group: one epoch of each sparse layout, in-process",
    )
    ap.add_argument(
        "--threads", type=int, default=1, help="with --group: the threads of both sides (default 1)"
    )
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: cap,sparse of one child run
    ap.add_argument("--one-group", help=argparse.SUPPRESS)  # internal: cap,batched of one child run
    a = ap.parse_args()
    if a.one:
        cap, sparse = a.one.split(",")
        print(json.dumps(one(a.path, int(cap), sparse == "1", a.epochs, a.lr, a.device)))
        return
    if a.one_group:
        cap, batched = a.one_group.split(",")
        print(json.dumps(one_group(a.path, int(cap), a.group, a.epochs, a.device, batched == "1")))
        return
    if not Path(a.path).is_file():
        sys.exit(
            f"text_bench: {a.path} does not exist: download the SMS Spam Collection or pass --path"
        )
    if a.group and a.layouts:
        print(
            f"data=sms data.ngram_max=2 depth=1 width=64 K={a.group}: ms per member-epoch, one "
            "thread, best of 15"
        )
        print(
            f"{'max_features':>12} {'vocabulary':>10} | {'per member':>10} {'one product':>11} "
            f"{'alone':>7}"
        )
        for cap in [int(c) for c in a.caps.split(",")]:
            r = epoch_layouts(a.path, cap, a.group)
            print(
                f"{cap or 'all':>12} {r['vocabulary']:>10} | {r['per member'] * 1e3:>10.2f} "
                f"{r['one product'] * 1e3:>11.2f} {r['alone'] * 1e3:>7.2f}",
                flush=True,
            )
        return
    if a.group:
        groups(a)
        return
    print(
        f"data=sms data.ngram_max=2 depth=1 width=64 lr={a.lr} epochs={a.epochs} device={a.device}"
    )
    print(
        f"{'max_features':>12} {'vocabulary':>10} | {'dense ep/s':>10} {'sparse ep/s':>11} "
        f"{'speedup':>7} | "
        f"{'dense RSS MB':>12} {'sparse RSS MB':>13} {'ratio':>6} | {'dense acc':>9} "
        f"{'sparse acc':>10}"
    )
    for cap in [int(c) for c in a.caps.split(",")]:
        d, s = _row(a, "--one", cap, "--lr", str(a.lr))
        print(
            f"{cap or 'all':>12} {s['vocabulary']:>10} | {d['epochs_per_s']:>10.2f} "
            f"{s['epochs_per_s']:>11.2f} "
            f"{s['epochs_per_s'] / d['epochs_per_s']:>6.1f}x | {d['peak_rss_mb']:>12.0f} "
            f"{s['peak_rss_mb']:>13.0f} "
            f"{s['peak_rss_mb'] / d['peak_rss_mb']:>6.2f} | {d['test_accuracy']:>9.4f} "
            f"{s['test_accuracy']:>10.4f}",
            flush=True,
        )


def _row(
    a: argparse.Namespace, option: str, cap: int, *extra: str, threads: int | None = None
) -> tuple[dict, dict]:
    """One row's two cells, each from a fresh subprocess of this script: ``option cap,0`` and
    ``option cap,1``; with ``threads``, both on that many threads (sweeper's and BLAS's)."""
    import os

    env = dict(os.environ)
    if threads:
        env |= {
            k: str(threads)
            for k in (
                "SWEEPER_THREADS",
                "OMP_NUM_THREADS",
                "OPENBLAS_NUM_THREADS",
                "MKL_NUM_THREADS",
            )
        }
    cells = []
    for side in (0, 1):
        cmd = [
            sys.executable,
            __file__,
            "--path",
            a.path,
            "--epochs",
            str(a.epochs),
            "--device",
            a.device,
            *extra,
            option,
            f"{cap},{side}",
        ]
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=True, env=env)
        cells.append(json.loads(p.stdout.strip().splitlines()[-1]))
    return cells[0], cells[1]


def groups(a: argparse.Namespace) -> None:
    print(
        f"data=sms data.ngram_max=2 depth=1 width=64 K={a.group} lr={group_lrs(a.group)} epochs="
        f"{a.epochs} "
        f"device={a.device}; threads: {a.threads} on each side (the group's and a "
        "configuration's alone)"
    )
    print(
        f"{'max_features':>12} {'vocabulary':>10} | {'alone cfg-ep/s':>14} {'group cfg-ep/s':>14}"
        f" {'speedup':>7} | "
        f"{'alone wall s':>12} {'group wall s':>12} | {'alone RSS MB':>12} {'group RSS MB':>12} "
        f"{'ratio':>6} | "
        f"{'max |d test_log_loss|':>21}"
    )
    for cap in [int(c) for c in a.caps.split(",")]:
        s, g = _row(a, "--one-group", cap, "--group", str(a.group), threads=a.threads)
        diff = max(abs(x - y) for x, y in zip(s["test_log_loss"], g["test_log_loss"]))
        print(
            f"{cap or 'all':>12} {g['vocabulary']:>10} | {s['config_epochs_per_s']:>14.1f} "
            f"{g['config_epochs_per_s']:>14.1f} "
            f"{g['config_epochs_per_s'] / s['config_epochs_per_s']:>6.1f}x | "
            f"{s['wall_s']:>12.2f} {g['wall_s']:>12.2f} | "
            f"{s['peak_rss_mb']:>12.0f} {g['peak_rss_mb']:>12.0f} "
            f"{g['peak_rss_mb'] / s['peak_rss_mb']:>6.2f} | "
            f"{diff:>21.2e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
