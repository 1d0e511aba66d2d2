"""Test packet builders: real wire encodings read back by the lean readers the forwarder uses."""

from __future__ import annotations

from icn.wire.encode import make_data, make_interest
from icn.wire.name import component_ends, from_uri, implicit_digest_component
from icn.wire.packet import DataView, InterestView, parse_data, parse_interest


def interest(
    uri: str,
    *,
    nonce: bytes = b"\x00\x00\x00\x01",
    cbp: bool = False,
    mbf: bool = False,
    lifetime: int | None = None,
) -> InterestView:
    wire = make_interest(
        from_uri(uri), nonce=nonce, can_be_prefix=cbp, must_be_fresh=mbf, lifetime=lifetime
    )
    return parse_interest(wire)


def interest_for_name(name: bytes, *, cbp: bool = False, mbf: bool = False) -> InterestView:
    return parse_interest(
        make_interest(name, nonce=b"\x00\x00\x00\x01", can_be_prefix=cbp, must_be_fresh=mbf)
    )


def data(uri: str, content: bytes = b"", *, freshness: int | None = None) -> DataView:
    return parse_data(make_data(from_uri(uri), content, freshness=freshness))


def digest_interest(d: DataView, *, cbp: bool = False, mbf: bool = False) -> InterestView:
    """An Interest for exactly ``d``: its name plus its implicit digest component."""
    return interest_for_name(d.name + implicit_digest_component(d.wire), cbp=cbp, mbf=mbf)


def name(uri: str) -> bytes:
    return from_uri(uri)


def ends(name_value: bytes) -> list[int]:
    return component_ends(name_value)
