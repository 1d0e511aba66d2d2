"""Call sessions: after one full exchange, later calls between the same client and server take
one round trip (issue 17, docs/design.md section 6).

The first call runs the full RICE exchange (credential by Reflexive Interest, Ed25519,
authorization) and, when the caller asks, also agrees a session: both ends derive 64 bytes by
X25519 (the server's key from the credential's Reflexive Interest name, the caller's from its
credential) and HKDF-SHA256, salted with the call's RNP.  The first half keys HMAC-SHA256
signatures, the second seals private arguments and results.  The server names the session by
a random id and says how long it lasts.

A session call is one signed Interest ``/svc/<fn>/_s/<sid>/<params digest>``: its
ApplicationParameters carry the arguments, its InterestSignatureInfo a SignatureNonce, a
SignatureTime and a SignatureSeqNum, and its signature is the session's HMAC.  The server checks
the HMAC, that the time is within ``max_skew`` of its clock and that the sequence number was
not seen before (a sliding window, as IPsec's anti-replay), then authorizes the session's
caller, before any work.  The answer is the Data, HMAC-signed.

This module holds what both ends decide, free of I/O and of clocks: ``now`` is passed in.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from compute.rmi.errors import BadArguments
from compute.rmi.local import LocalFile, LocalProof
from compute.rmi.policy import Caller
from icn.dataplane.memfile import MemFileError
from icn.errors import DecodeError
from icn.security.hmac_signer import HmacSigner
from icn.security.secretbox import KEY_LEN, CallKey, EphemeralKey, derive_secret
from icn.security.signed_interest import SignedInterest
from icn.wire import tlv_types as T
from icn.wire.encode import Outgoing
from icn.wire.name import generic
from icn.wire.serialize import pack, unpack
from icn.wire.tlv import Buffer, encode_nni

SESSION = generic("_s")
SESSION_INFO = b"icn-rmi v1 session"
SID_LEN = 8
DEFAULT_LIFETIME = 600.0  # seconds a session lasts on the server
DEFAULT_MAX_SESSIONS = 10_000
# answers kept for retransmitted calls, over all sessions: a local-path answer may be 4 MiB
DEFAULT_MAX_ANSWER_BYTES = 64 << 20
REPLAY_WINDOW = 1024  # sequence numbers behind the highest one still accepted once
MAX_SKEW_MS = 60_000  # SignatureTime against the server's clock
# a client stops using a session this long before the server's end, so no call races it
CLIENT_MARGIN = 5.0
# room in a packet for what is not arguments or result: name, signature, envelope fields
PACKET_ROOM = 1024
# the largest answer a server puts in one packet, whatever a caller asks for
LOCAL_ANSWER_MAX = T.MAX_LOCAL_PACKET_SIZE - PACKET_ROOM


def session_name(sid: bytes) -> bytes:
    """The name a session's HMAC key goes by (the signatures' KeyLocator)."""
    return SESSION + generic(sid)


def session_keys(secret: bytes, sid: bytes) -> tuple[HmacSigner, CallKey]:
    """The HMAC signer and the sealing key of a session, from its 64-byte shared secret."""
    return HmacSigner(secret[:KEY_LEN], session_name(sid)), CallKey(secret[KEY_LEN:])


def derive_session_secret(mine: EphemeralKey, peer_public: bytes, rnp_key: bytes) -> bytes:
    """What both ends of the first call derive (SecurityError for an unusable peer key)."""
    return derive_secret(mine, peer_public, salt=rnp_key, info=SESSION_INFO, length=2 * KEY_LEN)


class ReplayWindow:
    """Sequence numbers accepted once each: anything above the highest seen, or within
    ``size`` below it and not seen yet (calls in flight may arrive out of order)."""

    __slots__ = ("_bits", "_top", "size")

    def __init__(self, size: int = REPLAY_WINDOW) -> None:
        self.size = size
        self._top = -1  # highest accepted
        self._bits = 0  # bit i: top - i was accepted

    def accept(self, seq: int) -> bool:
        """Record ``seq`` and say whether it is new (False: seen, or too old to tell)."""
        if seq < 0:
            return False
        if seq > self._top:
            shift = seq - self._top
            # a jump past the window starts it afresh (shifting by the jump itself would let a
            # caller's huge sequence number build an integer as large)
            if shift >= self.size:
                self._bits = 1
            else:
                self._bits = ((self._bits << shift) | 1) & ((1 << self.size) - 1)
            self._top = seq
            return True
        back = self._top - seq
        if back >= self.size or self._bits >> back & 1:
            return False
        self._bits |= 1 << back
        return True


@dataclass
class ServerSession:
    """One session as its server keeps it."""

    sid: bytes
    caller: Caller
    signer: HmacSigner
    box: CallKey
    expires: float
    replay: ReplayWindow = field(default_factory=ReplayWindow)
    # recent calls by sequence number: a retransmitted call (the same sequence number, a new
    # SignatureNonce and time) gets its call's answer instead of running twice
    calls: OrderedDict[int, SessionCall] = field(default_factory=OrderedDict)
    # the caller's call file, once checked (compute.rmi.local)
    local: LocalProof = field(default_factory=LocalProof)

    def remember(self, seq: int, call: SessionCall, keep: int = 256) -> list[int]:
        """Keep ``call``; the sequence numbers of the calls forgotten to make room."""
        self.calls[seq] = call
        gone = []
        while len(self.calls) > keep:
            gone.append(self.calls.popitem(last=False)[0])
        return gone


class SessionCall:
    """A call in a session: its answer once known, and the names and reply paths of the
    retransmissions of it that came meanwhile (answered with it)."""

    __slots__ = ("answer", "waiting")

    def __init__(self) -> None:
        self.answer: bytes | None = None
        self.waiting: list[tuple[bytes, Callable[[Outgoing], None]]] = []


MAX_WAITING_REPEATS = 8


class SessionCheck:
    """Why a session call is refused (the values of :meth:`SessionTable.check`)."""

    OK: Final = "ok"
    UNKNOWN: Final = "unknown"  # no such session here (expired, or the server restarted)
    FORGED: Final = "forged"  # not signed by the session's key, or not a session signature
    STALE: Final = "stale"  # SignatureTime too far from the server's clock, or no time or nonce
    REPLAY: Final = "replay"  # a sequence number seen before (or too old to tell)


class SessionTable:
    """The server's sessions, bounded in number and by lifetime."""

    def __init__(
        self,
        *,
        lifetime: float = DEFAULT_LIFETIME,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        max_skew_ms: int = MAX_SKEW_MS,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        self.lifetime = lifetime
        self.max_sessions = max_sessions
        self.max_skew_ms = max_skew_ms
        self.max_answer_bytes = max_answer_bytes
        self._by_sid: OrderedDict[bytes, ServerSession] = OrderedDict()
        # answers kept, oldest first, by (session, sequence number): their bytes are bounded
        self._answers: OrderedDict[tuple[bytes, int], int] = OrderedDict()
        self.answer_bytes = 0

    def answered(self, session: ServerSession, seq: int, call: SessionCall, answer: bytes) -> None:
        """Keep ``answer`` for a retransmission of call ``seq``; the oldest answers kept go
        beyond ``max_answer_bytes`` (their calls are forgotten: a late repeat of one is
        refused as a replay, never run)."""
        call.answer = answer
        if session.calls.get(seq) is not call:  # forgotten already: nothing to answer again
            return
        self._answers[session.sid, seq] = len(answer)
        self.answer_bytes += len(answer)
        while self.answer_bytes > self.max_answer_bytes and self._answers:
            (sid, old), size = self._answers.popitem(last=False)
            self.answer_bytes -= size
            owner = self._by_sid.get(sid)
            if owner is not None:
                owner.calls.pop(old, None)

    def remember(self, session: ServerSession, seq: int, call: SessionCall) -> None:
        """Keep ``call`` for retransmissions of it; the answers of the calls the session
        forgets to make room leave the byte count (kept, their bookkeeping grew by an entry
        per call until ``max_answer_bytes`` of answers were counted: 600,000 of 100 B)."""
        for old in session.remember(seq, call):
            size = self._answers.pop((session.sid, old), None)
            if size is not None:
                self.answer_bytes -= size

    def __len__(self) -> int:
        return len(self._by_sid)

    def create(self, caller: Caller, secret: bytes, now: float) -> ServerSession:
        """A new session for ``caller``; the oldest goes when the table is full."""
        sid = os.urandom(SID_LEN)
        signer, box = session_keys(secret, sid)
        session = ServerSession(sid, caller, signer, box, now + self.lifetime)
        self._by_sid[sid] = session
        while len(self._by_sid) > self.max_sessions:
            self._by_sid.popitem(last=False)
        return session

    def get(self, sid: bytes, now: float) -> ServerSession | None:
        session = self._by_sid.get(sid)
        if session is not None and now >= session.expires:
            del self._by_sid[sid]
            return None
        return session

    def check(
        self, sid: bytes, si: SignedInterest, now: float, wall_ms: int
    ) -> tuple[str, ServerSession | None]:
        """Whether the signed Interest ``si`` is a good call in session ``sid``: a
        :class:`SessionCheck` value, and the session when it exists.  The sequence number is
        recorded only for a call that passes every other check, so a forgery cannot burn it."""
        session = self.get(sid, now)
        if session is None:
            return SessionCheck.UNKNOWN, None
        fields = si.fields
        if (
            fields.sig_type != T.SIG_HMAC_WITH_SHA256
            or fields.key_name != session.signer.key_name
            or not session.signer.verify_parts(si.value, si.name_part, si.block_part)
        ):
            return SessionCheck.FORGED, session
        if (
            fields.nonce is None
            or fields.time_ms is None
            or fields.seq is None
            or abs(fields.time_ms - wall_ms) > self.max_skew_ms
        ):
            return SessionCheck.STALE, session
        if not session.replay.accept(fields.seq):
            return SessionCheck.REPLAY, session
        return SessionCheck.OK, session


@dataclass
class ClientSession:
    """A session as its client keeps it: one per server prefix."""

    sid: bytes
    signer: HmacSigner
    box: CallKey
    expires: float  # the client's clock, CLIENT_MARGIN before the server's end
    seq: int = 0
    # the largest packet the path to the server carries, asked of the forwarder once
    packet_limit: int | None = None
    # on a local path, the file the calls' payloads go in (compute.rmi.local); ``not_local``
    # once the server could not use it (the calls go in packets)
    local: LocalFile | None = None
    not_local: bool = False

    def inline_limit(self) -> int:
        """The largest arguments (or result) a call carries in its Interest (or Data)."""
        return max(0, (self.packet_limit or T.MAX_PACKET_SIZE) - PACKET_ROOM)

    @classmethod
    def agreed(cls, sid: bytes, secret: bytes, ttl: float, now: float) -> ClientSession:
        signer, box = session_keys(secret, sid)
        return cls(sid, signer, box, now + max(0.0, ttl - CLIENT_MARGIN))

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def usable(self, now: float) -> bool:
        return now < self.expires

    def local_file(self) -> LocalFile | None:
        """The file for this call's payloads: made on a local path's first call (and anew once
        too many of its slots were retired), None elsewhere."""
        if self.not_local or self.packet_limit != T.MAX_LOCAL_PACKET_SIZE:
            return None
        local = self.local
        if local is None or not local.usable():
            if local is not None:
                local.retire()
            try:
                local = self.local = LocalFile(self.signer)
            except MemFileError:  # (no memfd here): packets, as on any other path
                self.local, self.not_local = None, True
                return None
        return local

    def end(self) -> None:
        """The session is no longer used: its file goes once its calls end."""
        if self.local is not None:
            self.local.retire()
            self.local = None


def session_offer(session: ServerSession, lifetime: float) -> dict[str, Any]:
    """What the first call's answer adds for its caller: the session id and its lifetime."""
    return {"sid": session.sid, "sttl": lifetime}


def session_call_aad(name_part: bytes, seq: int) -> bytes:
    """What a private session call's sealed arguments and result are bound to: the call's
    name (without its parameters digest) and sequence number."""
    return name_part + encode_nni(seq)


def session_params(
    payload: bytes, private: bool, answer_limit: int, local: list[Any] | None = None
) -> bytes:
    """A session call's ApplicationParameters: the arguments (sealed when private), the
    largest answer the caller's path carries in one packet, and for a call between processes of
    one host the slot of the caller's file its arguments (if not in ``payload``) and answer
    are in (``compute.rmi.local``)."""
    value: dict[str, Any] = {"a": payload, "p": private, "m": answer_limit}
    if local is not None:
        value["l"] = local
    return pack(value)


def read_session_params(params: Buffer, function: str) -> tuple[bytes, bool, int, Any]:
    """Inverse of :func:`session_params` (the slot reference unchecked, None if there is
    none); BadArguments for anything else."""
    try:
        value = unpack(params)
        payload, private, limit = value["a"], value["p"], value["m"]
        if not isinstance(payload, bytes) or not isinstance(limit, int) or limit < 0:
            raise DecodeError("fields of the wrong type")
    except (DecodeError, KeyError, TypeError) as exc:
        raise BadArguments(f"unreadable session call: {exc}", function) from None
    # what a packet can hold at most, whatever the caller asks
    return payload, bool(private), min(limit, LOCAL_ANSWER_MAX), value.get("l")
