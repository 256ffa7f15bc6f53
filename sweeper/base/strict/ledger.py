"""The stand-in's account of every crossing between host and device: what, where in the
code, and in which phase of training (the training loops name their phases
through ``Backend.mark``: ``epoch``, ``segment end``, ``end``).

Each event is one of three kinds:

- ``h2d``: a host→device copy (``to_device``, ``xp.asarray`` of host data, a host index array);
- ``d2h``: a device→host copy (``to_numpy``, ``.get()``, ``cupy.asnumpy``);
- ``sync``: the host waits for the device to read a value (``float()``, ``int()``,
  ``bool()``, ``.item()``, ``.tolist()``, ``__array__`` where allowed, printing an
  array, a boolean mask's count, ``synchronize()``).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Iterator, NamedTuple

__all__ = ["Event", "LEDGER", "LEDGER_ENV", "Ledger", "append_summary_at_exit", "describe"]

KINDS = ("h2d", "d2h", "sync")
# Frames inside these folders are the stand-in's or NumPy's/SciPy's own: a site names
# the first frame outside them.
_HERE = str(Path(__file__).resolve().parent)
_SKIP = (
    _HERE,
    os.sep + "numpy" + os.sep,
    os.sep + "scipy" + os.sep,
    os.path.join("sweeper", "base", "backend.py"),
)
# the checkout: sites are shown relative to it
_ROOT = str(Path(__file__).resolve().parents[3]) + os.sep
SITE_FRAMES = 3


class Event(NamedTuple):
    kind: str  # h2d | d2h | sync
    what: str  # float(), .get(), to_numpy, ...
    phase: str  # the phase the training loop last marked on this thread ("" before any)
    step: int  # the epoch (or the segment's last epoch) given with the mark; -1 without one
    # "path:line in function", innermost first, outside the stand-in and NumPy
    site: tuple[str, ...]


def _site() -> tuple[str, ...]:
    frames: list[str] = []
    f = sys._getframe(2)
    while f is not None and len(frames) < SITE_FRAMES:
        name = f.f_code.co_filename
        if not any(s in name for s in _SKIP):
            frames.append(f"{name.removeprefix(_ROOT)}:{f.f_lineno} in {f.f_code.co_name}")
        f = f.f_back
    return tuple(frames)


class Ledger:
    """Every event since the last :meth:`reset`, and the phase each thread is in."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        # how many times each phase was entered (every epoch, every segment end)
        self.marks: Counter = Counter()
        self._local = threading.local()
        # > 0 inside allow_implicit(): np.asarray(device array) is a counted sync, not an error
        self.implicit = 0

    def mark(self, phase: str, step: int = -1) -> None:
        """Enter ``phase`` (``epoch``, ``segment end``, ``end``, ...) at ``step`` on this thread."""
        self._local.phase, self._local.step = phase, step
        self.marks[phase] += 1

    def record(self, kind: str, what: str) -> None:
        local = self._local
        self.events.append(
            Event(kind, what, getattr(local, "phase", ""), getattr(local, "step", -1), _site())
        )

    def reset(self) -> None:
        self.events = []
        self.mark("")
        self.marks = Counter()

    def counts(self, phase: str | None = None) -> Counter:
        """Events per kind, in ``phase`` only when given."""
        return Counter(e.kind for e in self.events if phase is None or e.phase == phase)

    def per_step(self, phase: str) -> dict[int, Counter]:
        """Events per kind at each step of ``phase`` that had any (an epoch without an
        event is absent)."""
        out: dict[int, Counter] = {}
        for e in self.events:
            if e.phase == phase:
                out.setdefault(e.step, Counter())[e.kind] += 1
        return out

    def per_phase(self) -> dict[str, dict[str, int]]:
        """Per phase: how often it was entered (``marks``) and, per kind, the events in
        all and the most at one step (``d2h``, ``d2h_max``, ...): the figures of the
        design's promise (0 in an epoch, one copy a segment end)."""
        out: dict[str, dict[str, int]] = {p: {"marks": n} for p, n in self.marks.items() if p}
        for phase, steps in ((p, self.per_step(p)) for p in out):
            for kind in KINDS:
                out[phase][kind] = sum(c[kind] for c in steps.values())
                out[phase][f"{kind}_max"] = max((c[kind] for c in steps.values()), default=0)
        return out

    def inside(self, phase: str = "epoch") -> list[Event]:
        """The events of ``phase`` (by default: inside the epoch loop, where the design
        allows none)."""
        return [e for e in self.events if e.phase == phase]

    @contextlib.contextmanager
    def allow_implicit(self) -> Iterator[None]:
        """Within this block ``np.asarray(device_array)`` copies (a counted sync)
        instead of raising CuPy's error."""
        self.implicit += 1
        try:
            yield
        finally:
            self.implicit -= 1

    def summary(self) -> dict:
        """Counts per phase and kind, and the sites of the events inside epochs (at most 10): what
        ``SWEEPER_STRICT_LEDGER`` appends for a process at its exit."""
        phases: dict[str, Counter] = {}
        for e in self.events:
            phases.setdefault(e.phase, Counter())[e.kind] += 1
        return {
            "pid": os.getpid(),
            "phases": {p: dict(c) for p, c in phases.items()},
            "in_epochs": [
                f"{e.what} at {e.site[0] if e.site else '?'}" for e in self.inside()[:10]
            ],
        }


def describe(events: list[Event]) -> str:
    """One line per event: ``kind what at site (phase step)``, for an assertion's message."""
    return "\n".join(
        f"{e.kind} {e.what} at {' <- '.join(e.site) or '?'} ({e.phase} {e.step})" for e in events
    )


LEDGER = Ledger()
# test-only: a file each process appends its summary to (one JSON line) at exit
LEDGER_ENV = "SWEEPER_STRICT_LEDGER"


def append_summary_at_exit() -> None:
    """With ``SWEEPER_STRICT_LEDGER`` set, append this process's :meth:`Ledger.summary`
    to that file at exit."""
    path = os.environ.get(LEDGER_ENV, "")
    if not path or getattr(append_summary_at_exit, "registered", False):
        return

    def write() -> None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(LEDGER.summary()) + "\n")

    atexit.register(write)
    append_summary_at_exit.registered = True  # type: ignore[attr-defined]
