"""Reflexive table: bounded, counted, and never answering for a TI that has left the PIT."""

from __future__ import annotations

from collections import Counter

import pytest

from forwarder.config import config_from_dict
from forwarder.daemon import table_limits
from forwarder.fw.forwarder import Forwarder
from forwarder.table.limits import TableLimits
from forwarder.table.pit import Pit, PitEntry
from forwarder.table.reflexive import ReflexiveTable
from icn.errors import ConfigError
from icn.wire.name import reflexive_component

from .packets import interest_for_name, name

KEY_A = reflexive_component(b"A" * 16)
KEY_B = reflexive_component(b"B" * 16)
KEY_C = reflexive_component(b"C" * 16)


def trigger(pit: Pit, key: bytes) -> PitEntry:
    entry, new = pit.find_or_insert(interest_for_name(name("/svc/fn") + key))
    assert entry is not None and new
    return entry


@pytest.fixture
def counters() -> Counter[str]:
    return Counter()


@pytest.fixture
def pit(counters: Counter[str]) -> Pit:
    return Pit(100, counters)


def test_insert_find_erase_counted(pit: Pit, counters: Counter[str]) -> None:
    rft = ReflexiveTable(10, counters)
    entry = trigger(pit, KEY_A)
    state = rft.insert(KEY_A, entry)
    assert state is not None and state.entry is entry and not state.cached
    assert rft.find(KEY_A) is state and KEY_A in rft and KEY_B not in rft
    assert rft.insert(KEY_A, entry) is state  # again: the same state, not a second one
    assert counters["rft.insert"] == 1
    assert rft.erase(KEY_A, entry)
    assert len(rft) == 0 and counters["rft.erase"] == 1
    assert not rft.erase(KEY_A, entry)


def test_bounded_refuses_and_counts(pit: Pit, counters: Counter[str]) -> None:
    rft = ReflexiveTable(2, counters)
    a, b, c = (trigger(pit, k) for k in (KEY_A, KEY_B, KEY_C))
    assert rft.insert(KEY_A, a) is not None and rft.insert(KEY_B, b) is not None
    assert rft.insert(KEY_C, c) is None
    assert len(rft) == 2 and counters["rft.refused_full"] == 1
    rft.erase(KEY_A, a)
    assert rft.insert(KEY_C, c) is not None


def test_zero_capacity_refuses_everything(pit: Pit, counters: Counter[str]) -> None:
    rft = ReflexiveTable(0, counters)
    assert rft.insert(KEY_A, trigger(pit, KEY_A)) is None
    with pytest.raises(ValueError):
        ReflexiveTable(-1)


def test_state_of_an_erased_ti_is_absent_and_removed(pit: Pit, counters: Counter[str]) -> None:
    rft = ReflexiveTable(10, counters)
    entry = trigger(pit, KEY_A)
    rft.insert(KEY_A, entry)
    pit.erase(entry)  # gone without finalize
    assert rft.find(KEY_A) is None
    assert len(rft) == 0 and counters["rft.erase"] == 1


def test_a_dead_state_does_not_count_against_the_bound(pit: Pit) -> None:
    rft = ReflexiveTable(1)
    old = trigger(pit, KEY_A)
    rft.insert(KEY_A, old)
    pit.erase(old)
    new = trigger(pit, KEY_A)
    state = rft.insert(KEY_A, new)
    assert state is not None and state.entry is new


def test_second_ti_with_a_live_rnp_does_not_take_it_over(pit: Pit) -> None:
    rft = ReflexiveTable(10)
    first = trigger(pit, KEY_A)
    other, _ = pit.find_or_insert(interest_for_name(name("/other") + KEY_A))
    assert other is not None
    rft.insert(KEY_A, first)
    state = rft.insert(KEY_A, other)
    assert state is not None and state.entry is first
    assert not rft.erase(KEY_A, other)  # the second TI's end leaves the first's state alone
    assert rft.find(KEY_A) is state


def test_purge_only_for_states_that_cached(pit: Pit) -> None:
    purged: list[bytes] = []
    rft = ReflexiveTable(10, purge=purged.append)
    a, b, c = (trigger(pit, k) for k in (KEY_A, KEY_B, KEY_C))
    for key, entry in ((KEY_A, a), (KEY_B, b), (KEY_C, c)):
        state = rft.insert(key, entry)
        assert state is not None
        state.cached = key != KEY_B
    rft.erase(KEY_A, a)
    rft.erase(KEY_B, b)
    pit.erase(c)
    assert rft.find(KEY_C) is None
    assert purged == [KEY_A, KEY_C]


def test_prune_drops_every_dead_state(pit: Pit, counters: Counter[str]) -> None:
    rft = ReflexiveTable(10, counters)
    a, b = trigger(pit, KEY_A), trigger(pit, KEY_B)
    rft.insert(KEY_A, a)
    rft.insert(KEY_B, b)
    pit.erase(a)
    assert rft.prune() == 1
    assert len(rft) == 1 and rft.find(KEY_B) is not None


def test_limit_from_config_reaches_the_forwarder() -> None:
    assert TableLimits().reflexive_max_entries == 10_000
    cfg = config_from_dict({"tables": {"reflexive_max_entries": 7}})
    limits = table_limits(cfg)
    assert limits.reflexive_max_entries == 7
    assert Forwarder(limits).rft.max_entries == 7
    with pytest.raises(ConfigError, match="reflexive_max_entries"):
        config_from_dict({"tables": {"reflexive_max_entries": 0}})
    with pytest.raises(ConfigError, match="reflexive_max_entries"):
        TableLimits(reflexive_max_entries=-1)
