"""ControlParameters in, ControlResponse out: the management message bodies.

python-ndn's TLV models are the reference codec for management (docs/design.md section 3):
commands are rare, so the 50 µs a model costs does not matter here, and using the same models
python-ndn and pynfdc use keeps the field numbers and their order in one place.  A handler raises
:class:`ControlError` to answer with a status code; everything else answers 200.

``ndn.app_support.nfd_mgmt`` is imported where a message is decoded or encoded, never at module
import: it pulls in ``ndn.security`` (Cryptodome, an sqlite keychain), about 80 ms of CPU and
7 MB that a forwarder nobody manages should not pay at start (issue 23).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ndn.encoding import DecodeError as NdnDecodeError
from ndn.encoding import Name

from icn.wire import tlv_types as T
from icn.wire.tlv import encode_tlv, read_tl

if TYPE_CHECKING:
    from ndn.app_support.nfd_mgmt import ControlParametersValue

# NFD's status codes (the management protocol's ControlResponse)
OK = 200
BAD_PARAMS = 400
UNAUTHORIZED = 403
NOT_FOUND = 404
UNSUPPORTED_PROTOCOL = 406
CONFLICT = 409
FACE_GONE = 410
NAME_TOO_LONG = 414
INTERNAL = 500
NOT_IMPLEMENTED = 501

CONTROL_RESPONSE = 0x65

# NFD rejects prefixes deeper than this in RIB and FIB commands.
MAX_PREFIX_COMPONENTS = 32


class ControlError(Exception):
    """A command refused with ``status``; ``body`` is echoed (409 carries the existing face)."""

    def __init__(self, status: int, text: str, body: ControlParametersValue | None = None) -> None:
        super().__init__(f"{status} {text}")
        self.status = status
        self.text = text
        self.body = body


def decode_params(tlv: bytes | None, model: Any = None) -> ControlParametersValue:
    """The ControlParameters element (type 0x68, whole TLV) as a model.

    ``model`` is the python-ndn model of the whole element (None: NFD's ControlParameters); a
    command with extension fields (python-ndn skips unknown non-critical ones) passes its own,
    whose ``cp`` extends ControlParametersValue.  Absent parameters read as an empty ``cp``;
    malformed ones raise ``ControlError(400)``.
    """
    if model is None:
        from ndn.app_support.nfd_mgmt import ControlParameters

        model = ControlParameters
    if not tlv:
        return model.cp.model_type()
    try:
        cp = model.parse(tlv).cp
    except (NdnDecodeError, ValueError, IndexError, TypeError) as exc:
        raise ControlError(BAD_PARAMS, f"malformed ControlParameters: {exc}") from None
    if cp is None:
        raise ControlError(BAD_PARAMS, "ControlParameters element missing")
    return cp


def encode_response(status: int, text: str, body: ControlParametersValue | None = None) -> bytes:
    """A ControlResponse TLV.  The body is always present (possibly empty): python-ndn's
    ``parse_response`` crashes on a response without one."""
    from ndn.app_support.nfd_mgmt import ControlParametersValue, ControlResponse

    resp = ControlResponse()
    resp.status_code = status
    # python-ndn sizes a String field by its characters and then writes its UTF-8 octets, so
    # any non-ASCII text (e.g. a module name from the network, decoded with U+FFFD) overruns
    # its buffer and raises; escaped, the text stays readable and the reply is sent.
    resp.status_text = text.encode("ascii", "backslashreplace").decode("ascii")
    resp.body = body if body is not None else ControlParametersValue()
    return encode_tlv(CONTROL_RESPONSE, bytes(resp.encode()))


def name_of(params: ControlParametersValue) -> bytes:
    """The Name field as a name value (b"" for the root), or ControlError(400) when absent."""
    if params.name is None:
        raise ControlError(BAD_PARAMS, "ControlParameters must carry a Name")
    try:
        wire = bytes(Name.to_bytes(params.name))
        _typ, start, end = read_tl(wire, 0, len(wire))
    except (ValueError, TypeError) as exc:  # DecodeError is a ValueError
        raise ControlError(BAD_PARAMS, f"bad Name: {exc}") from None
    return wire[start:end]


def set_name(model: Any, name: bytes) -> None:
    """Store a name value in the Name field of a python-ndn model (ControlParameters, RibEntry,
    FibEntry, StrategyChoice...)."""
    model.name = Name.from_bytes(encode_tlv(T.NAME, name))
