"""What a named-function call can raise: one class per cause, all under icn.errors.IcnError.

Each error the server reports travels as a small envelope (``kind``, ``type``, ``message``) and
is raised again here on the caller's side, so ``except Unauthorized`` works across the network.
"""

from __future__ import annotations

from icn.errors import IcnError


class RmiError(IcnError):
    """Base of the errors of a named-function call; ``function`` is the called name."""

    kind = "error"

    def __init__(self, message: str, function: str = "") -> None:
        self.function = function
        self.message = message
        super().__init__(f"{function}: {message}" if function else message)


class RemoteError(RmiError):
    """The function itself raised: ``remote_type`` is its exception type (``ValueError``),
    ``message`` its text and ``remote_traceback`` the server's formatted traceback."""

    kind = "remote"

    def __init__(
        self, remote_type: str, message: str, function: str = "", remote_traceback: str = ""
    ) -> None:
        self.remote_type = remote_type
        self.remote_traceback = remote_traceback
        super().__init__(f"{remote_type}: {message}", function)
        self.message = message


class Unauthorized(RmiError):
    """The server's policy refused the caller's credential; the function did not run."""

    kind = "unauthorized"


class NoSuchFunction(RmiError):
    """The server serves no function of that name."""

    kind = "no_such_function"


class BadArguments(RmiError):
    """The arguments could not be decoded, did not fit the function's signature, or exceeded
    the server's size limit; the function did not run."""

    kind = "bad_arguments"


class Overloaded(RmiError):
    """The server has as many calls in progress as it accepts; retry later."""

    kind = "overloaded"


class Timeout(RmiError, TimeoutError):
    """The call did not complete within the caller's deadline."""

    kind = "timeout"


class ServerUnavailable(RmiError):
    """No server answered (no route, or the server stopped answering mid-call)."""

    kind = "unavailable"


class ResultLost(RmiError):
    """The server no longer knows the call (it restarted, or the result expired unfetched)."""

    kind = "result_lost"


class SessionUnknown(RmiError):
    """The server does not know the session a call came in (it expired, or the server
    restarted).  The client runs the full exchange again, which agrees a new session; callers
    see this only if that fails too."""

    kind = "session"


class NotLocal(RmiError):
    """The server cannot use the memory file a session call's payloads are in (the caller is on
    another host, or run by another user); the function did not run.  The client sends that
    session's calls in packets from then on, and callers never see this."""

    kind = "not_local"


class ProtocolError(RmiError):
    """A peer sent something this side cannot read (a version or encoding mismatch)."""

    kind = "protocol"


# Errors a server may report, by the ``kind`` they travel as.
BY_KIND: dict[str, type[RmiError]] = {
    cls.kind: cls
    for cls in (
        Unauthorized,
        NoSuchFunction,
        BadArguments,
        Overloaded,
        ResultLost,
        SessionUnknown,
        NotLocal,
        ProtocolError,
    )
}
