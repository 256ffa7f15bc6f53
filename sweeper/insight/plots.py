"""A sweep's plots: described as data (:func:`specs`), drawn with
matplotlib's Agg backend (:func:`draw`).

Importing matplotlib and drawing three figures costs ~0.3-0.5 s, at the very end of a sweep. The
launching process therefore starts a :class:`Painter` when the sweep starts — a second
Python process (``python -m sweeper.insight.plots``) that imports matplotlib on the
other core while the jobs run and then waits — and at the end sends it the figures'
data; it draws them while this process logs the leaderboard and the advice, and hands
back the PNG files, which this process logs to the parent run. Without a painter
(``report`` on its own, a painter that failed) the figures are drawn here, the same way.

The painter also fits the sweep's baselines (:mod:`sweeper.insight.baselines`: scikit-learn's
import and the fits, ~1 s of a small sweep) while the jobs run, when the sweep asks it to at
its start (:func:`start` with a request).

Protocol: one JSON line per request on the painter's stdin, ``{"folder": ..., "specs": [...]}`` or
``{"baselines": request}``; one JSON line per answer on its stdout, in order:
``{"files": {name: path}}`` or ``{"baselines": fitted, "request": request}``; ``{"error": "..."}``
when either failed (the one place the painter decides a request's fault).
"""

from __future__ import annotations

import json
import math
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

from sweeper.base import state
from sweeper.base.output import quietly
from sweeper.base.fmt import cell, text_cell
from sweeper.base.files import CURVES_FILE
from sweeper.base.process import exit_with_parent
from sweeper.base.tested import shortcut

__all__ = [
    "MAX_TICKS",
    "Painter",
    "current",
    "draw",
    "draw_all",
    "figure",
    "specs",
    "start",
    "stop",
    "wanted",
]

TOP_CURVES = 5  # loss curves drawn: the best runs by the validation metric
MAX_TICKS = 30  # labelled ticks on an axis at most (a tick a swept value, a bar a configuration)
FEW = 3  # finished runs a sweep needs for its history and parallel-coordinates plots
# the longest the launching process waits for the painter's figures before drawing them itself
TIMEOUT_S = 60.0


def wanted() -> bool:
    """Whether a sweep's figures are drawn and logged (``plots/*.png`` on its parent run): unless
    ``SWEEPER_PLOTS=off``, which leaves them out (their data is still described, :func:`specs`:
    cheap) and the painter fitting the baselines only, without matplotlib's import."""
    return os.environ.get("SWEEPER_PLOTS", "") != "off"


