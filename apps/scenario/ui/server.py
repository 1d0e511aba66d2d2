"""The live page's server: aiohttp in the launcher's own loop, every asset served from here.

``/`` is the page (``static/``), ``/vendor/plotly.min.js`` plotly.js from the installed
``plotly`` package (no CDN: labs are often offline), ``/api/topology`` the drawing,
``/api/stream`` server-sent events with a frame each second (live), ``/api/frames`` every frame
of a finished run (replay), ``/api/node/NAME`` a node's faces, FIB, table sizes and counters.
Unauthenticated, like the metrics endpoints: it binds to loopback unless told otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from apps.scenario.results import read_complete
from apps.scenario.ui.model import (
    TIMELINE_VERSION,
    WorkloadSeries,
    frame,
    topology,
)
from apps.scenario.ui.positions import file_positions
from icn.addr import parse_host_port
from icn.errors import ConfigError

if TYPE_CHECKING:
    from aiohttp import web

    from apps.scenario.runner import ScenarioRunner

STATIC = Path(__file__).with_name("static")
PUSH_EVERY = 1.0  # seconds between two frames on /api/stream
NODE_TIMEOUT = 2.0  # seconds a node's panel may wait for its forwarder
NODE_CACHE = 1.0  # a node's answer is reused for this long: one question per node per second


def plotly_js() -> Path:
    """plotly.min.js as the ``plotly`` package ships it."""
    path = Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))
    if not path.exists():
        raise ConfigError("plotly.min.js is missing from the plotly package: pip install plotly")
    return path


def parse_ui_address(value: str) -> tuple[str, int]:
    """``[HOST:]PORT`` (HOST 127.0.0.1 when left out; port 0: any free port)."""
    if value.isdigit():
        value = f"127.0.0.1:{value}"
    try:
        host, port = parse_host_port(value)
    except ValueError as exc:
        raise ConfigError(f"--ui {value!r}: {exc}; e.g. --ui 8080 or --ui 127.0.0.1:8080") from None
    return host, port


class Source(Protocol):
    """Where the page's data comes from: a running scenario, or a finished run's file."""

    live: bool

    def topology(self) -> dict[str, Any]: ...

    def frames(self) -> list[dict[str, Any]]: ...

    def latest(self) -> dict[str, Any] | None: ...

    async def node(self, name: str) -> dict[str, Any]: ...


def _events(runner: ScenarioRunner) -> list[dict[str, Any]]:
    return [
        {"t": None if e.t is None else round(e.t, 3), "text": e.text} for e in runner.state.events
    ]


class LiveSource:
    """A scenario as it runs: the runner's samples, events and faults, the workloads' files."""

    live = True

    def __init__(self, runner: ScenarioRunner, scenario_dir: Path | None = None) -> None:
        self.runner = runner
        self._topology = topology(runner.sc, file_positions(runner.sc, scenario_dir))
        self.series = {w.name: WorkloadSeries() for w in runner.sc.workloads}
        self._offsets: dict[str, int] = {}
        self._nodes: dict[str, tuple[float, dict[str, Any]]] = {}
        # one question to a node at a time: pages asking together share its answer
        self._asking: dict[str, asyncio.Lock] = {}

    def topology(self) -> dict[str, Any]:
        return self._topology

    def _read_results(self) -> None:
        t0 = self.runner.state.t0
        for name, series in self.series.items():
            path = self.runner.results_path(name)
            offset = self._offsets.get(name, 0)
            complete = read_complete(path, offset)
            self._offsets[name] = offset + len(complete)
            rows = []
            for line in complete.splitlines():
                with contextlib.suppress(ValueError):
                    rows.append(json.loads(line))
            series.add(rows, t0)

    def frames(self) -> list[dict[str, Any]]:
        latest = self.latest()
        return [] if latest is None else [latest]

    def latest(self) -> dict[str, Any] | None:
        samples = self.runner.state.samples
        if not samples or not self.runner.state.t0:
            return None
        self._read_results()
        out = frame(samples, len(samples) - 1, self.series, _events(self.runner), [])
        out["faults"] = list(self.runner.state.faults)
        out["now"] = round(self.runner.now(), 3)
        out["ended"] = self.runner.state.ended_at is not None
        return out

    async def node(self, name: str) -> dict[str, Any]:
        async with self._asking.setdefault(name, asyncio.Lock()):
            return await self._node(name)

    async def _node(self, name: str) -> dict[str, Any]:
        from icn.dataplane import mgmt_client

        cached = self._nodes.get(name)
        if cached is not None and time.monotonic() - cached[0] < NODE_CACHE:
            return cached[1]
        ep = self.runner.fabric.endpoints.get(name)
        if ep is None:
            return {"name": name, "error": "the node is not running"}
        try:
            async with asyncio.timeout(NODE_TIMEOUT):
                general = await mgmt_client.status(ep, "status/general")
                faces = await mgmt_client.status(ep, "faces/list")
                fib = await mgmt_client.status(ep, "fib/list")
        except Exception as exc:  # a node down or slow: the panel says so
            return {"name": name, "error": f"no answer from its forwarder: {exc or 'timeout'}"}
        answer = {
            "name": name,
            "counters": {k: v for k, v in general.items() if isinstance(v, int | float)},
            "faces": faces,
            "fib": fib,
        }
        plain: dict[str, Any] = _plain(answer)
        self._nodes[name] = (time.monotonic(), plain)
        return plain


def _plain(x: Any) -> Any:
    """JSON-safe: bytes as text, names and other objects by their str."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, bytes):
        return x.decode("utf-8", "replace")
    if x is None or isinstance(x, bool | int | float | str):
        return x
    return str(x)


