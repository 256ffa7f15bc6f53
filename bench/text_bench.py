"""Text data: sparse against dense training on the SMS Spam Collection, as the vocabulary cap grows.

    python bench/text_bench.py                          # 1k / 10k / 50k / all terms, sparse and dense (~6 min on 2 cores)
    python bench/text_bench.py --caps 1000 --epochs 20  # a quick look
    python bench/text_bench.py --path /path/to/SMSSpamCollection --device gpu

Each cell is one configuration of ``data=sms data.ngram_max=2 depth=1 width=64`` trained by the project's own
path (``sweeper.data.load`` → ``sweeper.run.train_and_score``) in a fresh subprocess, so that its peak
memory (``ru_maxrss``: the data, the vectorizer and the trainer's buffers) is its own. Columns: the
fitted vocabulary (``data.max_features=0``: every word and word pair of the training rows), epochs/s
(``train_time_s``, after the warm-up pass), peak RSS, test accuracy after the same epochs.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PATH = ROOT.parent / "shared" / "data" / "SMSSpamCollection.tsv"


def one(path: str, cap: int, sparse: bool, epochs: int, lr: float, device: str) -> dict:
    """Train one configuration here and return its numbers (run by the parent in a subprocess)."""
    from hydra import compose, initialize_config_dir

    from sweeper import CONF_DIR, data
    from sweeper.backend import resolve
    from sweeper.run import train_and_score

    overrides = ["data=sms", f"data.path={path}", "data.ngram_max=2", f"data.max_features={cap}",
                 f"data.sparse={str(sparse).lower()}", "depth=1", "width=64", f"lr={lr}", f"epochs={epochs}",
                 f"log_every={max(1, epochs // 5)}", f"device={device}"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    ds = data.load(cfg.data, cfg.seed)
    out = train_and_score(cfg, ds, resolve(device))
    return {"vocabulary": ds.n_features, "epochs_per_s": out.scores["epochs_per_s"],
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "test_accuracy": out.scores.get("test_accuracy", float("nan"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default=str(DEFAULT_PATH))
    ap.add_argument("--caps", default="1000,10000,50000,0", help="data.max_features values (0: no cap)")
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--lr", type=float, default=4.0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: cap,sparse of one child run
    a = ap.parse_args()
    if a.one:
        cap, sparse = a.one.split(",")
        print(json.dumps(one(a.path, int(cap), sparse == "1", a.epochs, a.lr, a.device)))
        return
    if not Path(a.path).is_file():
        sys.exit(f"text_bench: {a.path} does not exist: download the SMS Spam Collection or pass --path")
    print(f"data=sms data.ngram_max=2 depth=1 width=64 lr={a.lr} epochs={a.epochs} device={a.device}")
    print(f"{'max_features':>12} {'vocabulary':>10} | {'dense ep/s':>10} {'sparse ep/s':>11} {'speedup':>7} | "
          f"{'dense RSS MB':>12} {'sparse RSS MB':>13} {'ratio':>6} | {'dense acc':>9} {'sparse acc':>10}")
    for cap in [int(c) for c in a.caps.split(",")]:
        cells = {}
        for sparse in (0, 1):
            cmd = [sys.executable, __file__, "--path", a.path, "--epochs", str(a.epochs), "--lr", str(a.lr),
                   "--device", a.device, "--one", f"{cap},{sparse}"]
            p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=True)
            cells[sparse] = json.loads(p.stdout.strip().splitlines()[-1])
        d, s = cells[0], cells[1]
        print(f"{cap or 'all':>12} {s['vocabulary']:>10} | {d['epochs_per_s']:>10.2f} {s['epochs_per_s']:>11.2f} "
              f"{s['epochs_per_s'] / d['epochs_per_s']:>6.1f}x | {d['peak_rss_mb']:>12.0f} {s['peak_rss_mb']:>13.0f} "
              f"{s['peak_rss_mb'] / d['peak_rss_mb']:>6.2f} | {d['test_accuracy']:>9.4f} {s['test_accuracy']:>10.4f}",
              flush=True)


if __name__ == "__main__":
    main()
