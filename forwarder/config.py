"""Forwarder configuration: one settings class, loaded from YAML or built from CLI flags.

Checked by :mod:`forwarder.schema` (not pydantic, whose import alone would cost every idle
forwarder about 8 MB): unknown keys are rejected so a typo is reported with its path instead of
being ignored, and every error names the field and what to write instead.  A file's problems are
reported all at once, each with its line and column, as scenarios and stream graphs report theirs
(:mod:`icn.problems`): ``fwd.yaml:3:3: tables.pit_max_entrys: unknown field 'pit_max_entrys'
(did you mean 'pit_max_entries'? valid fields: ...)``.  Every field is described in
docs/reference/forwarder-config.md.
"""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path
from typing import Any, Literal

from forwarder import schema
from forwarder.face.link_settings import ShaperConfig
from forwarder.schema import SchemaError, Settings, fill, setting
from icn.addr import parse_host_port
from icn.errors import ConfigError
from icn.problems import (
    NotYaml,
    Problem,
    ProblemsError,
    YamlDocument,
    parse_yaml,
    validation_problems,
)
from icn.units import parse_duration
from icn.wire import tlv_types as T
from icn.wire.name import from_uri

LogLevel = Literal["debug", "info", "warning", "error"]


def _check_face_uri(v: str) -> str:
    scheme, sep, rest = v.partition("://")
    if not sep or scheme not in ("udp4", "udp6", "udp", "tcp4", "tcp6", "tcp"):
        raise ValueError(f"{v!r}: use udp4://HOST:PORT or tcp4://HOST:PORT")
    parse_host_port(rest)
    return v


def _check_prefix(v: str) -> str:
    try:
        from_uri(v)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return v


def _check_addrs(v: list[str]) -> list[str]:
    for item in v:
        parse_host_port(item)
    return v


def _check_networks(v: list[str]) -> list[str]:
    for item in v:
        try:
            ipaddress.ip_network(item)
        except ValueError:
            raise ValueError(
                f"{item!r} is not a network in CIDR form, e.g. 127.0.0.0/8 or ::1/128"
            ) from None
    return v


class FaceConfig(Settings):
    """A static face the daemon creates at start."""

    uri: str = setting(check=_check_face_uri)  # udp4://HOST:PORT or tcp4://HOST:PORT
    shaper: ShaperConfig = setting(default_factory=ShaperConfig)


class RouteConfig(Settings):
    """A static FIB nexthop: names under ``prefix`` go to the static face ``face``."""

    prefix: str = setting(check=_check_prefix)
    face: str = setting()  # URI of one of the static faces
    cost: int = setting(default=0, ge=0)


class StrategyConfig(Settings):
    prefix: str = setting(check=_check_prefix)
    # best-route, multicast, asf, multipath, or an instance name with parameters,
    # e.g. /localhost/nfd/strategy/asf/v=5/clone-after~50
    strategy: str = setting()


class ListenConfig(Settings):
    """Where the daemon accepts faces.  Left out of the config entirely, the daemon listens
    where NFD does, so unmodified NDN apps find it: see :func:`default_listen`."""

    udp: list[str] = setting(default_factory=list, check=_check_addrs)  # HOST:PORT, UDP
    tcp: list[str] = setting(default_factory=list, check=_check_addrs)  # HOST:PORT, TCP
    unix: str | None = None  # path of the Unix stream socket


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


def _check_anchors(v: list[str]) -> list[str]:
    if not v:
        raise ValueError(
            "name at least one trust anchor certificate (e.g. made by icn cert self-sign)"
        )
    return v


class LocalhopSecurity(Settings):
    """The trust policy for ``/localhop/nfd/rib`` commands (NFD's ``localhop_security``):
    without it they are refused.  A command is accepted when its signer's certificate chain
    reaches one of ``anchors`` and every step is allowed by the LightVerSec ``trust_schema``
    (the command's name against its key name)."""

    trust_schema: str = setting()  # path of a LightVerSec schema file
    anchors: list[str] = setting(check=_check_anchors)  # trust anchor certificate files
    # how long a certificate fetch from the commanding face may take
    fetch_timeout_ms: int = setting(default=1000, ge=10, le=60_000)
    cache_entries: int = setting(default=256, ge=1)  # certificates kept once validated


def _check_listen(v: str) -> str:
    if not v.rpartition(":")[1]:
        raise ValueError(f"{v!r} has no port; write HOST:PORT, e.g. 127.0.0.1:9400 (0: any free)")
    parse_host_port(v)
    return v


