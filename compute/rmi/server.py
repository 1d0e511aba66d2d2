"""The RICE server: serves a module's functions under a prefix (docs/design.md section 6).

For each Trigger Interest ``/svc/<fn>/<RNP>``: pull the caller's signed credential by a
Reflexive Interest, authorize it, pull the arguments (segmented, bounded), start the job, and
answer the Trigger Interest with the result when it is ready within a short budget, else with a
thunk (an unguessable result name and a completion estimate).  Result polls that come early get
a new estimate (or are held when the result is due within their lifetime), never silence.

A server with ``max_jobs`` calls running answers a new call (a Trigger Interest, or a call in a
session) with a Nack of reason Congestion, before any work: the forwarders then try another
replica of the prefix at once and, under the adaptive strategy, send the next calls elsewhere
for a while (docs/guides/strategies.md, "Replicas").  A caller with no replica left gets Overloaded.

Replicas: servers of one prefix on several nodes.  A server given a ``replica`` id names what
only it holds under ``<prefix>/_r/<replica>``, which it registers and the network routes to it
alone: its thunks (polls and cancels of a call must reach the server running it), its memo
names (a pure call's answer; the memo is also served under its usual name, for caches), and
``_cancel/<RNP>``, which stops the call of that RNP: a clone that lost the race (its caller
got another replica's answer).  It adds its id to the Reflexive Interest for the credential
and to its answers, so a caller knows which replicas took a call and which one answered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compute.rmi.credential import Credential, check_credential, check_payload
from compute.rmi.errors import (
    BadArguments,
    NoSuchFunction,
    Overloaded,
    ProtocolError,
    RemoteError,
    ResultLost,
    RmiError,
    SessionUnknown,
    Unauthorized,
)
from compute.rmi.functions import FunctionSpec
from compute.rmi.jobs import Job, JobRunner
from compute.rmi.local import MIN_SHARED, LocalFiles, LocalSlot
from compute.rmi.policy import Caller, CertificatePolicy, anyone
from compute.rmi.polls import MAX_HELD_POLLS, HeldPoll, PollHolding
from compute.rmi.session import (
    DEFAULT_LIFETIME,
    DEFAULT_MAX_SESSIONS,
    LOCAL_ANSWER_MAX,
    MAX_WAITING_REPEATS,
    SESSION,
    ServerSession,
    SessionCall,
    SessionCheck,
    SessionTable,
    derive_session_secret,
    read_session_params,
    session_call_aad,
    session_offer,
)
from compute.rmi.stats import CallStats
from compute.rmi.store import BoundedStore
from compute.rmi.wire import (
    ARGS,
    CANCEL,
    HELLO,
    IDEM,
    KEY_INFO,
    MEMO,
    REPLICA,
    THUNK,
    call_digest,
    component_text,
    component_value,
    envelope,
    error_envelope,
    memo_name,
    replica_component,
    split_service_name,
    thunk_name,
    unpack_args,
    with_fields,
)
from icn.dataplane.endpoint import Endpoint
from icn.dataplane.handlers import Reply
from icn.dataplane.publish import SegmentedObject, signed_once
from icn.dataplane.segments import fetch_segments
from icn.errors import (
    ConfigError,
    DecodeError,
    IcnError,
    InterestNack,
    InterestTimeout,
    SecurityError,
    ValidationError,
)
from icn.security.certs import Certificate, CertSigner
from icn.security.keys import Identity
from icn.security.secretbox import CallKey, EphemeralKey, derive_key
from icn.security.signed_interest import SignedInterest, read_signed_interest
from icn.security.trust import SignedPacket, Validator
from icn.wire import tlv_types as T
from icn.wire.encode import Nacked, Uncached, data_parts, make_data
from icn.wire.name import NameLike, as_name, generic, to_uri
from icn.wire.packet import InterestView
from icn.wire.reflexive import LIFETIME_EXTENSION
from icn.wire.serialize import pack
from icn.wire.signer import Signer
from icn.wire.tlv import Buffer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerConfig:
    """Limits and timing of a server; the defaults suit calls over a few forwarder hops."""

    inline_budget: float = 0.05  # seconds a call may take and still be answered inline
    inline_max: int = 7000  # bytes of result that ride in the Trigger Interest's Data
    max_jobs: int = 64  # calls in progress before new ones are Nacked (Congestion)
    max_arg_bytes: int = 64 << 20
    result_ttl: float = 120.0  # seconds a finished result waits to be fetched
    ri_lifetime_ms: int = 1000
    ri_retries: int = 2
    args_window: int = 32
    memo_entries: int = 1024
    memo_max_bytes: int = 256 << 20
    results_max_bytes: int = 256 << 20  # finished results waiting to be fetched
    max_calls_tracked: int = 100_000  # exchanges remembered for retransmitted Trigger Interests
    memo_freshness_ms: int = 3_600_000
    result_freshness_ms: int = 10_000
    margin: float = 0.1  # seconds kept between answering and the Trigger Interest expiring
    key_rotation: float = 60.0  # seconds one X25519 key serves private calls
    max_held_polls: int = MAX_HELD_POLLS  # result polls waiting for calls due soon
    session_lifetime: float = DEFAULT_LIFETIME  # seconds a caller's session lasts
    max_sessions: int = DEFAULT_MAX_SESSIONS
    replica: str | None = None  # this server's id among the replicas of its prefix


class _Call:
    """Server-side state of one exchange, by RNP, kept so a retransmitted TI gets the answer
    (and a cancel by RNP finds its job, or stops it before it starts)."""

    __slots__ = ("answer", "cancelled", "job")

    def __init__(self) -> None:
        self.answer: bytes | None = None
        self.job: Job | None = None
        self.cancelled = False


def require_validator(functions: dict[str, FunctionSpec], validator: Validator | None) -> None:
    """ConfigError when a function is authorized by certificate and there is no validator to
    vouch for callers' certificates (every caller would be refused)."""
    needing = [n for n, f in functions.items() if isinstance(f.policy, CertificatePolicy)]
    if needing and validator is None:
        raise ConfigError(
            f"{', '.join(sorted(needing))}: authorized by certificate "
            f"({functions[needing[0]].policy!r}); give the server a validator "
            "(RmiServer(..., validator=Validator(schema, anchors)), or icn serve "
            "--trust-schema FILE --anchor CERT)"
        )


