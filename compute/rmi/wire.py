"""Names and envelopes of the RICE exchange (docs/design.md section 6), shared by client and server.

Names, under a service prefix ``/svc``::

    /svc/<fn>/<RNP>                  Trigger Interest (the call)
    /<RNP>/hello/<server X25519 pub> Reflexive Interest: the caller's credential (signed Data)
    /<RNP>/args/seg=<i>              Reflexive Interests: the arguments, segmented
    /svc/_thunk/<token>[/seg=<i>]    the result of a call that did not finish inline
    /svc/_thunk/<token>/_cancel      stop that call (its caller was cancelled)
    /svc/<fn>/_memo/<digest>[/seg=i] the result of a pure function, named by its arguments
    /svc/_r/<replica>/...            one replica's own names (a server given a replica id):
                                     its thunks, its memos, and ``_cancel/<RNP>`` (stop the
                                     call of that RNP: a clone that lost the race)
    /svc/_idem/<fn>/<RNP>            a call of an idempotent function: it may be cloned

Envelopes are msgpack maps with short keys; ``s`` says what an answer is: ``ok`` (result
inline), ``thunk`` (fetch the result from ``name`` after ``eta`` seconds), ``memo`` (the result
is at the memo name), ``pending`` (not ready; new ``eta``), ``miss`` (no memo yet) or ``err``.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from compute.rmi.errors import BY_KIND, ProtocolError, RemoteError, RmiError
from icn.errors import ConfigError, DecodeError
from icn.wire.name import components_after, generic
from icn.wire.serialize import pack, unpack
from icn.wire.tlv import Buffer, read_tl

VERSION = 1
# HKDF info for a private call's key: both sides must derive with the same
KEY_INFO = b"icn-rmi v1 call key"
THUNK = generic("_thunk")
CANCEL = generic("_cancel")
MEMO = generic("_memo")
HELLO = generic("hello")
ARGS = generic("args")
# the calls of idempotent functions, /svc/_idem/<fn>/<RNP>: a strategy may clone them
IDEM = generic("_idem")
# a replica's own names, under /svc/_r/<replica id>: routed to that replica, not to any server
# of /svc (docs/guides/strategies.md, "Replicas")
REPLICA = generic("_r")
REPLICA_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")


def replica_component(replica: str) -> bytes:
    """``_r/<replica>`` as name components; ConfigError for an id that is not a short word."""
    if not REPLICA_ID.match(replica):
        raise ConfigError(
            f"replica id {replica!r}: use a letter or digit, then letters, digits, '_', '.' or "
            "'-' (32 at most), e.g. r1"
        )
    return REPLICA + generic(replica)


def function_component(function: str) -> bytes:
    """The name component of a function (names starting with ``_`` are the protocol's)."""
    if not function or function.startswith("_") or "/" in function:
        raise ValueError(
            f"function name {function!r}: use a non-empty name without '/' that does not "
            "start with '_'"
        )
    return generic(function)


def call_digest(function: str, args_blob: bytes) -> str:
    """What names a pure function's result: the function and its serialized arguments."""
    h = hashlib.sha256(function.encode())
    h.update(b"\0")
    h.update(args_blob)
    return h.hexdigest()


def memo_name(prefix: bytes, function: str, digest: str) -> bytes:
    return prefix + function_component(function) + MEMO + generic(digest)


def thunk_name(prefix: bytes, token: str) -> bytes:
    return prefix + THUNK + generic(token)


def pack_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
    """Positional and keyword arguments as one blob; keywords sorted, so equal calls give
    equal blobs (and a pure function's repeated call the same memo name)."""
    return pack([list(args), dict(sorted(kwargs.items()))])


def unpack_args(blob: Buffer) -> tuple[list[Any], dict[str, Any]]:
    """Inverse of :func:`pack_args`; DecodeError for anything else."""
    value = unpack(blob)
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not isinstance(value[0], list)
        or not isinstance(value[1], dict)
        or not all(isinstance(k, str) for k in value[1])
    ):
        raise DecodeError("arguments are not [positional list, keyword map]")
    return value[0], value[1]


def envelope(status: str, **fields: Any) -> bytes:
    return pack({"v": VERSION, "s": status, **fields})


def with_fields(blob: bytes, fields: dict[str, Any]) -> bytes:
    """An envelope with ``fields`` added (the first call's answer carries its session)."""
    value = unpack(blob)
    if not isinstance(value, dict):
        raise DecodeError("an envelope is a map")
    value.update(fields)
    return pack(value)


def error_envelope(exc: RmiError) -> bytes:
    fields: dict[str, Any] = {"kind": exc.kind, "msg": exc.message}
    if isinstance(exc, RemoteError):
        fields.update(type=exc.remote_type, tb=exc.remote_traceback)
    return envelope("err", **fields)


def open_envelope(blob: bytes, function: str = "") -> dict[str, Any]:
    """Decode an answer; an ``err`` answer is raised as its typed error."""
    try:
        value = unpack(blob)
    except DecodeError as exc:
        raise ProtocolError(f"unreadable answer: {exc}", function) from None
    if not isinstance(value, dict) or value.get("v") != VERSION or "s" not in value:
        raise ProtocolError(f"not an RMI v{VERSION} answer", function)
    if value["s"] == "err":
        raise_error(value, function)
    return value


def raise_error(value: dict[str, Any], function: str) -> None:
    kind = value.get("kind")
    msg = str(value.get("msg", ""))
    if kind == RemoteError.kind:
        raise RemoteError(str(value.get("type", "Exception")), msg, function, str(value.get("tb")))
    raise BY_KIND.get(str(kind), ProtocolError)(msg, function)


def split_service_name(prefix: bytes, name: bytes) -> list[bytes] | None:
    """The components of ``name`` after ``prefix`` (whole TLVs), or None if not under it."""
    return components_after(prefix, name)


def component_text(component: bytes) -> str | None:
    """The value of a GenericNameComponent as text, or None for another type or bad UTF-8."""
    if not component or component[0] != 8:
        return None
    value = component_value(component)
    try:
        return value.decode()
    except UnicodeDecodeError:
        return None


def component_value(component: bytes) -> bytes:
    _, start, end = read_tl(component, 0, len(component))
    return component[start:end]
