"""The prefix -> handler table without an event loop: longest-prefix dispatch, replacing, and
removal that keeps the depths it tries right."""

from __future__ import annotations

from icn.dataplane.handlers import Handler, HandlerTable, Reply
from icn.wire.name import component_ends, from_uri
from icn.wire.packet import InterestView


def handler(label: str, got: list[str]) -> Handler:
    def answer(iv: InterestView, reply: Reply) -> None:
        got.append(label)

    answer.__name__ = label
    return answer


def lookup(t: HandlerTable, uri: str) -> str | None:
    name = from_uri(uri)
    h = t.lookup(name, component_ends(name))
    return None if h is None else h.__name__


def test_longest_prefix_wins() -> None:
    got: list[str] = []
    t = HandlerTable()
    for uri in ("/a", "/a/b", "/a/b/c/d", "/x"):
        t.add(uri, handler(uri, got))
    assert lookup(t, "/a/b/c") == "/a/b"
    assert lookup(t, "/a/b/c/d/e") == "/a/b/c/d"
    assert lookup(t, "/a/z") == "/a"
    assert lookup(t, "/a") == "/a"
    assert lookup(t, "/ab") is None  # by component, not by byte
    assert lookup(t, "/y/a/b") is None
    assert t.depths() == [4, 2, 1]


def test_the_root_prefix_catches_the_rest() -> None:
    got: list[str] = []
    t = HandlerTable()
    t.add("/", handler("root", got))
    t.add("/a/b", handler("ab", got))
    assert lookup(t, "/z") == "root" and lookup(t, "/a/b/c") == "ab" and lookup(t, "/a") == "root"
    assert t.depths() == [2, 0]


def test_replacing_a_handler_keeps_one_depth_and_returns_the_old_one() -> None:
    got: list[str] = []
    t = HandlerTable()
    first, second = handler("first", got), handler("second", got)
    assert t.add(from_uri("/a/b"), first) is None
    assert t.add("/a/b", second) is first  # a URI or a name value: the same prefix
    assert len(t) == 1 and t.depths() == [2] and t.get("/a/b") is second
    assert "/a/b" in t and from_uri("/a/b") in t and "/a" not in t


def test_removal_keeps_the_depths_right() -> None:
    got: list[str] = []
    t = HandlerTable()
    ab, xy, a = handler("ab", got), handler("xy", got), handler("a", got)
    t.add("/a/b", ab)
    t.add("/x/y", xy)
    t.add("/a", a)
    assert t.remove("/a/b") is ab
    assert t.depths() == [2, 1]  # /x/y still at depth 2
    assert lookup(t, "/a/b/c") == "a" and lookup(t, "/x/y/z") == "xy"
    assert t.remove("/x/y") is xy and t.remove("/x/y") is None  # idempotent
    assert t.depths() == [1] and lookup(t, "/x/y/z") is None
    assert t.remove("/a") is a
    assert t.depths() == [] and len(t) == 0 and lookup(t, "/a/b/c") is None
    t.add("/a/b", ab)  # a depth comes back when a prefix of it does
    assert t.depths() == [2] and lookup(t, "/a/b/c") == "ab"
    assert got == []  # the table only finds handlers; calling them is the caller's
