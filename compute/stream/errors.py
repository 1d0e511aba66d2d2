"""What the stream runtime can raise, under icn.errors like every error of ours."""

from __future__ import annotations

from icn.errors import IcnError
from icn.problems import ProblemsError


class StreamError(IcnError):
    """An operator cannot go on: an upstream batch is gone for good, a user function failed
    on a record, a sink cannot write.  The message names the operator and the record."""


class GraphError(ProblemsError):
    """A graph file that cannot run; ``problems`` each name the line, the field and the fix
    (``g.yaml:7:5: operators[1].fn: ...``), as the forwarder's config and scenarios do."""