def timeline(
    runner: ScenarioRunner,
    scenario_dir: Path | None = None,
    report: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What a replay needs, from a finished run: the drawing, a frame per sample, and the
    verdict on each expectation and invariant (``report``: the run's report.json)."""
    source = LiveSource(runner, scenario_dir)
    source._read_results()
    samples = runner.state.samples
    events = _events(runner)
    frames = [frame(samples, i, {}, events, runner.state.faults) for i in range(len(samples))]
    return {
        "version": TIMELINE_VERSION,
        "topology": source.topology(),
        "frames": frames,
        "workloads": {name: s.points() for name, s in source.series.items()},
        "verdicts": [
            {"text": str(e.get("text", "")), "passed": bool(e.get("passed"))}
            for key in ("expectations", "invariants")
            for e in (report or {}).get(key, [])
        ],
    }


class ReplaySource:
    """A finished run, from the ``timeline.json`` it wrote."""

    live = False

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def topology(self) -> dict[str, Any]:
        return {**self.data["topology"], "verdicts": self.data.get("verdicts", [])}

    def frames(self) -> list[dict[str, Any]]:
        workloads = self.data.get("workloads", {})
        out = []
        for f in self.data["frames"]:
            t = float(f["t"])
            # the seconds over at the frame's time, as the live page showed them
            points = {n: [p for p in pts if p["t"] + 1 <= t + 1e-9] for n, pts in workloads.items()}
            out.append({**f, "workloads": points})
        return out

    def latest(self) -> dict[str, Any] | None:
        frames = self.frames()
        return frames[-1] if frames else None

    async def node(self, name: str) -> dict[str, Any]:
        counters = None
        for f in reversed(self.data["frames"]):
            counters = f.get("nodes", {}).get(name)
            if counters is not None:
                break
        return {"name": name, "counters": counters or {}, "faces": [], "fib": [], "replay": True}


def make_app(source: Source) -> web.Application:
    # aiohttp is imported here, not with the module: every run writes its timeline through
    # this module, and aiohttp's import (0.1-0.2 s of CPU, 54 modules) is only worth it for a
    # page served
    from aiohttp import web

    app = web.Application()

    async def index(_request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "index.html")

    async def plotly(_request: web.Request) -> web.StreamResponse:
        return web.FileResponse(plotly_js(), headers={"Cache-Control": "max-age=86400"})

    async def topo(_request: web.Request) -> web.Response:
        return web.json_response({**source.topology(), "live": source.live})

    async def frames(_request: web.Request) -> web.Response:
        return web.json_response(source.frames())

    async def node(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in {n["name"] for n in source.topology()["nodes"]}:
            return web.json_response({"error": f"no node {name!r}"}, status=404)
        return web.json_response(_plain(await source.node(name)))

    async def stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        # bounded by the run: its last frame says "ended" and the stream closes; the server's
        # shutdown (after the run) cancels a stream still waiting
        try:
            ended = False
            while not ended:
                latest = source.latest()
                if latest is None:
                    await resp.write(b": waiting for the first sample\n\n")
                else:
                    await resp.write(b"data: " + json.dumps(latest).encode() + b"\n\n")
                    ended = bool(latest.get("ended"))
                if ended:
                    await resp.write(b"event: ended\ndata: {}\n\n")
                else:
                    await asyncio.sleep(PUSH_EVERY)
        except ConnectionError:
            pass  # the browser went away (a closed tab, a reload)
        return resp

    app.router.add_get("/", index)
    app.router.add_get("/vendor/plotly.min.js", plotly)
    app.router.add_get("/api/topology", topo)
    app.router.add_get("/api/frames", frames)
    app.router.add_get("/api/stream", stream)
    app.router.add_get("/api/node/{name}", node)
    app.router.add_static("/static/", STATIC)
    return app


@dataclass
class UiServer:
    runner: web.AppRunner
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def close(self) -> None:
        await self.runner.cleanup()


async def start_ui(source: Source, address: str) -> UiServer:
    """Serve the page for ``source`` on ``[HOST:]PORT`` until :meth:`UiServer.close`."""
    host, port = parse_ui_address(address)
    plotly_js()  # missing: say so now, not in the browser
    from aiohttp import web

    runner = web.AppRunner(
        make_app(source), handle_signals=False, access_log=None, shutdown_timeout=1.0
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise ConfigError(f"--ui {address}: {exc.strerror}; choose a free port (0: any)") from None
    return UiServer(runner, host, int(runner.addresses[0][1]))
