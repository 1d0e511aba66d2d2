"""Client side of the NFD management protocol: control commands and status datasets.

Commands are rare, so the message bodies go through python-ndn's TLV models (the reference
codec, the same ones pynfdc and our forwarder's dispatcher use); the Interest itself is ours, a
v0.3 signed Interest with DigestSha256, which NFD's default ``rib`` policy accepts.  Results are
plain dicts (names as URIs, enums as lowercase names, flags as ints) that a CLI can print and
dump as JSON.

python-ndn's ``nfd_mgmt`` models are imported where a message is built or read, not with this
module: they pull in ``ndn.security`` (Cryptodome, an sqlite keychain), and every program that
imports the endpoint imports this module, most of them never managing anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import Enum, Flag
from functools import cache
from typing import TYPE_CHECKING, Any

from ndn.encoding import DecodeError as NdnDecodeError
from ndn.encoding import ModelField, NameField, RepeatedField, TlvModel

from icn.dataplane.segments import data_content
from icn.errors import CommandFailed, DecodeError, EncodeError
from icn.wire import tlv_types as T
from icn.wire.name import NameLike, as_name, components, generic, to_uri
from icn.wire.tlv import encode_tlv, read_tl

if TYPE_CHECKING:
    from icn.dataplane.endpoint import Endpoint

COMMAND_LIFETIME_MS = 4000
CONTROL_RESPONSE = 0x65
DATASET_RECORD = 0x80  # the wrapper NFD puts around each dataset record (CsInfo included)
LOCALHOST_NFD = generic("localhost") + generic("nfd")
LOCALHOP_NFD = generic("localhop") + generic("nfd")


@cache
def _param_fields() -> frozenset[str]:
    from ndn.app_support.nfd_mgmt import ControlParametersValue

    return frozenset(f.name for f in ControlParametersValue._encoded_fields)


def management_prefix(local: bool) -> bytes:
    """``/localhost/nfd`` over a local face, ``/localhop/nfd`` otherwise (as python-ndn)."""
    return LOCALHOST_NFD if local else LOCALHOP_NFD


def encode_control_parameters(**params: Any) -> bytes:
    """The ControlParameters TLV (type 0x68); ``name`` and ``strategy`` take a URI or a name
    value, enum-valued fields an int or the python-ndn enum.  EncodeError on unknown fields."""
    from ndn.app_support.nfd_mgmt import ControlParameters, ControlParametersValue, Strategy

    cp = ControlParametersValue()
    for key, value in params.items():
        if value is None:
            continue
        if key not in _param_fields():
            known = ", ".join(sorted(_param_fields()))
            raise EncodeError(f"unknown ControlParameters field {key!r}; use one of {known}")
        if key == "name":
            value = components(as_name(value))
        elif key == "strategy":
            strategy = Strategy()
            strategy.name = components(as_name(value))
            value = strategy
        setattr(cp, key, value)
    wrapper = ControlParameters()
    wrapper.cp = cp
    return bytes(wrapper.encode())


def command_name(module: str, verb: str, *, local: bool = True, **params: Any) -> bytes:
    """``/<localhost|localhop>/nfd/<module>/<verb>/<ControlParameters>`` as a name value
    (still to be signed, which appends the params-sha256 component)."""
    return _command_name(module, verb, encode_control_parameters(**params), local)


def _command_name(module: str, verb: str, cp: bytes, local: bool) -> bytes:
    prefix = management_prefix(local)
    return prefix + generic(module) + generic(verb) + encode_tlv(T.COMP_GENERIC, cp)


def parse_control_response(content: bytes) -> tuple[int, str, dict[str, Any]]:
    """(StatusCode, StatusText, ControlParameters body as a dict) of a ControlResponse."""
    from ndn.app_support.nfd_mgmt import ControlResponse

    try:
        typ, start, end = read_tl(content, 0, len(content))
        if typ != CONTROL_RESPONSE or end != len(content):
            raise DecodeError(f"expected a ControlResponse (type {CONTROL_RESPONSE:#x})")
        resp = ControlResponse.parse(content[start:end])
    except (NdnDecodeError, ValueError, IndexError, TypeError) as exc:
        raise DecodeError(f"malformed ControlResponse: {exc}") from None
    if resp.status_code is None:
        raise DecodeError("ControlResponse without a StatusCode")
    body = _plain(resp.body) if resp.body is not None else {}
    return int(resp.status_code), str(resp.status_text or ""), body


async def command(
    ep: Endpoint,
    module: str,
    verb: str,
    *,
    lifetime_ms: int = COMMAND_LIFETIME_MS,
    **params: Any,
) -> dict[str, Any]:
    """Send a control command, e.g. ``command(ep, "rib", "register", name="/app")``.

    Returns the response's ControlParameters (``face_id``, ``origin``, ``name`` as a URI...).
    Raises CommandFailed for StatusCode >= 400, InterestTimeout if the forwarder does not
    answer within ``lifetime_ms`` (4 s; a command is sent once: it need not be idempotent),
    InterestNack, or DecodeError for a reply that is not a ControlResponse.
    """
    cp = encode_control_parameters(**params)
    return await _send_command(ep, module, verb, cp, lifetime_ms)


async def _send_command(
    ep: Endpoint, module: str, verb: str, cp: bytes, lifetime_ms: int = COMMAND_LIFETIME_MS
) -> dict[str, Any]:
    """Sign and send a command whose ControlParameters element is ``cp``; see :func:`command`."""
    name = _command_name(module, verb, cp, ep.is_local)
    data = await ep.express(name, signed=True, lifetime_ms=lifetime_ms)
    status, text, body = parse_control_response(data_content(data))
    if status >= 400:
        raise CommandFailed(status, text, f"{module}/{verb}", body)
    return body


async def dataset(ep: Endpoint, module: str, what: str, **fetch: Any) -> bytes:
    """The reassembled content of ``/<localhost|localhop>/nfd/<module>/<what>`` (``what`` may
    hold several components, e.g. ``"list"``).  ``fetch`` goes to ``Endpoint.fetch_segments``."""
    name = management_prefix(ep.is_local) + generic(module)
    for part in what.strip("/").split("/"):
        name += generic(part)
    fetch.setdefault("must_be_fresh", True)
    return await ep.fetch_segments(name, **fetch)


# ---- standard datasets ---------------------------------------------------------------------


def _plain(model: TlvModel) -> dict[str, Any]:
    """A python-ndn model as JSON-ready values; absent fields are left out."""
    out: dict[str, Any] = {}
    for field in model._encoded_fields:
        value = getattr(model, field.name)
        if value is None:
            continue
        out[field.name] = _plain_value(field, value)
    return out


def _plain_value(field: Any, value: Any) -> Any:
    from ndn.app_support.nfd_mgmt import Strategy

    if isinstance(field, NameField):
        return to_uri(b"".join(bytes(c) for c in value))
    if isinstance(field, RepeatedField):
        return [_plain_value(field.element_type, v) for v in value]
    if isinstance(value, Strategy):  # a strategy is only its name
        return to_uri(b"".join(bytes(c) for c in value.name or []))
    if isinstance(field, ModelField):
        return _plain(value)
    if isinstance(value, Flag):
        return int(value.value)
    if isinstance(value, Enum):
        return str(value.name).lower()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return value


def _parse(model: type[TlvModel], content: bytes, what: str) -> Any:
    try:
        return model.parse(content)
    except (NdnDecodeError, ValueError, IndexError, TypeError) as exc:
        raise DecodeError(f"malformed {what} dataset: {exc}") from None


def parse_general_status(content: bytes) -> dict[str, Any]:
    """``status/general``: NFD's ForwarderStatus fields (nfd_version, n_pit_entries...)."""
    from ndn.app_support.nfd_mgmt import GeneralStatus

    return _plain(_parse(GeneralStatus, content, "status/general"))


