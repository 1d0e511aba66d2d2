"""Calling named functions: ``await client.call("/svc/fn", *args, **kwargs)``.

One call is one RICE exchange (docs/design.md section 6): a Trigger Interest with a fresh RNP; the
caller answers the server's Reflexive Interests with its signed credential and the arguments;
the answer is the result, or a thunk to poll after its estimate.  Results of pure functions are
fetched by the digest of their arguments, so a repeated call is answered by the first content
store that holds it.  Every Interest keeps the client's ``lifetime_ms``; nothing waits longer.

Calls of idempotent functions (pure ones, ``@function(idempotent=True)``; learnt from a first
answer, or said with ``invoke(idempotent=True)``) go under ``/svc/_idem/<fn>``, where the
network may clone them (a strategy with ``clone-after`` on that prefix), and always run the full
exchange: a session lives on one replica, and a clone must be runnable by any.  Each replica
that takes the call pulls its own credential; once the caller has an answer, it cancels the
call on the others (``/svc/_r/<replica>/_cancel/<RNP>``).  docs/guides/strategies.md,
"Replicas".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from compute.rmi.credential import build_credential
from compute.rmi.errors import (
    NotLocal,
    Overloaded,
    ProtocolError,
    ResultLost,
    RmiError,
    ServerUnavailable,
    SessionUnknown,
    Timeout,
)
from compute.rmi.local import MIN_SHARED
from compute.rmi.session import (
    PACKET_ROOM,
    ClientSession,
    derive_session_secret,
    session_call_aad,
    session_name,
    session_params,
)
from compute.rmi.wire import (
    ARGS,
    CANCEL,
    HELLO,
    IDEM,
    KEY_INFO,
    call_digest,
    component_text,
    component_value,
    function_component,
    memo_name,
    open_envelope,
    pack_args,
    replica_component,
    split_service_name,
)
from icn.dataplane.endpoint import Endpoint, Verifier
from icn.dataplane.handlers import Reply
from icn.dataplane.path_limit import path_packet_limit
from icn.dataplane.publish import SegmentedObject
from icn.dataplane.segments import data_content, fetch_signed
from icn.dataplane.validating import check_cached
from icn.errors import (
    ConfigError,
    DecodeError,
    IcnError,
    InterestNack,
    InterestTimeout,
    SecurityError,
    ValidationError,
)
from icn.security.certs import Certificate
from icn.security.keys import Identity, verify_data, verify_hmac_data
from icn.security.secretbox import CallKey, EphemeralKey, derive_key
from icn.security.trust import Validator
from icn.wire.name import component_ends, components, from_uri, to_uri
from icn.wire.packet import DataView, InterestView
from icn.wire.reflexive import new_rnp, reflexive_key, trigger_name
from icn.wire.serialize import unpack

Progress = Callable[[str, float, float], None]  # (state, elapsed s, eta s)
MAX_NAMES_KEPT = 4096
# servers that may take one call (a clone per replica): credentials built for at most this many
MAX_SERVERS_PER_CALL = 8
# a poll is sent once the result is due within this share of its lifetime (held there till then)
POLL_HOLD_SHARE = 0.75


def split_function(function: str) -> tuple[bytes, str]:
    """``/svc/fn`` -> (name value of ``/svc``, ``fn``); ValueError names the expected form."""
    try:
        name = from_uri(function)
        parts = components(name)
    except Exception:
        parts = []
    if len(parts) < 2:
        raise ValueError(f"{function!r}: call a function by its full name, e.g. /svc/fn")
    last = parts[-1]
    fn = component_text(last) or ""
    function_component(fn)
    return name[: len(name) - len(last)], fn


def open_session_answer(data: DataView, session: ClientSession, function: str) -> dict[str, Any]:
    """A session call's answer, opened: signed by the session's HMAC key, or else only the
    server's "no such session" (which lets the client fall back to the full exchange; anyone
    can send it, and it gains them nothing but that)."""
    try:
        signed = verify_hmac_data(data, session.signer, other_types=True)
    except ValidationError as exc:
        raise ProtocolError(f"session answer rejected: {exc}", function) from None
    content = data_content(data)
    if not signed:
        try:
            value = unpack(content)
        except DecodeError:
            value = None
        if isinstance(value, dict) and value.get("kind") == SessionUnknown.kind:
            raise SessionUnknown(str(value.get("msg", "")), function)
        raise ProtocolError("a session answer not signed by the session", function)
    return open_envelope(content, function)


class _Exchange:
    """The caller's side of one exchange: answers the server's Reflexive Interests."""

    def __init__(
        self,
        client: Client,
        key: bytes,
        function: str,
        blob: bytes,
        private: bool,
        session: bool = False,
        packet_limit: int | None = None,
    ) -> None:
        self.client = client
        self.key = key
        self.function = function
        # what the path to the server carries in one packet, when known: the credential then
        # holds arguments up to it and asks for results up to it in the answer
        self.room = None if packet_limit is None else max(0, packet_limit - PACKET_ROOM)
        self.blob = blob
        self.private = private
        self.session = session  # ask for a session: later calls take one round trip
        # X25519 only for a private call or a session: it costs as much as the credential's
        # signature
        self.ephemeral = EphemeralKey.generate() if private or session else None
        self.server_public: bytes | None = None  # the first server's, which keys a private call
        self.call_key: CallKey | None = None
        self.args: SegmentedObject | None = None
        # one credential per server that takes the call (its Reflexive Interest names its
        # X25519 key, and its replica id if it has one): a clone's server pulls its own
        self.credentials: dict[bytes, bytes] = {}
        self.servers: dict[str, bytes] = {}  # replica id ("" if none) -> its X25519 key

    def handler(self, iv: InterestView, reply: Reply) -> None:
        parts = split_service_name(self.key, iv.name)
        if not parts:
            return
        if parts[0] == HELLO and len(parts) in (2, 3):
            credential = self.credentials.get(iv.name)
            if credential is None:  # built once: a retransmitted RI gets the same
                # a private call is sealed for the first server's key: no other may take it
                if (self.private and self.credentials) or len(
                    self.credentials
                ) >= MAX_SERVERS_PER_CALL:
                    return
                server_public = component_value(parts[1])
                replica = component_text(parts[2]) if len(parts) == 3 else ""
                self.servers.setdefault(replica or "", server_public)
                credential = self.credentials[iv.name] = self._credential(iv.name, server_public)
            if credential:
                reply(credential)
        elif parts[0] == ARGS and self.args is not None:
            self.args.handler(iv, reply)

    def server_key(self, env: dict[str, Any]) -> bytes | None:
        """The X25519 key of the server that answered: the one its replica id names, else the
        only one that took the call (None when several did and the answer does not say)."""
        replica = env.get("rid")
        if isinstance(replica, str) and replica in self.servers:
            return self.servers[replica]
        return self.server_public if len(self.servers) == 1 else None

    def losers(self, env: dict[str, Any]) -> list[str]:
        """The replicas that took the call but did not answer it (clones that lost)."""
        winner = env.get("rid")
        return [r for r in self.servers if r and r != winner]

    def _credential(self, name: bytes, server_public: bytes) -> bytes:
        payload = self.blob
        if self.server_public is None:
            self.server_public = server_public
        if self.ephemeral is not None and self.private:
            try:
                self.call_key = derive_key(
                    self.ephemeral, server_public, salt=self.key, info=KEY_INFO
                )
            except SecurityError:
                return b""  # a malformed server key: let the call fail by timeout
            payload = self.call_key.seal(self.blob, aad=self.key)
        inline = len(payload) <= max(self.client.inline_args, self.room or 0)
        if not inline and self.args is None:  # (the same arguments for every server)
            self.args = SegmentedObject(self.key + ARGS, payload)
        return build_credential(
            self.client.identity,
            name,
            function=self.function,
            rnp_key=self.key,
            ephemeral=self.ephemeral.public_bytes if self.ephemeral else b"",
            private=self.private,
            size=len(self.blob),
            payload=payload,
            inline=inline,
            session=self.session,
            answer_limit=self.room,
            certificate=None if self.client.certificate is None else self.client.certificate.wire,
        )

    def result(self, env: dict[str, Any]) -> Any:
        value = env.get("r")
        if not isinstance(value, bytes):
            raise ProtocolError("answer without a result", self.function)
        if env.get("enc"):
            if self.call_key is None:
                raise ProtocolError("encrypted result for a call without a key", self.function)
            value = self.call_key.open(value, aad=self.key)
        return unpack(value)


class Client:
    """Calls functions through one endpoint.  ``identity`` signs the credentials (a new key
    per client unless given: load a persistent one with ``Identity.load_or_create``);
    ``server_key`` (raw Ed25519 public key) makes every answer's signature checked."""

    def __init__(
        self,
        ep: Endpoint,
        *,
        identity: Identity | None = None,
        certificate: Certificate | None = None,
        server_key: bytes | None = None,
        validator: Validator | None = None,
        lifetime_ms: int = 2000,
        retries: int = 2,
        timeout: float = 60.0,
        max_poll_interval: float = 2.0,
        inline_args: int = 6000,
        sessions: bool = True,
        shared: bool = True,
    ) -> None:
        self.ep = ep
        self.identity = identity or Identity.generate()
        if certificate is not None and certificate.public_key != self.identity.public_bytes:
            raise ConfigError(
                f"certificate {certificate.uri()} is of another key than the client's identity "
                f"({self.identity.fingerprint[:16]}); give the key it certifies"
            )
        # sent in credentials: servers that authorize by certificate validate it
        self.certificate = certificate
        self.lifetime_ms = lifetime_ms
        self.retries = retries
        self.timeout = timeout
        self.max_poll_interval = max_poll_interval
        self.inline_args = inline_args
        self.verify: Verifier | None = None
        if server_key is not None:
            key = server_key
            self.verify = lambda dv: verify_data(dv, key)
        # the one validator (a trust schema and anchors): every answer not signed by a session
        # must come from a server whose certificate it accepts.  A call's first answer is
        # validated with fetching (the server's chain is then cached); what follows from the
        # same server (polled results, memo) is checked against the cache, without I/O.
        self.validator = validator
        self._answer_verify = self.verify
        if validator is not None:
            cached = check_cached(validator, ep.counters)
            keyed = self.verify

            def both(dv: DataView) -> None:
                if keyed is not None:
                    keyed(dv)
                cached(dv)

            self._answer_verify = both
        self.pure_functions: set[str] = set()  # learnt from answers: probe the memo first
        # learnt from answers: their calls go under /svc/_idem, where they may be cloned
        self.idempotent_functions: set[str] = set()
        self.polls = 0
        # one session per server prefix, agreed by the first full exchange with it: later
        # calls are one signed Interest and its Data (``sessions=False``: every call runs the
        # full exchange)
        self.sessions = sessions
        # a session with a server on this host carries large payloads in a memory file
        # (compute.rmi.local; ``shared=False``: in the packets, as between hosts)
        self.shared = shared
        self._large_answers: set[str] = set()  # functions whose answers exceeded MIN_SHARED
        self._sessions: dict[bytes, ClientSession] = {}
        # the first call to a server agrees its session; calls made meanwhile wait for it
        # rather than each agreeing one of their own (the server would keep them all)
        self._agreeing: dict[bytes, asyncio.Future[None]] = {}
        self.counters: Counter[str] = Counter()
        self._background: set[asyncio.Task[None]] = set()  # cancel Interests on their way
        self._split: dict[str, tuple[bytes, str]] = {}  # function name -> (prefix, function)
        # the largest packet the path to each server prefix carries, asked of the forwarder
        # once (icn.dataplane.path_limit): arguments and results up to it ride whole
        self._path_limits: dict[bytes, int] = {}
        # the questions about it in flight: calls made meanwhile share one, never ask twice
        self._learning: dict[bytes, asyncio.Task[int]] = {}

    @classmethod
    async def connect(cls, uri: str | None = None, **options: Any) -> Client:
        """A client on a new connection to the forwarder at ``uri`` (default: NDN_CLIENT_TRANSPORT,
        client.conf, NFD's socket); ``options`` are the constructor's."""
        return cls(await Endpoint.connect(uri), **options)

    def close(self) -> None:
        """End the sessions and close the connection (``await client.ep.wait_closed()`` to
        know it is closed; ``async with`` does both)."""
        for session in self._sessions.values():
            session.end()
        self._sessions.clear()
        for task in self._learning.values():
            task.cancel()
        self.ep.close()

    def use_identity(self, identity: Identity) -> None:
        """Sign later calls with ``identity``.  The sessions agreed under another key end: a
        server knows a session's caller by the key that agreed it, so calls in them would
        still run as that caller."""
        if identity.fingerprint != self.identity.fingerprint:
            for session in self._sessions.values():
                session.end()
            self._sessions.clear()
        self.identity = identity

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
        await self.ep.wait_closed()

    async def call(self, function: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``function`` (``/svc/fn``) with these arguments; see :meth:`invoke`."""
        return await self.invoke(function, args, kwargs)

    async def invoke(
        self,
        function: str,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        *,
        private: bool = False,
        pure: bool = False,
        idempotent: bool = False,
        timeout: float | None = None,
        progress: Progress | None = None,
    ) -> Any:
        """Call with options: ``private`` encrypts arguments and result under a per-call key;
        ``pure`` probes caches for the result first (learnt after one call anyway);
        ``idempotent`` says the function may run twice, so the call goes where the network
        may clone it (learnt after one call too; a private call is never cloned);
        ``timeout`` bounds the whole call (Timeout); ``progress(state, elapsed, eta)`` is told
        while a thunked call runs.  Raises the errors of :mod:`compute.rmi.errors`."""
        split = self._split.get(function)
        if split is None:  # parsing the name cost more than the rest of a small call's encoding
            split = split_function(function)
            if len(self._split) < MAX_NAMES_KEPT:
                self._split[function] = split
        prefix, fn = split
        blob = pack_args(args, kwargs or {})
        limit = self.timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with asyncio.timeout(limit):
                if (pure or function in self.pure_functions) and not private:
                    found, value = await self._probe_memo(prefix, fn, blob, function)
                    if found:
                        return value
                if not private and (
                    idempotent
                    or pure
                    or function in self.idempotent_functions
                    or function in self.pure_functions
                ):  # a clone must be runnable by any replica: never in a session
                    return await self._exchange(
                        prefix, fn, function, blob, private, progress, started, idempotent=True
                    )
                agreeing = self._agreeing.get(prefix)
                if agreeing is not None and prefix not in self._sessions:
                    await asyncio.shield(agreeing)  # (failed or not: it tells; bounded by limit)
                session = self._sessions.get(prefix)
                if session is not None and not session.usable(loop.time()):
                    del self._sessions[prefix]
                    session.end()
                    session = None
                if (
                    session is not None
                    and session.packet_limit is None
                    and self._needs_path(function, blob, private, session)
                ):  # (small calls never ask: they ride in packets on any path)
                    session.packet_limit = await self._path_limit(prefix)
                if session is not None and len(blob) <= session.inline_limit():
                    try:
                        return await self._session_call(
                            prefix, fn, function, blob, private, session, progress, started
                        )
                    except SessionUnknown:  # the server lost it: the full exchange, once
                        self.counters["session_fallback"] += 1
                        self._sessions.pop(prefix, session).end()
                return await self._exchange(prefix, fn, function, blob, private, progress, started)
        except TimeoutError:
            raise Timeout(f"no result within {limit} s", function) from None

    def _needs_path(
        self, function: str, blob: bytes, private: bool, session: ClientSession
    ) -> bool:
        """Whether a session call must know its path first: arguments that only a local
        packet carries, or a payload that would go in the session's memory file on one host
        (large arguments, or a function whose answers came large)."""
        if len(blob) > session.inline_limit():
            return True
        return not private and (len(blob) > MIN_SHARED or function in self._large_answers)

    async def _path_limit(self, prefix: bytes) -> int:
        """The largest packet the path to ``prefix`` carries, asked of the forwarder once: two
        management datasets, whose first answer costs this process and the forwarder the
        import of python-ndn's models (about 0.2 s of CPU), so only calls that need it ask,
        and calls made meanwhile share the question."""
        limit = self._path_limits.get(prefix)
        if limit is not None:
            return limit
        task = self._learning.get(prefix)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._ask_path_limit(prefix))
            self._learning[prefix] = task
        return await asyncio.shield(task)

    async def _ask_path_limit(self, prefix: bytes) -> int:
        try:
            limit = await path_packet_limit(self.ep, prefix)
        finally:
            del self._learning[prefix]
        if len(self._path_limits) < MAX_NAMES_KEPT:
            self._path_limits[prefix] = limit
        return limit

    async def _probe_memo(
        self, prefix: bytes, fn: str, blob: bytes, function: str
    ) -> tuple[bool, Any]:
        name = memo_name(prefix, fn, call_digest(fn, blob))
        env = open_envelope(await self._fetch(name, function), function)
        if env["s"] == "miss":
            return False, None
        if env["s"] != "ok":
            raise ProtocolError(f"unexpected memo answer {env['s']!r}", function)
        return True, unpack(env["r"])

    async def _exchange(
        self,
        prefix: bytes,
        fn: str,
        function: str,
        blob: bytes,
        private: bool,
        progress: Progress | None,
        started: float,
        *,
        idempotent: bool = False,
    ) -> Any:
        limit = self._path_limits.get(prefix)
        if limit is None and len(blob) > self.inline_args:
            # arguments that may not fit a network packet: if the path is local they ride
            # whole in the credential (and the result in the answer), no segments either way
            limit = await self._path_limit(prefix)
        rnp = new_rnp()
        key = reflexive_key(rnp)
        want_session = (
            self.sessions
            and not idempotent
            and prefix not in self._sessions
            and prefix not in self._agreeing
        )
        agreed: asyncio.Future[None] | None = None
        if want_session:
            agreed = self._agreeing[prefix] = asyncio.get_running_loop().create_future()
        exchange = _Exchange(self, key, fn, blob, private, want_session, limit)
        self.ep.handlers.add(key, exchange.handler)
        # (an idempotent function's calls come under /svc/_idem, where they may be cloned)
        trigger = trigger_name(prefix + (IDEM if idempotent else b"") + function_component(fn), rnp)

        async def ask(retries: int) -> DataView:
            return await self.ep.express(
                trigger,
                lifetime_ms=self.lifetime_ms,
                retries=retries,
                verify=self.verify,
                validator=self.validator,
            )

        try:
            td = await ask(self.retries)
            env = open_envelope(data_content(td), function)
            if "sid" in env and want_session:
                self._adopt_session(prefix, exchange, env)
            if env.get("idem"):
                self.idempotent_functions.add(function)
            for replica in exchange.losers(env):  # clones that lost the race: stop them
                self._cancel_clone(prefix, replica, key)
        except (InterestNack, InterestTimeout) as exc:
            raise self._unavailable(exc, prefix, function) from None
        except asyncio.CancelledError:
            # (the same Trigger name: the forwarders aggregate it with the one in flight)
            self._cancel_once_answered(
                lambda: ask(0), lambda dv: open_envelope(data_content(dv), function), function
            )
            raise
        finally:
            self.ep.handlers.remove(key)
            if agreed is not None:  # the calls waiting for the session go on, with or without
                del self._agreeing[prefix]
                agreed.set_result(None)
        return await self._settle(
            env, exchange.result, self._answer_verify, function, progress, started
        )

    def _adopt_session(self, prefix: bytes, exchange: _Exchange, env: dict[str, Any]) -> None:
        """The first call's answer offered a session: derive its keys as the server did."""
        sid, ttl = env.get("sid"), env.get("sttl")
        server_public = exchange.server_key(env)
        if (
            not isinstance(sid, bytes)
            or not isinstance(ttl, (int, float))
            or exchange.ephemeral is None
            or server_public is None  # (several servers took it, and the answer does not say)
        ):
            return
        try:
            secret = derive_session_secret(exchange.ephemeral, server_public, exchange.key)
        except SecurityError:
            return
        loop = asyncio.get_running_loop()
        session = ClientSession.agreed(sid, secret, float(ttl), loop.time())
        session.packet_limit = self._path_limits.get(prefix)
        session.not_local = not self.shared
        self._sessions[prefix] = session
        self.counters["sessions"] += 1

    async def _session_call(
        self,
        prefix: bytes,
        fn: str,
        function: str,
        blob: bytes,
        private: bool,
        session: ClientSession,
        progress: Progress | None,
        started: float,
    ) -> Any:
        """One signed Interest, one Data: the call in its session.  On a local path the
        payloads go in the session's memory file (``compute.rmi.local``) when they are large."""
        seq = session.next_seq()
        name = prefix + function_component(fn) + session_name(session.sid)
        aad = session_call_aad(name, seq)
        payload = session.box.seal(blob, aad=aad) if private else blob
        # a slot when the arguments are large, or the function's answers were: small calls
        # stay as they were (a slot costs them a tenth of their rate)
        local = (
            None
            if private or (len(blob) <= MIN_SHARED and function not in self._large_answers)
            else session.local_file()
        )
        slot = None if local is None else local.take()
        ref = None
        if local is not None and slot is not None:
            if MIN_SHARED < len(blob) <= local.layout.args_cap:
                ref, payload = local.put_args(slot, blob), b""
            else:
                ref = local.slot_ref(slot)
        params = session_params(payload, private, session.inline_limit(), ref)

        async def ask(retries: int) -> DataView:
            return await self.ep.express(
                name,
                app_params=params,
                signer=session.signer,
                sig_seq=seq,  # a retransmission repeats it: the server answers, never reruns
                lifetime_ms=self.lifetime_ms,
                retries=retries,
            )

        answered = False
        try:
            try:
                data = await ask(self.retries)
            except (InterestNack, InterestTimeout) as exc:
                raise self._unavailable(exc, prefix, function) from None
            except asyncio.CancelledError:
                self._cancel_once_answered(
                    lambda: ask(0), lambda dv: open_session_answer(dv, session, function), function
                )
                raise
            answered = True
            try:
                env = open_session_answer(data, session, function)
            except NotLocal:  # the server cannot use the file (not run): packets from now on
                self.counters["not_local"] += 1
                session.not_local = True
                session.end()
                return await self._session_call(
                    prefix, fn, function, blob, private, session, progress, started
                )
            if env["s"] == "local" and local is not None and slot is not None:
                length = env.get("n")
                if not isinstance(length, int):
                    raise ProtocolError("a local answer without its length", function)
                env = open_envelope(local.answer(slot, seq, length, function), function)
                self.counters["local_answers"] += 1
        finally:
            if local is not None and slot is not None:
                local.give_back(slot, answered)
        self.counters["session_calls"] += 1

        def result(env: dict[str, Any]) -> Any:
            value = env.get("r")
            if not isinstance(value, bytes):
                raise ProtocolError("answer without a result", function)
            if (
                local is None
                and len(value) > MIN_SHARED
                and len(self._large_answers) < MAX_NAMES_KEPT
            ):  # a large answer, inline or polled: the function's next calls name a slot for it
                self._large_answers.add(function)
            if env.get("enc"):
                value = session.box.open(value, aad=aad)
            return unpack(value)

        def verify(dv: DataView) -> None:
            # the result and "pending" come signed by the session; a server that lost the
            # call (restarted) can only say so unsigned, and nothing else is taken unsigned
            if verify_hmac_data(dv, session.signer, other_types=True):
                return
            try:
                value = unpack(data_content(dv))
            except DecodeError:
                value = None
            if not (isinstance(value, dict) and value.get("kind") == ResultLost.kind):
                raise ValidationError("a session's result not signed by the session")

        return await self._settle(env, result, verify, function, progress, started)

    async def _settle(
        self,
        env: dict[str, Any],
        result: Callable[[dict[str, Any]], Any],
        verify: Verifier | None,
        function: str,
        progress: Progress | None,
        started: float,
    ) -> Any:
        """The result an answer gives: inline, at its memo name, or after polling a thunk."""
        state = env["s"]
        if env.get("pure"):
            self.pure_functions.add(function)
        if state == "ok":
            return result(env)
        if state == "memo":
            self.pure_functions.add(function)
            name = self._name_field(env, function)
            return result(open_envelope(await self._fetch(name, function), function))
        if state != "thunk":
            raise ProtocolError(f"unexpected answer {state!r}", function)
        return await self._poll(result, verify, env, function, progress, started)

    async def _poll(
        self,
        result: Callable[[dict[str, Any]], Any],
        verify: Verifier | None,
        env: dict[str, Any],
        function: str,
        progress: Progress | None,
        started: float,
    ) -> Any:
        name = self._name_field(env, function)
        try:
            loop = asyncio.get_running_loop()
            eta = float(env.get("eta", 0.0))
            while True:
                if progress is not None:
                    progress("running", loop.time() - started, eta)
                await asyncio.sleep(min(self._poll_wait(eta), self.max_poll_interval))
                self.polls += 1
                env = open_envelope(await self._fetch(name, function, verify), function)
                if env["s"] == "pending":
                    eta = float(env.get("eta", 0.0))
                    continue
                if env["s"] != "ok":
                    raise ProtocolError(f"unexpected result answer {env['s']!r}", function)
                if progress is not None:
                    progress("done", loop.time() - started, 0.0)
                return result(env)
        except asyncio.CancelledError:
            self._cancel_on_server(name)
            raise

    def _poll_wait(self, eta: float) -> float:
        """Seconds to wait before polling a result due in ``eta``: the server holds a poll
        that the result is due within (polls.py) and answers it at completion, so the poll
        goes out once the estimate falls within most of its lifetime.  Waiting the whole
        estimate instead added up to the estimate's error to every call: a task platform's
        executor, learning one estimate over all its tasks, answered a 0.13 s call in 1.3 s
        (an estimate learnt from queued calls)."""
        return max(0.0, eta - POLL_HOLD_SHARE * self.lifetime_ms / 1000)

    def _cancel_once_answered(
        self,
        ask: Callable[[], Awaitable[DataView]],
        opened: Callable[[DataView], dict[str, Any]],
        function: str,
    ) -> None:
        """The caller was cancelled before the server's first answer, so before it knew the
        thunk to cancel: in the background, ask for that answer again (the server answers a
        repeated call with the answer of the first, never runs it twice) and, if it is a
        thunk, cancel its job.  Bounded by one Interest lifetime and the cancel's."""
        self.counters["cancelled"] += 1
        if self.ep.closed:
            return

        async def follow() -> None:
            with contextlib.suppress(IcnError, TimeoutError):  # (RmiError is an IcnError)
                env = opened(await ask())
                if env.get("s") == "thunk":
                    self._cancel_on_server(self._name_field(env, function), counted=True)

        task = asyncio.get_running_loop().create_task(follow())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _cancel_clone(self, prefix: bytes, replica: str, key: bytes) -> None:
        """Replica ``replica`` took this call (a clone) and another answered: stop it there,
        without waiting for its answer."""
        self.counters["clones_cancelled"] += 1
        if self.ep.closed:
            return
        name = prefix + replica_component(replica) + CANCEL + key

        async def send() -> None:
            with contextlib.suppress(IcnError, TimeoutError):
                await self.ep.express(
                    name, lifetime_ms=self.lifetime_ms, must_be_fresh=True, retries=1
                )

        task = asyncio.get_running_loop().create_task(send())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _cancel_on_server(self, thunk: bytes, *, counted: bool = False) -> None:
        """Tell the server to stop the call whose result is ``thunk`` (the caller's task was
        cancelled), without waiting for its answer."""
        if not counted:
            self.counters["cancelled"] += 1
        if self.ep.closed:
            return

        async def send() -> None:
            with contextlib.suppress(IcnError, TimeoutError):
                await self.ep.express(
                    thunk + CANCEL, lifetime_ms=self.lifetime_ms, must_be_fresh=True, retries=1
                )

        task = asyncio.get_running_loop().create_task(send())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _fetch(self, name: bytes, function: str, verify: Verifier | None = None) -> bytes:
        try:
            # a large result is signed once, by a manifest of its segments' digests
            return await fetch_signed(
                self.ep,
                name,
                verify or self._answer_verify,
                lifetime_ms=self.lifetime_ms,
                retries=self.retries,
                must_be_fresh=True,
                window=16,
            )
        except (InterestNack, InterestTimeout) as exc:
            raise self._unavailable(exc, name, function) from None

    def _unavailable(self, exc: Exception, name: bytes, function: str) -> RmiError:
        if isinstance(exc, InterestNack) and exc.reason_name == "Congestion":
            # every server of the prefix that the network tried has all its job slots taken
            self.counters["overloaded"] += 1
            return Overloaded(f"every server of {to_uri(name)} is busy; retry later", function)
        if isinstance(exc, InterestNack) and exc.reason_name == "NoRoute":
            why = f"no route to {to_uri(name)}: is a server running there (`icn serve`)?"
        else:
            why = f"no answer for {to_uri(name)} ({exc}); the server may have stopped"
        return ServerUnavailable(why, function)

    @staticmethod
    def _name_field(env: dict[str, Any], function: str) -> bytes:
        name = env.get("name")
        if not isinstance(name, bytes):
            raise ProtocolError("answer without a result name", function)
        try:
            component_ends(name)
        except Exception:
            raise ProtocolError("answer with a malformed result name", function) from None
        return name