def specs(c: Any, board: Any, folders: dict[str, Path] | None = None) -> list[dict[str, Any]]:
    """The plots of a sweep's leaderboard as plain data (artifact
    name, size, axes with their series).

    ``folders`` (run id → job folder): a run's loss curve is read from its folder's ``curves.npz``
    (every sample, no store query: on a store of many runs MLflow's metric history took ~170 ms a
    call), else from MLflow's history of the run (``report`` on its own, reused runs)."""
    out: list[dict[str, Any]] = []
    done = [
        r for r in board.rows if r["status"] == "FINISHED" and r[f"val_{board.metric}"] is not None
    ]
    val = f"val_{board.metric}"
    unit = " (target units²)" if board.metric == "mse" else ""

    if "lr" in board.keys and len({r["lr"] for r in done}) > 1:
        others = [k for k in board.keys if k not in ("lr", "device", "sync_every_epoch")]
        groups: dict[str, list[dict[str, Any]]] = {}
        for r in done:
            if r.get("device", "cpu") == "cpu" or "device" not in board.keys:
                groups.setdefault(
                    ", ".join(f"{k}={r[k]}" for k in others) or "all runs", []
                ).append(r)
        series = []
        for label, rs in sorted(groups.items()):
            rs = sorted(rs, key=lambda r: float(r["lr"]))
            series.append(
                {
                    "x": [float(r["lr"]) for r in rs],
                    "y": [r[val] for r in rs],
                    "label": label,
                    "marker": "o",
                }
            )
        # a tick at each swept lr (0.005 too, not only decades) while they can be
        # read; more: matplotlib's own (1,000 labels took ~5 s to draw and covered the axis)
        lrs = sorted({x for s in series for x in s["x"]})
        ticks = (
            {"xticks": lrs, "xticklabels": [f"{v:g}" for v in lrs]} if len(lrs) <= MAX_TICKS else {}
        )
        out.append(
            {
                "name": "plots/val_metric_vs_lr.png",
                "size": [7, 4.5],
                "axes": [
                    {
                        "title": f"Validation {board.metric} against learning rate",
                        "xlabel": "learning rate (lr, log scale)",
                        "ylabel": f"validation {board.metric}{unit}",
                        "xscale": "log",
                        "lines": series,
                        **ticks,
                    }
                ],
            }
        )

    top = done[:TOP_CURVES]
    if top:
        series = []
        # validation loss (what runs are ranked by) solid, training loss dashed
        for i, r in enumerate(top):
            for name, style, label in (("val_loss", "-", r["run"]), ("train_loss", "--", None)):
                x, y = _curve(c, r["run_id"], (folders or {}).get(r["run_id"]), name)
                if x:
                    series.append(
                        {"x": x, "y": y, "label": label, "ls": style, "color": f"C{i % 10}"}
                    )
        loss = "mean squared error, target units²" if board.metric == "mse" else "cross-entropy"
        out.append(
            {
                "name": "plots/loss_curves_top.png",
                "size": [7, 4.5],
                "axes": [
                    {
                        "title": (
                            f"Loss of the top {len(top)} runs (by {val})\nvalidation solid, "
                            "training dashed"
                        ),
                        "xlabel": "epoch",
                        "ylabel": f"loss ({loss}, log scale)",
                        "yscale": "log",
                        "lines": series,
                    }
                ],
            }
        )

    # a history and parallel coordinates of two runs say nothing their table does not
    if len(done) >= FEW:
        out.append(_history(board, done))
        parallel = _parallel(board, done)
        if parallel is not None:
            out.append(parallel)

    pairs: dict[str, dict[str, Any]] = {}
    for r in done:
        pairs.setdefault(r["fingerprint"], {})[r["device"]] = r
    pairs = {fp: p for fp, p in pairs.items() if "cpu" in p and "gpu" in p}
    if pairs:
        out.append(_times(board, list(pairs.values())))
    return out


