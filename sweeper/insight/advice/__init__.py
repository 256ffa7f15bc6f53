"""The sweep advisor: what a finished sweep's own evidence says to try next
(``evidence``: the sweep as the advisor reads it; ``findings``: one function a
finding; ``curves``: the findings read from validation curves, checked against the
grid; ``advisor``: the findings in order, the budgeted plan and the next command)."""

__all__: list[str] = []