def parse_face_list(content: bytes) -> list[dict[str, Any]]:
    """``faces/list``: one dict per face (face_id, uri, local_uri, face_scope, counters...)."""
    from ndn.app_support.nfd_mgmt import FaceStatusMsg

    msg = _parse(FaceStatusMsg, content, "faces/list")
    return [_plain(f) for f in msg.face_status or []]


def parse_fib_list(content: bytes) -> list[dict[str, Any]]:
    """``fib/list``: ``{"name": uri, "next_hop_records": [{"face_id", "cost"}]}`` per entry."""
    from ndn.app_support.nfd_mgmt import FibStatus

    return [_plain(e) for e in _parse(FibStatus, content, "fib/list").entries or []]


def parse_rib_list(content: bytes) -> list[dict[str, Any]]:
    """``rib/list``: ``{"name": uri, "routes": [{"face_id", "origin", "cost", "flags"}]}``."""
    from ndn.app_support.nfd_mgmt import RibStatus

    return [_plain(e) for e in _parse(RibStatus, content, "rib/list").entries or []]


def parse_strategy_choices(content: bytes) -> list[dict[str, Any]]:
    """``strategy-choice/list``: ``{"name": uri, "strategy": uri}`` per entry."""
    from ndn.app_support.nfd_mgmt import StrategyChoiceMsg

    msg = _parse(StrategyChoiceMsg, content, "strategy-choice/list")
    return [_plain(c) for c in msg.strategy_choices or []]


