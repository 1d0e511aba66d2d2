"""The /metrics endpoint in the loop, the forwarder's families, and their config errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from icn.errors import ConfigError
from icn.observe.endpoint import serve_metrics


async def request(port: int, raw: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    reply = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return reply


async def test_scrape_404_405_and_bad_requests() -> None:
    registry = CollectorRegistry()
    c = Counter("icn_test_things", "things", registry=registry)
    c.inc(3)
    ep = await serve_metrics("127.0.0.1:0", registry)
    try:
        ok = await request(ep.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert ok.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"icn_test_things_total 3.0" in ok
        assert (await request(ep.port, b"GET / HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404")
        post = await request(ep.port, b"POST /metrics HTTP/1.1\r\n\r\n")
        assert post.startswith(b"HTTP/1.1 405")
        assert (await request(ep.port, b"hello\r\n\r\n")).startswith(b"HTTP/1.1 400")
        huge = b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n"
        assert (await request(ep.port, huge)).startswith(b"HTTP/1.1 431")
        # several at once, and a client that sends nothing does not hold the others up
        _, idle = await asyncio.open_connection("127.0.0.1", ep.port)
        replies = await asyncio.gather(
            *(request(ep.port, b"GET /metrics HTTP/1.1\r\n\r\n") for _ in range(5))
        )
        assert all(r.startswith(b"HTTP/1.1 200") for r in replies)
        assert ep.scrapes == 6
        idle.close()
    finally:
        await ep.close()


@pytest.mark.parametrize(
    ("listen", "words"), [("127.0.0.1", "no port"), ("localhost:9", "numeric IP")]
)
async def test_bad_listen_addresses_are_config_errors(listen: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        await serve_metrics(listen, CollectorRegistry())


def test_config_names_the_bad_metrics_and_capture_fields() -> None:
    with pytest.raises(ConfigError, match=r"metrics\.listen: .*has no port"):
        config_from_dict({"metrics": {"listen": "127.0.0.1"}})
    with pytest.raises(ConfigError, match=r"capture\.max_bytes: .*greater than or equal"):
        config_from_dict({"capture": {"file": "x.pcapng", "max_bytes": 10}})
    with pytest.raises(ConfigError, match=r"capture\.fil: unknown field"):
        config_from_dict({"capture": {"fil": "x.pcapng"}})


async def test_forwarder_families_from_a_running_daemon(tmp_path: Path) -> None:
    cfg = config_from_dict(
        {
            "listen": {"unix": str(tmp_path / "f.sock")},
            "metrics": {"listen": "127.0.0.1:0"},
            "log_level": "warning",
        }
    )
    daemon = ForwarderDaemon(cfg)
    await daemon.start(signals=False)
    try:
        assert daemon.metrics is not None
        daemon.counters["fw.drop_hop_limit"] += 2
        daemon.counters["fw.drop_pit_full"] += 1
        body = (await request(daemon.metrics.port, b"GET /metrics HTTP/1.1\r\n\r\n")).decode()
    finally:
        await daemon.stop()
    for family in (
        "icn_interests_total",
        "icn_pit_entries",
        "icn_cs_hits_total",
        "icn_process_cpu_seconds_total",
        "icn_process_resident_memory_bytes",
        "icn_uptime_seconds",
    ):
        assert f"\n{family}" in body, family
    assert 'icn_drops_total{reason="fw_hop_limit"} 2.0' in body
    assert 'icn_refusals_total{reason="fw_drop_pit_full"}' not in body
    assert 'icn_drops_total{reason="fw_pit_full"} 1.0' in body


async def test_unwritable_capture_is_a_config_error(tmp_path: Path) -> None:
    cfg = config_from_dict(
        {
            "listen": {"unix": str(tmp_path / "f.sock")},
            "capture": {"file": str(tmp_path / "no" / "such" / "dir.pcapng")},
        }
    )
    with pytest.raises(ConfigError, match=r"capture\.file: cannot write .*choose a writable"):
        await ForwarderDaemon(cfg).start(signals=False)
    assert not (tmp_path / "f.sock").exists()
