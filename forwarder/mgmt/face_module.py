"""faces/create, faces/destroy, faces/update and the faces/list and faces/query datasets.

Only UDP and TCP faces can be created by command (as with NFD; Unix faces are made by apps
connecting).  A create for a remote URI that already has a face answers 409 with that face in
the body, which clients treat as "exists".  The management face (id 1) is listed but can be
neither destroyed nor updated.

The datasets report each face's largest packet in NFD's ``Mtu`` field (FaceStatus TLV 0x89):
what NFD means by it (the largest network-layer packet the face sends, fragmentation included),
without NFD's cap at 8800.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import TYPE_CHECKING, Any

from forwarder.face.face import Face
from forwarder.face.uri import FaceUri, parse_face_uri
from forwarder.mgmt.context import Managed, target_face
from forwarder.mgmt.control import (
    BAD_PARAMS,
    CONFLICT,
    NOT_FOUND,
    UNSUPPORTED_PROTOCOL,
    ControlError,
)
from forwarder.mgmt.dispatcher import Dispatcher
from forwarder.mgmt.mgmt_face import MGMT_FACE_ID, MGMT_FACE_URI
from icn.errors import DecodeError, FaceError
from icn.wire.tlv import read_tl

if TYPE_CHECKING:
    from ndn.app_support.nfd_mgmt import ControlParametersValue, FaceStatus

PERSISTENT, ON_DEMAND, PERMANENT = 0, 1, 2
# What faces/create can make: NFD answers 406 for a well-formed URI of any other scheme.
CREATABLE = frozenset(("udp", "udp4", "udp6", "tcp", "tcp4", "tcp6"))
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
FACE_QUERY_FILTER = 0x96
CONNECT_FAILED = 504  # NFD's code when the remote end cannot be reached


def _int(value: Any) -> int:
    """python-ndn decodes enum-typed fields (FacePersistency, FaceScope...) as Enum members."""
    return int(value.value) if isinstance(value, Enum) else int(value)


def _persistency(face: Face, permanent: set[int]) -> int:
    if face.on_demand:
        return ON_DEMAND
    return PERMANENT if face.face_id in permanent else PERSISTENT


def _body(face: Face, permanent: set[int]) -> ControlParametersValue:
    from ndn.app_support.nfd_mgmt import ControlParametersValue

    body = ControlParametersValue()
    body.face_id = face.face_id
    body.uri = face.remote_uri
    body.local_uri = face.local_uri
    body.face_persistency = _persistency(face, permanent)
    body.flags = 0
    return body


def _update_body(face: Face, permanent: set[int]) -> ControlParametersValue:
    """The faces/update reply as NFD's: FaceId, FacePersistency, Flags and the congestion
    settings, never the URIs (ndn-cxx's FaceUpdateCommand rejects a reply carrying them)."""
    from ndn.app_support.nfd_mgmt import ControlParametersValue

    body = ControlParametersValue()
    body.face_id = face.face_id
    body.face_persistency = _persistency(face, permanent)
    body.flags = 0
    body.base_congestion_mark_interval = round(face.link.congestion_interval * 1e9)  # ns
    body.default_congestion_threshold = face.link.congestion_threshold  # bytes
    return body


def _scheme(uri: str) -> str | None:
    """The scheme of a well-formed ``scheme://...`` URI (lower case), else None."""
    match = _SCHEME.match(uri)
    return match.group(1).lower() if match else None


def _face_status(st: dict[str, Any], persistency: int) -> FaceStatus:
    from ndn.app_support.nfd_mgmt import FaceStatus

    fs = FaceStatus()
    fs.face_id = st["face_id"]
    fs.uri = st["remote_uri"]
    fs.local_uri = st["local_uri"]
    fs.face_scope = 1 if st["is_local"] else 0
    fs.face_persistency = persistency
    fs.link_type = 0  # all our faces are point-to-point
    if "max_packet" in st:
        # NFD's Mtu: the largest network-layer packet the face sends (NFD caps it at 8800, its
        # largest packet; ours may be larger: local faces, tcp_max_packet, udp_max_packet).
        # Apps learn their path's limit from it (icn.dataplane.path_limit).
        fs.mtu = st["max_packet"]
    for field in ("n_in_interests", "n_in_data", "n_in_nacks", "n_out_interests", "n_out_data"):
        setattr(fs, field, st.get(field, 0))
    fs.n_out_nacks = st.get("n_out_nacks", 0)
    fs.n_in_bytes = st.get("n_in_bytes", 0)
    fs.n_out_bytes = st.get("n_out_bytes", 0)
    fs.flags = 0
    return fs


def _matches(fs: FaceStatus, flt: Any) -> bool:
    if flt is None:
        return True
    for field in ("face_id", "uri", "local_uri", "face_scope", "face_persistency", "link_type"):
        want = getattr(flt, field)
        if want is not None and _plain(getattr(fs, field)) != _plain(want):
            return False
    scheme = flt.uri_scheme
    return scheme is None or str(fs.uri).split("://", 1)[0] == scheme


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def install(dispatcher: Dispatcher, ctx: Managed) -> None:
    # Faces the operator made permanent: NFD keeps those up across errors; ours stay up anyway
    # (persistent), so this only changes what is reported.
    permanent: set[int] = set()

    async def create(params: ControlParametersValue, _requester: int) -> ControlParametersValue:
        if not params.uri:
            raise ControlError(BAD_PARAMS, "faces/create needs a Uri such as udp4://host:6363")
        scheme = _scheme(str(params.uri))
        if scheme is not None and scheme not in CREATABLE:
            raise ControlError(
                UNSUPPORTED_PROTOCOL, f"cannot create {scheme} faces; use udp4:// or tcp4://"
            )
        try:
            target: FaceUri = parse_face_uri(str(params.uri))
        except FaceError as exc:
            raise ControlError(BAD_PARAMS, str(exc)) from None
        if not target.is_ip:
            raise ControlError(UNSUPPORTED_PROTOCOL, f"cannot create {target.scheme} faces")
        persistency = None if params.face_persistency is None else _int(params.face_persistency)
        if persistency == ON_DEMAND:
            raise ControlError(UNSUPPORTED_PROTOCOL, "on-demand faces are made by listeners")
        existing = ctx.faces.find(str(target))
        if existing is not None:
            raise ControlError(CONFLICT, "face exists", _body(existing, permanent))
        try:
            face = await ctx.faces.connect(target)
        except (FaceError, OSError) as exc:
            text = str(exc) if str(target) in str(exc) else f"cannot connect to {target}: {exc}"
            raise ControlError(CONNECT_FAILED, text) from None
        if persistency == PERMANENT:
            permanent.add(face.face_id)
        return _body(face, permanent)

    def destroy(params: ControlParametersValue, _requester: int) -> ControlParametersValue:
        from ndn.app_support.nfd_mgmt import ControlParametersValue

        if params.face_id is None:
            raise ControlError(BAD_PARAMS, "faces/destroy needs a FaceId")
        face_id = int(params.face_id)
        if face_id == MGMT_FACE_ID:
            raise ControlError(BAD_PARAMS, "the management face cannot be destroyed")
        face = ctx.faces.get(face_id)
        if face is not None:  # an absent face is already destroyed: 200, as NFD
            face.close()
        permanent.discard(face_id)
        body = ControlParametersValue()
        body.face_id = face_id
        return body

    def update(params: ControlParametersValue, requester: int) -> ControlParametersValue:
        face_id = target_face(params, requester)
        face = ctx.faces.get(face_id)
        if face is None:
            raise ControlError(NOT_FOUND, f"face {face_id} does not exist")
        if params.flags is not None and params.mask is None:
            raise ControlError(BAD_PARAMS, "Flags needs a Mask saying which bits to change")
        if params.flags is not None and int(params.flags) & int(params.mask or 0):
            # LocalFields, LpReliability and CongestionMarking are not face options here.
            raise ControlError(
                CONFLICT, "face flags are not supported", _update_body(face, permanent)
            )
        if params.face_persistency is not None:
            persistency = _int(params.face_persistency)
            if persistency not in (PERSISTENT, ON_DEMAND, PERMANENT):
                raise ControlError(BAD_PARAMS, f"unknown FacePersistency {persistency}")
            face.transport.on_demand = persistency == ON_DEMAND
            if persistency == PERMANENT:
                permanent.add(face.face_id)
            else:
                permanent.discard(face.face_id)
        return _update_body(face, permanent)

    def listing(_requester: int, _extra: list[bytes]) -> bytes:
        return _encode_faces(None)

    def query(_requester: int, extra: list[bytes]) -> bytes:
        if not extra or extra[0][:1] != b"\x08":
            raise ControlError(BAD_PARAMS, "faces/query needs a FaceQueryFilter component")
        return _encode_faces(_parse_filter(extra[0]))

    def _encode_faces(flt: Any) -> bytes:
        from ndn.app_support.nfd_mgmt import FaceStatusMsg

        msg = FaceStatusMsg()
        msg.face_status = []
        mgmt = {
            "face_id": MGMT_FACE_ID,
            "remote_uri": MGMT_FACE_URI,
            "local_uri": MGMT_FACE_URI,
            "is_local": True,
        }
        rows = [_face_status(mgmt, PERMANENT)]
        for f in ctx.faces:
            st = {**f.status(), "max_packet": f.link.max_packet}
            rows.append(_face_status(st, _persistency(f, permanent)))
        msg.face_status = [fs for fs in rows if _matches(fs, flt)]
        return bytes(msg.encode())

    dispatcher.add_command("faces", "create", create)
    dispatcher.add_command("faces", "destroy", destroy)
    dispatcher.add_command("faces", "update", update)
    dispatcher.add_dataset("faces", "list", listing)
    dispatcher.add_dataset("faces", "query", query)


def _parse_filter(component: bytes) -> Any:
    """The FaceQueryFilter carried in a faces/query component; 400 when unreadable."""
    from ndn.app_support.nfd_mgmt import FaceQueryFilter

    try:
        _t, start, end = read_tl(component, 0, len(component))
        return FaceQueryFilter.parse(component[start:end]).face_query_filter
    except (DecodeError, ValueError, IndexError, TypeError) as exc:
        raise ControlError(BAD_PARAMS, f"bad FaceQueryFilter: {exc}") from None
