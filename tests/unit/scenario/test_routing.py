"""routes: auto (shortest paths per announced prefix, with failures) and route diffs."""

from __future__ import annotations

from typing import Any

from apps.scenario.routing import auto_routes, compute_routes, route_diff
from apps.scenario.schema import Scenario


def scenario(links: list[dict[str, Any]], **extra: Any) -> Scenario:
    nodes = sorted({n for link in links for n in link["between"]})
    return Scenario.model_validate(
        {
            "name": "r",
            "nodes": {n: {} for n in nodes},
            "links": links,
            "services": [
                {"name": "p", "node": "d", "entry": "m:f", "announce": ["/p"]},
            ],
            **extra,
        }
    )


DIAMOND = [
    {"between": ["a", "b"], "cost": 1},
    {"between": ["b", "d"], "cost": 1},
    {"between": ["a", "c"], "cost": 2},
    {"between": ["c", "d"], "cost": 2},
]


def test_diamond_prefers_the_short_path_and_keeps_the_other() -> None:
    t = auto_routes(scenario(DIAMOND))
    assert t["a"] == {"/p": {"b": 2, "c": 4}}
    # b's only way that does not come back through b is d directly
    assert t["b"] == {"/p": {"d": 1, "a": 5}}
    assert t["d"] == {}  # the producer registers its own prefix


def test_a_dead_node_is_routed_around() -> None:
    t = auto_routes(scenario(DIAMOND), down_nodes=["b"])
    assert "b" not in t
    assert t["a"] == {"/p": {"c": 4}}


def test_a_cut_link_is_routed_around_and_a_partition_has_no_route() -> None:
    t = auto_routes(scenario(DIAMOND), down_links=[frozenset(("b", "d"))])
    assert t["a"] == {"/p": {"c": 4}}  # b leads nowhere without coming back through a
    assert t["b"] == {"/p": {"a": 5}}
    line = [{"between": ["a", "b"]}, {"between": ["b", "d"]}]
    t = auto_routes(scenario(line), down_nodes=["b"])
    assert t["a"] == {}


def test_explicit_routes() -> None:
    sc = scenario(DIAMOND, routes=[{"node": "a", "prefix": "/x", "via": "c", "cost": 3}])
    t = compute_routes(sc)
    assert t["a"] == {"/x": {"c": 3}}
    assert compute_routes(sc, down_nodes=["a"]).get("a") is None


def test_route_diff() -> None:
    old = {"a": {"/p": {"b": 2, "c": 4}}}
    new = {"a": {"/p": {"c": 4, "e": 1}}, "f": {"/q": {"a": 1}}}
    add, remove = route_diff(old, new)
    assert add == [("a", "/p", "e", 1), ("f", "/q", "a", 1)]
    assert remove == [("a", "/p", "b")]
    add, remove = route_diff(new, new)
    assert add == [] and remove == []


def test_a_stopped_service_withdraws_its_prefix() -> None:
    sc = scenario(
        [*DIAMOND, {"between": ["a", "e"], "cost": 1}],
        services=[
            {"name": "p", "node": "d", "entry": "m:f", "announce": ["/p"]},
            {"name": "q", "node": "e", "entry": "m:f", "announce": ["/p"]},
        ],
    )
    assert compute_routes(sc)["a"]["/p"] == {"b": 2, "c": 4, "e": 1}
    # p on d stopped: every route leads to e now, d's own included
    t = compute_routes(sc, down_services=["p"])
    assert t["a"]["/p"] == {"e": 1}
    assert t["d"]["/p"] == {"b": 3, "c": 5}
    assert compute_routes(sc, down_services=["p", "q"])["a"] == {}
