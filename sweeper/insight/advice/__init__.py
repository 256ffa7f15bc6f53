"""The sweep advisor: what a finished sweep's own evidence says to try next (``evidence``: the sweep as the advisor
reads it; ``findings``: one function a finding; ``advisor``: the findings in order, the plan and the next command)."""
