"""Reflexive names (docs/design.md section 3; draft-irtf-icnrg-reflexive-forwarding): the consumer
side of the exchange.

A consumer picks a fresh Reflexive Name Prefix (RNP, 16 bytes from ``secrets``), appends it as
the **last** component of its Trigger Interest, and answers the producer's Reflexive Interests,
whose **first** component is that same typed component.  The component's whole TLV is the key
forwarders and endpoints use for the exchange, so two consumers never share state.
"""

from __future__ import annotations

import secrets

from icn.wire import tlv_types as T
from icn.wire.name import reflexive_component

RNP_SIZE = 16
# The first octet of a name value whose first component is a Reflexive Name Segment (type 59
# fits in one VAR-NUMBER octet): one byte compare tells a Reflexive Interest on a hot path.
REFLEXIVE_FIRST_OCTET = bytes((T.COMP_REFLEXIVE,))
# Forwarders keep a Trigger Interest alive this many times an arriving Reflexive Interest's
# lifetime (the draft's RECOMMENDED extension); the consumer's own timer follows the same rule.
LIFETIME_EXTENSION = 1.5


def new_rnp() -> bytes:
    """A fresh, unguessable Reflexive Name Prefix value."""
    return secrets.token_bytes(RNP_SIZE)


def reflexive_key(rnp: bytes) -> bytes:
    """The Reflexive Name Segment TLV for ``rnp``: the prefix of every Reflexive Interest."""
    return reflexive_component(rnp)


def trigger_name(name: bytes, rnp: bytes) -> bytes:
    """``name`` with the reflexive segment appended: a Trigger Interest name."""
    return name + reflexive_component(rnp)


def is_reflexive_name(name: bytes) -> bool:
    """True for a Reflexive Interest's name (first component is a Reflexive Name Segment)."""
    return name[:1] == REFLEXIVE_FIRST_OCTET


def trigger_key(name: bytes, ends: list[int]) -> bytes | None:
    """The reflexive segment TLV that ends a Trigger Interest name, or None for other names."""
    if not ends:
        return None
    start = ends[-2] if len(ends) > 1 else 0
    if name[start] != T.COMP_REFLEXIVE:
        return None
    return name[start:]


def ri_key(name: bytes, ends: list[int]) -> bytes | None:
    """The reflexive segment TLV that starts a Reflexive Interest name, or None."""
    if not ends or name[:1] != REFLEXIVE_FIRST_OCTET:
        return None
    return name[: ends[0]]
