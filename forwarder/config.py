"""Forwarder configuration: one pydantic model, loaded from YAML or built from CLI flags.

Unknown keys are rejected so a typo is reported with its path instead of being ignored, and every
error names the field and what to write instead.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from forwarder.face.link_settings import ShaperConfig
from icn.errors import ConfigError
from icn.wire import tlv_types as T
from icn.wire.name import from_uri

LogLevel = Literal["debug", "info", "warning", "error"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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


class FaceConfig(_Strict):
    """A static face the daemon creates at start."""

    uri: str = Field(description="udp4://HOST:PORT or tcp4://HOST:PORT")
    shaper: ShaperConfig = ShaperConfig()

    @field_validator("uri")
    @classmethod
    def _check_uri(cls, v: str) -> str:
        scheme, sep, rest = v.partition("://")
        if not sep or scheme not in ("udp4", "udp6", "udp", "tcp4", "tcp6", "tcp"):
            raise ValueError(f"{v!r}: use udp4://HOST:PORT or tcp4://HOST:PORT")
        parse_host_port(rest)
        return v


class RouteConfig(_Strict):
    """A static FIB nexthop: names under ``prefix`` go to the static face ``face``."""

    prefix: str
    face: str = Field(description="URI of one of the static faces")
    cost: int = Field(0, ge=0)

    @field_validator("prefix")
    @classmethod
    def _check_prefix(cls, v: str) -> str:
        try:
            from_uri(v)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return v


class StrategyConfig(_Strict):
    prefix: str
    strategy: str = Field(
        description="best-route, multicast, asf, multipath, or an instance name with parameters, "
        "e.g. /localhost/nfd/strategy/asf/v=5/clone-after~50"
    )

    @field_validator("prefix")
    @classmethod
    def _check_prefix(cls, v: str) -> str:
        return RouteConfig._check_prefix(v)


class ListenConfig(_Strict):
    """Where the daemon accepts faces.  Left out of the config entirely, the daemon listens
    where NFD does, so unmodified NDN apps find it: see :func:`default_listen`."""

    udp: list[str] = Field(default_factory=list, description="HOST:PORT to listen on with UDP")
    tcp: list[str] = Field(default_factory=list, description="HOST:PORT to listen on with TCP")
    unix: str | None = Field(None, description="path of the Unix stream socket")

    @field_validator("udp", "tcp")
    @classmethod
    def _check_addrs(cls, v: list[str]) -> list[str]:
        for item in v:
            parse_host_port(item)
        return v


DEFAULT_PORT = 6363
NFD_SOCKET = "/run/nfd/nfd.sock"


def default_unix_socket() -> str:
    """NFD's socket path when we may create it (root), else a per-user path.

    Apps find the first through python-ndn's default; for the second, point them at it with
    ``NDN_CLIENT_TRANSPORT=unix://<path>`` (the daemon logs the path when it is ready).
    """
    if os.geteuid() == 0:
        return NFD_SOCKET
    base = os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/icn-{os.getuid()}"
    return os.path.join(base, "icn-fwd.sock")


def default_listen() -> ListenConfig:
    """NFD's defaults, on loopback only: the Unix socket, TCP and UDP 127.0.0.1:6363."""
    return ListenConfig(
        udp=[f"127.0.0.1:{DEFAULT_PORT}"],
        tcp=[f"127.0.0.1:{DEFAULT_PORT}"],
        unix=default_unix_socket(),
    )


class TablesConfig(_Strict):
    fib_max_entries: int = Field(100_000, ge=1)
    pit_max_entries: int = Field(100_000, ge=1)
    cs_max_entries: int = Field(65_536, ge=0)
    cs_max_bytes: int = Field(256 * 1024 * 1024, ge=0)
    dnl_lifetime_ms: int = Field(6000, ge=50)
    dnl_max_entries: int = Field(1 << 20, ge=1)
    strategy_choice_max_entries: int = Field(1000, ge=1)
    reflexive_max_entries: int = Field(10_000, ge=1)
    rib_max_routes: int = Field(100_000, ge=1)
    face_share: float = Field(
        0.25, gt=0, le=1, description="share of the PIT and reflexive table one face may fill"
    )
    local_reserve: float = Field(
        0.1, ge=0, lt=1, description="share of those tables kept for local apps and management"
    )
    interest_lifetime_max_ms: int = Field(
        60_000, ge=1, description="a PIT entry waits at most this long, whatever the Interest asks"
    )


class ForwarderConfig(_Strict):
    """The whole daemon configuration."""

    log_level: LogLevel = "info"
    listen: ListenConfig = ListenConfig()
    tables: TablesConfig = TablesConfig()
    faces: list[FaceConfig] = Field(default_factory=list)
    routes: list[RouteConfig] = Field(default_factory=list)
    default_strategy: str = "best-route"
    strategies: list[StrategyConfig] = Field(default_factory=list)
    tick_ms: int = Field(20, ge=1, le=1000, description="period of the PIT expiry timer")
    tcp_max_packet: int = Field(
        T.MAX_PACKET_SIZE,
        ge=T.MAX_PACKET_SIZE,
        le=T.MAX_LOCAL_PACKET_SIZE,
        description="largest packet on TCP faces, listened or created: NDN's 8800 (what NFD "
        "and python-ndn accept); larger, like jumbo frames, only where every TCP peer is set "
        "alike (a peer closes a connection that brings a packet over its own limit)",
    )
    local_networks: list[str] = Field(
        default_factory=lambda: ["127.0.0.0/8", "::1/128"],
        description="IP networks whose UDP/TCP peers get local scope (/localhost, management)",
    )

    @field_validator("local_networks")
    @classmethod
    def _check_networks(cls, v: list[str]) -> list[str]:
        for item in v:
            try:
                ipaddress.ip_network(item)
            except ValueError:
                raise ValueError(
                    f"{item!r} is not a network in CIDR form, e.g. 127.0.0.0/8 or ::1/128"
                ) from None
        return v

    @property
    def effective_listen(self) -> ListenConfig:
        """``listen`` as given, or NFD's default places when the config does not mention it."""
        return self.listen if "listen" in self.model_fields_set else default_listen()

    def model_post_init(self, __context: Any) -> None:
        face_uris = {f.uri for f in self.faces}
        for i, r in enumerate(self.routes):
            if r.face not in face_uris:
                known = ", ".join(sorted(face_uris)) or "none"
                raise ConfigError(
                    f"routes.{i}.face: {r.face!r} is not one of the static faces ({known}); "
                    f"add it under 'faces:' or fix the URI"
                )


def format_validation_error(exc: ValidationError, source: str) -> str:
    lines = [f"invalid configuration in {source}:"]
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown field; check the spelling (see the README for the fields)"
        lines.append(f"  {loc}: {msg}")
    return "\n".join(lines)


def config_from_dict(data: dict[str, Any], source: str = "<config>") -> ForwarderConfig:
    try:
        return ForwarderConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from None


def read_config_mapping(path: str | Path) -> dict[str, Any]:
    """The top-level mapping of a YAML config file; ConfigError names the file, line and fix."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {p}: {exc.strerror}") from None
    import yaml  # here: a daemon started with flags only reads no YAML

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{p}:{where} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the top level must be a mapping of settings, e.g. 'listen:'")
    return data


def load_config(path: str | Path) -> ForwarderConfig:
    """Read and validate a YAML config file."""
    return config_from_dict(read_config_mapping(path), str(path))