class MetricsConfig(Settings):
    """Prometheus ``/metrics`` of this forwarder (none unless ``listen`` is set).  The endpoint
    is unauthenticated, like every exporter's: keep it on loopback or a monitoring network."""

    listen: str | None = setting(default=None, check=_check_listen)  # HOST:PORT


class CaptureConfig(Settings):
    """A packet capture of every face (pcapng, one interface per face; none unless ``file``)."""

    file: str | None = None  # path of the capture; rotated files get .1, .2, ...
    # a file that passes this size is rotated; the oldest of ``files`` is dropped
    max_bytes: int = setting(default=64 * 1024 * 1024, ge=64 * 1024)
    files: int = setting(default=2, ge=1, le=1000)


class TablesConfig(Settings):
    fib_max_entries: int = setting(default=100_000, ge=1)
    pit_max_entries: int = setting(default=100_000, ge=1)
    cs_max_entries: int = setting(default=65_536, ge=0)
    cs_max_bytes: int = setting(default=256 * 1024 * 1024, ge=0)
    dnl_lifetime_ms: int = setting(default=6000, ge=50)
    dnl_max_entries: int = setting(default=1 << 20, ge=1)
    strategy_choice_max_entries: int = setting(default=1000, ge=1)
    reflexive_max_entries: int = setting(default=10_000, ge=1)
    rib_max_routes: int = setting(default=100_000, ge=1)
    # share of the PIT and reflexive table one face may fill
    face_share: float = setting(default=0.25, gt=0, le=1)
    # share of those tables kept for local apps and management
    local_reserve: float = setting(default=0.1, ge=0, lt=1)
    # a PIT entry waits at most this long, whatever the Interest asks
    interest_lifetime_max_ms: int = setting(default=60_000, ge=1)


class ForwarderConfig(Settings):
    """The whole daemon configuration."""

    log_level: LogLevel = "info"
    listen: ListenConfig = setting(default_factory=ListenConfig)
    tables: TablesConfig = setting(default_factory=TablesConfig)
    faces: list[FaceConfig] = setting(default_factory=list)
    routes: list[RouteConfig] = setting(default_factory=list)
    default_strategy: str = "best-route"
    strategies: list[StrategyConfig] = setting(default_factory=list)
    tick_ms: int = setting(default=20, ge=1, le=1000)  # period of the PIT expiry timer
    # largest packet on TCP faces, listened or created: NDN's 8800 (what NFD and python-ndn
    # accept); larger, like jumbo frames, only where every TCP peer is set alike (a peer closes
    # a connection that brings a packet over its own limit)
    tcp_max_packet: int = setting(
        default=T.MAX_PACKET_SIZE, ge=T.MAX_PACKET_SIZE, le=T.MAX_LOCAL_PACKET_SIZE
    )
    # largest packet on UDP faces, listened or created: NDN's 8800; larger, like jumbo frames,
    # only where every forwarder on the UDP links is set alike (a peer drops a packet over its
    # own limit).  The faces' MTU stays: a packet above it goes as NDNLPv2 fragments (65467
    # bytes each, cut into IP fragments by the kernel), reassembled by the peer
    udp_max_packet: int = setting(
        default=T.MAX_PACKET_SIZE, ge=T.MAX_PACKET_SIZE, le=T.MAX_LOCAL_PACKET_SIZE
    )
    # the trust policy that lets /localhop/nfd/rib commands in; none: they are refused
    localhop_security: LocalhopSecurity | None = None
    metrics: MetricsConfig = setting(default_factory=MetricsConfig)
    capture: CaptureConfig = setting(default_factory=CaptureConfig)
    # IP networks whose UDP/TCP peers get local scope (/localhost, management)
    local_networks: list[str] = setting(
        default_factory=lambda: ["127.0.0.0/8", "::1/128"], check=_check_networks
    )

    @property
    def effective_listen(self) -> ListenConfig:
        """``listen`` as given, or NFD's default places when the config does not mention it."""
        return self.listen if "listen" in self.fields_given else default_listen()

    def __post_init__(self) -> None:
        face_uris = {f.uri for f in self.faces}
        for i, r in enumerate(self.routes):
            if r.face not in face_uris:
                known = ", ".join(sorted(face_uris)) or "none"
                msg = f"{r.face!r} is not one of the static faces ({known}); "
                msg += "add it under 'faces:' or fix the URI"
                raise SchemaError([schema.Problem(("routes", i, "face"), "check", msg, r.face)])


class ForwarderConfigError(ProblemsError):
    """A config that cannot be used; ``problems`` lists every mistake, each with its line and
    column when it came from a file (``FILE:LINE:COL: field.path: message``)."""


# forwarder/schema.py's kinds of problem in pydantic's terms, which icn.problems explains
_KINDS = {"unknown": "extra_forbidden", "missing": "missing", "check": "value_error"}


