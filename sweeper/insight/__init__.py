"""What a sweep says afterwards: the leaderboard (``leaderboard``), the report on
the parent run (``report``), the advice (``advice/``), the plots (``plots``), the
pinned configs (``pinned``, ``promotion``) and GPU speedups (``speedup``)."""

__all__: list[str] = []
