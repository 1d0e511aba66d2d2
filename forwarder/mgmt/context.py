"""What the management modules may touch: the forwarder's tables and faces, as one protocol.

The daemon implements it; tests can too.  Also the checks every module shares (which face a
command means, whether a prefix is acceptable).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Protocol

from forwarder.face.face_table import FaceTable
from forwarder.fw.forwarder import Forwarder
from forwarder.mgmt.control import (
    BAD_PARAMS,
    MAX_PREFIX_COMPONENTS,
    NAME_TOO_LONG,
    ControlError,
    name_of,
)
from forwarder.mgmt.rib import Rib
from icn.wire.name import component_ends

if TYPE_CHECKING:
    from ndn.app_support.nfd_mgmt import ControlParametersValue


class Managed(Protocol):
    fw: Forwarder
    faces: FaceTable
    rib: Rib
    counters: Counter[str]
    started_at: float  # wall clock, seconds


def target_face(params: ControlParametersValue, requester: int) -> int:
    """FaceId, where 0 or absent means the face the command came on."""
    face_id = params.face_id
    if not face_id:
        return requester
    return int(face_id)


def checked_prefix(params: ControlParametersValue) -> bytes:
    """The Name of a RIB/FIB command: present (else 400), at most 32 components (else 414)."""
    prefix = name_of(params)
    try:
        depth = len(component_ends(prefix))
    except ValueError as exc:
        raise ControlError(BAD_PARAMS, f"bad Name: {exc}") from None
    if depth > MAX_PREFIX_COMPONENTS:
        raise ControlError(
            NAME_TOO_LONG, f"prefix has {depth} components; at most {MAX_PREFIX_COMPONENTS}"
        )
    return prefix