def schema_problems(exc: SchemaError) -> list[Problem]:
    """The problems of a config checked by forwarder/schema.py, explained as a scenario's are:
    an unknown field with the closest valid one and every valid one there, a missing field, a
    wrong type or bound with the value written, a check's own message with its fix."""
    errors = [
        {"type": _KINDS.get(p.kind, p.kind), "loc": p.loc, "msg": p.msg}
        | ({} if p.kind in ("unknown", "missing") else {"input": p.value})
        for p in exc.problems
    ]
    for err, p in zip(errors, exc.problems, strict=True):
        hint = _milliseconds_hint(p)
        if hint is not None:
            err.update(type="value_error", msg=hint)
    return validation_problems(errors, ForwarderConfig)


def _milliseconds_hint(p: schema.Problem) -> str | None:
    """For a ``..._ms`` field given a duration with units (``6s``, as scenarios and the CLI
    take them), the whole number of milliseconds to write instead."""
    if p.kind != "type" or not p.loc or not str(p.loc[-1]).endswith("_ms"):
        return None
    if not isinstance(p.value, str) or not any(c.isalpha() for c in p.value):
        return None  # a bare number ("1.5") means milliseconds here, not parse_duration's seconds
    try:
        ms = parse_duration(p.value) * 1000
    except ValueError:
        return None
    return f"a whole number of milliseconds; write {round(ms)} for {p.value!r}"


class ConfigMapping(dict[str, Any]):
    """A config file's top-level mapping, which remembers where it was read from, so that
    :func:`config_from_dict` can give each problem its line (the CLI's flags may add to it)."""

    def __init__(
        self, data: dict[str, Any], text: str, document: YamlDocument | None, duplicated: bool
    ) -> None:
        super().__init__(data)
        self.text = text
        self._document = document
        self.duplicated = duplicated  # a key written twice in one mapping

    def document(self) -> YamlDocument | None:
        """The file's YAML nodes (for a JSON file, parsed again now: only a bad one needs it)."""
        if self._document is None:
            try:
                self._document = parse_yaml(self.text)
            except NotYaml:
                return None  # JSON that YAML reads otherwise: the problems go without lines
        return self._document


def config_from_dict(data: dict[str, Any], source: str = "<config>") -> ForwarderConfig:
    """``data`` checked as a :class:`ForwarderConfig`; ForwarderConfigError lists every problem
    (with its line when ``data`` was read by :func:`read_config_mapping`)."""
    problems: list[Problem] = []
    try:
        config = fill(ForwarderConfig, data)
    except SchemaError as exc:
        problems = schema_problems(exc)
    if isinstance(data, ConfigMapping) and (problems or data.duplicated):
        document = data.document()
        if document is not None:
            problems = document.duplicate_keys() + document.locate(problems)
    if problems:
        raise ForwarderConfigError(source, problems)
    return config


def _note_duplicates(found: list[bool]) -> Any:
    """A json.loads object hook that notes a key written twice (which JSON, like YAML, would
    otherwise drop silently but for the last)."""

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) != len(pairs):
            found.append(True)
        return out

    return hook


def read_config_mapping(path: str | Path) -> dict[str, Any]:
    """The top-level mapping of a YAML config file (remembering the file, for the lines of its
    problems); ForwarderConfigError names the file, line, column and fix."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        problem = Problem((), f"cannot read the config file: {exc.strerror}", file=str(p))
        raise ForwarderConfigError(str(p), [problem]) from None
    document = None
    duplicated: list[bool] = []
    try:
        # JSON is YAML too: a config written as JSON (as a launcher may) is read without a
        # YAML parser, which would stay in the daemon's memory (1.7 MB, issue 23)
        data = json.loads(text, object_pairs_hook=_note_duplicates(duplicated))
    except ValueError:
        try:
            document = parse_yaml(text)
        except NotYaml as exc:
            raise ForwarderConfigError(str(p), [exc.problem]) from None
        data = document.data
        duplicated = [True] if document.duplicate_keys() else []
    if data is None:
        data = {}
    if not isinstance(data, dict):
        problem = Problem(
            (),
            f"the top level must be a mapping of settings, e.g. 'listen:', not a "
            f"{type(data).__name__}; see docs/reference/forwarder-config.md",
            1,
            1,
        )
        raise ForwarderConfigError(str(p), [problem])
    return ConfigMapping(data, text, document, bool(duplicated))


def load_config(path: str | Path) -> ForwarderConfig:
    """Read and validate a YAML config file."""
    return config_from_dict(read_config_mapping(path), str(path))
