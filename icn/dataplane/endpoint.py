"""The app endpoint: one asyncio connection to a forwarder, for consumers and producers alike.

It speaks what NFD's apps speak (bare TLVs back to back on Unix/TCP, one packet per UDP
datagram) with the lean codec, so an app costs a few microseconds per packet.  The receive path
runs in the protocol callback: no task per packet, one ``call_later`` timer per pending Interest
(its lifetime: asking again is the fetcher's, :mod:`icn.dataplane.fetcher`), futures for
results.  Bad input from the forwarder is counted in ``counters`` and dropped; a broken stream
(a TLV header that cannot be framed) closes the endpoint and cancels what is pending, since
nothing after it can be trusted.  Names are name values (:mod:`icn.wire.name`) or URIs.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, cast

import icn.dataplane.mgmt_client as mgmt_client
from icn.dataplane.app_protocols import DatagramProtocol, PacketPort, PortTransport, StreamProtocol
from icn.dataplane.client_conf import (
    ENV_VAR,
    is_local_transport,
    parse_transport,
    resolve_transport,
)
from icn.dataplane.fetcher import expiry_policy, fetch
from icn.dataplane.publish import DEFAULT_SEGMENT_SIZE, SegmentedObject
from icn.dataplane.segments import fetch_segments
from icn.errors import (
    DecodeError,
    EncodeError,
    ForwarderUnreachable,
    InterestCanceled,
    InterestNack,
    InterestTimeout,
    TooManyPending,
)
from icn.security.signed_interest import encode_signed_interest
from icn.wire import tlv_types as T
from icn.wire.encode import EncodedInterest, encode_interest, make_data
from icn.wire.lp import encode_lp, parse_lp
from icn.wire.name import NameLike, as_name, component_ends, to_uri
from icn.wire.packet import DataView, InterestView, parse_data, parse_interest
from icn.wire.reflexive import LIFETIME_EXTENSION, reflexive_key, ri_key, trigger_key
from icn.wire.signer import DIGEST_SHA256, Signer

log = logging.getLogger(__name__)

Reply = Callable[[bytes], None]
Handler = Callable[[InterestView, Reply], Awaitable[None] | None]
# Checks a received Data before it is handed over (a signature, a trust policy): it raises, and
# the expression fails with that exception, e.g. icn.errors.ValidationError.
Verifier = Callable[[DataView], None]

DEFAULT_MAX_PENDING = 65536
# Bytes queued in a stream transport before sends are dropped: four of the largest local packets,
# so a producer answering a window of 1 MiB chunks at once is not cut short.
SEND_LIMIT = 4 * T.MAX_LOCAL_PACKET_SIZE


class PendingInterest:
    """One expressed Interest awaiting Data: its wire, its lifetime timer."""

    __slots__ = (
        "congestion_mark",
        "digest",
        "done",
        "future",
        "lifetime",
        "mbf",
        "name",
        "nonce_pos",
        "prefix",
        "timer",
        "trigger",
        "verify",
        "wire",
    )

    def __init__(
        self,
        enc: EncodedInterest,
        lifetime_ms: int,
        can_be_prefix: bool,
        must_be_fresh: bool,
        future: asyncio.Future[DataView],
    ) -> None:
        self.name = enc.name
        self.prefix = can_be_prefix
        self.mbf = must_be_fresh
        ends = enc.name_ends
        # an implicit digest (type 1) ends the name: Data matches it by its full name
        self.digest = enc.name[ends[-2] if len(ends) > 1 else 0] == T.COMP_IMPLICIT_DIGEST
        self.wire = enc.wire
        self.nonce_pos = enc.nonce_pos
        self.lifetime = lifetime_ms / 1000.0
        self.future = future
        self.timer: asyncio.TimerHandle | None = None
        self.done = False
        # the reflexive segment ending a Trigger Interest's name: Reflexive Interests for it
        # extend this Interest's wait, as forwarders extend its PIT entry
        self.trigger = trigger_key(enc.name, ends)
        self.verify: Verifier | None = None
        # the CongestionMark of the Data that satisfied it (0: none): a window of Interests
        # shrinks on a marked Data as on a timeout
        self.congestion_mark = 0


class Endpoint:
    """A connection to a forwarder.  Create with ``await Endpoint.connect(uri)``."""

    def __init__(self, uri: str, *, is_local: bool, max_pending: int = DEFAULT_MAX_PENDING):
        self.uri = uri
        self.is_local = is_local  # management goes to /localhost/nfd, else /localhop/nfd
        self.max_pending = max_pending
        self.counters: Counter[str] = Counter()
        self.face_id: int | None = None  # learnt from the first rib/register reply
        self.signer: Signer | None = DIGEST_SHA256  # signs what publish() and make_data() build
        self._transport: asyncio.BaseTransport | PortTransport | None = None
        self._datagram = False
        self._open = True
        self._closed = asyncio.get_running_loop().create_future()
        self._pending: dict[bytes, list[PendingInterest]] = {}
        self._n_pending = self._n_prefix = self._n_digest = 0
        self._handlers: dict[bytes, tuple[Handler, int]] = {}  # prefix -> (handler, depth)
        self._depth_count: Counter[int] = Counter()  # handlers per prefix depth
        self._depths: list[int] = []  # component counts of the handler prefixes, longest first
        self._tasks: set[asyncio.Future[None]] = set()
        self._triggers: dict[bytes, list[PendingInterest]] = {}

    @classmethod
    async def connect(
        cls,
        uri: str | None = None,
        *,
        connect_timeout: float = 3.0,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> Endpoint:
        """Connect to the forwarder at ``uri`` (default: NDN_CLIENT_TRANSPORT, client.conf,
        NFD's socket).  ConfigError for a bad URI, ForwarderUnreachable if nobody answers."""
        uri = resolve_transport(uri)
        addr = parse_transport(uri)
        loop = asyncio.get_running_loop()
        unix = addr.scheme == "unix"
        local = unix or await loop.run_in_executor(None, is_local_transport, uri)
        ep = cls(uri, is_local=local, max_pending=max_pending)
        family = {"4": socket.AF_INET, "6": socket.AF_INET6}.get(addr.scheme[-1], 0)
        try:
            async with asyncio.timeout(connect_timeout):
                if unix:
                    await loop.create_unix_connection(lambda: StreamProtocol(ep), addr.host)
                elif addr.scheme.startswith("tcp"):
                    await loop.create_connection(
                        lambda: StreamProtocol(ep), addr.host, addr.port, family=family
                    )
                else:
                    await loop.create_datagram_endpoint(
                        lambda: DatagramProtocol(ep),
                        remote_addr=(addr.host, addr.port),
                        family=family,
                    )
        except (OSError, TimeoutError) as exc:
            raise ForwarderUnreachable(
                f"no forwarder at {uri} (is `icn fwd` running? set {ENV_VAR})"
            ) from exc
        return ep

    @classmethod
    def over_port(cls, port: PacketPort, *, max_pending: int = DEFAULT_MAX_PENDING) -> Endpoint:
        """An endpoint on an in-memory link to a forwarder in this process (a forwarder's
        in-memory transport, see ``forwarder.face.memory``): local scope, like a Unix socket.
        Call from within the running event loop."""
        ep = cls("memory://", is_local=True, max_pending=max_pending)
        PortTransport(port, ep)
        return ep

    async def __aenter__(self) -> Endpoint:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
        await self.wait_closed()

    @property
    def closed(self) -> bool:
        return not self._open

    @property
    def pending(self) -> int:
        """How many Interests await Data (bounded by ``max_pending``)."""
        return self._n_pending

    def close(self) -> None:
        """Close the connection; pending expressions raise InterestCanceled."""
        self._shutdown(f"endpoint to {self.uri} closed")

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)

    # ---- consumer ------------------------------------------------------------------------

    async def express(
        self,
        name: NameLike,
        *,
        lifetime_ms: int = T.DEFAULT_INTEREST_LIFETIME_MS,
        can_be_prefix: bool = False,
        must_be_fresh: bool = False,
        app_params: bytes | None = None,
        signed: bool = False,
        hop_limit: int | None = None,
        forwarding_hint: list[bytes] | None = None,
        timeout: float | None = None,
        retries: int = 0,
        verify: Verifier | None = None,
    ) -> DataView:
        """Send an Interest and return the Data that satisfies it.

        Each transmission waits its lifetime; then it is re-sent with a fresh Nonce, up to
        ``retries`` times (by the fetcher), before InterestTimeout.  ``timeout`` bounds the
        whole call.  A Nack
        raises InterestNack; closing the endpoint raises InterestCanceled.  ``verify`` checks
        the Data first; what it raises fails the call (a forged Data is not retried: the
        network gave its answer).  A Trigger Interest (its name ends in a reflexive segment)
        waits longer while Reflexive Interests for it arrive, 1.5 times their lifetime from
        each, as the forwarders keep its PIT entry.  Read the content with
        :func:`data_content`.
        """
        if retries:
            if retries < 0:
                raise EncodeError("retries must not be negative")
            return await fetch(
                self,
                as_name(name),
                expiry_policy(lifetime_ms, timeout, retries),
                verify=verify,
                can_be_prefix=can_be_prefix,
                must_be_fresh=must_be_fresh,
                app_params=app_params,
                signed=signed,
                hop_limit=hop_limit,
                forwarding_hint=forwarding_hint,
            )
        rec = self.start(
            name,
            lifetime_ms=lifetime_ms,
            can_be_prefix=can_be_prefix,
            must_be_fresh=must_be_fresh,
            app_params=app_params,
            signed=signed,
            hop_limit=hop_limit,
            forwarding_hint=forwarding_hint,
        )
        rec.verify = verify
        try:
            async with asyncio.timeout(timeout):
                return await rec.future
        except TimeoutError:
            raise InterestTimeout(to_uri(rec.name), 1, timeout) from None
        finally:
            self.drop(rec)

    def start(
        self,
        name: NameLike,
        *,
        lifetime_ms: int = T.DEFAULT_INTEREST_LIFETIME_MS,
        can_be_prefix: bool = False,
        must_be_fresh: bool = False,
        app_params: bytes | None = None,
        signed: bool = False,
        hop_limit: int | None = None,
        forwarding_hint: list[bytes] | None = None,
    ) -> PendingInterest:
        """Send an Interest without waiting: the record's ``future`` gets the Data, or
        InterestTimeout once its lifetime ends.  The caller must :meth:`drop` the record when
        done with it (the fetcher's window does)."""
        if self.closed:
            raise InterestCanceled(f"endpoint to {self.uri} is closed")
        if self._n_pending >= self.max_pending:
            raise TooManyPending(f"{self._n_pending} Interests pending; wait for some to finish")
        if lifetime_ms <= 0:
            raise EncodeError("lifetime_ms must be positive")
        value = as_name(name)
        if signed:
            enc = encode_signed_interest(
                value,
                app_params=app_params or b"",
                lifetime=lifetime_ms,
                can_be_prefix=can_be_prefix,
                must_be_fresh=must_be_fresh,
                hop_limit=hop_limit,
                forwarding_hint=forwarding_hint,
            )
        else:
            enc = encode_interest(
                value,
                lifetime=lifetime_ms,
                can_be_prefix=can_be_prefix,
                must_be_fresh=must_be_fresh,
                hop_limit=hop_limit,
                forwarding_hint=forwarding_hint,
                app_params=app_params,
            )
        future = asyncio.get_running_loop().create_future()
        rec = PendingInterest(enc, lifetime_ms, can_be_prefix, must_be_fresh, future)
        self._pending.setdefault(rec.name, []).append(rec)
        if rec.trigger is not None:
            self._triggers.setdefault(rec.trigger, []).append(rec)
        self._n_pending += 1
        self._n_prefix += rec.prefix
        self._n_digest += rec.digest
        self._transmit(rec)
        return rec

    def drop(self, rec: PendingInterest) -> None:
        """Forget a pending Interest (idempotent); an unfinished future is cancelled."""
        if rec.done:
            return
        rec.done = True
        if rec.timer is not None:
            rec.timer.cancel()
        recs = self._pending[rec.name]
        recs.remove(rec)
        if not recs:
            del self._pending[rec.name]
        if rec.trigger is not None:
            triggers = self._triggers[rec.trigger]
            triggers.remove(rec)
            if not triggers:
                del self._triggers[rec.trigger]
        self._n_pending -= 1
        self._n_prefix -= rec.prefix
        self._n_digest -= rec.digest
        if not rec.future.done():
            rec.future.cancel()

    async def fetch_segments(self, name: NameLike, **options: Any) -> bytes:
        """Fetch and reassemble a segmented object: see
        :func:`icn.dataplane.segments.fetch_segments`."""
        return await fetch_segments(self, as_name(name), **options)

    def _transmit(self, rec: PendingInterest) -> None:
        self._write(rec.wire)
        rec.timer = asyncio.get_running_loop().call_later(rec.lifetime, self._expired, rec)

    def _extend_trigger(self, key: bytes, ri_lifetime_ms: int) -> None:
        """A Reflexive Interest for ``key`` arrived: its Trigger Interest waits at least 1.5
        times the RI's lifetime from now (never less than it already would)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + LIFETIME_EXTENSION * ri_lifetime_ms / 1000.0
        for rec in self._triggers.get(key, ()):
            timer = rec.timer
            if timer is not None and timer.when() < until:
                timer.cancel()
                rec.timer = loop.call_at(until, self._expired, rec)
                self.counters["trigger_extended"] += 1

    def _expired(self, rec: PendingInterest) -> None:
        if rec.done:
            return
        self.counters["timeout"] += 1
        self._fail(rec, InterestTimeout(to_uri(rec.name), 1))

    def _fail(self, rec: PendingInterest, exc: BaseException) -> None:
        if not rec.future.done():  # before drop(), which cancels an unfinished future
            rec.future.set_exception(exc)
        self.drop(rec)

    def _satisfy(self, rec: PendingInterest, dv: DataView) -> None:
        if not rec.future.done():
            verify = rec.verify
            if verify is None:
                rec.future.set_result(dv)
            else:
                try:
                    verify(dv)
                except Exception as exc:
                    self.counters["verify_failed"] += 1
                    rec.future.set_exception(exc)
                else:
                    rec.future.set_result(dv)
        self.drop(rec)

    # ---- producer ------------------------------------------------------------------------

    async def serve(
        self, prefix: NameLike, handler: Handler, *, origin: int = 0, cost: int = 0
    ) -> None:
        """Serve ``prefix``: see :meth:`register`.  The handler gets ``(interest, reply)`` and
        may call ``reply(data_wire)`` at once or later (a thunk, a slow computation)."""
        await self.register(prefix, handler, origin=origin, cost=cost)

    async def register(
        self, prefix: NameLike, handler: Handler, *, origin: int = 0, cost: int = 0
    ) -> None:
        """Serve ``prefix`` with ``handler``: route it here with ``rib/register`` (CommandFailed
        if refused) and pass each Interest under it, by longest prefix, to the handler."""
        value = as_name(prefix)
        previous = self._handlers.get(value)
        self.add_handler(value, handler)  # before the route exists, so no Interest is missed
        try:
            body = await mgmt_client.command(
                self, "rib", "register", name=value, origin=origin, cost=cost
            )
        except BaseException:
            self.remove_handler(value)
            if previous is not None:
                self.add_handler(value, previous[0])
            raise
        if self.face_id is None and isinstance(body.get("face_id"), int):
            self.face_id = body["face_id"]

    async def unregister(self, prefix: NameLike, *, origin: int = 0) -> None:
        """Stop serving ``prefix`` and withdraw its route."""
        value = as_name(prefix)
        self.remove_handler(value)
        await mgmt_client.command(self, "rib", "unregister", name=value, origin=origin)

    async def offer(self, prefix: NameLike, handler: Handler, *, register: bool) -> None:
        """Serve ``prefix``: with ``register`` as :meth:`register` does, else only dispatch to
        ``handler`` (a route installed some other way).  Undo with :meth:`withdraw`."""
        if register:
            await self.register(prefix, handler)
        else:
            self.add_handler(prefix, handler)

    async def withdraw(self, prefix: NameLike, *, registered: bool) -> None:
        """Stop serving ``prefix``; if it was registered, withdraw its route too, unless the
        forwarder is gone already (then there is nothing left to withdraw)."""
        if registered and not self.closed:
            try:
                await self.unregister(prefix)
                return
            except Exception:  # closed or unreachable forwarder: the route went with the face
                pass
        self.remove_handler(prefix)

    def add_handler(self, prefix: NameLike, handler: Handler) -> None:
        """Dispatch Interests under ``prefix`` to ``handler`` without touching the forwarder's
        routes (reflexive Interests, or a route installed some other way)."""
        value = as_name(prefix)
        self.remove_handler(value)
        depth = len(component_ends(value))
        self._handlers[value] = (handler, depth)
        self._depth_count[depth] += 1
        if self._depth_count[depth] == 1:
            self._depths = sorted([*self._depths, depth], reverse=True)

    def remove_handler(self, prefix: NameLike) -> None:
        # per-depth counts: a call's reflexive handler comes and goes without rescanning the
        # others (64 calls in flight made that rescan the client's top cost)
        entry = self._handlers.pop(as_name(prefix), None)
        if entry is not None:
            depth = entry[1]
            self._depth_count[depth] -= 1
            if not self._depth_count[depth]:
                del self._depth_count[depth]
                self._depths.remove(depth)

    def add_reflexive(self, rnp: bytes, handler: Handler) -> bytes:
        """Answer Reflexive Interests ``/<RNP>/...`` for ``rnp`` with ``handler``: no route is
        registered (forwarders bring them along the Trigger Interest's reverse path).  Returns
        the reflexive segment; :meth:`remove_reflexive` when the exchange is over."""
        key = reflexive_key(rnp)
        self.add_handler(key, handler)
        return key

    def remove_reflexive(self, rnp: bytes) -> None:
        self.remove_handler(reflexive_key(rnp))

    def make_data(
        self,
        name: NameLike,
        content: bytes = b"",
        *,
        freshness: int | None = None,
        final_block_id: bytes | None = None,
    ) -> bytes:
        """A Data packet signed with this endpoint's ``signer``."""
        return make_data(
            as_name(name),
            content,
            freshness=freshness,
            final_block_id=final_block_id,
            signer=self.signer,
        )

    async def publish(
        self,
        prefix: NameLike,
        content: bytes,
        *,
        register: bool = True,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        freshness: int | None = None,
        manifest: bool = False,
    ) -> SegmentedObject:
        """Serve ``content`` as segments ``<prefix>/seg=<i>``, each built and signed (with
        ``signer``) when first asked for; with ``manifest``, signed once instead (segments by
        DigestSha256, a manifest of their digests by ``signer``: :mod:`icn.security.manifest`).
        ``register=False`` adds the handler without a route (under a reflexive segment, or a
        prefix already routed here).  Withdraw with :meth:`unpublish`."""
        value = as_name(prefix)
        obj = SegmentedObject(
            value,
            content,
            segment_size=segment_size,
            freshness=freshness,
            signer=self.signer,
            manifest=manifest,
        )
        if register:
            await self.register(value, obj.handler)
        else:
            self.add_handler(value, obj.handler)
        return obj

    async def unpublish(self, obj: SegmentedObject, *, registered: bool = True) -> None:
        if registered:
            await self.unregister(obj.prefix)
        else:
            self.remove_handler(obj.prefix)

    def put(self, wire: bytes) -> None:
        """Send a Data packet (the whole TLV).  Dropped and counted once the endpoint is closed."""
        if wire[:1] != b"\x06":
            raise EncodeError("put() sends Data packets (TLV type 6)")
        self._write(wire)

    # ---- receive path ----------------------------------------------------------------------

    def _receive(self, wire: bytes) -> None:
        try:
            self._dispatch(wire)
        except Exception:  # a bug, never bad input: keep the connection alive
            self.counters["internal_error"] += 1
            log.exception("endpoint %s: error handling a packet", self.uri)

    def _dispatch(self, wire: bytes) -> None:
        typ = wire[0]
        token = None
        mark = 0
        if typ == T.LP_PACKET:
            try:
                lp = parse_lp(wire)
            except DecodeError:
                self.counters["drop_malformed"] += 1
                return
            if lp.fragment is None:
                self.counters["drop_lp_no_fragment"] += 1
                return
            if lp.frag_count > 1:
                self.counters["drop_lp_fragment"] += 1
                return
            if lp.nack_reason is not None:
                self._on_nack(lp.fragment, lp.nack_reason)
                return
            wire, token, mark = lp.fragment, lp.pit_token, lp.congestion_mark
            typ = wire[0]
        if typ == T.DATA:
            self._on_data(wire, mark)
        elif typ == T.INTEREST:
            self._on_interest(wire, token)
        else:
            self.counters["drop_unknown_type"] += 1

    def _on_data(self, wire: bytes, mark: int = 0) -> None:
        try:
            dv = parse_data(wire)
        except DecodeError:
            self.counters["drop_malformed"] += 1
            return
        pending = self._pending
        name = dv.name
        hits = list(pending.get(name, ()))
        if self._n_prefix:
            for end in dv.name_ends[:-1]:
                hits += [r for r in pending.get(name[:end], ()) if r.prefix]
        if self._n_digest:
            hits += pending.get(dv.full_name, ())
        if not hits:
            self.counters["drop_unsolicited_data"] += 1
            return
        self.counters["in_data"] += 1
        if mark:
            self.counters["congestion_marks"] += 1
            for rec in hits:
                rec.congestion_mark = mark
        for rec in hits:
            self._satisfy(rec, dv)

    def _on_nack(self, interest: bytes, reason: int) -> None:
        try:
            iv = parse_interest(interest)
        except DecodeError:
            self.counters["drop_malformed"] += 1
            return
        recs = self._pending.get(iv.name, [])
        # NFD's rule: a Nack answers the transmission whose Nonce it carries; a Nack for an
        # earlier transmission (since retransmitted) is stale.
        match = next((r for r in recs if r.wire[r.nonce_pos : r.nonce_pos + 4] == iv.nonce), None)
        if match is None:
            self.counters["drop_unsolicited_nack"] += 1
            return
        self.counters["in_nack"] += 1
        uri = to_uri(iv.name)
        for rec in [r for r in recs if (r.prefix, r.mbf) == (match.prefix, match.mbf)]:
            self._fail(rec, InterestNack(reason, uri))

    def _on_interest(self, wire: bytes, token: bytes | None) -> None:
        try:
            iv = parse_interest(wire)
        except DecodeError:
            self.counters["drop_malformed"] += 1
            return
        if self._triggers:
            key = ri_key(iv.name, iv.name_ends)
            if key is not None:
                self._extend_trigger(key, iv.lifetime)
        handler = self._lookup(iv.name, iv.name_ends)
        if handler is None:
            self.counters["drop_no_handler"] += 1
            return
        self.counters["in_interest"] += 1
        reply = self.put if token is None else self._reply_with(token)
        try:
            result = handler(iv, reply)
        except Exception:
            self.counters["handler_error"] += 1
            log.exception("handler for %s failed", to_uri(iv.name))
            return
        if inspect.isawaitable(result):  # an async handler: the app chose a task per Interest
            task = asyncio.ensure_future(result)
            self._tasks.add(task)
            task.add_done_callback(self._handler_done)

    def _reply_with(self, token: bytes) -> Reply:
        """Echo the PitToken the Interest came with, as python-ndn's v2 apps do."""

        def reply(wire: bytes) -> None:
            if wire[:1] != b"\x06":
                raise EncodeError("reply() sends Data packets (TLV type 6)")
            self._write(encode_lp(wire, pit_token=token))

        return reply

    def _handler_done(self, task: asyncio.Future[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.counters["handler_error"] += 1
            log.error("handler failed", exc_info=task.exception())

    def _lookup(self, name: bytes, ends: list[int]) -> Handler | None:
        handlers = self._handlers
        n = len(ends)
        for depth in self._depths:
            if depth <= n:
                entry = handlers.get(name[: ends[depth - 1]] if depth else b"")
                if entry is not None:
                    return entry[0]
        return None

    # ---- transport -------------------------------------------------------------------------

    def _write(self, wire: bytes) -> None:
        t = self._transport
        if t is None:
            self.counters["drop_closed"] += 1
        elif self._datagram:  # asyncio's and uvloop's UDP transports share no base class
            cast(asyncio.DatagramTransport, t).sendto(wire)
        else:
            stream = cast(asyncio.WriteTransport, t)
            if stream.get_write_buffer_size() > SEND_LIMIT:
                self.counters["drop_send_queue_full"] += 1
            else:
                stream.write(wire)

    def _socket_error(self, exc: Exception) -> None:
        self.counters["socket_error"] += 1
        if isinstance(exc, ConnectionRefusedError):  # ICMP port unreachable: nobody there
            msg = f"no forwarder at {self.uri} (is `icn fwd` running? set {ENV_VAR})"
            self._fail_all(lambda: ForwarderUnreachable(msg))

    def _abort(self, why: str) -> None:
        self.counters["drop_bad_framing"] += 1
        log.warning("endpoint %s: %s; closing", self.uri, why)
        self._shutdown(f"connection to {self.uri} closed: {why}")

    def _lost(self, exc: Exception | None) -> None:
        if self._open:  # the forwarder went away
            self.counters["connection_lost"] += 1
            self._shutdown(f"connection to {self.uri} lost")
        if not self._closed.done():
            self._closed.set_result(None)

    def _shutdown(self, why: str) -> None:
        if not self._open:
            return
        self._open = False
        t, self._transport = self._transport, None
        if t is not None:
            t.close()  # connection_lost follows and resolves _closed
        elif not self._closed.done():
            self._closed.set_result(None)
        self._fail_all(lambda: InterestCanceled(why))
        for task in list(self._tasks):
            task.cancel()

    def _fail_all(self, make: Callable[[], BaseException]) -> None:
        for recs in list(self._pending.values()):
            for rec in list(recs):
                self._fail(rec, make())
