"""MQTT in and out of a stream graph, over aiomqtt, to a real broker (mosquitto).

:class:`MqttSource` holds a persistent session and acknowledges a message to the broker only
when the caller says it has durably taken it (:meth:`MqttSource.ack`, after writing the batch to
its log): a crash before that and the broker delivers the message again.  :class:`MqttSink`
publishes and returns once the broker has acknowledged (QoS 1), publishing again over a new
connection when one drops: at least once on both sides.

MQTT 5 is spoken, for a *Session Expiry Interval*: with clean start off, it is the 5.0 form of
``clean_session=False`` (subscriptions and unacknowledged QoS 1 messages stay with the broker
while the source is away).

Push-back: when ``max_buffered`` messages wait unread, the source stops reading its socket (it
takes the socket's reader off the event loop) until :meth:`MqttSource.get` has taken some; TCP
then holds the broker back, and the broker queues the rest.  The source also sends
``max_buffered`` as MQTT 5's *Receive Maximum* (QoS 1 messages unacknowledged at once), which a
broker should honour by itself; mosquitto 2.0.11 does at first but lets more through after the
first acknowledgements (``counters['over_receive_maximum']``), so the paused socket is what
bounds memory.  Mosquitto's ``max_queued_messages`` (1000 by default) bounds its queue per
client and drops what is beyond: set it higher for a source that may fall behind or be away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiomqtt
import paho.mqtt.client as paho
from aiomqtt.exceptions import MqttConnectError
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode
from paho.mqtt.subscribeoptions import SubscribeOptions

from icn.errors import ConfigError, IcnError

log = logging.getLogger(__name__)
T = TypeVar("T")

SESSION_NEVER_EXPIRES = 0xFFFFFFFF  # seconds; this value means "never" in MQTT 5
RECEIVE_MAXIMUM_LIMIT = 65535  # a two-byte field in CONNECT
FIRST_BACKOFF = 0.05  # seconds before the first reconnection attempt; doubles up to max_backoff
SYNC_FILTER = "icn/sync/never-subscribed"  # MqttSource.sync's round trip unsubscribes it


class MqttUnavailable(IcnError):
    """No MQTT broker answers at an address (or it refused us) within a bound."""


@dataclass
class MqttMessage:
    """One message from a topic.  ``delivery`` tells this delivery apart from an earlier one
    with the same ``mid`` (the broker reuses ids once acknowledged, and numbers afresh on a new
    connection): an acknowledgement goes out only for the delivery it names."""

    topic: str
    payload: bytes
    mid: int
    qos: int
    delivery: int = field(default=0, repr=False, compare=False)


def _check(who: str, host: str, port: int, client_id: str, qos: int) -> None:
    if not isinstance(host, str) or not host:
        raise ConfigError(f"{who} host={host!r}: give the broker's host name or address")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ConfigError(
            f"{who} port={port!r}: give the TCP port the broker listens on, in 1..65535 "
            "(mosquitto's default is 1883)"
        )
    if not isinstance(client_id, str) or not client_id:
        raise ConfigError(
            f"{who} client_id={client_id!r}: give a fixed, non-empty id (a persistent session "
            "is found again by it)"
        )
    if qos not in (0, 1):
        raise ConfigError(
            f"{who} qos={qos!r}: use 1 (at least once) or 0 (at most once); QoS 2 cannot be "
            "acknowledged after a crash (its state lives in the client's memory), so it is "
            "not offered"
        )


class _Link:
    """One connection: its aiomqtt client, and ``lost``, done when it drops."""

    def __init__(self, client: aiomqtt.Client, counters: Counter[str]) -> None:
        self.client = client
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._watch = asyncio.create_task(self._watch_loop(counters))

    async def _watch_loop(self, counters: Counter[str]) -> None:
        # aiomqtt's own queue only gets messages that no topic callback of ours took; its
        # iterator is also aiomqtt's public way of hearing that the connection dropped
        try:
            async for _ in self.client.messages:
                counters["unmatched"] += 1
        except aiomqtt.MqttError:
            pass
        finally:
            if not self.lost.done():
                self.lost.set_result(None)

    async def until_lost(self, work: Awaitable[T]) -> T:
        """``work``'s result, or MqttError as soon as the connection drops."""
        task = asyncio.ensure_future(work)
        try:
            await asyncio.wait((task, self.lost), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not task.done():
                task.cancel()
                # aiomqtt drops its pending-call entry itself; nothing is left to wait for
                task.add_done_callback(lambda t: t.cancelled() or t.exception())
        if not task.done():
            raise aiomqtt.MqttError("the connection to the broker dropped")
        return task.result()

    async def close(self) -> None:
        """DISCONNECT (bounded by the client's timeout); never acknowledges anything."""
        with contextlib.suppress(aiomqtt.MqttError, OSError):
            await self.client.__aexit__(None, None, None)
        self._watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._watch


class _Endpoint:
    """Connecting with bounded backoff, shared by the source and the sink."""

    who = "MQTT client"

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        qos: int,
        timeout: float,
        connect_timeout: float,
        max_backoff: float,
        keepalive: int,
    ) -> None:
        _check(self.who, host, port, client_id, qos)
        self.host = host
        self.port = port
        self.client_id = client_id
        self.qos = qos
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_backoff = max_backoff
        self.keepalive = keepalive
        self.counters: Counter[str] = Counter()
        self._link: _Link | None = None
        self._links = 0
        self._closed = False

    @property
    def connected(self) -> bool:
        return self._link is not None and not self._link.lost.done()

    def _client(self) -> aiomqtt.Client:
        """A new aiomqtt client; the subclass sets it up before it connects."""
        raise NotImplementedError

    async def _open(self) -> _Link:
        self._links += 1
        client = self._client()
        paho_client: paho.Client = client._client
        paho_client.connect_timeout = self.timeout
        try:
            await client.__aenter__()
        except BaseException:
            with contextlib.suppress(Exception):
                paho_client.disconnect()  # a connection whose CONNACK came too late is not kept
            raise
        return _Link(client, self.counters)

    async def _connect(self, within: float) -> _Link:
        """Connect, retrying with doubling delays (at most ``max_backoff`` apart) for up to
        ``within`` seconds (``math.inf``: until closed)."""
        deadline = time.monotonic() + within
        delay = FIRST_BACKOFF
        while True:
            try:
                return await self._open()
            except MqttConnectError as exc:
                raise MqttUnavailable(
                    f"the MQTT broker at {self.host}:{self.port} refused {self.who} "
                    f"client_id={self.client_id!r}: {exc}; check the client id and the broker's "
                    "access settings (allow_anonymous, ACLs)"
                ) from None
            except (aiomqtt.MqttError, OSError) as exc:
                self.counters["connect_failures"] += 1
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    raise MqttUnavailable(
                        f"no MQTT broker answers at {self.host}:{self.port} within {within:.3g} s "
                        f"({exc}): start one there (e.g. mosquitto -p {self.port}) or check "
                        "the host and port"
                    ) from None
                await asyncio.sleep(min(delay, left))
                delay = min(delay * 2, self.max_backoff)


