"""What the task platform raises, under icn.errors.IcnError."""

from __future__ import annotations

from icn.errors import IcnError


class TaskError(IcnError):
    """A task or actor method raised, or could not run: ``task`` is its name, ``remote_type``
    the exception's type when the task itself raised (else empty), ``traceback`` the
    executor's formatted traceback when there is one."""

    def __init__(self, task: str, message: str, remote_type: str = "", traceback: str = "") -> None:
        self.task = task
        self.remote_type = remote_type
        self.traceback = traceback
        self.message = message
        what = f"{remote_type}: {message}" if remote_type else message
        super().__init__(f"task {task}: {what}")


class NoExecutors(IcnError):
    """No executor is reachable (none registered ``/cfn/node/<id>`` at the forwarder)."""


class TaskLost(IcnError):
    """A task could not be run to completion within its retries (every executor that took it
    failed or vanished), or its result can no longer be fetched nor rebuilt."""


class GetTimeout(IcnError, TimeoutError):
    """``get`` or ``wait`` gave up after its timeout; the tasks go on."""
