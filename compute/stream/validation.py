"""Batches checked by the project's one validator (:class:`icn.security.trust.Validator`) before
an inlet hands them over.

An inlet's data callback is synchronous, so each batch Data is checked without I/O
(``validate_cached``).  When its signer's certificate chain is not cached yet, one validation
with fetching (``validate``, through the validator's own ``fetch``, e.g.
:func:`icn.dataplane.validating.cert_fetcher`) is started for that signer, and the batch is
rejected for now (counted ``batches_awaiting_certificate``): the fetcher asks for it again
after a pause, and once the chain is cached the new copy passes.  Those validations are shared
by every inlet of one validator: one per signer (KeyLocator) at a time, at most
:data:`MAX_FETCHING` at once.

A batch the validator refuses is counted ``batches_refused`` (and by the validator,
``trust.refused_*``), logged the first few times, never handed over, and asked again past
caches (a forged copy in a cache must not block the real one).  When a signer's chain was
refused, its batches are refused without fetching again for a pause that doubles (from
:data:`REFUSED_PAUSE` up to :data:`MAX_REFUSED_PAUSE` seconds), so a stranger costs a
certificate fetch now and then, not one per batch.  (The signer is all a refusal is known by
here: a forged copy that comes before its claimed signer's chain is cached delays the real
batch by that first pause.)
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import Counter, OrderedDict
from typing import TYPE_CHECKING

from icn.errors import CertificateNotCached, ValidationError
from icn.security.trust import SignedPacket
from icn.wire.name import to_uri
from icn.wire.packet import DataView

if TYPE_CHECKING:
    from icn.security.trust import Validator

log = logging.getLogger(__name__)

MAX_FETCHING = 4  # validations fetching certificates at once, per validator
REFUSED_PAUSE = 0.25  # seconds a refused signer's batches are refused without a new fetch ...
MAX_REFUSED_PAUSE = 30.0  # ... doubling each time, up to this
REMEMBERED = 64  # refused signers remembered, per validator (least recently refused forgotten)
LOGGED_REFUSED = 5  # refused batches logged per inlet (all are counted)


class _Refusal:
    __slots__ = ("pause", "reason", "until")

    def __init__(self, until: float, pause: float, reason: str) -> None:
        self.until = until
        self.pause = pause
        self.reason = reason


class BatchTrust:
    """What the inlets of one validator share: the validations fetching a chain, and the
    signers whose chain was refused lately.  Holds no reference to its validator (it is kept
    in a weak mapping keyed by it); get it with :func:`trust_of`."""

    def __init__(self) -> None:
        self.fetching: dict[bytes, asyncio.Task[None]] = {}  # KeyLocator -> its validation
        self.refused: OrderedDict[bytes, _Refusal] = OrderedDict()


_shared: weakref.WeakKeyDictionary[Validator, BatchTrust] = weakref.WeakKeyDictionary()


def trust_of(validator: Validator) -> BatchTrust:
    trust = _shared.get(validator)
    if trust is None:
        trust = _shared[validator] = BatchTrust()
    return trust


class BatchCheck:
    """One inlet's check of its batches (module docstring); ``counters`` are the inlet's."""

    def __init__(self, validator: Validator, counters: Counter[str]) -> None:
        self.validator = validator
        self.counters = counters
        self.shared = trust_of(validator)
        self._started: set[asyncio.Task[None]] = set()  # ours, cancelled by close()

    def admits(self, dv: DataView) -> bool:
        """Whether ``dv`` may be handed over now (False: drop it, ask again)."""
        try:
            pkt = SignedPacket.of_data(dv)
        except ValidationError as exc:  # malformed or unsigned: nothing to look up
            self.validator.counters["trust.refused_malformed"] += 1
            self._refuse(dv.name, str(exc))
            return False
        try:
            self.validator.validate_cached(pkt)
            return True
        except CertificateNotCached:
            pass
        except ValidationError as exc:
            self._refuse(pkt.name, str(exc))
            return False
        signer = pkt.key_locator or b""
        shared = self.shared
        now = asyncio.get_running_loop().time()
        refusal = shared.refused.get(signer)
        if refusal is not None and now < refusal.until:
            self._refuse(pkt.name, refusal.reason)
            return False
        self.counters["batches_awaiting_certificate"] += 1
        if signer not in shared.fetching and len(shared.fetching) < MAX_FETCHING:
            task = asyncio.ensure_future(self._fetch_chain(signer, pkt))
            shared.fetching[signer] = task
            self._started.add(task)
            task.add_done_callback(self._started.discard)
        return False

    def close(self) -> None:
        """Cancel the validations this inlet started (another inlet starts its own again)."""
        for task in list(self._started):
            task.cancel()

    async def _fetch_chain(self, signer: bytes, pkt: SignedPacket) -> None:
        shared = self.shared
        try:
            await self.validator.validate(pkt)
        except ValidationError as exc:
            now = asyncio.get_running_loop().time()
            old = shared.refused.pop(signer, None)
            pause = REFUSED_PAUSE if old is None else min(MAX_REFUSED_PAUSE, old.pause * 2)
            shared.refused[signer] = _Refusal(now + pause, pause, str(exc))
            while len(shared.refused) > REMEMBERED:
                shared.refused.popitem(last=False)
            self._refuse(pkt.name, str(exc))  # the batch that started it, counted waiting
        except Exception:  # validate() raises ValidationError only: a bug, logged, no crash
            log.exception("validating the chain of %s failed", to_uri(signer))
        else:
            shared.refused.pop(signer, None)
        finally:
            if shared.fetching.get(signer) is asyncio.current_task():
                del shared.fetching[signer]

    def _refuse(self, name: bytes, reason: str) -> None:
        self.counters["batches_refused"] += 1
        if self.counters["batches_refused"] <= LOGGED_REFUSED:
            log.warning("%s refused: %s", to_uri(name) if name else "a batch", reason)