class MqttSource(_Endpoint):
    """Messages of ``topic`` (a filter; wildcards allowed) from a persistent session.

    ``await start()``; ``await get(max_n, timeout)`` for what has arrived; ``ack(messages)``
    once they are durably taken; ``await close()``.  The connection is re-made when it drops
    (``counters['reconnects']``); messages read but not acknowledged over the lost connection
    are then delivered again by the broker."""

    who = "MqttSource"

    def __init__(
        self,
        host: str,
        port: int,
        topic: str,
        *,
        client_id: str,
        qos: int = 1,
        max_buffered: int = 10000,
        timeout: float = 10.0,
        connect_timeout: float = 10.0,
        max_backoff: float = 5.0,
        keepalive: int = 30,
    ) -> None:
        super().__init__(
            host, port, client_id, qos, timeout, connect_timeout, max_backoff, keepalive
        )
        if not isinstance(topic, str) or not topic:
            raise ConfigError(f"MqttSource topic={topic!r}: give a topic filter, e.g. sensors/#")
        if not 0 < max_buffered <= RECEIVE_MAXIMUM_LIMIT:
            raise ConfigError(
                f"MqttSource max_buffered={max_buffered!r}: give 1..{RECEIVE_MAXIMUM_LIMIT} "
                "(MQTT's Receive Maximum carries it to the broker)"
            )
        self.topic = topic
        self.max_buffered = max_buffered
        self._buffer: deque[MqttMessage] = deque()
        self._arrived = asyncio.Event()
        # QoS 1 messages of the current connection in arrival order: mid -> [delivery, taken];
        # PUBACKs go out in this order (MQTT requires it), up to the first one not yet taken
        self._unacked: OrderedDict[int, list[int]] = OrderedDict()
        self._deliveries = 0
        self._connections = 0
        self._session_present = False
        self._paused: paho.Client | None = None  # the client whose reader is off the loop
        self._failure: Exception | None = None  # why the source stopped reconnecting
        self._task: asyncio.Task[None] | None = None

    @property
    def buffered(self) -> int:
        """Messages arrived and not yet returned by :meth:`get`."""
        return len(self._buffer)

    @property
    def unacked(self) -> int:
        """QoS 1 messages of the current connection the broker has no PUBACK for."""
        return len(self._unacked)

    def _client(self) -> aiomqtt.Client:
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = SESSION_NEVER_EXPIRES
        props.ReceiveMaximum = self.max_buffered
        client = aiomqtt.Client(
            self.host,
            self.port,
            identifier=self.client_id,
            protocol=aiomqtt.ProtocolVersion.V5,
            clean_start=False,
            properties=props,
            timeout=self.timeout,
            keepalive=self.keepalive,
        )
        number = self._links
        # aiomqtt has no manual acknowledgement, and acknowledges each message as it reads it;
        # its paho-mqtt client (the private ``_client``, paho 2.x) does: with manual_ack set
        # before connecting, paho sends a PUBACK only when ack(mid, qos) is called
        paho_client: paho.Client = client._client
        paho_client.manual_ack_set(True)
        # messages matching our filter come to us, in the loop, tagged with their connection
        paho_client.message_callback_add(
            self.topic, lambda c, _u, msg: self._on_message(c, msg, number)
        )
        aiomqtt_on_connect = client._on_connect  # aiomqtt's CONNACK handling, then ours

        def on_connect(
            c: paho.Client, u: Any, flags: paho.ConnectFlags, rc: ReasonCode, p: Properties | None
        ) -> None:
            self._session_present = flags.session_present
            aiomqtt_on_connect(c, u, flags, rc, p)

        paho_client.on_connect = on_connect
        return client

    def _on_message(self, client: paho.Client, msg: paho.MQTTMessage, number: int) -> None:
        if number != self._links:  # a connection already given up; the broker sends it again
            self.counters["stale_dropped"] += 1
            return
        self._deliveries += 1
        message = MqttMessage(msg.topic, bytes(msg.payload), msg.mid, msg.qos, self._deliveries)
        if msg.qos > 0:
            self._unacked[msg.mid] = [self._deliveries, 0]
            if len(self._unacked) > self.max_buffered:  # a broker that ignores Receive Maximum
                self.counters["over_receive_maximum"] += 1
        self._buffer.append(message)
        self.counters["received"] += 1
        if msg.dup:
            self.counters["redelivered"] += 1
        self._arrived.set()
        if len(self._buffer) >= self.max_buffered and self._paused is None:
            self._pause(client)

    # Pausing takes the socket's reader off the loop (aiomqtt's, or ours after a resume) and
    # resuming puts ours on: aiomqtt has no flow control of its own.  While paused, PINGRESPs
    # are not read either: a pause longer than about twice ``keepalive`` ends the connection,
    # and the source connects again (the broker then sends the unacknowledged messages again).
    def _pause(self, client: paho.Client) -> None:
        sock = client.socket()
        if sock is not None:
            asyncio.get_running_loop().remove_reader(sock.fileno())
            self._paused = client
            self.counters["pauses"] += 1

    def _resume(self) -> None:
        client, self._paused = self._paused, None
        link = self._link
        if client is None or link is None or link.client._client is not client:
            return  # a connection since replaced: the new one has its own reader
        sock = client.socket()
        if sock is not None and not link.lost.done():
            asyncio.get_running_loop().add_reader(sock.fileno(), self._read, link)

    def _read(self, link: _Link) -> None:
        client: paho.Client = link.client._client
        try:
            client.loop_read()  # closes the socket itself on EOF or a socket error
        except Exception as exc:
            # as in aiomqtt's reader: a read that raises leaves the connection unusable
            sock = client.socket()
            if sock is not None:
                asyncio.get_running_loop().remove_reader(sock.fileno())
            log.warning("MqttSource %r: reading from the broker failed: %r", self.client_id, exc)
            if not link.lost.done():
                link.lost.set_result(None)

    async def start(self) -> None:
        """Connect (retrying for up to ``connect_timeout`` s) and subscribe."""
        if self._task is not None or self._closed:
            raise RuntimeError(f"MqttSource {self.client_id!r} was already started")
        self._link = await self._connect_and_subscribe(self.connect_timeout)
        self._task = asyncio.create_task(self._keep_connected())

    async def _connect_and_subscribe(self, within: float) -> _Link:
        while True:
            link = await self._connect(within)
            try:
                # retained messages only for a new subscription, not again on each reconnect
                options = SubscribeOptions(
                    qos=self.qos, retainHandling=SubscribeOptions.RETAIN_SEND_IF_NEW_SUB
                )
                granted = await link.until_lost(link.client.subscribe(self.topic, options=options))
            except aiomqtt.MqttError as exc:
                await link.close()
                self.counters["connect_failures"] += 1
                if within != math.inf:
                    raise MqttUnavailable(
                        f"subscribing to {self.topic!r} at {self.host}:{self.port} failed: {exc}"
                    ) from None
                await asyncio.sleep(self.max_backoff)
                continue
            code = granted[0]
            if isinstance(code, ReasonCode) and code.is_failure:
                await link.close()
                raise ConfigError(
                    f"MqttSource topic={self.topic!r}: the broker at {self.host}:{self.port} "
                    f"refused the subscription ({code}); check the filter and the broker's ACLs"
                )
            self._after_connect()
            return link

    def _after_connect(self) -> None:
        self._connections += 1
        if self._connections == 1:
            return
        stale = [m for m in self._buffer if m.qos > 0 and not self._is_current(m)]
        if self._session_present:
            # the broker sends these again, in order: keeping them would only repeat them
            self._buffer = deque(m for m in self._buffer if m.qos == 0 or self._is_current(m))
            self.counters["stale_dropped"] += len(stale)
            return
        self.counters["sessions_lost"] += 1
        log.warning(
            "MqttSource %r: the broker at %s:%d had lost the session (restarted without "
            "persistence?); %d unacknowledged message(s) are handed on but cannot be acknowledged",
            self.client_id,
            self.host,
            self.port,
            len(stale),
        )

    def _is_current(self, m: MqttMessage) -> bool:
        entry = self._unacked.get(m.mid)
        return entry is not None and entry[0] == m.delivery

    async def _keep_connected(self) -> None:
        while True:
            link = self._link
            assert link is not None
            await link.lost
            if self._closed:
                return
            self.counters["disconnects"] += 1
            log.warning("MqttSource %r: lost %s:%d", self.client_id, self.host, self.port)
            self._link = None
            self._paused = None
            self._unacked.clear()  # their PUBACKs would go nowhere: the broker sends them again
            await link.close()
            try:
                self._link = await self._connect_and_subscribe(math.inf)
            except Exception as exc:  # the broker now refuses us or the subscription
                self._failure = exc
                self._arrived.set()
                return
            self.counters["reconnects"] += 1

    async def get(self, max_n: int, timeout: float) -> list[MqttMessage]:
        """Up to ``max_n`` messages that have arrived, waiting at most ``timeout`` s for the
        first; [] when none came.  Raises what stopped the source from reconnecting."""
        if max_n < 1:
            raise ValueError(f"MqttSource.get max_n={max_n}: ask for at least 1 message")
        deadline = time.monotonic() + timeout
        while not self._buffer:
            if self._failure is not None:
                raise self._failure
            left = deadline - time.monotonic()
            if left <= 0 or self._closed:
                return []
            self._arrived.clear()
            try:
                async with asyncio.timeout(left):
                    await self._arrived.wait()
            except TimeoutError:
                return []
        out = [self._buffer.popleft() for _ in range(min(max_n, len(self._buffer)))]
        if self._paused is not None and len(self._buffer) < self.max_buffered:
            self._resume()
        return out

    def ack(self, messages: list[MqttMessage]) -> None:
        """The caller has durably taken ``messages``: PUBACK them (each one once all messages
        that arrived before it are taken too).  Messages of a lost connection are skipped
        (``counters['acks_stale']``): the broker delivers them again."""
        for m in messages:
            if m.qos == 0:
                continue
            entry = self._unacked.get(m.mid)
            if entry is None or entry[0] != m.delivery:
                self.counters["acks_stale"] += 1
                continue
            entry[1] = 1
        link = self._link
        while self._unacked:
            mid, entry = next(iter(self._unacked.items()))
            if not entry[1]:
                break
            self._unacked.popitem(last=False)
            if link is None or link.lost.done():
                rc = paho.MQTT_ERR_NO_CONN  # the broker sends it again on the next connection
            else:
                rc = link.client._client.ack(mid, 1)
            self.counters["acked" if rc == paho.MQTT_ERR_SUCCESS else "acks_failed"] += 1

    async def sync(self) -> None:
        """Return once the broker has handled every acknowledgement sent before the call: one
        round trip (an UNSUBSCRIBE of a filter never subscribed, answered by an UNSUBACK)
        behind them, since a broker handles a connection's packets in order.  Raises
        MqttError if the connection drops first (what was not handled is delivered again)."""
        link = self._link
        if link is None or link.lost.done():
            raise aiomqtt.MqttError("not connected to the broker")
        await link.until_lost(link.client.unsubscribe(SYNC_FILTER, timeout=self.timeout))

    async def close(self) -> None:
        """Disconnect without acknowledging anything; unread messages are dropped (the broker
        keeps them for the session)."""
        self._closed = True
        self._arrived.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, MqttUnavailable):
                await self._task
        link, self._link = self._link, None
        if link is not None:
            await link.close()
        self._buffer.clear()
        self._unacked.clear()


