"""Fragmenter / Reassembler: round trips at many MTUs, in any order, with duplicates; the limits
are counted, never raised."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icn.errors import EncodeError
from icn.wire import tlv_types as T
from icn.wire.fragment import Fragmenter, Reassembler
from icn.wire.lp import LpView, encode_lp, parse_lp
from tests.unit.icn.test_name import SETTINGS

MASK = 2**64 - 1
HEADER_FIELDS: dict[str, Any] = {
    "pit_token": b"\xa1\xb2\xc3\xd4",
    "nack_reason": T.NACK_CONGESTION,
    "congestion_mark": 1,
    "incoming_face_id": 300,
}


def fragment_all(packet: bytes, mtu: int, **fields: Any) -> tuple[list[bytes], list[LpView]]:
    wires = Fragmenter(mtu).fragment(packet, **fields)
    return wires, [parse_lp(w) for w in wires]


@SETTINGS
@given(
    st.integers(1, 6000),
    st.sampled_from([50, 64, 100, 253, 255, 256, 257, 576, 1400, 1500, 8800, 65540]),
    st.booleans(),
    st.randoms(use_true_random=False),
    st.integers(0, 2**64 - 1),
)
def test_round_trip_any_order_with_duplicates(
    size: int, mtu: int, with_fields: bool, rnd: random.Random, start: int
) -> None:
    packet = rnd.randbytes(size)
    fields = HEADER_FIELDS if with_fields else {}
    fragmenter = Fragmenter(mtu)
    fragmenter.next_sequence = start  # exercises the 64-bit wrap too
    wires = fragmenter.fragment(packet, **fields)
    assert all(len(w) <= mtu for w in wires)
    if len(wires) == 1:
        # fits: bare packet, or one LpPacket without fragmentation fields
        if not fields:
            assert wires[0] == packet
        else:
            assert wires[0] == encode_lp(packet, **fields)
        return
    views = [parse_lp(w) for w in wires]
    count = len(views)
    assert [v.frag_index for v in views] == list(range(count))
    assert {v.frag_count for v in views} == {count}
    assert [v.sequence for v in views] == [(start + i) & MASK for i in range(count)]
    assert fragmenter.next_sequence == (start + count) & MASK
    # pieces are as large as the MTU allows (a few bytes lost to VAR-NUMBER widths at most)
    assert all(len(w) >= mtu - 4 for w in wires[:-1])
    for key, value in fields.items():
        assert getattr(views[0], key) == value
        assert all(getattr(v, key) == getattr(LpView(), key) for v in views[1:])
    # any order, with some pieces twice; the last arrival completes the message
    order = rnd.sample(views, k=count)
    arrivals = order[:-1] + rnd.sample(order[:-1], k=min(3, count - 1))
    rnd.shuffle(arrivals)
    arrivals.append(order[-1])
    counters: Counter[str] = Counter()
    reassembler = Reassembler(counters=counters)
    results = [reassembler.receive(v, 0.0) for v in arrivals]
    assert results[:-1] == [None] * (len(arrivals) - 1)
    assert results[-1] is not None
    joined, first = results[-1]
    assert joined == packet
    assert first is views[0]
    assert counters == Counter(
        {"reassembly.duplicate": len(arrivals) - count} if len(arrivals) > count else {}
    )
    assert reassembler.pending == 0


def test_single_item_cases() -> None:
    packet = bytes(100)
    assert Fragmenter(100).fragment(packet) == [packet]
    assert Fragmenter(1000).fragment(packet, pit_token=b"t") == [encode_lp(packet, pit_token=b"t")]
    # fields that encode to nothing do not force an LpPacket
    assert Fragmenter(100).fragment(packet, pit_token=None, congestion_mark=0) == [packet]
    with_token = encode_lp(packet, pit_token=b"t")
    assert Fragmenter(len(with_token)).fragment(packet, pit_token=b"t") == [with_token]
    assert len(Fragmenter(len(with_token) - 1).fragment(packet, pit_token=b"t")) == 2


def test_one_byte_over_the_mtu_makes_two_fragments() -> None:
    packet = bytes(range(200))
    wires, views = fragment_all(packet, 199)
    assert len(wires) == 2 and b"".join(v.fragment or b"" for v in views) == packet


def test_mtu_too_small_raises() -> None:
    packet = bytes(100)
    with pytest.raises(EncodeError):
        Fragmenter(20).fragment(packet)
    # room for payload on later fragments but not for fragment 0's header fields
    with pytest.raises(EncodeError):
        Fragmenter(40).fragment(packet, pit_token=bytes(32))
    # the smallest MTU that works carries one payload byte per fragment
    wires, views = fragment_all(packet, 21)
    assert len(wires) == 100 and all(len(v.fragment or b"") == 1 for v in views)


def test_fragmenter_rejects_its_own_fields_and_empty_packets() -> None:
    with pytest.raises(EncodeError):
        Fragmenter(100).fragment(bytes(500), sequence=1)
    with pytest.raises(EncodeError):
        Fragmenter(100).fragment(b"")


def test_sequence_continues_across_packets() -> None:
    fragmenter = Fragmenter(100)
    fragmenter.next_sequence = 10
    first = [parse_lp(w).sequence for w in fragmenter.fragment(bytes(300))]
    fragmenter.fragment(bytes(50))  # fits: uses no sequence number
    second = [parse_lp(w).sequence for w in fragmenter.fragment(bytes(300))]
    assert first + second == list(range(10, 10 + len(first) + len(second)))


def _pieces(packet_size: int, mtu: int, sequence: int = 1000) -> list[LpView]:
    fragmenter = Fragmenter(mtu)
    fragmenter.next_sequence = sequence
    return [parse_lp(w) for w in fragmenter.fragment(bytes(packet_size), pit_token=b"p")]


def test_frag_count_one_is_returned_at_once() -> None:
    view = parse_lp(encode_lp(b"\x05\x00", pit_token=b"x"))
    reassembler = Reassembler()
    assert reassembler.receive(view, 0.0) == (b"\x05\x00", view)
    assert reassembler.receive(parse_lp(encode_lp(None)), 0.0) is None
    assert not reassembler.counters


def test_frag_count_too_large() -> None:
    pieces = _pieces(2000, 60)
    counters: Counter[str] = Counter()
    reassembler = Reassembler(max_frag_count=len(pieces) - 1, counters=counters)
    assert all(reassembler.receive(p, 0.0) is None for p in pieces)
    assert counters == Counter({"reassembly.frag_count_too_large": len(pieces)})
    assert reassembler.pending == 0


def test_frag_count_mismatch_drops_the_piece_only() -> None:
    pieces = _pieces(300, 100)
    reassembler = Reassembler()
    assert reassembler.receive(pieces[0], 0.0) is None
    liar = parse_lp(encode_lp(b"zz", sequence=pieces[1].sequence, frag_index=1, frag_count=9))
    assert reassembler.receive(liar, 0.0) is None
    assert reassembler.counters["reassembly.frag_count_mismatch"] == 1
    results = [reassembler.receive(p, 0.0) for p in pieces[1:]]
    assert results[-1] is not None and results[-1][0] == bytes(300)


def test_duplicate_is_counted() -> None:
    pieces = _pieces(300, 100)
    reassembler = Reassembler()
    reassembler.receive(pieces[0], 0.0)
    reassembler.receive(pieces[0], 0.0)
    assert reassembler.counters == Counter({"reassembly.duplicate": 1})


def test_too_many_pending_evicts_the_oldest() -> None:
    messages = [_pieces(300, 100, sequence=1000 * k) for k in range(3)]
    counters: Counter[str] = Counter()
    reassembler = Reassembler(max_pending=2, counters=counters)
    for k, pieces in enumerate(messages):
        assert reassembler.receive(pieces[0], float(k) / 100) is None
    assert counters == Counter({"reassembly.too_many_pending": 1})
    assert reassembler.pending == 2
    # message 0 was evicted: its other pieces start a new partial that never completes
    assert all(reassembler.receive(p, 0.03) is None for p in messages[0][1:])
    # message 2 still completes (message 1 made room for message 0's restart)
    assert [reassembler.receive(p, 0.04) for p in messages[2][1:]][-1] is not None


def test_timeout_counts_from_the_last_piece() -> None:
    pieces = _pieces(400, 100)
    counters: Counter[str] = Counter()
    reassembler = Reassembler(timeout=0.5, counters=counters)
    reassembler.receive(pieces[0], 0.0)
    assert reassembler.expire(0.4) == 0
    reassembler.receive(pieces[1], 0.4)  # restarts the timer, as in NFD
    assert reassembler.expire(0.8) == 0
    assert reassembler.expire(0.91) == 1
    assert counters == Counter({"reassembly.timeout": 1})
    assert reassembler.pending == 0
    # a piece of the expired message starts over and cannot complete it
    assert all(reassembler.receive(p, 1.0) is None for p in pieces[2:])


def test_receive_expires_stale_partials_itself() -> None:
    old, new = _pieces(300, 100, sequence=0), _pieces(300, 100, sequence=500)
    reassembler = Reassembler(timeout=0.5)
    reassembler.receive(old[0], 0.0)
    reassembler.receive(new[0], 1.0)
    assert reassembler.counters["reassembly.timeout"] == 1 and reassembler.pending == 1


def test_rejected_pieces_do_not_refresh_the_timer() -> None:
    pieces = _pieces(300, 100)
    reassembler = Reassembler(timeout=0.5)
    reassembler.receive(pieces[0], 0.0)
    reassembler.receive(pieces[0], 0.4)  # duplicate
    assert reassembler.expire(0.6) == 1


def test_hand_made_views_never_raise() -> None:
    reassembler = Reassembler()
    weird = LpView()
    weird.fragment, weird.frag_count, weird.frag_index = b"x", 3, 5
    assert reassembler.receive(weird, 0.0) is None
    weird.frag_index, weird.sequence = 1, None
    assert reassembler.receive(weird, 0.0) is None
    weird.fragment, weird.sequence = None, 7
    assert reassembler.receive(weird, 0.0) is None
    assert reassembler.counters == Counter(
        {"reassembly.bad_frag_index": 1, "reassembly.no_sequence": 1, "reassembly.no_fragment": 1}
    )


def test_a_message_past_the_largest_packet_is_dropped_as_soon_as_it_is() -> None:
    # counts alone let a peer pin max_pending x max_frag_count pieces: gigabytes of 64 KiB
    pieces = _pieces(3000, 300)
    counters: Counter[str] = Counter()
    reassembler = Reassembler(max_message=1000, counters=counters)
    for piece in pieces:
        assert reassembler.receive(piece, 0.0) is None
        assert reassembler.held <= 1000
    # each try of the message is dropped once its pieces pass 1000 octets
    assert counters["reassembly.too_large"] == 2


def test_partial_messages_together_stay_within_the_byte_budget() -> None:
    messages = [_pieces(2000, 300, sequence=1000 * k) for k in range(10)]
    counters: Counter[str] = Counter()
    reassembler = Reassembler(max_message=4000, max_bytes=3000, counters=counters)
    for k, pieces in enumerate(messages):
        for piece in pieces[:-1]:  # none is complete yet
            assert reassembler.receive(piece, k / 100) is None
            assert reassembler.held <= 3000
    assert counters["reassembly.over_budget"] >= 7  # the stalest made room
    assert reassembler.receive(messages[-1][-1], 0.2) is not None  # the latest is whole
    reassembler.expire(10.0)
    assert reassembler.pending == 0 and reassembler.held == 0  # every octet accounted for


def test_the_byte_budget_follows_the_largest_packet() -> None:
    assert Reassembler().max_bytes == 1 << 20  # NDN's 8800 B packets: the 1 MiB floor
    assert Reassembler(max_message=4 << 20).max_bytes == 32 << 20  # eight at their largest
