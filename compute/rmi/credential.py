"""The caller's credential: the Data a server pulls with its first Reflexive Interest.

It is signed by the caller's Ed25519 key and binds, under that signature, everything the server
decides on before doing any work: which call (the RNP and the function), who (the public key),
the caller's ephemeral X25519 key for a private call, and the size and SHA-256 of the argument
payload that follows (inline when small), so arguments pulled later cannot be swapped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from dataclasses import dataclass
from typing import Any

from compute.rmi.errors import BadArguments, Unauthorized
from compute.rmi.policy import Caller
from icn.dataplane.segments import data_content
from icn.errors import DecodeError, SecurityError, ValidationError
from icn.security import certs
from icn.security.certs import Certificate
from icn.security.keys import Identity, verify_data
from icn.wire.encode import make_data
from icn.wire.packet import DataView
from icn.wire.serialize import pack, unpack

# How far the credential's timestamp may be from the server's clock (hosts' clocks drift).
MAX_CLOCK_SKEW = 300.0


@dataclass(frozen=True)
class Credential:
    caller: Caller
    function: str
    rnp_key: bytes
    ephemeral: bytes  # X25519 public key, for private calls
    private: bool
    size: int  # the plaintext argument blob
    payload_size: int  # what travels (sealed when private)
    payload_digest: bytes
    inline: bytes | None
    session: bool = False  # the caller asks for a session (its ephemeral key agrees it)
    # the largest answer the caller's path carries in one packet, when the caller knows it
    answer_limit: int | None = None
    # the caller's certificate of its key, as it sent it (not validated yet: the server's
    # validator decides whether the Caller gets it)
    certificate: Certificate | None = None


def build_credential(
    identity: Identity,
    name: bytes,
    *,
    function: str,
    rnp_key: bytes,
    ephemeral: bytes,
    private: bool,
    size: int,
    payload: bytes,
    inline: bool,
    session: bool = False,
    answer_limit: int | None = None,
    certificate: bytes | None = None,
) -> bytes:
    """The signed credential Data, named ``name`` (the Reflexive Interest's name); with
    ``certificate`` (the caller's, of its key) for servers that authorize by certificate."""
    content = pack(
        {
            "fn": function,
            "rnp": rnp_key,
            "pub": identity.public_bytes,
            "epub": ephemeral,
            "private": private,
            "size": size,
            "psize": len(payload),
            "h": hashlib.sha256(payload).digest(),
            "args": payload if inline else None,
            "t": time.time(),
            "sess": session,
            "m": answer_limit,
            **({"cert": certificate} if certificate is not None else {}),
        }
    )
    return make_data(name, content, signer=identity.signer())


def check_credential(data: DataView, *, function: str, rnp_key: bytes) -> Credential:
    """Verify the signature and the binding to this call; Unauthorized for anything wrong."""
    try:
        fields: Any = unpack(data_content(data))
        if not isinstance(fields, dict):
            raise DecodeError("credential is not a map")
        pub = fields["pub"]
        if not isinstance(pub, bytes):
            raise DecodeError("credential key is not bytes")
        verify_data(data, pub)
    except (DecodeError, SecurityError, KeyError, TypeError) as exc:
        raise Unauthorized(f"credential rejected: {exc}", function) from None
    if fields.get("fn") != function or fields.get("rnp") != rnp_key:
        raise Unauthorized("credential was signed for another call", function)
    stamp = fields.get("t")
    if not isinstance(stamp, int | float) or abs(stamp - time.time()) > MAX_CLOCK_SKEW:
        raise Unauthorized(
            f"credential timestamp is more than {MAX_CLOCK_SKEW:.0f} s from the server's clock",
            function,
        )
    try:
        cred = Credential(
            caller=Caller(pub),
            function=function,
            rnp_key=rnp_key,
            ephemeral=bytes(fields["epub"]),
            private=bool(fields["private"]),
            size=int(fields["size"]),
            payload_size=int(fields["psize"]),
            payload_digest=bytes(fields["h"]),
            inline=None if fields["args"] is None else bytes(fields["args"]),
            session=bool(fields.get("sess", False)),
            answer_limit=None if fields.get("m") is None else int(fields["m"]),
        )
    except (KeyError, TypeError, ValueError, OverflowError) as exc:  # (int(inf): Overflow)
        raise BadArguments(f"malformed credential: {exc}", function) from None
    if cred.size < 0 or cred.payload_size < 0 or (cred.answer_limit or 0) < 0:
        raise BadArguments("negative argument or answer size", function)
    cert_wire = fields.get("cert")
    if cert_wire is not None:
        try:
            cert = certs.parse(bytes(cert_wire))
        except (ValidationError, TypeError) as exc:
            raise Unauthorized(f"the credential's certificate: {exc}", function) from None
        if cert.public_key != pub:
            raise Unauthorized("the credential's certificate is of another key", function)
        cred = dataclasses.replace(cred, certificate=cert)
    return cred


def check_payload(cred: Credential, payload: bytes) -> None:
    """The pulled (or inline) payload is the one the caller signed for."""
    if len(payload) != cred.payload_size or hashlib.sha256(payload).digest() != (
        cred.payload_digest
    ):
        raise BadArguments("arguments do not match the signed credential", cred.function)
