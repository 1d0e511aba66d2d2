"""``GET /metrics`` served from the process's own asyncio loop.

prometheus-client's ``start_http_server`` answers from a thread of its own; a collector would
then read the forwarder's counters while the loop changes them (a dict resized mid-iteration
raises).  Answering in the loop thread reads them between two packets instead, and a scrape
once a second costs one short pause of the loop, nothing per packet.

The reply is HTTP/1.1 with ``Connection: close``: Prometheus, curl and browsers all take it.
The endpoint is unauthenticated, as Prometheus exporters are: bind it to loopback (the default
the CLI suggests) or to a network only the monitoring host reaches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from icn.addr import parse_host_port
from icn.errors import ConfigError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

log = logging.getLogger(__name__)

MAX_REQUEST_HEAD = 8192  # bytes of request line and headers; more is not a scrape
READ_TIMEOUT = 5.0  # seconds a client may take to send its request


@dataclass
class MetricsEndpoint:
    """A listening ``/metrics`` endpoint; ``port`` is the bound one (0 asked for a free one)."""

    host: str
    port: int
    server: asyncio.Server
    scrapes: int = 0
    _clients: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    async def close(self) -> None:
        self.server.close()
        for task in list(self._clients):
            task.cancel()
        for task in list(self._clients):
            with contextlib.suppress(BaseException):
                await task
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.server.wait_closed(), 1.0)


def _reply(status: str, body: bytes, content_type: str = "text/plain; charset=utf-8") -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


async def _handle(
    endpoint: MetricsEndpoint,
    registry: CollectorRegistry,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> None:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    try:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT)
        except asyncio.LimitOverrunError:
            writer.write(_reply("431 Request Header Fields Too Large", b"request too large\n"))
            return
        except (asyncio.IncompleteReadError, TimeoutError):
            return  # the client went away or never finished: nothing to answer
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            writer.write(_reply("400 Bad Request", b"expected: GET /metrics HTTP/1.1\n"))
            return
        method, target = parts[0], parts[1].split("?", 1)[0]
        if target != "/metrics":
            writer.write(_reply("404 Not Found", b"metrics are at /metrics\n"))
            return
        if method not in ("GET", "HEAD"):
            writer.write(_reply("405 Method Not Allowed", b"use GET /metrics\n"))
            return
        body = generate_latest(registry)
        endpoint.scrapes += 1
        reply = _reply("200 OK", body, CONTENT_TYPE_LATEST)
        if method == "HEAD":
            reply = reply[: len(reply) - len(body)]
        writer.write(reply)
        with contextlib.suppress(OSError, TimeoutError):
            await asyncio.wait_for(writer.drain(), READ_TIMEOUT)
    except Exception:  # a collector's bug: say so, keep serving and forwarding
        log.exception("metrics: error answering a scrape")
    finally:
        writer.close()


async def serve_metrics(listen: str, registry: CollectorRegistry) -> MetricsEndpoint:
    """Serve ``registry`` at ``http://LISTEN/metrics`` until :meth:`MetricsEndpoint.close`.

    ``listen`` is ``HOST:PORT`` (port 0: any free port, read it back from ``.port``); ConfigError
    names a malformed or unusable address.
    """
    if not listen.rpartition(":")[1]:
        raise ConfigError(
            f"metrics listen address {listen!r} has no port; write HOST:PORT, e.g. 127.0.0.1:9400"
        )
    try:
        host, port = parse_host_port(listen)
    except ValueError as exc:
        raise ConfigError(f"metrics listen address: {exc}") from None
    holder: list[MetricsEndpoint] = []

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        endpoint = holder[0]
        task = asyncio.current_task()
        assert task is not None
        endpoint._clients.add(task)
        try:
            await _handle(endpoint, registry, reader, writer)
        finally:
            endpoint._clients.discard(task)

    try:
        server = await asyncio.start_server(on_client, host, port, limit=MAX_REQUEST_HEAD)
    except OSError as exc:
        raise ConfigError(
            f"metrics listen address {listen}: {exc.strerror}; choose a free port (0: any)"
        ) from None
    bound = server.sockets[0].getsockname()[1]
    endpoint = MetricsEndpoint(host, int(bound), server)
    holder.append(endpoint)
    return endpoint