def _times(board: Any, pairs: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """CPU and GPU train time of each configuration run on both, and the speedup:
    bars on a linear axis from 0 with each bar's value printed (a log axis made a 2%
    difference look large), or on a log axis where the times span :data:`LOG_SPAN`
    or more; configurations named by their swept values but the device."""

    keys = [k for k in board.keys if k not in ("device", "sync_every_epoch")]
    labels = [
        ", ".join(f"{k}={text_cell(p['gpu'].get(k))}" for k in keys) or "all runs" for p in pairs
    ]
    x = list(range(len(pairs)))
    ticks = {"xticks": x, "xticklabels": labels} if len(x) <= MAX_TICKS else {}
    ticks["xlabel"] = "configuration"
    times = {d: [p[d]["train_time_s"] for p in pairs] for d in ("cpu", "gpu")}
    scale = _scale([t for ts in times.values() for t in ts])
    shown = len(x) <= MAX_TICKS  # each bar's value printed while they can be read
    speedups = [p["gpu"].get("speedup") or 0.0 for p in pairs]
    return {
        "name": "plots/time_and_speedup.png",
        "size": [11, 4.5],
        "axes": [
            {
                "title": "Train time per configuration",
                "legend": "outside",
                **ticks,
                **scale,
                "ylabel": "train time (s"
                + (", log scale)" if scale.get("yscale") == "log" else ")"),
                "bars": [
                    {
                        "x": [i + dx for i in x],
                        "y": times[d],
                        "width": 0.4,
                        "label": d,
                        **({"labels": [cell(t) for t in times[d]]} if shown else {}),
                    }
                    for d, dx in (("cpu", -0.2), ("gpu", 0.2))
                ],
            },
            {
                "title": "GPU-over-CPU speedup (train time)",
                "ylabel": "speedup (×)",
                **ticks,
                "hline": 1.0,
                "ymin": 0.0,
                "legend": "outside",
                "bars": [
                    {
                        "x": x,
                        "y": speedups,
                        "width": 0.5,
                        "color": "tab:green",
                        "label": "gpu over cpu",
                        **({"labels": [f"{cell(v)}×" for v in speedups]} if shown else {}),
                    }
                ],
            },
        ],
    }


def _history(board: Any, done: list[dict[str, Any]]) -> dict[str, Any]:
    """The optimisation history: each finished run's validation metric in the order the
    runs finished, and the best so far (Optuna Dashboard's and W&B's first plot)."""
    val = f"val_{board.metric}"
    ordered = sorted(done, key=lambda r: (r.get("end_time") or 0, r.get("start_time") or 0))
    y = [r[val] for r in ordered]
    # lazy: saves ~113 ms at this module's import (measured)
    from sweeper.job.metrics import LOWER_IS_BETTER

    pick = min if LOWER_IS_BETTER[board.metric] else max
    best = [pick(y[: i + 1]) for i in range(len(y))]
    x = list(range(1, len(y) + 1))
    return {
        "name": "plots/history.png",
        "size": [7, 4.5],
        "axes": [
            {
                "title": f"Validation {board.metric} of each run as the runs finished",
                "xlabel": "runs finished",
                "ylabel": f"validation {board.metric}",
                "points": [{"x": x, "y": y, "label": "a run", "color": "tab:blue"}],
                "lines": [
                    {
                        "x": x,
                        "y": best,
                        "label": "best so far",
                        "color": "tab:orange",
                        "drawstyle": "steps-post",
                    }
                ],
            }
        ],
    }


MAX_LINES = 1000  # the runs a parallel-coordinates plot draws at most (the best ones)


def _parallel(board: Any, done: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Parallel coordinates: an axis a swept key (seeds aside; logarithmic
    for a log-spaced key: positive numbers spanning :data:`LOG_SPAN` or more)
    and one for the metric, each run a line coloured by its metric (the best
    darkest), drawn on top. MLflow's own put ``lr`` on a linear axis."""

    # lazy: saves ~113 ms at this module's import (measured)
    from sweeper.insight.advice.evidence import SEEDS, _number
    from sweeper.job.metrics import LOWER_IS_BETTER

    keys = [
        k
        for k in board.keys
        if k not in (*SEEDS, "sync_every_epoch") and len({r[k] for r in done}) > 1
    ]
    if not keys or len(done) < 2:
        return None
    val = f"val_{board.metric}"
    runs = done[:MAX_LINES][::-1]  # the best drawn last, on top
    axes, texts = [], []
    for i, k in enumerate([*keys, val]):
        values = [r[k] for r in runs]
        numbers = [_number(v) for v in values]
        if all(v is not None for v in numbers):
            log = min(numbers) > 0 and max(numbers) / min(numbers) >= LOG_SPAN
            f = math.log10 if log else float
            lo, hi = f(min(numbers)), f(max(numbers))
            pos = [(f(v) - lo) / ((hi - lo) or 1.0) for v in numbers]
            marks = sorted(set(numbers)) if len(set(numbers)) <= 8 else [min(numbers), max(numbers)]
            texts += [
                {
                    "x": i,
                    "y": (f(v) - lo) / ((hi - lo) or 1.0),
                    "text": cell(v) if k == val else text_cell(v),
                }
                for v in marks
            ]
            name = f"{k} (log)" if log else k
        else:  # categories: evenly spaced
            cats = sorted({str(v) for v in values})
            pos = [cats.index(str(v)) / ((len(cats) - 1) or 1) for v in values]
            texts += [
                {"x": i, "y": j / ((len(cats) - 1) or 1), "text": c} for j, c in enumerate(cats)
            ]
            name = k
        axes.append((name, pos))
    scores = [r[val] for r in runs]
    lo, hi = min(scores), max(scores)
    lower = LOWER_IS_BETTER[board.metric]
    shade = [
        ((v - lo) / ((hi - lo) or 1.0)) if lower else ((hi - v) / ((hi - lo) or 1.0))
        for v in scores
    ]
    lines = [
        {
            "x": list(range(len(axes))),
            "y": [pos[j] for _, pos in axes],
            "cvalue": shade[j],
            "lw": 1.2,
            "alpha": 0.8,
        }
        for j in range(len(runs))
    ]
    return {
        "name": "plots/parallel_coordinates.png",
        "size": [2.2 * len(axes) + 1.5, 4.8],
        "axes": [
            {
                "title": f"Each run through its swept values to its {val} (darker: better)",
                "lines": lines,
                "cmap": "viridis",
                "xlim": [-0.15, len(axes) - 0.6],
                "vlines": list(range(len(axes))),
                "texts": texts,
                "xticks": list(range(len(axes))),
                "rotation": 0,
                "xticklabels": [n for n, _ in axes],
                "yticks": [],
                "yticklabels": [],
                "legend": False,
                "grid": False,
            }
        ],
    }


LOG_SPAN = 10.0  # bars go on a log axis only where their values span this factor or more


def _scale(values: list[float]) -> dict[str, Any]:
    """A bar chart's value axis: linear from 0, or logarithmic where
    the positive values span :data:`LOG_SPAN`."""
    positive = [v for v in values if v is not None and v > 0]
    if positive and max(positive) / min(positive) >= LOG_SPAN:
        return {"yscale": "log"}
    return {"ymin": 0.0}


def _curve(
    c: Any, run_id: str, folder: Path | None, name: str = "train_loss"
) -> tuple[list[float], list[float]]:
    """A run's loss curve ``name`` (steps, values): from its job
    folder's curves.npz, else MLflow's history."""
    # lazy: saves ~112 ms at this module's import (measured)
    import numpy as np

    if folder is not None and (folder / CURVES_FILE).is_file():
        try:
            with np.load(folder / CURVES_FILE) as z:
                return z[f"{name}_steps"].tolist(), z[f"{name}_values"].tolist()
        except (OSError, KeyError, ValueError):
            pass  # a damaged file: the store has the curve
    history = c.get_metric_history(run_id, name)
    return [h.step for h in history], [h.value for h in history]


def figure(spec: dict[str, Any]) -> Any:
    """One figure of :func:`specs`, laid out so that nothing is cut
    (matplotlib's constrained layout: titles, labels, rotated ticks and a
    legend outside the axes all inside the canvas); the caller closes it."""
    # lazy: saves ~244 ms at this module's import (measured)
    import matplotlib

    matplotlib.use("Agg")
    # lazy: saves ~472 ms at this module's import (measured)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        1, len(spec["axes"]), figsize=tuple(spec["size"]), squeeze=False, layout="constrained"
    )
    for ax, a in zip(axes[0], spec["axes"]):
        _draw_marks(ax, a, matplotlib.colormaps[a["cmap"]] if "cmap" in a else None)
        _dress(ax, a)
    return fig


def _draw_marks(ax: Any, a: dict[str, Any], cmap: Any) -> None:
    """What one axes' spec ``a`` plots: lines (coloured by ``cmap`` where they give a
    ``cvalue``), vertical lines, text labels, points, bars and horizontal bars, a parity line."""
    for s in a.get("lines", []):
        color = cmap(s["cvalue"]) if cmap is not None and "cvalue" in s else s.get("color")
        ax.plot(
            s["x"],
            s["y"],
            marker=s.get("marker"),
            label=s.get("label"),
            ls=s.get("ls", "-"),
            color=color,
            lw=s.get("lw", 1.5),
            alpha=s.get("alpha", 1.0),
            drawstyle=s.get("drawstyle", "default"),
        )
    for x in a.get("vlines", []):
        ax.axvline(x, color="black", lw=1)
    for t in a.get("texts", []):
        ax.annotate(
            t["text"],
            (t["x"], t["y"]),
            xytext=(4, 0),
            textcoords="offset points",
            fontsize="x-small",
            va="center",
            bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.7},
        )
    for s in a.get("points", []):
        ax.scatter(
            s["x"],
            s["y"],
            s=s.get("size", 16),
            color=s.get("color"),
            label=s.get("label"),
            zorder=3,
        )
    for b in a.get("bars", []):
        bars = ax.bar(b["x"], b["y"], b["width"], color=b.get("color"), label=b["label"])
        if "labels" in b:
            ax.bar_label(bars, labels=b["labels"], fontsize="x-small", padding=2)
    for b in a.get("hbars", []):  # horizontal bars with an interval each (importance)
        ax.barh(
            b["y"],
            b["x"],
            xerr=b.get("xerr"),
            color=b.get("color"),
            label=b.get("label"),
            capsize=3,
        )
    if "hline" in a:
        ax.axhline(a["hline"], color="grey", lw=1, ls="--", label="parity")
    if "vline" in a:
        ax.axvline(a["vline"], color="grey", lw=1)


