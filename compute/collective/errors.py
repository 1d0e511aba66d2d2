"""What a collective operation can raise, under icn.errors.IcnError like every error of ours."""

from __future__ import annotations

from icn.errors import IcnError


class CollectiveError(IcnError):
    """A collective operation failed: a member did not contribute within the deadline, the
    members disagree (dtype, size, operation), or the plan is wrong.  ``job`` names the job."""

    def __init__(self, message: str, job: str = "") -> None:
        self.job = job
        self.message = message
        super().__init__(f"{job}: {message}" if job else message)


class PlanError(CollectiveError):
    """A plan that cannot work: a worker missing or placed twice, an aggregator unreachable,
    a cycle.  The message names the field and the fix."""