class RmiServer:
    """Serve ``functions`` under ``prefix`` through ``ep``: ``await start()``, ``close()``."""

    def __init__(
        self,
        ep: Endpoint,
        prefix: NameLike,
        functions: dict[str, FunctionSpec],
        *,
        config: ServerConfig | None = None,
        identity: Identity | None = None,
        certificate: Certificate | None = None,
        validator: Validator | None = None,
    ) -> None:
        self.ep = ep
        self.prefix = as_name(prefix)
        self.functions = functions
        self.config = config or ServerConfig()
        # vouches for callers' certificates (the one validator): needed by certificate policies
        self.validator = validator
        require_validator(functions, validator)
        replica = self.config.replica
        # where this server's own names live: under /svc/_r/<replica> when it is one of several
        self.here = self.prefix if replica is None else self.prefix + replica_component(replica)
        self._hello_tail = b"" if replica is None else generic(replica)
        self.identity = identity or Identity.generate()
        # answers signed by the key alone (callers that pin it), or naming the certificate of
        # it (callers that validate them against a trust schema fetch the chain by that name)
        self.ep.signer = (
            self.identity.signer()
            if certificate is None
            else CertSigner.of(self.identity, certificate)
        )
        self.jobs = JobRunner()
        self.counters: Counter[str] = Counter()
        self.stats = CallStats()  # per function, for /metrics (compute.rmi.metrics)
        cfg = self.config
        self._calls: BoundedStore[bytes, _Call] = BoundedStore(
            "calls", max_entries=cfg.max_calls_tracked, ttl=cfg.result_ttl, counters=self.counters
        )
        self._results: BoundedStore[str, SegmentedObject] = BoundedStore(
            "results",
            max_entries=cfg.max_calls_tracked,
            max_bytes=cfg.results_max_bytes,
            ttl=cfg.result_ttl,
            counters=self.counters,
        )
        self._memo: BoundedStore[str, SegmentedObject] = BoundedStore(
            "memo",
            max_entries=cfg.memo_entries,
            max_bytes=cfg.memo_max_bytes,
            lru=True,
            counters=self.counters,
        )
        self._polls: PollHolding[HeldPoll] = PollHolding(
            margin=cfg.margin, max_held=cfg.max_held_polls
        )
        self._poll_timer: asyncio.TimerHandle | None = None
        self._sessions = SessionTable(lifetime=cfg.session_lifetime, max_sessions=cfg.max_sessions)
        self._local = LocalFiles()  # callers' call files (sessions on this host)
        self._tasks: set[asyncio.Task[None]] = set()
        # calls accepted and not over (pulling their arguments, or their job running), at most
        # max_jobs: counted from acceptance, as calls that arrive together all start jobs later
        self.in_progress = 0
        self._eph: EphemeralKey | None = None
        self._eph_until = 0.0

    def _ephemeral(self, now: float) -> EphemeralKey:
        """The server's X25519 key for private calls, replaced every ``key_rotation`` seconds
        (generating one per call cost more than the rest of a small call's crypto; each call's
        key still differs, derived with the caller's own ephemeral key and its RNP as salt)."""
        if self._eph is None or now >= self._eph_until:
            self._eph = EphemeralKey.generate()
            self._eph_until = now + self.config.key_rotation
        return self._eph

    async def start(self) -> None:
        """Register the prefix (and a replica's own names) with the forwarder: from now on
        calls arrive."""
        await self.ep.serve(self.prefix, self._on_interest)
        if self.here != self.prefix:  # this replica's own names come here, wherever /svc goes
            await self.ep.serve(self.here, self._on_interest, flags=CAPTURE_ROUTE)

    async def close(self) -> None:
        """Stop the calls in progress and their jobs; the endpoint stays open (it is the
        caller's to close)."""
        for task in list(self._tasks):
            task.cancel()
        await self.jobs.close()
        if self._poll_timer is not None:
            self._poll_timer.cancel()
            self._poll_timer = None
        self._polls.clear()
        self._local.close()

    # ---- dispatch ----------------------------------------------------------------------------

    def _on_interest(self, iv: InterestView, reply: Reply) -> None:
        parts = split_service_name(self.prefix, iv.name)
        here = False
        if parts and parts[0] == REPLICA:  # /svc/_r/<replica>/...: this replica's own names
            parts, here = parts[2:], True
        if not parts:
            self.counters["drop_bad_name"] += 1
            return
        if parts[0] == CANCEL and len(parts) == 2:
            self._on_call_cancel(iv, reply, parts[1])
        elif parts[0] == THUNK and len(parts) == 3 and parts[2] == CANCEL:
            self._on_cancel(iv, reply, component_text(parts[1]) or "")
        elif parts[0] == THUNK and len(parts) >= 2:
            self._on_poll(iv, reply, component_text(parts[1]) or "")
        elif len(parts) >= 3 and parts[1] == MEMO:
            self._on_memo(iv, reply, component_text(parts[0]) or "", component_text(parts[2]), here)
        elif parts[0] == IDEM and len(parts) == 3 and parts[2][0] == 59:
            # /_idem/<fn>/<RNP>: the call of an idempotent function, which may be a clone
            self._on_trigger(iv, reply, component_text(parts[1]) or "", parts[2], idem=True)
        elif len(parts) == 2 and parts[1][0] == 59:  # /<fn>/<RNP>: a Trigger Interest
            self._on_trigger(iv, reply, component_text(parts[0]) or "", parts[1])
        elif len(parts) == 4 and parts[1] == SESSION:  # /<fn>/_s/<sid>/<digest>: in a session
            self._on_session_call(
                iv, reply, component_text(parts[0]) or "", component_value(parts[2])
            )
        else:
            self.counters["drop_bad_name"] += 1

    def _answer(
        self, iv: InterestView, reply: Reply, content: bytes, signer: Signer | None = None
    ) -> None:
        if signer is None:
            reply(self.ep.make_data(iv.name, content))
        else:
            reply(make_data(iv.name, content, signer=signer))

    # ---- the call ----------------------------------------------------------------------------

    def _on_trigger(
        self, iv: InterestView, reply: Reply, function: str, key: bytes, *, idem: bool = False
    ) -> None:
        now = asyncio.get_running_loop().time()
        call = self._calls.get(key, now)
        if call is not None:  # a retransmitted Trigger Interest
            self.counters["trigger_retransmitted"] += 1
            if call.answer is not None:
                self._answer(iv, reply, call.answer)
            return
        if self._busy(iv, reply):
            return
        call = _Call()
        self._calls.put(key, call, now)
        self.counters["calls"] += 1
        self.in_progress += 1
        task = asyncio.get_running_loop().create_task(
            self._serve_call(iv, reply, function, key, idem, call)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve_call(
        self, iv: InterestView, reply: Reply, function: str, key: bytes, idem: bool, call: _Call
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + iv.lifetime / 1000.0
        try:
            content, deadline, session = await self._run_call(function, key, deadline, idem, call)
            fields: dict[str, Any] = {}
            if session is not None:  # the answer tells the caller its session,
                fields.update(session_offer(session, self._sessions.lifetime))
            if self.config.replica is not None:  # which replica answered,
                fields["rid"] = self.config.replica
            spec = self.functions.get(function)
            if spec is not None and spec.idempotent:  # and that its calls may be cloned
                fields["idem"] = True
            if fields:
                content = with_fields(content, fields)
        except RmiError as exc:
            self.counters[f"refused_{exc.kind}"] += 1
            content = error_envelope(exc)
        except (InterestTimeout, InterestNack) as exc:
            # the caller stopped answering its Reflexive Interests: nobody to answer
            self.counters["caller_gone"] += 1
            log.info("call %s: caller gone (%s)", to_uri(iv.name), exc)
            return
        except Exception:  # a bug here must not leave the caller waiting in silence
            self.counters["internal_error"] += 1
            log.exception("call %s failed inside the server", to_uri(iv.name))
            content = error_envelope(ProtocolError("the server failed handling the call", function))
        finally:
            self._end_when_done(call.job)
        call.answer = content  # kept for a retransmission of the Trigger Interest
        if loop.time() > deadline + self.config.margin:
            self.counters["answer_late"] += 1
        self._answer(iv, reply, content)

    def _busy(self, iv: InterestView, reply: Reply) -> bool:
        """Every job slot taken: Nack the call (Congestion), so the network tries another
        replica; a Data answer, even Overloaded, would end the Interest here."""
        if self.in_progress < self.config.max_jobs:
            return False
        self.counters["overloaded"] += 1
        reply(Nacked(iv.wire, T.NACK_CONGESTION))
        return True

    def _end_when_done(self, job: Job | None) -> None:
        """An accepted call is over when its job ends (now, if it has none or it is done)."""
        if job is None or job.done:
            self.in_progress -= 1
        else:
            job.callbacks.append(self._job_ended)

    def _job_ended(self, job: Job) -> None:
        self.in_progress -= 1

    def _spec(self, function: str) -> FunctionSpec:
        """The function called, if it is served and the server has room for a call."""
        spec = self.functions.get(function)
        if spec is None:
            raise NoSuchFunction(
                f"no function {function!r} here; served: {', '.join(sorted(self.functions))}",
                to_uri(self.prefix),
            )
        if len(self.jobs.running) >= self.config.max_jobs:
            raise Overloaded(f"{self.config.max_jobs} calls in progress; retry later", function)
        return spec

    async def _run_call(
        self, function: str, key: bytes, deadline: float, idem: bool, call: _Call
    ) -> tuple[bytes, float, ServerSession | None]:
        cfg = self.config
        loop = asyncio.get_running_loop()
        spec = self._spec(function)
        if idem and not spec.idempotent:  # it may have been cloned: it must not run at all
            raise NoSuchFunction(
                f"{function} is not idempotent, so it is not served under "
                f"{to_uri(self.prefix)}/_idem (where calls may be cloned); call "
                f"{to_uri(self.prefix)}/{function}",
                function,
            )
        eph = self._ephemeral(loop.time())
        extend = LIFETIME_EXTENSION * cfg.ri_lifetime_ms / 1000.0
        hello = await self.ep.express(
            key + HELLO + generic(eph.public_bytes) + self._hello_tail,
            lifetime_ms=cfg.ri_lifetime_ms,
            retries=cfg.ri_retries,
        )
        deadline = max(deadline, loop.time() + extend - 0.05)
        cred = check_credential(hello, function=function, rnp_key=key)
        caller = await self._vouched(cred)
        if not spec.policy(caller):
            who = (
                caller.certificate.uri() if caller.certificate else f"key {caller.fingerprint[:16]}"
            )
            raise Unauthorized(f"{who} is not authorized to call it", function)
        self.counters["authorized"] += 1
        if cred.size > cfg.max_arg_bytes or cred.payload_size > cfg.max_arg_bytes + 64:
            raise BadArguments(
                f"arguments of {cred.size} bytes exceed this server's limit of "
                f"{cfg.max_arg_bytes} bytes",
                function,
            )
        payload = cred.inline
        if payload is None:
            try:
                payload = await fetch_segments(
                    self.ep,
                    key + ARGS,
                    window=cfg.args_window,
                    lifetime_ms=cfg.ri_lifetime_ms,
                    retries=cfg.ri_retries,
                    must_be_fresh=False,
                    max_size=cred.payload_size,
                )
            except DecodeError as exc:  # not segments, or more bytes than the credential said
                raise BadArguments(f"unreadable arguments: {exc}", function) from None
            deadline = max(deadline, loop.time() + extend - 0.05)
        check_payload(cred, payload)
        call_key = None
        if cred.private:
            try:
                call_key = derive_key(eph, cred.ephemeral, salt=key, info=KEY_INFO)
            except SecurityError as exc:
                raise BadArguments(f"unusable call key: {exc}", function) from None
        blob = self._open_args(call_key, payload, key, function)
        args, kwargs = self._bind(spec, blob)
        session = None
        if cred.session:
            try:
                secret = derive_session_secret(eph, cred.ephemeral, key)
            except SecurityError:
                self.counters["session_refused"] += 1  # an unusable key: no session, the call runs
            else:
                session = self._sessions.create(caller, secret, loop.time())
                self.counters["sessions"] += 1
        inline_max = cfg.inline_max
        if cred.answer_limit is not None:  # the caller's path carries answers this large
            inline_max = max(inline_max, min(cred.answer_limit, LOCAL_ANSWER_MAX))
        answer: asyncio.Future[bytes] = loop.create_future()

        def give(content: bytes) -> None:
            if not answer.done():
                answer.set_result(content)

        if call.cancelled:  # a clone cancelled while it pulled its arguments
            raise RemoteError("Cancelled", "the caller has another replica's answer", spec.name)
        call.job = self._begin_job(
            spec, args, kwargs, blob, call_key, key, deadline, self.ep.signer, inline_max, give
        )
        return await answer, deadline, session

    def _begin_job(
        self,
        spec: FunctionSpec,
        args: list[Any],
        kwargs: dict[str, Any],
        blob: bytes,
        call_key: CallKey | None,
        key: bytes,
        deadline: float,
        signer: Signer | None,
        inline_max: int,
        answer: Callable[[bytes], None],
    ) -> Job | None:
        """Start an authorized call (its job is returned; None when the memo answered);
        ``answer`` gets, once, the result if it is ready within
        the inline budget and fits ``inline_max``, else a thunk (its result signed by
        ``signer``, sealed under ``call_key`` with ``key`` as associated data for a private
        call).  No task of its own: the job's task calls back (a small call's answer leaves
        in the turn of the loop the function returns in)."""
        cfg = self.config
        loop = asyncio.get_running_loop()
        function = spec.name
        # In-network memoization makes a result public to whoever knows the arguments, so
        # only pure functions that anyone may call, and only calls that are not private.
        digest = None
        if spec.pure and call_key is None and spec.policy is anyone:
            digest = call_digest(function, blob)
            if self._memo.get(digest, loop.time()) is not None:
                self.counters["memo_hit"] += 1
                answer(envelope("memo", name=memo_name(self.here, function, digest)))
                return None
        job = self.jobs.create(spec)  # run below, once its callbacks are in place
        job.signer = signer
        self.counters["started"] += 1
        answered = False

        def finished(j: Job) -> None:
            nonlocal answered
            content = self._result_content(j, call_key, key, digest)
            if not answered:
                failed = isinstance(j.outcome, RemoteError)
                if failed or (digest is None and len(content) <= inline_max):
                    # answered now, in the Trigger's (or the session call's) Data: nothing
                    # to keep for a poll that will never come
                    answered = True
                    self.counters["inline"] += not failed
                    answer(content)
                    return
            self._keep_result(j, content, signer)

        job.callbacks.append(finished)

        def give() -> None:  # at completion or at the end of the budget, whichever is first
            nonlocal answered
            if answered:
                return
            answered = True
            try:
                content = self._trigger_answer(job, function, digest)
            except Exception:  # a bug here must not leave the caller waiting in silence
                self.counters["internal_error"] += 1
                log.exception("call of %s failed inside the server", function)
                content = error_envelope(
                    ProtocolError("the server failed handling the call", function)
                )
            answer(content)

        budget = min(cfg.inline_budget, deadline - cfg.margin - loop.time())
        if budget <= 0:
            give()
            self.jobs.run(job, args, kwargs)
            return job
        job.callbacks.append(lambda j: give())
        # a coroutine runs here until it first waits: one that returns without waiting has
        # been answered when this returns, with no task made and no timer armed
        self.jobs.run(job, args, kwargs)
        if not answered:
            timer = loop.call_later(budget, give)
            job.callbacks.append(lambda j: timer.cancel())
        return job

    async def _vouched(self, cred: Credential) -> Caller:
        """The caller, with its certificate when the validator accepts its chain (fetching
        what it lacks); a certificate it refuses is counted and left out, so certificate
        policies refuse the call, before any work."""
        cert = cred.certificate
        if cert is None or self.validator is None:
            return cred.caller
        try:
            # the chain above the certificate, then the certificate's own period (validating it
            # as a signed packet checks its issuer's)
            await self.validator.validate(SignedPacket.of_certificate(cert))
            if not cert.valid_at(time.time()):
                raise ValidationError(f"{cert.uri()} is outside its ValidityPeriod")
        except ValidationError:
            self.counters["caller_certificate_refused"] += 1
            return cred.caller
        self.counters["caller_certificate_ok"] += 1
        rules = frozenset(self.validator.schema.rules_of(cert.name))
        return Caller(cred.caller.public_key, certificate=cert, rules=rules)

    def _open_args(
        self, call_key: CallKey | None, payload: bytes, key: bytes, function: str
    ) -> bytes:
        if call_key is None:
            return payload
        try:
            return call_key.open(payload, aad=key)
        except SecurityError as exc:
            raise BadArguments(f"cannot decrypt the arguments: {exc}", function) from None

    def _bind(self, spec: FunctionSpec, blob: Buffer) -> tuple[list[Any], dict[str, Any]]:
        try:
            args, kwargs = unpack_args(blob)
            if kwargs or len(args) != spec.arity:  # (the common case needs no binding)
                spec.signature.bind(*args, **kwargs)
        except (DecodeError, TypeError) as exc:
            raise BadArguments(str(exc), spec.name) from None
        return args, kwargs

    def _trigger_answer(self, job: Job, function: str, digest: str | None) -> bytes:
        """The answer for a job not answered at its completion: its error, its memo name, or
        a thunk (running past the budget, or a result too large for the answer)."""
        if job.done:
            if isinstance(job.outcome, RemoteError):
                return error_envelope(job.outcome)
            if digest is not None:
                return envelope("memo", name=memo_name(self.here, function, digest))
            # (a result that fits was answered at completion; a larger one is fetched)
        self.counters["thunked"] += 1
        name = thunk_name(self.here, job.token)
        eta = job.eta(asyncio.get_running_loop().time())
        return envelope("thunk", name=name, eta=eta, pure=digest is not None)

    def _result_content(
        self, job: Job, call_key: CallKey | None, key: bytes, digest: str | None
    ) -> bytes:
        """A finished job's answer: its result (sealed for a private call; remembered under
        ``digest`` for a pure one) or its error."""
        outcome = job.outcome
        took = asyncio.get_running_loop().time() - job.started
        self.stats.finished(job.spec.name, not isinstance(outcome, RemoteError), took)
        if isinstance(outcome, RemoteError):
            self.counters["failed"] += 1
            content = error_envelope(outcome)
        else:
            self.counters["completed"] += 1
            try:
                result = pack(outcome)
            except IcnError as exc:
                content = error_envelope(
                    RemoteError(type(exc).__name__, f"cannot send the result: {exc}", job.spec.name)
                )
            else:
                if call_key is not None:
                    content = envelope("ok", r=call_key.seal(result, aad=key), enc=True)
                else:
                    content = envelope("ok", r=result)
                if digest is not None:
                    self._remember(job.spec.name, digest, content)
        return content

    def _keep_result(self, job: Job, content: bytes, signer: Signer | None) -> None:
        """Keep a finished job's answer for its thunk's polls (and answer those held)."""
        cfg = self.config
        obj = signed_once(
            thunk_name(self.here, job.token),
            content,
            freshness=cfg.result_freshness_ms,
            signer=signer or self.ep.signer,
        )
        now = asyncio.get_running_loop().time()
        self._results.put(job.token, obj, now, len(content))
        self._answer_polls(job.token, now)

    def _remember(self, function: str, digest: str, content: bytes) -> None:
        """Keep a pure call's answer under its memo name (and this replica's, if it is one)."""
        now = asyncio.get_running_loop().time()
        names = {digest: self.prefix}
        if self.here != self.prefix:
            names[_HERE + digest] = self.here
        for key, prefix in names.items():
            obj = signed_once(
                memo_name(prefix, function, digest),
                content,
                freshness=self.config.memo_freshness_ms,
                signer=self.ep.signer,
            )
            self._memo.put(key, obj, now, len(content))

    # ---- calls in a session ------------------------------------------------------------------

    def _on_session_call(self, iv: InterestView, reply: Reply, function: str, sid: bytes) -> None:
        """A call in a session: checked (HMAC, time, sequence) before anything else; a replay
        never runs the function (a retransmission gets the answer of the call it repeats)."""
        loop = asyncio.get_running_loop()
        if self._busy(iv, reply):  # before any check: the sequence number stays unspent
            return
        try:
            si = read_signed_interest(iv, check_digest=False)  # the session's HMAC covers it
        except DecodeError:
            self.counters["drop_bad_session_call"] += 1
            return
        verdict, session = self._sessions.check(sid, si, loop.time(), time.time_ns() // 1_000_000)
        seq = si.fields.seq
        if verdict == SessionCheck.OK and session is not None and seq is not None:
            self.counters["session_calls"] += 1
            call = SessionCall()
            self._sessions.remember(session, seq, call)
            self.in_progress += 1
            self._end_when_done(self._serve_session_call(iv, reply, function, session, si, call))
            return
        self.counters[f"session_{verdict}"] += 1
        if verdict == SessionCheck.REPLAY and session is not None and seq is not None:
            earlier = session.calls.get(seq)
            if earlier is not None:  # the caller's retransmission, or a replay: not run again
                if earlier.answer is not None:
                    reply(_single_use(iv.name, earlier.answer, session))
                elif len(earlier.waiting) < MAX_WAITING_REPEATS:
                    earlier.waiting.append((iv.name, reply))
                return
        error: RmiError
        if verdict == SessionCheck.UNKNOWN:
            # An application-level Nack (ContentType NACK): the forwarders' asf takes no RTT
            # sample from it, since this answer costs no work here and says nothing of how long
            # a call takes (a probe of a slowed replica measured it at a few ms and drew calls
            # back to that replica; forwarder/fw/asf.py, _app_nack)
            error = SessionUnknown("no such session here (expired, or the server restarted)")
            content, nack = error_envelope(error), T.CONTENT_NACK
            if session is None:
                reply(make_data(iv.name, content, signer=self.ep.signer, content_type=nack))
            else:
                reply(_single_use(iv.name, content, session, content_type=nack))
            return
        error = Unauthorized(f"session call refused ({verdict})", function)
        if session is None:  # no key to sign with: the caller falls back on it, unverified
            self._answer(iv, reply, error_envelope(error))
        else:
            reply(_single_use(iv.name, error_envelope(error), session))

    def _serve_session_call(
        self,
        iv: InterestView,
        reply: Reply,
        function: str,
        session: ServerSession,
        si: SignedInterest,
        call: SessionCall,
    ) -> Job | None:
        """Authorize and start a checked session call (its job returned, if one started); its
        answer leaves when the job gives it (:meth:`_begin_job`), signed by the session."""
        seq = si.fields.seq or 0
        slot: LocalSlot | None = None  # the call's slot in its caller's file, on one host

        def answer(content: bytes) -> None:
            if slot is not None and len(content) > MIN_SHARED and slot.put_answer(content, seq):
                self.counters["local_answers"] += 1
                content = envelope("local", n=len(content))
            self._sessions.answered(session, seq, call, content)
            reply(_single_use(iv.name, content, session))
            for name, again in call.waiting:
                again(_single_use(name, content, session))
            call.waiting.clear()

        loop = asyncio.get_running_loop()
        deadline = loop.time() + iv.lifetime / 1000.0
        try:
            spec = self._spec(function)
            if not spec.policy(session.caller):
                raise Unauthorized(
                    f"key {session.caller.fingerprint[:16]} is not authorized to call it", function
                )
            self.counters["authorized"] += 1
            payload, private, limit, local = read_session_params(si.params, function)
            aad = session_call_aad(si.name_part, seq)
            box = session.box if private else None
            if local is not None and not private:
                slot = self._local.slot(local, session.signer, function, session.local)
            if slot is not None and slot.nargs:
                view = slot.args()  # read where they lie: the one copy is into the arguments
                try:
                    args, kwargs = self._bind(spec, view)
                    # (a pure function's memo is named by the arguments' digest)
                    blob = bytes(view) if spec.pure else b""
                finally:
                    view.release()  # (bad arguments too: the mapping may be closed later)
            else:
                blob = self._open_args(box, payload, aad, function)
                args, kwargs = self._bind(spec, blob)
            return self._begin_job(
                spec, args, kwargs, blob, box, aad, deadline, session.signer, limit, answer
            )
        except RmiError as exc:
            self.counters[f"refused_{exc.kind}"] += 1
            content = error_envelope(exc)
        except Exception:  # a bug here must not leave the caller waiting in silence
            self.counters["internal_error"] += 1
            log.exception("session call %s failed inside the server", to_uri(iv.name))
            content = error_envelope(ProtocolError("the server failed handling the call", function))
        answer(content)
        return None

    def _on_call_cancel(self, iv: InterestView, reply: Reply, key: bytes) -> None:
        """``_r/<replica>/_cancel/<RNP>``: the caller of that exchange has its answer from
        another replica (this one ran a clone, or a probe's copy): stop its job, or keep it from
        starting.  The RNP is the capability, as the thunk's token is for a thunk's cancel."""
        call = self._calls.get(key, asyncio.get_running_loop().time())
        if call is None or call.answer is not None:
            self._answer(iv, reply, envelope("gone"))
            return
        self.counters["cancelled_clone"] += 1
        job = call.job
        if job is None:
            call.cancelled = True  # still pulling the credential or arguments
        elif self.jobs.cancel(job.token) is not None:
            self.counters["cancelled"] += 1
            if job.spec.run != "loop":
                self.counters["abandoned"] += 1
        self._answer(iv, reply, envelope("cancelled"))

    def _on_cancel(self, iv: InterestView, reply: Reply, token: str) -> None:
        """The caller of ``token`` was cancelled: stop its job.  The token is the capability,
        as for fetching the result: only the caller (and whoever it told) knows it."""
        job = self.jobs.cancel(token)
        if job is None:
            self._answer(iv, reply, envelope("gone"))
            return
        self.counters["cancelled"] += 1
        if job.spec.run != "loop":  # a thread or a process cannot be interrupted
            self.counters["abandoned"] += 1
        self._answer(iv, reply, envelope("cancelled"), job.signer)

    # ---- result fetch ------------------------------------------------------------------------

    def _on_poll(self, iv: InterestView, reply: Reply, token: str) -> None:
        self.counters["polls"] += 1
        now = asyncio.get_running_loop().time()
        obj = self._results.get(token, now)
        if obj is None:
            job = self.jobs.running.get(token)
            if job is None:
                lost = ResultLost(
                    "no such call here (the server restarted, or the result "
                    "expired before it was fetched)"
                )
                self._answer(iv, reply, error_envelope(lost))
                return
            eta = job.eta(now)
            if self._polls.poll(token, HeldPoll(iv.name, reply, iv), eta, iv.lifetime, now):
                # due within this Interest's lifetime: answered at completion or in time
                self.counters["polls_held"] += 1
                self._arm_poll_timer()
            else:
                self._answer(iv, reply, envelope("pending", eta=eta), job.signer)
            return
        wire = obj.answer_parts(iv)
        if wire is not None:
            reply(wire)

    def _answer_polls(self, token: str, now: float) -> None:
        """The call ``token`` finished and its result is stored: answer the polls held."""
        polls = self._polls.finished(token, now)
        obj = self._results.get(token, now) if polls else None
        if obj is not None:
            for poll in polls:
                wire = obj.answer_parts(poll.iv)
                if wire is not None:
                    poll.reply(wire)

    def _arm_poll_timer(self) -> None:
        """One timer for every held poll, at the first one's answer time."""
        due = self._polls.next_due()
        timer = self._poll_timer
        if timer is not None:
            if due is not None and timer.when() <= due:
                return
            timer.cancel()
            self._poll_timer = None
        if due is not None:
            self._poll_timer = asyncio.get_running_loop().call_at(due, self._polls_due)

    def _polls_due(self) -> None:
        self._poll_timer = None
        now = asyncio.get_running_loop().time()
        for token, poll in self._polls.due(now):
            job = self.jobs.running.get(token)
            if job is not None:  # (a finished one's polls were answered with its result)
                self._answer(poll.iv, poll.reply, envelope("pending", eta=job.eta(now)), job.signer)
        self._arm_poll_timer()

    def _on_memo(
        self, iv: InterestView, reply: Reply, function: str, digest: str | None, here: bool
    ) -> None:
        key = (_HERE if here else "") + (digest or "")
        obj = self._memo.get(key, asyncio.get_running_loop().time())
        if obj is None:
            self.counters["memo_miss"] += 1
            self._answer(iv, reply, envelope("miss"))
            return
        self.counters["memo_served"] += 1
        wire = obj.answer_parts(iv)
        if wire is not None:
            reply(wire)


_HERE = "@"  # memo store key prefix of the copy named under this replica's names
# NFD route flags CHILD_INHERIT | CAPTURE: /svc/_r/<replica> does not inherit the routes of /svc
# (another replica on the same forwarder)
CAPTURE_ROUTE = 1 | 2


def _single_use(
    name: bytes, content: bytes, session: ServerSession, content_type: int | None = None
) -> Uncached:
    """A session call's answer: signed by the session, and kept out of the caches on the way
    (its name, which holds the call's signature, is never asked again: a retransmission is
    signed anew and answered here)."""
    return Uncached(data_parts(name, content, signer=session.signer, content_type=content_type))
