"""Face URIs: ``udp4://host:port``, ``tcp4://host:port``, ``unix:///abs/path``, ``memory://name``.

The same strings name faces in configuration, in management commands (faces/create) and in the
faces/list dataset, so parsing is strict and errors say what is wrong and what is expected.
``udp``/``tcp`` without a version are accepted and canonized from the host (an IPv6 literal
gives ``udp6``/``tcp6``, anything else ``udp4``/``tcp4``), as NFD does.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from icn.errors import FaceError

DEFAULT_PORT = 6363  # NFD's and python-ndn's default for both UDP and TCP

_IP_SCHEMES = frozenset(("udp4", "udp6", "tcp4", "tcp6"))
_ALIASES = frozenset(("udp", "tcp"))
_EXAMPLES = "udp4://127.0.0.1:6363, tcp4://host:6363, unix:///run/nfd/nfd.sock or memory://name"


@dataclass(frozen=True, slots=True)
class FaceUri:
    """A parsed face URI.  ``host``/``port`` are set for IP schemes, ``path`` for unix/memory."""

    scheme: str
    host: str = ""
    port: int = 0
    path: str = ""

    @property
    def is_ip(self) -> bool:
        return self.scheme in _IP_SCHEMES

    @property
    def is_udp(self) -> bool:
        return self.scheme.startswith("udp")

    @property
    def is_tcp(self) -> bool:
        return self.scheme.startswith("tcp")

    def __str__(self) -> str:
        if self.is_ip:
            return format_ip_uri(self.scheme, self.host, self.port)
        return f"{self.scheme}://{self.path}"


def format_ip_uri(scheme: str, host: str, port: int) -> str:
    """``scheme://host:port`` with IPv6 literals in brackets (``udp6://[::1]:6363``)."""
    if ":" in host:
        return f"{scheme}://[{host}]:{port}"
    return f"{scheme}://{host}:{port}"


def parse_face_uri(
    text: str, *, default_port: int = DEFAULT_PORT, listening: bool = False
) -> FaceUri:
    """Parse a face URI or raise :class:`FaceError` naming the problem and the expected form.

    ``listening`` allows port 0 (any free port), which makes sense only for a local address.
    """
    if not isinstance(text, str) or "://" not in text:
        raise FaceError(f"bad face URI {text!r}: expected scheme://..., e.g. {_EXAMPLES}")
    scheme, _, rest = text.partition("://")
    scheme = scheme.lower()
    if scheme == "unix":
        if not rest.startswith("/"):
            raise FaceError(
                f"bad face URI {text!r}: a unix URI needs an absolute path, "
                "e.g. unix:///run/nfd/nfd.sock (three slashes)"
            )
        return FaceUri("unix", path=rest)
    if scheme == "memory":
        if "/" in rest or "?" in rest or "#" in rest:
            raise FaceError(f"bad face URI {text!r}: expected memory:// or memory://<name>")
        return FaceUri("memory", path=rest)
    if scheme not in _IP_SCHEMES and scheme not in _ALIASES:
        raise FaceError(f"bad face URI {text!r}: unknown scheme {scheme!r}; use {_EXAMPLES}")
    return _parse_ip(text, scheme, default_port, 0 if listening else 1)


def _parse_ip(text: str, scheme: str, default_port: int, min_port: int) -> FaceUri:
    try:
        parts = urlsplit(text)
        host = parts.hostname
        port = parts.port
    except ValueError as exc:  # bad port, unbalanced brackets
        raise FaceError(f"bad face URI {text!r}: {exc}; expected {scheme}://host:port") from None
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise FaceError(f"bad face URI {text!r}: expected only {scheme}://host:port")
    if not host:
        raise FaceError(f"bad face URI {text!r}: missing host; expected {scheme}://host:port")
    if port is None:
        port = default_port
    if not min_port <= port < 65536:
        raise FaceError(f"bad face URI {text!r}: port must be {min_port}-65535")
    try:
        addr: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        addr = None  # a host name, resolved when the face is created
    if addr is not None:
        host = str(addr)
    if scheme in _ALIASES:
        scheme += "6" if addr is not None and addr.version == 6 else "4"
    elif addr is not None and addr.version != int(scheme[-1]):
        raise FaceError(
            f"bad face URI {text!r}: {host} is an IPv{addr.version} address but the scheme "
            f"is {scheme}; use {scheme[:-1]}{addr.version}://"
        )
    return FaceUri(scheme, host=host, port=port)


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and IPv4-mapped loopback: the peers that get local scope."""
    try:
        addr = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped.is_loopback
    return addr.is_loopback


IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
LOOPBACK_NETWORKS: tuple[IpNetwork, ...] = (
    ipaddress.ip_network("127.0.0.0/8"),
    ipaddress.ip_network("::1/128"),
)


def peer_host(remote_uri: str) -> str | None:
    """The host of a udp/tcp face URI (brackets removed), None for unix/memory/internal."""
    scheme, sep, rest = remote_uri.partition("://")
    if not sep or not scheme.startswith(("udp", "tcp")):
        return None
    host = rest.rpartition(":")[0]
    return host.strip("[]")


def in_networks(host: str, networks: tuple[IpNetwork, ...]) -> bool:
    """Whether ``host`` (an IP literal, IPv4-mapped allowed) is inside one of ``networks``."""
    try:
        addr = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return any(addr.version == net.version and addr in net for net in networks)
