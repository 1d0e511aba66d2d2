"""The fetcher: policies turned into the core's options (fake clock, no loop), and its wiring
to an endpoint against an in-memory producer (a few async tests, on a virtual clock: lifetimes,
RTOs, pauses and deadlines end when the fetcher says, whatever the CPU's load)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from icn.dataplane.fetcher import Fetcher, FetchPolicy, fetch, fetch_all
from icn.dataplane.window import Window
from icn.errors import InterestNack, InterestTimeout
from icn.rtt import RttOptions
from icn.wire.name import from_uri, generic
from icn.wire.packet import InterestView
from tests.unit.dataplane.memory_producer import data, endpoint, marked, nack
from tests.virtual_time import virtual_time

NAME = from_uri("/p/x")


# ---- policies, on a fake clock ---------------------------------------------------------------


def test_a_stream_policy_does_not_count_an_unproduced_item_as_lost() -> None:
    w: Window[int] = Window(FetchPolicy(loss_needs_later_arrival=True).window_options)
    w.sent(0, 0.0)
    assert not w.expired(0, 2.0) and w.decreases == 0
    assert w.due(2.0).resume == [0]


def test_a_fetch_policy_counts_an_expiry_as_a_loss() -> None:
    w: Window[int] = Window(FetchPolicy().window_options)
    w.sent(0, 0.0)
    assert w.expired(0, 4.0) and w.decreases == 1


def test_without_rto_retransmit_only_the_lifetime_ends_a_wait() -> None:
    w: Window[int] = Window(FetchPolicy(rto_retransmit=False).window_options)
    assert w.sent(0, 0.0) is None
    assert w.due(1000.0).lost == []


def test_slow_start_is_the_policys_choice() -> None:
    opts = FetchPolicy(initial_window=2, max_window=8, slow_start=False).window_options
    w: Window[int] = Window(opts)
    w.sent(0, 0.0)
    w.arrived(0, 0.1)
    assert w.cwnd == pytest.approx(2.5)
    w = Window(FetchPolicy(initial_window=2, max_window=8).window_options)
    w.sent(0, 0.0)
    w.arrived(0, 0.1)
    assert w.cwnd == 3


# ---- wiring, against an in-memory producer ------------------------------------------------------


@virtual_time
async def test_one_name_asked_again_after_each_expiry() -> None:
    ep, producer = endpoint(lambda iv: data(iv) if len(producer.seen) == 3 else None)
    policy = FetchPolicy(lifetime_ms=30, max_retries=2, rto_retransmit=False)
    dv = await fetch(ep, NAME, policy)
    assert dv.name == NAME and len(producer.seen) == 3
    assert len({iv.nonce for iv in producer.seen}) == 3  # a new Nonce each time
    assert ep.counters["retransmitted"] == 2 and ep.pending == 0


@virtual_time
async def test_retries_run_out() -> None:
    ep, producer = endpoint(lambda iv: None)
    with pytest.raises(InterestTimeout) as info:
        await fetch(ep, NAME, FetchPolicy(lifetime_ms=20, max_retries=1, rto_retransmit=False))
    assert info.value.attempts == 2 and len(producer.seen) == 2 and ep.pending == 0


@virtual_time
async def test_the_deadline_bounds_the_whole_fetch() -> None:
    ep, _ = endpoint(lambda iv: None)
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(InterestTimeout):
        await fetch(ep, NAME, FetchPolicy(lifetime_ms=1000, max_retries=None, deadline=0.1))
    assert loop.time() - start == pytest.approx(0.1) and ep.pending == 0


@virtual_time
async def test_rto_retransmits_before_the_lifetime_ends() -> None:
    ep, producer = endpoint(lambda iv: data(iv) if len(producer.seen) == 2 else None)
    policy = FetchPolicy(lifetime_ms=4000, rtt=RttOptions(initial_rto=0.05, min_rto=0.01))
    counters: Counter[str] = Counter()
    loop = asyncio.get_running_loop()
    start = loop.time()
    await fetch(ep, NAME, policy, counters=counters)
    assert loop.time() - start == pytest.approx(0.05)  # the initial RTO, not the 4 s lifetime
    assert counters["losses"] == 1 and counters["interests_retransmitted"] == 1


@virtual_time
async def test_a_nack_gives_up_or_pauses_and_asks_again() -> None:
    ep, _ = endpoint(nack)
    with pytest.raises(InterestNack):
        await fetch(ep, NAME, FetchPolicy(nack_gives_up=True))
    ep, producer = endpoint(lambda iv: nack(iv) if len(producer.seen) < 3 else data(iv))
    counters: Counter[str] = Counter()
    loop = asyncio.get_running_loop()
    start = loop.time()
    await fetch(ep, NAME, FetchPolicy(), counters=counters)
    # paused 0.05 s, then 0.1 s
    assert counters["nacks"] == 2 and loop.time() - start == pytest.approx(0.15)


@virtual_time
async def test_fetch_all_keeps_the_window_and_takes_marks() -> None:
    names = [NAME + generic(str(i)) for i in range(20)]
    ep, producer = endpoint(marked)
    producer.hold = True
    got: dict[int, bytes] = {}
    counters: Counter[str] = Counter()
    policy = FetchPolicy(initial_window=4, max_window=4)
    task = asyncio.ensure_future(
        fetch_all(ep, names, lambda i, dv: got.setdefault(i, dv.name), policy, counters=counters)
    )
    await asyncio.sleep(0.01)
    assert len(producer.seen) == 4  # no more than the window before any answer
    while not task.done():
        producer.release()
        await asyncio.sleep(0.001)
    await task
    assert got == dict(enumerate(names))
    assert counters["congestion_marks"] == 20 and counters["window_decreases"] >= 1


@virtual_time
async def test_a_rejected_answer_is_asked_again_after_a_pause_past_caches() -> None:
    fresh: list[bool] = []

    def answer(iv: InterestView) -> bytes:
        fresh.append(iv.must_be_fresh)
        return data(iv)

    ep, _ = endpoint(answer)
    keys = [0]
    verdicts = [False, True]

    def on_data(_key: int, _dv: object) -> bool:
        ok = verdicts.pop(0)
        if ok:
            fetcher.finish()
        return ok

    fetcher: Fetcher[int] = Fetcher(
        ep, FetchPolicy(), lambda _k: NAME, lambda: keys.pop() if keys else None, on_data
    )
    async with asyncio.timeout(1):
        await fetcher.run()
    assert fresh == [False, True] and ep.pending == 0
