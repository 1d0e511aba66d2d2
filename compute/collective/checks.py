"""Chunks checked by the project's one validator (:class:`icn.security.trust.Validator`).

A member given ``validator=`` (a worker's :class:`~compute.collective.Collective`, an
:class:`~compute.collective.Aggregator`) validates every chunk it fetches before it is combined
or returned: a worker the sums (and, for broadcast, allgather and ring, the other workers'
chunks), an aggregator its children's chunks.  The validator checks the Data's signature, that
the trust schema lets its key sign the chunk's name, and the key's certificate chain up to a
trust anchor.  Build the validator with ``fetch=cert_fetcher(ep)``
(:func:`icn.dataplane.validating.cert_fetcher`) so that it can fetch the signers' certificates,
and serve each member's certificate under its key name.

As chunks arrive they are checked without I/O (``validate_cached``).  A chunk whose signer's
certificate is not cached yet starts one validation with fetching per missing key (a few at
once, :data:`CHAIN_FETCHES`), and is asked again, not counted as bad: once the chain is cached
the next copy passes.  A refused chunk is never combined or returned: it is dropped, counted
(``chunks_refused``, and the validator's ``trust.refused_*``), and asked again with MustBeFresh
so that a forged copy in a cache does not hide the real one (a forged copy that claims a long
FreshnessPeriod still answers MustBeFresh: then the refusals fail the operation instead).
After :data:`REFUSALS_TO_FAIL` refusals of the same chunk the operation fails with a
CollectiveError naming the refusal (an aggregator publishes it as the chunk's error, so the
workers see it); a deadline passed with a refused chunk names the refusal too.  A key whose
chain was refused is not fetched again for :data:`REFUSAL_HOLD` seconds: its chunks are refused
with the same reason meanwhile.  Never is a refused chunk summed.
"""

from __future__ import annotations

import asyncio
from collections import Counter, OrderedDict

from icn.errors import CertificateNotCached, ValidationError
from icn.security.trust import SignedPacket, Validator, split_locator
from icn.wire.packet import DataView

CHAIN_FETCHES = 4  # validations with fetching at once, one per missing key
REFUSALS_TO_FAIL = 3  # refusals of one chunk before the operation fails, naming the refusal
REFUSAL_HOLD = 2.0  # seconds a key whose chain was refused is not fetched again
MAX_HELD = 256  # keys whose refusal is remembered


class ChunkCheck:
    """One member's checks of the chunks it fetches (see the module docstring).

    :meth:`now` is the sync check, for a fetcher's arrival callback: None when valid, a reason
    when refused, or the task fetching the signer's chain (ask again later).  :meth:`check`
    waits for that chain instead."""

    def __init__(self, validator: Validator, counters: Counter[str]) -> None:
        self.validator = validator
        self.counters = counters
        self._chains: dict[bytes, asyncio.Task[None]] = {}  # key name -> its validation
        self._held: OrderedDict[bytes, tuple[float, str]] = OrderedDict()  # key -> until, why
        self._slots: asyncio.Semaphore | None = None

    def now(self, dv: DataView) -> str | asyncio.Task[None] | None:
        """None: valid.  A string: refused, why (counted).  A task: the signer's chain is being
        fetched; the chunk is neither good nor bad, ask it again."""
        try:
            pkt = SignedPacket.of_data(dv)
        except ValidationError as exc:  # malformed
            return self._refuse(str(exc))
        try:
            self.validator.validate_cached(pkt)
        except CertificateNotCached:
            key = split_locator(pkt.key_locator or b"")[0]
            held = self._held.get(key)
            if held is not None:
                if held[0] > asyncio.get_running_loop().time():
                    return self._refuse(held[1])
                del self._held[key]
            task = self._chains.get(key)
            if task is None:
                task = asyncio.ensure_future(self._chain(key, dv))
                self._chains[key] = task
            self.counters["chunks_awaiting_certificate"] += 1
            return task
        except ValidationError as exc:
            return self._refuse(str(exc))
        self.counters["chunks_validated"] += 1
        return None

    async def check(self, dv: DataView) -> str | None:
        """None when ``dv`` is valid, else why it is refused (counted); fetches the chain."""
        verdict = self.now(dv)
        while isinstance(verdict, asyncio.Task):
            await asyncio.shield(verdict)
            verdict = self.now(dv)
        return verdict

    def close(self) -> None:
        for task in list(self._chains.values()):
            task.cancel()

    def _refuse(self, why: str) -> str:
        self.counters["chunks_refused"] += 1
        return why

    async def _chain(self, key: bytes, dv: DataView) -> None:
        """Validate ``dv`` with fetching: its signer's chain is then cached, or held refused."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(CHAIN_FETCHES)
        try:
            async with self._slots:
                await self.validator.validate(SignedPacket.of_data(dv))
        except ValidationError as exc:
            self._held[key] = (asyncio.get_running_loop().time() + REFUSAL_HOLD, str(exc))
            while len(self._held) > MAX_HELD:
                self._held.popitem(last=False)
        finally:
            self._chains.pop(key, None)
