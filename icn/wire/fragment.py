"""NDNLPv2 fragmentation and reassembly (Sequence / FragIndex / FragCount).

A face with a finite MTU (UDP, Ethernet) owns one :class:`Fragmenter`; the receiving side keeps
one :class:`Reassembler` per remote endpoint.  The rules follow NFD's ``LpFragmenter`` and
``LpReassembler``: fragments of one packet carry consecutive Sequence numbers, the receiver keys a
message by ``Sequence - FragIndex``, link header fields (PitToken, Nack, CongestionMark, local
fields) travel on fragment 0 only and are taken from it.  Reassembly input comes from the network,
so every problem is dropped and counted, never raised.
"""

from __future__ import annotations

import secrets
from collections import Counter
from typing import Any, Final

from icn.errors import EncodeError
from icn.wire import tlv_types as T
from icn.wire.lp import LpView, encode_lp
from icn.wire.tlv import encode_nni, encode_varnum, read_tl

_SEQ_MASK = (1 << 64) - 1
# Fields the Fragmenter owns; a caller passing them would break the Sequence/FragIndex rules.
_RESERVED = frozenset(("sequence", "frag_index", "frag_count"))
# Sequence TLV: type, length, fixed 8 octets.
_SEQUENCE_SIZE = 10
# A Reassembler's bounds in octets (see Reassembler): the largest message by default (NDN's
# largest packet; a face passes its own), and what all partial messages together may hold.
MAX_MESSAGE: Final = T.MAX_PACKET_SIZE
MESSAGES_HELD: Final = 8
BYTES_FLOOR: Final = 1 << 20


def _lp_size(header_len: int, payload: int) -> int:
    """Size of an LpPacket whose header fields take ``header_len`` bytes and whose Fragment
    carries ``payload`` bytes."""
    inner = header_len + 1 + len(encode_varnum(payload)) + payload
    return 1 + len(encode_varnum(inner)) + inner


def _payload_room(mtu: int, header_len: int) -> int:
    """Largest Fragment payload that keeps the LpPacket within ``mtu`` (<= 0: none fits)."""
    # Start from the guess with one-octet lengths; longer VAR-NUMBERs cost at most 16 more bytes.
    room = mtu - header_len - 4
    while room > 0 and _lp_size(header_len, room) > mtu:
        room -= 1
    return room


def _active(lp_fields: dict[str, Any]) -> dict[str, Any]:
    """The fields that put something on the wire (None and a zero CongestionMark do not)."""
    return {
        k: v
        for k, v in lp_fields.items()
        if v is not None and not (k == "congestion_mark" and v == 0)
    }


