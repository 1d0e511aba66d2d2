from collections import Counter

from forwarder.table.strategy_choice import StrategyChoice
from tests.unit.table.packets import ends, name


def find(sc: StrategyChoice[str], uri: str) -> str:
    n = name(uri)
    return sc.find(n, ends(n))


def test_root_default_answers_everything() -> None:
    sc = StrategyChoice("best-route")
    assert find(sc, "/a/b") == "best-route"
    assert sc.get(b"") == "best-route" and len(sc) == 1


def test_longest_prefix_match() -> None:
    sc = StrategyChoice("best-route")
    assert sc.set(name("/a"), "multicast")
    assert sc.set(name("/a/b/c"), "asf")
    assert find(sc, "/a") == "multicast"
    assert find(sc, "/a/b") == "multicast"
    assert find(sc, "/a/b/c/d") == "asf"
    assert find(sc, "/ab") == "best-route"
    assert sc.unset(name("/a/b/c"))
    assert find(sc, "/a/b/c/d") == "multicast"
    assert not sc.unset(name("/a/b/c"))


def test_root_can_be_replaced_but_not_unset() -> None:
    sc = StrategyChoice("best-route")
    assert sc.set(b"", "multicast")
    assert find(sc, "/x") == "multicast"
    assert not sc.unset(b"")
    assert find(sc, "/x") == "multicast"


def test_iteration_in_canonical_order() -> None:
    sc = StrategyChoice("r")
    sc.set(name("/b"), "b")
    sc.set(name("/a/x"), "ax")
    assert list(sc) == [(b"", "r"), (name("/a/x"), "ax"), (name("/b"), "b")]


def test_cap_refuses_new_prefix_and_counts() -> None:
    counters: Counter[str] = Counter()
    sc = StrategyChoice("r", max_entries=2, counters=counters)
    assert sc.set(name("/a"), "a")
    assert not sc.set(name("/b"), "b")
    assert counters["strategy_choice.refused_full"] == 1
    assert sc.set(name("/a"), "a2")  # replacing is allowed when full
    assert find(sc, "/b") == "r" and find(sc, "/a") == "a2" and len(sc) == 2
