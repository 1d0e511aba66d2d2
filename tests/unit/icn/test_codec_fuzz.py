"""Fuzz the lean readers: over 100,000 mutated and random inputs, only DecodeError may escape.

Inputs are :mod:`tests.fuzz_packets`'s mutations of valid Interests, Data, LpPackets and
fragments; the success ratios show the mutations reach past the outer header.
"""

from __future__ import annotations

import random
import traceback
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from icn.errors import DecodeError
from icn.wire.fragment import Reassembler
from icn.wire.lp import parse_lp
from icn.wire.name import component_ends
from icn.wire.packet import parse_data, parse_interest
from tests.fuzz_packets import Mutator, seeds

SEED = 0x1C0DEC
INPUTS = 100_000


def _exercise_interest(wire: bytes) -> None:
    iv = parse_interest(wire)
    # Rewrites a forwarder does must yield packets the reader accepts again.
    again = parse_interest(iv.with_nonce(b"\x00\x11\x22\x33"))
    assert again.nonce == b"\x00\x11\x22\x33" and again.name == iv.name
    if iv.hop_limit is not None:
        assert parse_interest(iv.with_hop_limit(0)).hop_limit == 0
    assert iv.last_component_type >= 0
    assert component_ends(iv.name) == iv.name_ends


def _exercise_data(wire: bytes) -> None:
    dv = parse_data(wire)
    assert component_ends(dv.full_name) == [*dv.name_ends, len(dv.name) + 34]


@pytest.mark.timeout(120)
def test_only_decode_error_escapes() -> None:
    rnd = random.Random(SEED)
    corpus = seeds()
    mutator = Mutator(rnd, corpus)
    reassembler = Reassembler(max_pending=64)
    ok: Counter[str] = Counter()
    failures: list[str] = []

    def attempt(label: str, fn: Callable[[bytes], Any], wire: bytes) -> Any:
        try:
            result = fn(wire)
        except DecodeError:
            return None
        except Exception:
            failures.append(f"{label}({wire.hex()}):\n{traceback.format_exc()}")
            return None
        ok[label] += 1
        return result

    for n in range(INPUTS):
        wire = mutator.next()
        attempt("interest", _exercise_interest, wire)
        attempt("data", _exercise_data, wire)
        view = attempt("lp", parse_lp, wire)
        if view is not None:
            try:
                done = reassembler.receive(view, n * 0.001)
            except Exception:  # receive must never raise, not even DecodeError
                failures.append(f"receive({wire.hex()}):\n{traceback.format_exc()}")
            else:
                if done is not None:
                    ok["reassembled"] += 1
                    attempt("interest", _exercise_interest, done[0])
                    attempt("data", _exercise_data, done[0])
        if len(failures) >= 5:
            break
    assert not failures, "\n".join(failures)
    # The mutations must reach the inner rules, not only die at the outer header.
    assert min(ok["interest"], ok["data"], ok["lp"]) > INPUTS // 100, ok
    assert ok["reassembled"] > 0, ok
    assert sum(reassembler.counters.values()) > 0
