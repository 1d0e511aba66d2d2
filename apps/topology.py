"""A line of forwarder processes on loopback with a producer at the far end.

Used by ``icn demo`` and the integration tests until the scenario launcher (issue 4) exists:
consumer -> fwd0 -> fwd1 -> ... -> fwd(n-1) -> producer, static routes over UDP, optional
link shaping on the link between two forwarders (both directions).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from apps.procs import Child, ProcessGroup, icn_argv


def free_udp_port(host: str = "127.0.0.1") -> int:
    """A UDP port free right now (the kernel picks it; tiny race until the child binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class LineTopology:
    """Handles of a started line: forwarders in order, the producer and their addresses."""

    group: ProcessGroup
    forwarders: list[Child] = field(default_factory=list)
    addresses: list[tuple[str, int]] = field(default_factory=list)
    producer: Child | None = None
    producer_address: tuple[str, int] = ("127.0.0.1", 0)

    @property
    def entry(self) -> tuple[str, int]:
        """Where a consumer sends its Interests (the first forwarder)."""
        return self.addresses[0]

    def stop(self) -> None:
        self.group.stop_all()


def start_line(
    workdir: Path,
    n_forwarders: int,
    prefix: str,
    *,
    shaped_link: int | None = None,
    shaper: dict[str, Any] | None = None,
    cs_capacity: int = 65_536,
    payload_size: int = 1024,
    log_level: str = "info",
) -> LineTopology:
    """Start the producer and ``n_forwarders`` forwarders; wait until each is ready.

    ``shaped_link`` i shapes the link between forwarder i and i+1 with ``shaper`` (fields of
    forwarder.config.ShaperConfig) on both of its faces.
    """
    group = ProcessGroup(workdir)
    topo = LineTopology(group)
    try:
        host = "127.0.0.1"
        ports = [free_udp_port() for _ in range(n_forwarders)]
        topo.addresses = [(host, p) for p in ports]
        topo.producer_address = (host, free_udp_port())
        prod_uri = f"udp4://{host}:{topo.producer_address[1]}"
        topo.producer = group.start(
            "producer",
            icn_argv(
                "loadgen",
                "produce",
                "--listen",
                f"{host}:{topo.producer_address[1]}",
                "--prefix",
                prefix,
                "--size",
                str(payload_size),
            ),
        )
        topo.producer.wait_for("ready", stream="stdout")
        for i, port in enumerate(ports):
            upstream = f"udp4://{host}:{ports[i + 1]}" if i + 1 < n_forwarders else prod_uri
            faces: list[dict[str, Any]] = [{"uri": upstream}]
            if shaped_link is not None and shaper:
                if i == shaped_link:
                    faces[0]["shaper"] = dict(shaper)
                if i == shaped_link + 1:
                    # a static face toward the downstream forwarder so the reverse direction
                    # of the link is shaped too (its packets arrive from that listen address)
                    faces.append({"uri": f"udp4://{host}:{ports[i - 1]}", "shaper": dict(shaper)})
            cfg = {
                "log_level": log_level,
                "listen": {"udp": [f"{host}:{port}"]},
                "tables": {"cs_max_entries": cs_capacity},
                "faces": faces,
                "routes": [{"prefix": prefix, "face": upstream}],
            }
            path = workdir / f"fwd{i}.yaml"
            path.write_text(yaml.safe_dump(cfg))
            child = group.start(f"fwd{i}", icn_argv("fwd", "--config", str(path)))
            topo.forwarders.append(child)
        for child in topo.forwarders:
            child.wait_for("forwarder ready", stream="stderr")
    except BaseException:
        group.stop_all()
        raise
    return topo