class Fragmenter:
    """Cuts network packets into LpPackets of at most ``mtu`` bytes (one per face).

    The Sequence counter starts at a random value so that a restarted sender does not feed pieces
    into partial messages the receiver still holds from before; ``next_sequence`` is public so a
    test can place it near the 64-bit wrap.
    """

    __slots__ = ("mtu", "next_sequence")

    def __init__(self, mtu: int) -> None:
        self.mtu = mtu
        self.next_sequence = secrets.randbits(64)

    def fragment(self, packet: bytes, **lp_fields: Any) -> list[bytes]:
        """LpPackets (or the bare packet) carrying ``packet``, each at most ``mtu`` bytes.

        ``lp_fields`` are keyword arguments of :func:`icn.wire.lp.encode_lp`; they go on fragment 0.
        """
        if not packet:
            raise EncodeError("cannot fragment an empty packet")
        if not _RESERVED.isdisjoint(lp_fields):
            raise EncodeError("sequence, frag_index and frag_count are set by the Fragmenter")
        fields = _active(lp_fields)
        single = encode_lp(packet, **fields) if fields else packet
        if len(single) <= self.mtu:
            return [single]
        return self._split(packet, fields)

    def _split(self, packet: bytes, fields: dict[str, Any]) -> list[bytes]:
        extra = _header_value_len(fields)
        # The FragIndex/FragCount widths depend on the count, which depends on the room left by
        # those widths: grow the count until the packet fits (two or three rounds at most).
        count = 2
        while True:
            common = _SEQUENCE_SIZE + 2 + len(encode_nni(count - 1)) + 2 + len(encode_nni(count))
            room_first = _payload_room(self.mtu, common + extra)
            room_other = _payload_room(self.mtu, common)
            if room_first <= 0 or room_other <= 0:
                raise EncodeError(f"MTU {self.mtu} leaves no room for a fragment payload")
            needed = 1 + -(-(len(packet) - room_first) // room_other)
            if needed <= count:
                break
            count = needed
        cuts = [0, *range(room_first, len(packet), room_other), len(packet)]
        count = len(cuts) - 1
        base = self.next_sequence
        self.next_sequence = (base + count) & _SEQ_MASK
        return [
            encode_lp(
                packet[cuts[i] : cuts[i + 1]],
                sequence=(base + i) & _SEQ_MASK,
                frag_index=i,
                frag_count=count,
                **(fields if i == 0 else {}),
            )
            for i in range(count)
        ]


def _header_value_len(fields: dict[str, Any]) -> int:
    """Bytes the header ``fields`` add to an LpPacket."""
    if not fields:
        return 0
    wire = encode_lp(None, **fields)
    _, vstart, vend = read_tl(wire, 0, len(wire))
    return vend - vstart


class _Partial:
    """Pieces of one message received so far."""

    __slots__ = ("count", "first", "pieces", "received", "size", "touched")

    def __init__(self, count: int, now: float) -> None:
        self.count = count
        self.pieces: list[bytes | None] = [None] * count
        self.received = 0
        self.size = 0  # octets of the pieces held
        self.first: LpView | None = None
        self.touched = now


class Reassembler:
    """Joins fragments back into network packets (one per face / remote endpoint).

    Partial messages live in a dict ordered by last accepted piece, so the front is always the
    stalest: expiry and eviction pop from the front without scanning.  Like NFD, each accepted
    piece restarts the message's timeout, so a slow link that keeps delivering is not cut off.
    What a peer can pin is bounded in messages (``max_pending``) and in octets: a message whose
    pieces pass ``max_message`` (the largest packet the face takes) is dropped as soon as they
    do, and the pieces of all messages together stay within ``max_bytes`` (the stalest messages
    are evicted to make room).  Counts alone let a peer pin max_pending x max_frag_count
    datagrams, gigabytes with 64 KiB pieces.
    """

    __slots__ = (
        "_held",
        "_pending",
        "counters",
        "max_bytes",
        "max_frag_count",
        "max_message",
        "max_pending",
        "timeout",
    )

    def __init__(
        self,
        timeout: float = 0.5,
        max_frag_count: int = 400,
        max_pending: int = 256,
        counters: Counter[str] | None = None,
        max_message: int = MAX_MESSAGE,
        max_bytes: int | None = None,
    ) -> None:
        self.timeout = timeout
        self.max_frag_count = max_frag_count
        self.max_pending = max_pending
        self.max_message = max_message
        # room for a few messages at their largest, and never less than a megabyte (small
        # packets from many senders interleave)
        self.max_bytes = (
            max(BYTES_FLOOR, MESSAGES_HELD * max_message) if max_bytes is None else max_bytes
        )
        self.counters: Counter[str] = counters if counters is not None else Counter()
        self._pending: dict[int, _Partial] = {}
        self._held = 0  # octets of pieces held, over every partial message

    @property
    def held(self) -> int:
        """Octets of fragments held in partial messages."""
        return self._held

    @property
    def pending(self) -> int:
        """Number of partial messages held."""
        return len(self._pending)

    def receive(self, lp: LpView, now: float) -> tuple[bytes, LpView] | None:
        """Feed one LpPacket; return (network packet, LpView of fragment 0) once complete.

        An LpPacket without a Fragment (Ack-only, idle) yields None without counting a drop.
        """
        if lp.fragment is None:
            if lp.frag_count != 1:
                self._drop("no_fragment")
            return None
        if lp.frag_count == 1 and lp.frag_index == 0:
            return lp.fragment, lp
        self.expire(now)
        count, index = lp.frag_count, lp.frag_index
        if count > self.max_frag_count:
            self._drop("frag_count_too_large")
            return None
        if not 0 <= index < count:
            self._drop("bad_frag_index")
            return None
        if lp.sequence is None:
            self._drop("no_sequence")
            return None
        key = (lp.sequence - index) & _SEQ_MASK
        piece = lp.fragment
        pending = self._pending
        partial = pending.get(key)
        if partial is None:
            while len(pending) >= self.max_pending:
                self._forget(next(iter(pending)))
                self.counters["reassembly.too_many_pending"] += 1
            partial = _Partial(count, now)
        elif partial.count != count:
            self._drop("frag_count_mismatch")
            return None
        elif partial.pieces[index] is not None:
            self._drop("duplicate")
            return None
        else:
            del pending[key]  # re-inserted below, at the young end of the age order
        size = partial.size + len(piece)
        if size > self.max_message:  # larger than any packet the face takes: never whole
            self._held -= partial.size
            self._drop("too_large")
            return None
        if partial.received + 1 == count:  # complete: its pieces leave as one packet
            self._held -= partial.size
            partial.pieces[index] = piece
            if index == 0:
                partial.first = lp
            assert partial.first is not None  # every index is in, so index 0 is too
            return b"".join(p for p in partial.pieces if p is not None), partial.first
        while pending and self._held + len(piece) > self.max_bytes:
            self._forget(next(iter(pending)))  # the stalest message makes room
            self.counters["reassembly.over_budget"] += 1
        partial.pieces[index] = piece
        partial.received += 1
        partial.size = size
        partial.touched = now
        self._held += len(piece)
        if index == 0:
            partial.first = lp
        pending[key] = partial
        return None

    def _forget(self, key: int) -> None:
        self._held -= self._pending.pop(key).size

    def expire(self, now: float) -> int:
        """Drop partial messages with no new piece for ``timeout`` seconds; return how many."""
        dropped = 0
        pending = self._pending
        while pending:
            key = next(iter(pending))
            if now - pending[key].touched <= self.timeout:
                break
            self._forget(key)
            dropped += 1
        if dropped:
            self.counters["reassembly.timeout"] += dropped
        return dropped

    def _drop(self, reason: str) -> None:
        self.counters[f"reassembly.{reason}"] += 1
