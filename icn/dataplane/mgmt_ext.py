"""icn's extension to NFD's management messages: the LinkShape element of ``link/shape``.

NFD's ControlParameters has no field for link emulation, so ``/localhost/nfd/link/shape``
carries one extra element inside its ControlParameters (type 0x68)::

    ControlParameters = CONTROL-PARAMETERS-TYPE TLV-LENGTH
                          FaceId
                          LinkShape
    LinkShape = LINK-SHAPE-TYPE TLV-LENGTH *OCTET  ; UTF-8 JSON object

The JSON object is a face's ``shaper:`` block of the forwarder's config file (``delay_ms``,
``jitter_ms``, ``loss``, ``rate_mbps``, ``queue_packets``, ``seed``), validated by the same model.

LINK-SHAPE-TYPE is 65000: even, so non-critical under the NDN evolvability rule (python-ndn's
``ControlParametersValue.parse``, and NFD, skip it; an odd number would make them reject the
whole element), and far from every number NFD, ndn-cxx and NDNLPv2 assign.  LinkShape comes
last in the element, after FaceId (fields are read in order).  Being a JSON object, the settings
keep their units in their names, may be negative or fractional (so the forwarder, not the
encoding, refuses a bad value and names it) and can grow without a new TLV-TYPE.

This module is the codec both sides share: the client (:mod:`icn.dataplane.mgmt_client`) encodes
with
:class:`LinkShapeCommandParameters`, the forwarder's dispatcher decodes with it.  Its models
extend python-ndn's ``nfd_mgmt`` ones, so importing it imports ``ndn.security``: both sides
import it where a ``link/shape`` command is built or read, not at start.
"""

from __future__ import annotations

import json
from typing import Any

from ndn.app_support.nfd_mgmt import ControlParametersValue
from ndn.encoding import BytesField, IncludeBase, ModelField, TlvModel

CONTROL_PARAMETERS = 0x68
LINK_SHAPE = 65000


class LinkShapeParameters(ControlParametersValue):  # type: ignore[misc]
    """ControlParametersValue plus ``link_shape`` (the JSON bytes)."""

    _base = IncludeBase(ControlParametersValue)
    link_shape = BytesField(LINK_SHAPE)


class LinkShapeCommandParameters(TlvModel):  # type: ignore[misc]
    """The whole ControlParameters element of a ``link/shape`` command."""

    cp = ModelField(CONTROL_PARAMETERS, LinkShapeParameters)


def encode_link_shape(face_id: int, settings: dict[str, Any]) -> bytes:
    """The ControlParameters TLV of ``link/shape`` for ``face_id`` with ``settings`` (None
    values left out).  No range checks: the forwarder is the judge and answers 400."""
    cp = LinkShapeParameters()
    cp.face_id = face_id
    shown = {k: v for k, v in settings.items() if v is not None}
    cp.link_shape = json.dumps(shown, separators=(",", ":")).encode()
    wrapper = LinkShapeCommandParameters()
    wrapper.cp = cp
    return bytes(wrapper.encode())