class MqttSink(_Endpoint):
    """``await publish(topic, payload)`` returns once the broker has the message (PUBACK at
    QoS 1).  A dropped connection is re-made and the message published again, for up to
    ``retry_for`` seconds; then :class:`MqttUnavailable`.  Publishes may run concurrently (in
    call order on the wire, but for those published again); beyond ``max_in_flight`` at once
    they wait their turn."""

    who = "MqttSink"

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str,
        qos: int = 1,
        timeout: float = 10.0,
        connect_timeout: float = 10.0,
        retry_for: float = 30.0,
        max_backoff: float = 5.0,
        keepalive: int = 10,
        max_in_flight: int = 1000,
    ) -> None:
        super().__init__(
            host, port, client_id, qos, timeout, connect_timeout, max_backoff, keepalive
        )
        if max_in_flight < 1:
            raise ConfigError(f"MqttSink max_in_flight={max_in_flight!r}: give 1 or more")
        self.retry_for = retry_for
        self.max_in_flight = max_in_flight
        self._slots = asyncio.Semaphore(max_in_flight)
        self._reconnecting: asyncio.Lock = asyncio.Lock()

    def _client(self) -> aiomqtt.Client:
        # a publisher keeps no session: what it has not got a PUBACK for, it publishes again
        client = aiomqtt.Client(
            self.host,
            self.port,
            identifier=self.client_id,
            protocol=aiomqtt.ProtocolVersion.V5,
            clean_start=True,
            timeout=self.timeout,
            keepalive=self.keepalive,
        )
        # aiomqtt warns on every call beyond 10 pending; ours are bounded by max_in_flight
        client.pending_calls_threshold = self.max_in_flight
        return client

    async def start(self) -> None:
        """Connect, retrying for up to ``connect_timeout`` s."""
        if self._link is not None or self._closed:
            raise RuntimeError(f"MqttSink {self.client_id!r} was already started")
        self._link = await self._connect(self.connect_timeout)

    async def publish(self, topic: str, payload: bytes) -> None:
        async with self._slots:
            await self._publish(topic, payload)

    async def _publish(self, topic: str, payload: bytes) -> None:
        deadline = time.monotonic() + self.retry_for
        while True:
            link = self._link
            if self._closed:
                raise RuntimeError(f"MqttSink {self.client_id!r} is closed")
            if link is None:
                raise RuntimeError(f"MqttSink {self.client_id!r}: await start() first")
            try:
                await link.until_lost(link.client.publish(topic, payload, qos=self.qos))
                self.counters["published"] += 1
                return
            except aiomqtt.MqttError as exc:
                self.counters["publish_failures"] += 1
                left = deadline - time.monotonic()
                if left <= 0:
                    raise MqttUnavailable(
                        f"MqttSink could not publish to {topic!r} at {self.host}:{self.port} "
                        f"within {self.retry_for:g} s ({exc}): is the broker running there?"
                    ) from None
                await self._replace(link, left)
                self.counters["republished"] += 1

    async def _replace(self, broken: _Link, within: float) -> None:
        """A new connection in place of ``broken``, made once for all publishers waiting."""
        async with self._reconnecting:
            if self._link is not broken:
                return
            self._link = None
            self.counters["disconnects"] += 1
            await broken.close()
            try:
                self._link = await self._connect(within)
            finally:
                if self._link is None:
                    self._link = broken  # the next publish fails fast and tries again
            self.counters["reconnects"] += 1

    async def close(self) -> None:
        self._closed = True
        link, self._link = self._link, None
        if link is not None:
            await link.close()
