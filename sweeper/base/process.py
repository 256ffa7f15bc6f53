"""Processes on this host: whether one still runs. Imports nothing of ours."""
from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