def _dress(ax: Any, a: dict[str, Any]) -> None:
    """One axes' title, labels, scales, limits, ticks, legend and grid from its spec ``a``."""
    ax.set(title=a["title"], xlabel=a.get("xlabel", ""), ylabel=a.get("ylabel", ""))
    if a.get("xscale"):
        ax.set_xscale(a["xscale"])
    if a.get("yscale"):
        ax.set_yscale(a["yscale"])
    if "xlim" in a:
        ax.set_xlim(*a["xlim"])
    if "ymin" in a:
        ax.set_ylim(bottom=a["ymin"])
        ax.margins(y=0.12)  # room above the tallest bar for its value
        ax.set_ylim(bottom=a["ymin"])
    if "xticks" in a:
        ax.set_xticks(
            a["xticks"],
            a["xticklabels"],
            rotation=a.get("rotation", 30),
            ha="right" if a.get("rotation", 30) else "center",
            fontsize="small",
        )
        ax.set_xticks([], minor=True)  # on a log axis: no unlabelled minor ticks between them
    if "yticks" in a:
        ax.set_yticks(a["yticks"], a["yticklabels"], fontsize="small")
    if a.get("legend") == "outside":  # beside the axes, never over a bar
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    elif a.get("legend", True) and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    if a.get("grid", True):
        ax.grid(alpha=0.3)


