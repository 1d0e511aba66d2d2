"""Fabric.install_routes: what it sends to the nodes' management, with reroutes overlapping and
nodes leaving in the middle of one (a fake command that yields, as a real one awaits)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from apps.scenario.backend import Backend
from apps.scenario.fabric import Fabric
from apps.scenario.routing import compute_routes, nested_prefixes
from icn.dataplane.endpoint import Endpoint
from tests.unit.scenario.test_routing import DIAMOND, scenario


class Conn:
    def close(self) -> None:
        pass


class Recording(Fabric):
    def __init__(self) -> None:
        sc = scenario(DIAMOND)
        super().__init__(sc, cast(Backend, None))
        for node in ("a", "b", "c", "d"):
            self.endpoints[node] = cast(Endpoint, Conn())
            self.installed[node] = {}
        for i, link in enumerate(sc.links):
            for j, node in enumerate(link.between):
                self.link_faces[link.name][node] = 100 + 10 * i + j
        self.sent: list[tuple[str, str, dict[str, Any]]] = []

    async def command(self, node: str, module: str, verb: str, **params: Any) -> dict[str, Any]:
        if node not in self.endpoints:
            raise KeyError(node)  # as the real one does for a detached node
        self.sent.append((node, verb, params))  # sent now; routes go out in batches
        for _ in range(3):  # a round trip: other tasks run meanwhile
            await asyncio.sleep(0)
        return {}


async def test_overlapping_reroutes_each_send_their_difference_once() -> None:
    fab = Recording()
    await fab.install_routes(compute_routes(fab.sc))
    before = {n: {p: dict(h) for p, h in t.items()} for n, t in fab.installed.items()}
    assert before["a"]["/p"].keys() == {"b", "c"}
    fab.sent.clear()
    down = compute_routes(fab.sc, down_nodes=["b"])
    # two tasks reroute for the same failure at once: both want the routes via b gone
    first, second = await asyncio.gather(fab.install_routes(down), fab.install_routes(down))
    assert first > 0 and second == 0
    unregistered = [(n, p["face_id"]) for n, verb, p in fab.sent if verb == "unregister"]
    assert len(unregistered) == len(set(unregistered))  # each route removed once
    assert "b" not in fab.installed["a"]["/p"]


async def test_a_node_detached_during_a_reroute_is_skipped() -> None:
    fab = Recording()
    await fab.install_routes(compute_routes(fab.sc))
    down = compute_routes(fab.sc, down_nodes=["b"])
    sent_before_kill: list[int] = []

    async def kill_c_soon() -> None:
        await asyncio.sleep(0)  # while the reroute's first command is in flight
        sent_before_kill.append(len(fab.sent))
        fab.detach("c")  # c's routes went with its forwarder

    changes, _ = await asyncio.gather(fab.install_routes(down), kill_c_soon())
    assert changes > 0 and "c" not in fab.installed
    assert all(node != "c" for node, _, _ in fab.sent[sent_before_kill[0] :])
    assert "b" not in fab.installed["a"]["/p"]


async def test_a_replicas_own_prefix_is_registered_with_capture_and_its_service_without() -> None:
    # /p/_r/r1 under /p: its route must not inherit /p's, or a replica's thunk polls could
    # go to another replica of /p
    fab = Recording()
    fab.sc = scenario(
        DIAMOND,
        services=[{"name": "p", "node": "d", "entry": "m:f", "announce": ["/p", "/p/_r/r1"]}],
    )
    fab.nested = nested_prefixes(fab.sc)
    assert fab.nested == {"/p/_r/r1"}
    await fab.install_routes(compute_routes(fab.sc))
    flags = {(n, p["name"]): p.get("flags") for n, verb, p in fab.sent if verb == "register"}
    assert flags[("a", "/p/_r/r1")] == 3 and flags[("a", "/p")] is None


async def test_a_command_lives_as_long_as_the_launcher_waits_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # sent once, a command whose Interest expired before COMMAND_TIMEOUT failed a run on a
    # loaded machine with time left to wait
    from apps.scenario import fabric as fabric_module
    from icn.dataplane import mgmt_client

    lifetimes: list[int] = []

    async def command(ep: Endpoint, module: str, verb: str, **params: Any) -> dict[str, Any]:
        lifetimes.append(params.pop("lifetime_ms"))
        return {}

    async def shape_face(ep: Endpoint, face_id: int, **params: Any) -> dict[str, Any]:
        lifetimes.append(params.pop("lifetime_ms"))
        return {}

    monkeypatch.setattr(mgmt_client, "command", command)
    monkeypatch.setattr(mgmt_client, "shape_face", shape_face)
    sc = scenario(DIAMOND)
    fab = Fabric(sc, cast(Backend, None))
    fab.endpoints["a"] = cast(Endpoint, Conn())
    await fab.command("a", "faces", "create", uri="udp4://127.0.0.1:6363")
    fab.link_faces[sc.links[0].name]["a"] = 7
    await fab.apply_shaping(sc.links[0])
    assert lifetimes == [fabric_module.COMMAND_TIMEOUT * 1000] * 2


async def test_a_node_that_does_not_answer_is_named_with_the_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a bare TimeoutError has no text: the launcher printed "error: " and nothing else
    from apps.scenario import fabric as fabric_module
    from icn.dataplane import mgmt_client

    async def command(ep: Endpoint, module: str, verb: str, **params: Any) -> dict[str, Any]:
        await asyncio.sleep(10)
        return {}

    monkeypatch.setattr(mgmt_client, "command", command)
    monkeypatch.setattr(fabric_module, "COMMAND_TIMEOUT", 0.05)
    fab = Fabric(scenario(DIAMOND), cast(Backend, None))
    fab.endpoints["b"] = cast(Endpoint, Conn())
    with pytest.raises(fabric_module.NoAnswer) as caught:
        await fab.command("b", "faces", "create", uri="udp4://127.0.0.1:6363")
    assert str(caught.value).startswith("b's forwarder did not answer faces/create within 0.05 s")
