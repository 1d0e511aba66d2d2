"""Where an app finds its forwarder: the same rules as python-ndn and ndn-cxx.

An app written for NFD must find our forwarder the way it finds NFD, and one of ours must find
NFD: explicit URI, else ``NDN_CLIENT_TRANSPORT``, else ``transport=`` in the first client.conf
that exists, else the platform's default Unix socket.  URIs are checked here, so a typo gets a
message that names the problem and the fix instead of a socket error later.
"""

from __future__ import annotations

import configparser
import ipaddress
import os
import socket
from typing import NamedTuple
from urllib.parse import urlsplit

from icn.errors import ConfigError

DEFAULT_PORT = 6363
DEFAULT_SOCKET = "/run/nfd/nfd.sock"
OLD_DEFAULT_SOCKET = "/run/nfd.sock"  # NFD before 0.7 (python-ndn still falls back to it)
ENV_VAR = "NDN_CLIENT_TRANSPORT"
CLIENT_CONF_PATHS = (
    "~/.ndn/client.conf",
    "/usr/local/etc/ndn/client.conf",
    "/opt/local/etc/ndn/client.conf",
    "/etc/ndn/client.conf",
)
_IP_SCHEMES = frozenset(("tcp", "tcp4", "tcp6", "udp", "udp4", "udp6"))
_EXAMPLES = "unix:///run/nfd/nfd.sock, tcp://127.0.0.1:6363 or udp://127.0.0.1:6363"


class TransportAddr(NamedTuple):
    """A parsed transport URI: ``host`` is the socket path for unix (``port`` then 0)."""

    scheme: str
    host: str
    port: int


def client_conf_path() -> str | None:
    """The first client.conf that exists (only that one is read, as python-ndn does)."""
    for p in CLIENT_CONF_PATHS:
        path = os.path.expandvars(os.path.expanduser(p))
        if os.path.exists(path):
            return path
    return None


def read_client_conf_transport(path: str) -> str | None:
    """The ``transport=`` value of a client.conf (an INI file without sections), if set."""
    parser = configparser.ConfigParser()
    try:
        with open(path) as f:
            parser.read_string("[DEFAULT]\n" + f.read(), source=path)
        return parser["DEFAULT"].get("transport")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}; fix its permissions") from None
    except configparser.Error as exc:
        first = str(exc).splitlines()[0]
        raise ConfigError(
            f"{path} is not a valid client.conf ({first}); "
            "write lines like 'transport=unix:///run/nfd/nfd.sock'"
        ) from None


def default_transport() -> str:
    """The platform default: NFD's socket, or the pre-0.7 one if only that exists."""
    if not os.path.exists(DEFAULT_SOCKET) and os.path.exists(OLD_DEFAULT_SOCKET):
        return f"unix://{OLD_DEFAULT_SOCKET}"
    return f"unix://{DEFAULT_SOCKET}"


def resolve_transport(explicit: str | None = None) -> str:
    """The transport URI an app should use, by python-ndn's rules (see the module doc)."""
    if explicit is not None:
        return explicit
    env = os.environ.get(ENV_VAR)
    if env is not None:
        return env
    path = client_conf_path()
    if path is not None:
        value = read_client_conf_transport(path)
        if value is not None:
            return value
    return default_transport()


def parse_transport(uri: str) -> TransportAddr:
    """Split a transport URI; raises ConfigError naming the problem and the fix."""
    text = uri.strip()
    if not text:
        raise ConfigError(f"empty transport URI; use one like {_EXAMPLES} (or set {ENV_VAR})")
    scheme, sep, _ = text.partition("://")
    if not sep:
        raise ConfigError(f"transport {uri!r} has no scheme; use one like {_EXAMPLES}")
    scheme = scheme.lower()
    parts = urlsplit(text)
    if scheme == "unix":
        if parts.netloc or not parts.path.startswith("/"):
            raise ConfigError(
                f"transport {uri!r}: a unix URI needs an absolute path after three slashes, "
                "e.g. unix:///run/nfd/nfd.sock"
            )
        return TransportAddr("unix", parts.path, 0)
    if scheme not in _IP_SCHEMES:
        raise ConfigError(
            f"transport {uri!r}: unknown scheme {scheme!r}; use unix, tcp, tcp4, tcp6, udp, "
            "udp4 or udp6"
        )
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise ConfigError(f"transport {uri!r}: {exc}; write a port in 1-65535") from None
    if not host:
        raise ConfigError(f"transport {uri!r} has no host; write e.g. {scheme}://127.0.0.1:6363")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(f"transport {uri!r}: only {scheme}://HOST[:PORT] is allowed")
    _check_family(uri, scheme, host)
    return TransportAddr(scheme, host, port or DEFAULT_PORT)


def _check_family(uri: str, scheme: str, host: str) -> None:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return  # a host name: resolved when connecting
    if scheme.endswith("4") and ip.version != 4:
        raise ConfigError(f"transport {uri!r}: {scheme} needs an IPv4 address; use {scheme[:-1]}6")
    if scheme.endswith("6") and ip.version != 6:
        raise ConfigError(f"transport {uri!r}: {scheme} needs an IPv6 address; use {scheme[:-1]}4")


def is_local_transport(uri: str) -> bool:
    """True for a Unix socket or a host that resolves only to loopback addresses.

    Decides whether management commands go to ``/localhost/nfd`` (local faces) or
    ``/localhop/nfd``, the same test python-ndn makes.
    """
    addr = parse_transport(uri)
    if addr.scheme == "unix":
        return True
    try:
        return ipaddress.ip_address(addr.host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(addr.host, addr.port)
    except (socket.gaierror, UnicodeError):
        return False
    return bool(infos) and all(_is_loopback(str(i[4][0])) for i in infos)


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.partition("%")[0]).is_loopback
    except ValueError:
        return False
