from collections import Counter

from forwarder.table.dead_nonce_list import DeadNonceList
from tests.unit.table.packets import name

A = name("/a")
B = name("/b")
N1 = b"\x00\x00\x00\x01"
N2 = b"\x00\x00\x00\x02"


def test_has_after_add_only_for_that_pair() -> None:
    dnl = DeadNonceList()
    assert not dnl.has(A, N1, 0.0)
    dnl.add(A, N1, 0.0)
    assert dnl.has(A, N1, 0.1)
    assert not dnl.has(A, N2, 0.1)
    assert not dnl.has(B, N1, 0.1)
    assert len(dnl) == 1


def test_gone_after_lifetime() -> None:
    counters: Counter[str] = Counter()
    dnl = DeadNonceList(lifetime=6.0, counters=counters)
    dnl.add(A, N1, 10.0)
    dnl.add(B, N1, 12.0)
    assert dnl.has(A, N1, 15.999)
    assert not dnl.has(A, N1, 16.0)
    assert dnl.has(B, N1, 16.0)
    assert len(dnl) == 1 and counters["dnl.expired"] == 1
    assert not dnl.has(B, N1, 18.0) and len(dnl) == 0


def test_readded_pair_lives_from_its_last_add() -> None:
    dnl = DeadNonceList(lifetime=1.0)
    dnl.add(A, N1, 0.0)
    dnl.add(A, N1, 0.8)
    assert dnl.has(A, N1, 1.5)
    assert not dnl.has(A, N1, 1.8)


def test_cap_evicts_oldest_and_counts() -> None:
    counters: Counter[str] = Counter()
    dnl = DeadNonceList(lifetime=60.0, max_entries=3, counters=counters)
    nonces = [i.to_bytes(4, "big") for i in range(5)]
    for i, n in enumerate(nonces):
        dnl.add(A, n, float(i))
    assert len(dnl) == 3
    assert counters["dnl.evicted"] == 2 and counters["dnl.insert"] == 5
    assert not dnl.has(A, nonces[0], 5.0) and not dnl.has(A, nonces[1], 5.0)
    assert all(dnl.has(A, n, 5.0) for n in nonces[2:])


def test_zero_capacity_stores_nothing() -> None:
    dnl = DeadNonceList(max_entries=0)
    dnl.add(A, N1, 0.0)
    assert not dnl.has(A, N1, 0.0) and len(dnl) == 0
