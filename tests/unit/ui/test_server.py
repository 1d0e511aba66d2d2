"""The page's server on loopback with a scripted source: a frame a second on the event stream,
which ends with the run; plotly.js from its package; an unknown node is a 404, not a crash."""

from __future__ import annotations

import time
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from apps.scenario.ui.server import make_app, plotly_js, start_ui


class Scripted:
    """Frames at t = 1, 2, 3; the third says the run ended."""

    live = True

    def __init__(self) -> None:
        self.calls = 0

    def topology(self) -> dict[str, Any]:
        return {"nodes": [{"name": "a", "pos": [0, 0]}], "links": [], "duration": 3}

    def frames(self) -> list[dict[str, Any]]:
        return []

    def latest(self) -> dict[str, Any] | None:
        self.calls += 1
        return {"t": float(self.calls), "ended": self.calls >= 3}

    async def node(self, name: str) -> dict[str, Any]:
        return {"name": name, "counters": {"n_in_interests": 1}}


async def test_a_frame_each_second_until_the_run_ends() -> None:
    async with TestClient(TestServer(make_app(Scripted()), host="127.0.0.1")) as client:
        started = time.monotonic()
        resp = await client.get("/api/stream")
        assert resp.headers["Content-Type"] == "text/event-stream"
        body = (await resp.content.read()).decode()  # returns once the stream ends
        took = time.monotonic() - started
    assert body.count('data: {"t"') == 3 and body.endswith("event: ended\ndata: {}\n\n")
    assert 1.8 < took < 3.5  # three frames, a second apart


async def test_assets_and_node_answers() -> None:
    async with TestClient(TestServer(make_app(Scripted()), host="127.0.0.1")) as client:
        js = await client.get("/vendor/plotly.min.js")
        assert js.status == 200 and int(js.headers["Content-Length"]) == plotly_js().stat().st_size
        page = await client.get("/")
        assert "/vendor/plotly.min.js" in await page.text()
        assert (await client.get("/static/app.js")).status == 200
        assert (await (await client.get("/api/node/a")).json())["counters"] == {"n_in_interests": 1}
        missing = await client.get("/api/node/zz")
        assert missing.status == 404 and "zz" in (await missing.json())["error"]
        topo = await (await client.get("/api/topology")).json()
        assert topo["live"] is True


async def test_port_0_takes_a_free_port_and_a_taken_one_is_a_clear_error() -> None:
    from icn.errors import ConfigError

    first = await start_ui(Scripted(), "0")
    try:
        assert first.port > 0 and first.url == f"http://127.0.0.1:{first.port}/"
        try:
            await start_ui(Scripted(), f"127.0.0.1:{first.port}")
        except ConfigError as exc:
            assert "choose a free port" in str(exc)
        else:
            raise AssertionError("a taken port was accepted")
    finally:
        await first.close()
