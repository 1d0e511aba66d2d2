"""What the stream runtime can raise, under icn.errors like every error of ours."""

from __future__ import annotations

from icn.errors import ConfigError, IcnError


class StreamError(IcnError):
    """An operator cannot go on: an upstream batch is gone for good, a user function failed
    on a record, a sink cannot write.  The message names the operator and the record."""


class GraphError(ConfigError):
    """A graph file that cannot run; ``problems`` each name the operator, the field and the
    fix."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{source}: {len(problems)} problem(s) in the graph:\n{lines}")
