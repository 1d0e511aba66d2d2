"""Addresses as people write them: ``HOST:PORT`` with a numeric IP (IPv6 in brackets).

One parser for every place that takes one: the forwarder's listeners and faces, the CLI's
``--metrics`` and ``--ui`` options, a scenario's endpoints.
"""

from __future__ import annotations

import ipaddress


def parse_host_port(value: str, default_port: int = 6363) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 as ``[::1]:PORT``); raises ValueError with the expected form."""
    host, sep, port_s = value.rpartition(":")
    if not sep:
        host, port_s = value, str(default_port)
    host = host.strip("[]")
    try:
        ipaddress.ip_address(host)
        port = int(port_s)
    except ValueError:
        raise ValueError(
            f"{value!r} is not HOST:PORT with a numeric IP, e.g. 127.0.0.1:6363"
        ) from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} out of range 0-65535")
    return host, port