def draw(spec: dict[str, Any], path: Path) -> Path:
    """Draw one figure of :func:`specs` into the PNG ``path``: titled,
    labelled axes (units), a legend."""
    # lazy: saves ~472 ms at this module's import (measured)
    import matplotlib.pyplot as plt

    fig = figure(spec)
    try:
        if isinstance(path, Path):
            path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return path


def draw_all(figures: list[dict[str, Any]], folder: Path) -> dict[str, Path]:
    """Every figure drawn under ``folder`` at its artifact name: ``{name: file}``."""
    return {s["name"]: draw(s, Path(folder) / s["name"]) for s in figures}


class Painter:
    """A ``python -m sweeper.insight.plots`` process that has imported
    matplotlib and draws on request.

    ``start`` never fails: without a painter (it could not start, or
    died) :meth:`collect` draws here."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.pending: tuple[list[dict[str, Any]], Path] | None = None
        # the baselines request sent, until its answer is read
        self.fitting: dict[str, Any] | None = None

    def start(self) -> "Painter":
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sweeper.insight.plots"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                bufsize=1,
            )
        except OSError:
            self.proc = None
        return self

    def submit(self, figures: list[dict[str, Any]], folder: Path) -> None:
        """Ask for these figures under ``folder``; :meth:`collect` returns them."""
        self.pending = (figures, Path(folder))
        if figures:
            self._send({"folder": str(folder), "specs": figures})

    def collect(self) -> dict[str, Path]:
        """The files of the last :meth:`submit`: the painter's, or drawn here if it failed."""
        figures, folder = self.pending or ([], Path("."))
        self.pending = None
        if not figures:
            return {}
        if self.proc is not None:
            if self.fitting is not None:
                self.baselines()  # its answer comes first: read (and dropped) before the figures'
            answer = self._answer()
            if "files" in answer:
                return {name: Path(p) for name, p in answer["files"].items()}
            self.close()
        return draw_all(figures, folder)

    def prefit(self, request: dict[str, Any] | None) -> None:
        """Ask the painter to fit the baselines of ``request``
        (:func:`sweeper.insight.baselines.request`) now."""
        if request is not None and self._send({"baselines": request}):
            self.fitting = request

    def _send(self, request: dict[str, Any]) -> bool:
        """Whether ``request`` went to the painter (one JSON line); one that is gone, or whose
        pipe is closed, is closed here: the caller does the work itself."""
        if self.proc is None:
            return False
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            return True
        except (OSError, ValueError):
            self.close()
            return False

    def baselines(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The request sent by :meth:`prefit` and the baselines the painter fitted for it; None
        without one (none asked, the painter failed or hung: the caller fits them itself)."""
        request, self.fitting = self.fitting, None
        if request is None or self.proc is None:
            return None
        answer = self._answer()
        if "baselines" not in answer:
            return None
        return answer.get("request", request), answer["baselines"]

    def _answer(self) -> dict[str, Any]:
        # a hung painter is not waited on
        ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT_S)
        line = self.proc.stdout.readline() if ready else ""
        return json.loads(line) if line.strip() else {"error": "the painter ended"}

    def idle(self) -> bool:
        """Whether the painter process is alive with no request
        unanswered (a next sweep may use it)."""
        return (
            self.proc is not None
            and self.proc.poll() is None
            and self.pending is None
            and self.fitting is None
        )

    def close(self) -> None:
        if self.proc is not None:
            for pipe in (
                self.proc.stdin,
                self.proc.stdout,
            ):  # both: a process calling sweeps (the Python API) keeps
                quietly(pipe.close)  # no pipe of an earlier sweep's painter open
            self.proc = None


def current() -> Painter | None:
    """The launching process's painter, from the sweep's start (sweeper.sweep.start)
    to its end: the sweep's state's (:mod:`sweeper.base.state`)."""
    return state.current().painter


def start(baselines: dict[str, Any] | None = None) -> None:
    """Start the sweep's painter (once); ``baselines``: a request it fits while the
    jobs run. Unless the shortcut ``painter`` is off (``SWEEPER_PUBLIC_ONLY``):
    then the report draws its figures and fits the baselines in this process. None
    starts where it would have nothing to do (no figures, no baselines to fit)."""
    now = state.current()
    if not wanted() and _nothing_to_fit(baselines):
        return  # SWEEPER_PLOTS=off and baselines=none: no process for nothing (~0.3 CPU-s)
    if now.painter is None and shortcut("painter"):
        p = state.process()
        warm, p.spare_painter = p.spare_painter, None
        now.painter = warm if warm is not None and warm.idle() else Painter().start()
        if warm is not None and now.painter is not warm:
            warm.close()
        now.painter.prefit(baselines)


def _nothing_to_fit(request: dict[str, Any] | None) -> bool:
    """Whether a baselines request (:func:`sweeper.insight.baselines.request`) fits none:
    no job, or ``baselines=none`` (a value it refuses still goes to the painter, which
    answers with the error that the report then says). Read here, not by
    :func:`sweeper.insight.baselines.parse`: importing that module at this one's import
    costs 55-98 ms (measured), for the one value this needs."""
    if request is None:
        return True
    asked = request.get("asked")
    names = asked if isinstance(asked, (list, tuple)) else str(asked).split(",")
    return [str(n).strip() for n in names] == ["none"]


def stop(keep: bool = False) -> None:
    """The sweep's painter closed; with ``keep`` (a sweep's normal end),
    a live and idle one is kept for the next sweep of this process
    instead (the Python API's next call: its imports already paid)."""
    now = state.current()
    if now.painter is not None:
        if keep and now.painter.idle() and state.process().spare_painter is None:
            state.process().spare_painter = now.painter
        else:
            now.painter.close()
        now.painter = None


def serve() -> None:
    """The painter's loop: import matplotlib now, load what the first figure of a process
    would (its font, mathtext's parser for the log axes' tick labels: ~30 ms of that figure,
    ~40 ms here; drawing a whole figure for nothing cost ~190 ms of CPU for the same), then
    draw each request of stdin until it closes."""

    # the launching process killed (kill -9): this one ends with it, quietly
    exit_with_parent(helper=True)
    if wanted():  # SWEEPER_PLOTS=off: no figure comes, the baselines only (~0.7 CPU-s less)
        _import_matplotlib()
    for line in sys.stdin:
        try:
            request = json.loads(line)
            if "baselines" in request:
                # lazy: saves ~110 ms at this module's import (measured)
                from sweeper.insight import baselines

                answer = baselines.serve(request["baselines"])
            else:
                files = draw_all(request["specs"], Path(request["folder"]))
                answer = {"files": {name: str(p) for name, p in files.items()}}
        # the launching process draws them, or fits them, itself
        except Exception as e:  # noqa: BLE001
            answer = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


def _import_matplotlib() -> None:
    # lazy: saves ~244 ms at this module's import (measured)
    import matplotlib

    matplotlib.use("Agg")
    # lazy: saves ~499 ms at this module's import (measured)
    import matplotlib.pyplot  # noqa: F401  (the import is what the painter is for)
    from matplotlib import font_manager  # (both imported with pyplot: no cost)
    from matplotlib.mathtext import MathTextParser

    font_manager.get_font(font_manager.findfont(font_manager.FontProperties()))
    MathTextParser("agg").parse(r"$\mathdefault{10^{-3}}$", 100)


if __name__ == "__main__":
    serve()
