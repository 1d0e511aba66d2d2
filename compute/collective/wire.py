"""What a chunk's Data carries: a small header, then the raw bytes of a slice of the array.

``Content = u16 header length | msgpack header | payload``.  The header says what the payload
is (dtype, the reduction applied, how many workers it covers, how the whole array is cut) so an
aggregator can check that its children agree before adding them, and a receiver that did not
know the array (broadcast, allgather) can rebuild it.  An error is a header with ``error`` and
no payload: an aggregator that cannot complete a chunk says why instead of going silent.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from compute.collective.errors import CollectiveError
from icn.errors import DecodeError
from icn.wire.signer import DIGEST_SHA256, NULL_SIGNATURE, Signer
from icn.wire.tlv import Buffer

_LEN = struct.Struct("!H")
MAX_HEADER = 4096


@dataclass(frozen=True, slots=True)
class Layout:
    """How an array of ``shape`` and ``dtype`` is cut into chunks of ``chunk_bytes`` (a whole
    number of items; the last chunk may be shorter; an empty array is one empty chunk)."""

    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    chunk_bytes: int

    @classmethod
    def of(cls, array: np.ndarray[Any, Any], chunk_bytes: int) -> Layout:
        itemsize = max(array.dtype.itemsize, 1)
        per_chunk = max(chunk_bytes // itemsize, 1) * itemsize
        return cls(array.dtype, tuple(array.shape), per_chunk)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def chunks(self) -> int:
        return max(1, -(-self.nbytes // self.chunk_bytes))

    def span(self, chunk: int) -> tuple[int, int]:
        """Byte offsets [start, end) of ``chunk`` in the flat array."""
        start = chunk * self.chunk_bytes
        return start, min(start + self.chunk_bytes, self.nbytes)

    def header(self, op: str, count: int) -> dict[str, Any]:
        return {
            "dt": self.dtype.str,
            "shape": list(self.shape),
            "cb": self.chunk_bytes,
            "op": op,
            "n": count,
        }

    @classmethod
    def from_header(cls, header: dict[str, Any]) -> Layout:
        try:
            dtype = np.dtype(header["dt"])
            shape = tuple(int(x) for x in header["shape"])
            chunk_bytes = int(header["cb"])
        except (KeyError, TypeError, ValueError) as exc:
            raise DecodeError(f"chunk header without a usable layout: {exc}") from None
        if dtype.hasobject or chunk_bytes <= 0 or any(x < 0 for x in shape):
            raise DecodeError("chunk header with an unusable dtype, shape or chunk size")
        return cls(dtype, shape, chunk_bytes)


def chunk_lead(header: dict[str, Any]) -> bytes:
    """What a chunk's Content starts with: the header's length and the header.  A publisher
    puts it in front of the payload without joining them (the payload stays where it is)."""
    head: bytes = msgpack.packb(header)
    return _LEN.pack(len(head)) + head


def encode_chunk(header: dict[str, Any], payload: Buffer) -> bytes:
    return b"".join((chunk_lead(header), payload))


def encode_error(message: str) -> bytes:
    return chunk_lead({"error": message})


def decode_chunk(content: Buffer) -> tuple[dict[str, Any], memoryview]:
    """(header, payload); DecodeError when the content is not a chunk.  The payload is a view
    of ``content`` (a view of a received packet stays one: nothing is copied)."""
    content = memoryview(content)
    if len(content) < _LEN.size:
        raise DecodeError("chunk shorter than its header length")
    (size,) = _LEN.unpack_from(content)
    if size > MAX_HEADER or _LEN.size + size > len(content):
        raise DecodeError("chunk header length out of range")
    try:
        header = msgpack.unpackb(content[_LEN.size : _LEN.size + size])
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise DecodeError(f"chunk header is not msgpack: {exc}") from None
    if not isinstance(header, dict):
        raise DecodeError("chunk header is not a map")
    return header, content[_LEN.size + size :]


def payload_array(header: dict[str, Any], payload: memoryview) -> np.ndarray[Any, Any]:
    """The payload as a read-only 1-D array of the header's dtype (no copy)."""
    layout = Layout.from_header(header)
    if len(payload) % max(layout.dtype.itemsize, 1):
        raise DecodeError("chunk payload is not a whole number of items")
    return np.frombuffer(payload, dtype=layout.dtype)


# How chunks are signed: DigestSha256 by default (what NDN tools expect of a Data packet), or
# NDN's NullSignature, which hashes nothing: no one in a collective verifies a chunk's digest
# (links and sockets check integrity), and at 16 MiB the hashing was a fifth of a worker's CPU.
# "cert": the member endpoint's certificate signer (Ed25519, its KeyLocator naming a certified
# key), for members that validate what they fetch (``validator=``, compute/collective/checks)
SIGNATURES: dict[str, Signer] = {"digest": DIGEST_SHA256, "null": NULL_SIGNATURE}
CERT = "cert"


def chunk_signer(signature: str, job: str, endpoint_signer: Signer | None = None) -> Signer:
    """The signer named ``signature``: ``"cert"`` is ``endpoint_signer`` (the member endpoint's
    ``signer``), which must be a certificate signer; CollectiveError naming the fix otherwise."""
    if signature == CERT:
        from icn.security.certs import CertSigner

        if not isinstance(endpoint_signer, CertSigner):
            raise CollectiveError(
                "signature 'cert': the member's endpoint has no certificate signer (its signer "
                f"is {type(endpoint_signer).__name__}); give the process an identity and "
                "certificate (ep.signer = CertSigner.of(identity, cert)) or use digest",
                job,
            )
        return endpoint_signer
    try:
        return SIGNATURES[signature]
    except KeyError:
        raise CollectiveError(
            f"signature {signature!r}: use digest (DigestSha256, the default), cert (the "
            "endpoint's certificate signer, for members that validate chunks) or null "
            "(NullSignature: nothing hashed, for links that check integrity)",
            job,
        ) from None
