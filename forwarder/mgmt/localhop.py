"""The trust policy of ``/localhop/nfd/rib`` commands from non-local faces (NFD's
``localhop_security``): the config's ``localhop_security`` section names a LightVerSec schema and
trust anchors, and a command runs only when the project's one validator
(:mod:`icn.security.trust`) accepts its signer.

What the schema is asked: may the KeyLocator of the command's signature sign
``/localhop/nfd/rib/<verb>/<ControlParameters>`` (the same name for both signature forms: the
v0.2 form's timestamp, nonce and signature components, and the v0.3 form's parameters digest,
are not part of it)?  The signer's certificate,
when the forwarder does not hold it yet, is fetched from the face the command came on (NFD's
direct fetch: the requester is the one who can serve it; the FIB may have no route to it).
Freshness and replays are the dispatcher's :class:`CommandValidator`'s, before this runs.
"""

from __future__ import annotations

import contextvars
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Protocol

from forwarder.mgmt.command_auth import CommandRejected, SignedCommand
from forwarder.mgmt.control import UNAUTHORIZED
from icn.errors import ConfigError, ValidationError
from icn.security.trust import SignedPacket, TrustSchema, Validator, anchors_from
from icn.wire.packet import InterestView

# the face the command being validated came on: where its signer's certificate is fetched from
_requester: contextvars.ContextVar[int] = contextvars.ContextVar("localhop_requester")

FetchFrom = Callable[[int, bytes, int], Awaitable[bytes | None]]


class TrustSettings(Protocol):
    """What the policy reads of the config's ``localhop_security`` section (the daemon's
    :class:`forwarder.config.LocalhopSecurity`; management does not read the config itself)."""

    @property
    def trust_schema(self) -> str: ...
    @property
    def anchors(self) -> list[str]: ...
    @property
    def fetch_timeout_ms(self) -> int: ...
    @property
    def cache_entries(self) -> int: ...


class LocalhopPolicy:
    """Checks a ``/localhop`` command's signer; a callable the dispatcher awaits."""

    def __init__(self, validator: Validator, counters: Counter[str]) -> None:
        self.validator = validator
        self.counters = counters

    @classmethod
    def from_config(
        cls, conf: TrustSettings, fetch_from: FetchFrom, counters: Counter[str]
    ) -> LocalhopPolicy:
        """Load the schema and anchors the config names (ConfigError names the file)."""
        schema = TrustSchema.load(conf.trust_schema)
        try:
            anchors = anchors_from(conf.anchors)
        except ConfigError as exc:
            raise ConfigError(f"localhop_security.anchors: {exc}") from None

        async def fetch(name: bytes) -> bytes | None:
            return await fetch_from(_requester.get(), name, conf.fetch_timeout_ms)

        validator = Validator(
            schema,
            anchors,
            fetch=fetch,
            cache_entries=conf.cache_entries,
            counters=counters,
        )
        return cls(validator, counters)

    def __call__(self, iv: InterestView, cmd: SignedCommand, requester: int) -> Awaitable[None]:
        return self._check(iv, cmd, requester)

    async def _check(self, iv: InterestView, cmd: SignedCommand, requester: int) -> None:
        _requester.set(requester)  # (this coroutine runs in a task of its own: its context)
        try:
            if cmd.form == "v2":
                pkt = SignedPacket.of_interest(iv)
            else:
                pkt = SignedPacket.of_command_v02(cmd.signed, cmd.sig_type, cmd.key_name, cmd.value)
            await self.validator.validate(pkt)
        except ValidationError as exc:
            self.counters["mgmt.refused_localhop_untrusted"] += 1
            raise CommandRejected(UNAUTHORIZED, f"signer not trusted: {exc}") from None