def parse_cs_info(content: bytes) -> dict[str, Any]:
    """``cs/info``: capacity, flags, n_cs_entries, n_hits, n_misses.  NFD wraps the record in a
    CsInfo element; python-ndn's model has the fields bare, so both forms are read."""
    from ndn.app_support.nfd_mgmt import CsInfo

    if content[:1] == bytes((DATASET_RECORD,)):
        try:
            _, start, end = read_tl(content, 0, len(content))
        except DecodeError as exc:
            raise DecodeError(f"malformed cs/info dataset: {exc}") from None
        content = content[start:end]
    return _plain(_parse(CsInfo, content, "cs/info"))


PARSERS: dict[str, Callable[[bytes], Any]] = {
    "status/general": parse_general_status,
    "faces/list": parse_face_list,
    "fib/list": parse_fib_list,
    "rib/list": parse_rib_list,
    "strategy-choice/list": parse_strategy_choices,
    "cs/info": parse_cs_info,
}


async def status(ep: Endpoint, which: str) -> Any:
    """Fetch and parse one of the standard datasets named in :data:`PARSERS`."""
    parser = PARSERS.get(which)
    if parser is None:
        raise EncodeError(f"unknown dataset {which!r}; use one of {', '.join(PARSERS)}")
    module, _, what = which.partition("/")
    return parser(await dataset(ep, module, what))


# ---- icn extension: link shaping (not NFD) -------------------------------------------------


async def shape_face(
    ep: Endpoint,
    face_id: int,
    *,
    delay_ms: float = 0.0,
    jitter_ms: float = 0.0,
    loss: float = 0.0,
    rate_mbps: float | None = None,
    seed: int | None = None,
    lifetime_ms: int = COMMAND_LIFETIME_MS,
) -> dict[str, Any]:
    """Shape the send path of face ``face_id`` (0: this endpoint's own face) with the
    ``link/shape`` command of :mod:`icn.dataplane.mgmt_ext`: delay and jitter in ms, loss a
    probability
    in 0..1, rate in Mbit/s (None: unlimited).  All zero removes shaping.

    Returns ``{"face_id": ...}`` with the settings sent.  Raises CommandFailed as
    :func:`command` does: 400 for a bad value (the text names it), 404 for no such face, 501
    over a non-local face (only rib is served under /localhop); a forwarder without the
    extension (NFD) refuses it or lets it time out.
    """
    from icn.dataplane.mgmt_ext import encode_link_shape

    settings: dict[str, Any] = {
        "delay_ms": delay_ms,
        "jitter_ms": jitter_ms,
        "loss": loss,
        "rate_mbps": rate_mbps,
        "seed": seed,
    }
    cp = encode_link_shape(face_id, settings)
    body = await _send_command(ep, "link", "shape", cp, lifetime_ms)
    return {**body, **settings}


def parse_link_list(content: bytes) -> list[dict[str, Any]]:
    """``link/list``: one dict per shaped face (face_id, delay_ms, jitter_ms, loss, rate_mbps,
    dropped)."""
    try:
        rows = json.loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DecodeError(f"malformed link/list dataset: {exc}") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise DecodeError("malformed link/list dataset: expected a JSON array of objects")
    return rows


async def link_list(ep: Endpoint) -> list[dict[str, Any]]:
    """The faces the forwarder shapes, with their settings and drop counts (``link/list``)."""
    return parse_link_list(await dataset(ep, "link", "list"))


# ---- icn extension: the adaptive strategy's measurements (not NFD) -------------------------


def asf_list_name(prefix: NameLike, *, local: bool = True) -> bytes:
    """``/localhost/nfd/asf/list``, followed for a prefix other than ``/`` by one component
    holding its Name TLV (so that a prefix ending in a version is not read as a follow-up)."""
    name = management_prefix(local) + generic("asf") + generic("list")
    value = as_name(prefix)
    return name + generic(encode_tlv(T.NAME, value)) if value else name


def parse_asf_list(content: bytes) -> dict[str, Any]:
    """``asf/list``: ``{"prefix", "strategy", "asf", "namespaces": [...]}`` (see
    forwarder.mgmt.asf_module).  CommandFailed if the forwarder answered with a refusal."""
    if content[:1] == bytes((CONTROL_RESPONSE,)):
        status, text, body = parse_control_response(content)
        raise CommandFailed(status, text, "asf/list", body)
    try:
        out = json.loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DecodeError(f"malformed asf/list dataset: {exc}") from None
    if not isinstance(out, dict) or not isinstance(out.get("namespaces"), list):
        raise DecodeError("malformed asf/list dataset: expected an object with namespaces")
    return out


async def asf_list(ep: Endpoint, prefix: NameLike = "/") -> dict[str, Any]:
    """What the adaptive strategy measured for the prefixes related to ``prefix`` (at, under
    or above it), and which strategy ``prefix`` uses."""
    name = asf_list_name(prefix, local=ep.is_local)
    return parse_asf_list(await ep.fetch_segments(name, must_be_fresh=True))
