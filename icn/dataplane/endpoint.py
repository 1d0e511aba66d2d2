"""The app endpoint: one asyncio connection to a forwarder, for consumers and producers alike.

It speaks what NFD's apps speak (bare TLVs back to back on Unix/TCP, one packet per UDP
datagram) with the lean codec, so an app costs a few microseconds per packet.  It is the shell
over two tables free of I/O: :mod:`icn.dataplane.pending` (the Interests it awaits) and
:mod:`icn.dataplane.handlers` (who answers the Interests it gets).  The shell connects, writes,
and keeps per pending Interest a future for its result and one ``call_at`` timer for its
lifetime (asking again is the fetcher's, :mod:`icn.dataplane.fetcher`).  The receive path runs
in the protocol callback: no task per packet.  Bad input from the forwarder is counted in
``counters`` and dropped; a broken stream (a TLV header that cannot be framed) closes the
endpoint and cancels what is pending, since nothing after it can be trusted.  Names are name
values (:mod:`icn.wire.name`) or URIs.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import icn.dataplane.mgmt_client as mgmt_client
from icn.dataplane.app_protocols import PacketPort, PortTransport, open_transport
from icn.dataplane.client_conf import (
    ENV_VAR,
    is_local_transport,
    parse_transport,
    resolve_transport,
)
from icn.dataplane.fetcher import expiry_policy, fetch
from icn.dataplane.handlers import Handler, HandlerTable, Reply
from icn.dataplane.pending import PendingEntry, PendingTable
from icn.dataplane.segments import fetch_segments
from icn.dataplane.validating import validated
from icn.errors import (
    DecodeError,
    EncodeError,
    ForwarderUnreachable,
    InterestCanceled,
    InterestNack,
    InterestTimeout,
)
from icn.security.signed_interest import encode_signed_interest
from icn.wire import tlv_types as T
from icn.wire.encode import (
    DataParts,
    EncodedInterest,
    Nacked,
    Outgoing,
    Uncached,
    encode_interest,
    make_data,
)
from icn.wire.lp import encode_nack, lp_head, parse_lp
from icn.wire.name import NameLike, as_name, to_uri
from icn.wire.packet import DataView, parse_data, parse_interest
from icn.wire.reflexive import LIFETIME_EXTENSION, ri_key
from icn.wire.signer import DIGEST_SHA256, Signer
from icn.wire.tlv import Buffer

if TYPE_CHECKING:
    from icn.security.trust import Validator

log = logging.getLogger(__name__)

# Checks a received Data before it is handed over (a signature, a trust policy): it raises, and
# the expression fails with that exception, e.g. icn.errors.ValidationError.
Verifier = Callable[[DataView], None]

DEFAULT_MAX_PENDING = 65536
# rib/register commands sent for one serve() before it gives up (each waits its lifetime, 4 s)
REGISTER_ATTEMPTS = 2
# Bytes queued in a stream transport before sends are dropped: four of the largest local packets,
# so a producer answering a window of 1 MiB chunks at once is not cut short.
SEND_LIMIT = 4 * T.MAX_LOCAL_PACKET_SIZE


class PendingInterest(PendingEntry):
    """One expressed Interest awaiting Data: the table's entry, the future that gets the Data,
    the lifetime timer, and the check the Data must pass first."""

    __slots__ = ("future", "timer", "verify")

    def __init__(
        self,
        enc: EncodedInterest,
        lifetime_ms: int,
        can_be_prefix: bool,
        must_be_fresh: bool,
        future: asyncio.Future[DataView],
    ) -> None:
        super().__init__(enc, lifetime_ms, can_be_prefix, must_be_fresh)
        self.future = future
        self.timer: asyncio.TimerHandle | None = None
        self.verify: Verifier | None = None


class Served:
    """A prefix an endpoint serves (:meth:`Endpoint.serve`).  ``await close()``, or leave an
    ``async with``, to stop: the handler goes, and the route if ``serve`` registered one."""

    __slots__ = ("_closed", "_ep", "origin", "prefix", "registered")

    def __init__(self, ep: Endpoint, prefix: bytes, registered: bool, origin: int) -> None:
        self._ep = ep
        self.prefix = prefix  # a name value
        self.registered = registered
        self.origin = origin
        self._closed = False

    async def close(self) -> None:
        """Stop serving (idempotent).  A registered route is withdrawn unless the forwarder is
        gone already, or cannot be reached: then the route went with the face."""
        if self._closed:
            return
        self._closed = True
        ep = self._ep
        ep.handlers.remove(self.prefix)
        if self.registered and not ep.closed:
            # a closed or unreachable forwarder: the route went with the face
            with contextlib.suppress(Exception):
                await mgmt_client.command(
                    ep, "rib", "unregister", name=self.prefix, origin=self.origin
                )

    async def __aenter__(self) -> Served:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class Endpoint:
    """A connection to a forwarder.  Create with ``await Endpoint.connect(uri)``."""

    def __init__(self, uri: str, *, is_local: bool, max_pending: int = DEFAULT_MAX_PENDING):
        self.uri = uri
        self.is_local = is_local  # management goes to /localhost/nfd, else /localhop/nfd
        self.counters: Counter[str] = Counter()
        self.face_id: int | None = None  # learnt from the first rib/register reply
        self.signer: Signer | None = DIGEST_SHA256  # signs what make_data() builds
        # prefix -> handler; add and remove here to answer without a route (Reflexive
        # Interests, a route installed some other way), or use serve()
        self.handlers = HandlerTable()
        self._table: PendingTable[PendingInterest] = PendingTable(max_pending)
        self._transport: asyncio.BaseTransport | PortTransport | None = None
        self._datagram = False
        self._open = True
        self._closed = asyncio.get_running_loop().create_future()
        self._tasks: set[asyncio.Future[None]] = set()

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
        local = addr.scheme == "unix" or await loop.run_in_executor(None, is_local_transport, uri)
        ep = cls(uri, is_local=local, max_pending=max_pending)
        try:
            async with asyncio.timeout(connect_timeout):
                await open_transport(ep, addr)
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
        return len(self._table)

    @property
    def max_pending(self) -> int:
        return self._table.max_pending

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
        signer: Signer | None = None,
        sig_seq: int | None = None,
        hop_limit: int | None = None,
        forwarding_hint: list[bytes] | None = None,
        timeout: float | None = None,
        retries: int = 0,
        verify: Verifier | None = None,
        validator: Validator | None = None,
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
        :func:`data_content`.  ``signed`` makes it a signed Interest (DigestSha256), ``signer``
        one signed by that signer, with SignatureSeqNum ``sig_seq`` if given (a retransmission
        keeps it; SignatureNonce and SignatureTime are new each time).  ``validator`` (the
        project's one, :mod:`icn.security.trust`) must accept the Data's signer, its
        certificates fetched through this endpoint as needed; else ValidationError, and the Data
        is not returned (:mod:`icn.dataplane.validating`).
        """
        if retries:
            if retries < 0:
                raise EncodeError("retries must not be negative")
            dv = await fetch(
                self,
                as_name(name),
                expiry_policy(lifetime_ms, timeout, retries),
                verify=verify,
                can_be_prefix=can_be_prefix,
                must_be_fresh=must_be_fresh,
                app_params=app_params,
                signed=signed,
                signer=signer,
                sig_seq=sig_seq,
                hop_limit=hop_limit,
                forwarding_hint=forwarding_hint,
            )
            return dv if validator is None else await validated(dv, validator, self.counters)
        rec = self.start(
            name,
            lifetime_ms=lifetime_ms,
            can_be_prefix=can_be_prefix,
            must_be_fresh=must_be_fresh,
            app_params=app_params,
            signed=signed,
            signer=signer,
            sig_seq=sig_seq,
            hop_limit=hop_limit,
            forwarding_hint=forwarding_hint,
        )
        rec.verify = verify
        try:
            async with asyncio.timeout(timeout):
                dv = await rec.future
        except TimeoutError:
            raise InterestTimeout(to_uri(rec.name), 1, timeout) from None
        finally:
            self.drop(rec)
        return dv if validator is None else await validated(dv, validator, self.counters)

    def start(
        self,
        name: NameLike,
        *,
        lifetime_ms: int = T.DEFAULT_INTEREST_LIFETIME_MS,
        can_be_prefix: bool = False,
        must_be_fresh: bool = False,
        app_params: bytes | None = None,
        signed: bool = False,
        signer: Signer | None = None,
        sig_seq: int | None = None,
        hop_limit: int | None = None,
        forwarding_hint: list[bytes] | None = None,
    ) -> PendingInterest:
        """Send an Interest without waiting: the record's ``future`` gets the Data, or
        InterestTimeout once its lifetime ends.  The caller must :meth:`drop` the record when
        done with it (the fetcher's window does)."""
        if self.closed:
            raise InterestCanceled(f"endpoint to {self.uri} is closed")
        self._table.check_room()
        if lifetime_ms <= 0:
            raise EncodeError("lifetime_ms must be positive")
        value = as_name(name)
        if signed or signer is not None:
            enc = encode_signed_interest(
                value,
                app_params=app_params or b"",
                signer=signer or DIGEST_SHA256,
                sig_seq=sig_seq,
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
        loop = asyncio.get_running_loop()
        rec = PendingInterest(enc, lifetime_ms, can_be_prefix, must_be_fresh, loop.create_future())
        self._table.add(rec)
        self._write(rec.wire)
        rec.deadline = loop.time() + rec.lifetime
        rec.timer = loop.call_at(rec.deadline, self._expired, rec)
        return rec

    def drop(self, rec: PendingInterest) -> None:
        """Forget a pending Interest (idempotent); an unfinished future is cancelled."""
        if not self._table.drop(rec):
            return
        if rec.timer is not None:
            rec.timer.cancel()
        if not rec.future.done():
            rec.future.cancel()

    async def fetch_segments(self, name: NameLike, **options: Any) -> bytes:
        """Fetch and reassemble a segmented object: see
        :func:`icn.dataplane.segments.fetch_segments`."""
        return await fetch_segments(self, as_name(name), **options)

    def _extend_trigger(self, key: bytes, ri_lifetime_ms: int) -> None:
        """A Reflexive Interest for ``key`` arrived: its Trigger Interest waits at least 1.5
        times the RI's lifetime from now (never less than it already would)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + LIFETIME_EXTENSION * ri_lifetime_ms / 1000.0
        for rec in self._table.extend_triggers(key, until):
            if rec.timer is not None:
                rec.timer.cancel()
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
        self,
        prefix: NameLike,
        handler: Handler,
        *,
        register: bool = True,
        origin: int = 0,
        cost: int = 0,
        flags: int | None = None,
    ) -> Served:
        """Serve ``prefix`` with ``handler``: each Interest under it, by longest prefix, goes to
        ``handler(interest, reply)``, which may call ``reply(data_wire)`` at once or later (a
        thunk, a slow computation).  With ``register`` the route comes here by ``rib/register``
        (CommandFailed if refused, and the handler ``prefix`` had before is back); without, a
        route is someone else's (a prefix already routed here, Reflexive Interests under
        ``reflexive_key(rnp)``).  ``flags``: the route's NFD flags (CHILD_INHERIT 1, the
        default, CAPTURE 2).  Serving a prefix again replaces its handler.  Returns the handle
        that stops it (:class:`Served`)."""
        value = as_name(prefix)
        previous = self.handlers.add(value, handler)  # before the route: no Interest missed
        if register:
            try:
                # rib/register is idempotent (the same face, origin and cost again change
                # nothing), so a command unanswered in its lifetime is sent once more: a
                # forwarder busy beside other work once took longer than the 4 s to answer,
                # and `icn serve` gave up with the forwarder alive (issue 34)
                for attempt in range(REGISTER_ATTEMPTS):
                    try:
                        body = await mgmt_client.command(
                            self, "rib", "register", name=value, origin=origin, cost=cost,
                            flags=flags,
                        )  # fmt: skip
                        break
                    except InterestTimeout:
                        if attempt + 1 == REGISTER_ATTEMPTS:
                            raise
                        log.info("rib/register %s unanswered: sent again", to_uri(value))
            except BaseException:
                self.handlers.remove(value)
                if previous is not None:
                    self.handlers.add(value, previous)
                raise
            if self.face_id is None and isinstance(body.get("face_id"), int):
                self.face_id = body["face_id"]
        return Served(self, value, register, origin)

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

    def put(self, wire: Outgoing) -> None:
        """Send a Data packet: the whole TLV, or its :class:`~icn.wire.encode.DataParts` (a
        stream socket then writes the parts with one vectored write, the content uncopied),
        either one wrapped in :class:`~icn.wire.encode.Uncached` to keep it out of caches (a
        handler's reply path also takes a :class:`~icn.wire.encode.Nacked`).  Dropped and
        counted once the endpoint is closed."""
        self._write(_framed(wire, None, "put"))

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
        hits = self._table.match_data(dv)
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
        recs = self._table.match_nack(iv.name, iv.nonce)  # none for a stale Nack
        if not recs:
            self.counters["drop_unsolicited_nack"] += 1
            return
        self.counters["in_nack"] += 1
        uri = to_uri(iv.name)
        for rec in recs:
            self._fail(rec, InterestNack(reason, uri))

    def _on_interest(self, wire: bytes, token: bytes | None) -> None:
        try:
            iv = parse_interest(wire)
        except DecodeError:
            self.counters["drop_malformed"] += 1
            return
        if self._table.triggers_waiting:
            key = ri_key(iv.name, iv.name_ends)
            if key is not None:
                self._extend_trigger(key, iv.lifetime)
        handler = self.handlers.lookup(iv.name, iv.name_ends)
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

        def reply(wire: Outgoing) -> None:
            self._write(_framed(wire, token, "reply"))

        return reply

    def _handler_done(self, task: asyncio.Future[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.counters["handler_error"] += 1
            log.error("handler failed", exc_info=task.exception())

    # ---- transport -------------------------------------------------------------------------

    def _write(self, wire: bytes | tuple[Buffer, ...]) -> None:
        """Send one packet: its wire, or its pieces in order (DataParts is such a tuple)."""
        t = self._transport
        if t is None:
            self.counters["drop_closed"] += 1
        elif self._datagram:  # asyncio's and uvloop's UDP transports share no base class
            cast(asyncio.DatagramTransport, t).sendto(
                b"".join(wire) if isinstance(wire, tuple) else wire
            )
        else:
            stream = cast(asyncio.WriteTransport, t)
            if stream.get_write_buffer_size() > SEND_LIMIT:
                self.counters["drop_send_queue_full"] += 1
            elif isinstance(wire, tuple):
                # uvloop: one writev of the pieces; asyncio's 3.11 transports join them
                stream.writelines(wire)
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
        for rec in self._table.entries():
            self._fail(rec, make())


def _framed(wire: Outgoing, token: bytes | None, what: str) -> bytes | tuple[Buffer, ...]:
    """A Data to send, as :meth:`Endpoint._write` takes it: bare, or behind an LpPacket header
    when it carries a PitToken to echo or CachePolicy NoCache (:class:`Uncached`); the Data
    itself is not copied into the LpPacket, it follows its header in the same write.  A
    :class:`Nacked` goes as the Nack LpPacket of its Interest, with the PitToken."""
    if isinstance(wire, Nacked):
        return encode_nack(wire.interest, wire.reason, token)
    no_cache = isinstance(wire, Uncached)
    data = wire.data if isinstance(wire, Uncached) else wire
    if (data.head if isinstance(data, DataParts) else data)[:1] != b"\x06":
        raise EncodeError(f"{what}() sends Data packets (TLV type 6)")
    if token is None and not no_cache:
        return data
    head = lp_head(
        data.size if isinstance(data, DataParts) else len(data),
        pit_token=token,
        cache_policy=T.CACHE_POLICY_NO_CACHE if no_cache else None,
    )
    return (head, *data) if isinstance(data, DataParts) else (head, data)
