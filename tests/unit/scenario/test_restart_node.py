"""restart_node: the node's faces and routes come back before its services, which start
together (a fake runner records the order)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

from apps.scenario.faults import restart_node
from apps.scenario.runner import ScenarioRunner


class FakeRunner:
    def __init__(self) -> None:
        self.log: list[str] = []
        self.running = 0
        self.most_running = 0
        svcs = [SimpleNamespace(name=n, node="b") for n in ("s1", "s2", "s3")]
        self.sc = SimpleNamespace(services=[*svcs, SimpleNamespace(name="x", node="c")])
        self.fabric = SimpleNamespace(links_of=lambda node: ["a-b", "b-c"], connect_link=self.link)

    async def start_node(self, node: str) -> None:
        self.log.append(f"node {node}")

    async def link(self, link: str) -> None:
        self.log.append(f"link {link}")

    def reroute_later(self, reason: str, failure: bool) -> None:
        self.log.append(f"reroute {reason}")

    async def start_service(self, svc: Any) -> None:
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        await asyncio.sleep(0.01)  # a service takes a while to say it is ready
        self.running -= 1
        self.log.append(f"service {svc.name}")


async def test_routes_come_back_before_the_services_which_start_together() -> None:
    runner = FakeRunner()
    await restart_node(cast(ScenarioRunner, runner), "b")
    assert runner.log[:4] == ["node b", "link a-b", "link b-c", "reroute b back"]
    assert sorted(runner.log[4:]) == ["service s1", "service s2", "service s3"]
    assert runner.most_running == 3
