"""Consumers that validate what they fetch: the project's one validator
(:class:`icn.security.trust.Validator`) applied to Data as it arrives, and the certificates it
needs fetched through the same endpoint.

``express``, ``fetch_segments`` and ``fetch_segments_buffer`` take ``validator=``: a Data the
validator refuses is never returned (the call raises the ValidationError, saying why) and is
counted (the endpoint's ``data_refused``, and the validator's ``trust.refused_*``).  A segmented
object's first segment is validated with fetching (its signer's chain is then cached); the others
are checked without I/O as they arrive, so an object signed by one key costs one chain walk and a
signature check per segment.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from icn.errors import ValidationError
from icn.wire.packet import DataView

if TYPE_CHECKING:
    from icn.dataplane.endpoint import Endpoint
    from icn.security.trust import Fetch, Validator

CERT_LIFETIME_MS = 1000
CERT_RETRIES = 1


def cert_fetcher(
    ep: Endpoint, lifetime_ms: int = CERT_LIFETIME_MS, retries: int = CERT_RETRIES
) -> Fetch:
    """A validator's ``fetch``: the certificate a KeyLocator names, asked through ``ep``
    (CanBePrefix: a key name finds its certificate), or None when nobody answers."""
    from icn.errors import InterestNack, InterestTimeout

    async def fetch(name: bytes) -> bytes | None:
        try:
            dv = await ep.express(
                name, can_be_prefix=True, lifetime_ms=lifetime_ms, retries=retries
            )
        except (InterestTimeout, InterestNack):
            return None
        return bytes(dv.wire)

    return fetch


async def validated(dv: DataView, validator: Validator, counters: Counter[str]) -> DataView:
    """``dv`` once ``validator`` accepts it (fetching certificates as needed)."""
    from icn.security.trust import SignedPacket

    try:
        await validator.validate(SignedPacket.of_data(dv))
    except ValidationError:
        counters["data_refused"] += 1
        raise
    return dv


def check_cached(validator: Validator, counters: Counter[str]) -> Callable[[DataView], None]:
    """A sync ``verify`` hook: the validator without I/O (the chain known already)."""
    from icn.security.trust import SignedPacket

    def verify(dv: DataView) -> None:
        try:
            validator.validate_cached(SignedPacket.of_data(dv))
        except ValidationError:
            counters["data_refused"] += 1
            raise

    return verify
