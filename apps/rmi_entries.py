"""Scenario entries for named functions: ``apps.rmi_entries:server`` (a service) and
``apps.rmi_entries:caller`` (a workload).  See :mod:`apps.workloads` for the pattern."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from apps.demos import replica_functions
from apps.scenario.entry import ServiceContext, WorkloadContext
from apps.workloads import _arg, run_paced
from compute.rmi import Client, RmiError, RmiServer, ServerConfig, collect
from compute.rmi.client import split_function
from icn.units import parse_duration


async def server(ctx: ServiceContext) -> None:
    """Serve the ``@function`` functions of ``args.module`` under ``args.prefix`` (default
    /svc); ``args.max_jobs`` (default 64) bounds calls in progress, ``args.inline_budget``
    (default 50ms) is how long a call may run and still be answered inline.

    One of several replicas of the prefix: ``args.replica`` is its id, and its own names
    (``<prefix>/_r/<replica>``) must be announced too.  It reports the metrics ``calls`` (calls
    it ran: full exchanges and calls in sessions), ``overloaded`` (calls it Nacked, every job
    slot taken) and ``cancelled_clone`` (clones it stopped: another replica answered first)
    every ``args.metrics_every`` (default 0.5s).  The functions of
    :mod:`apps.demos.replica_functions` misbehave as told: ``args.slow_factor`` (times slower
    once a ``signal`` fault names this service), ``args.stall_every`` and ``args.stall_for``
    (every so many calls stall that long)."""
    module = str(ctx.args.get("module", "apps.demos.demo_functions"))
    functions = collect(module)
    prefix = str(ctx.args.get("prefix", "/svc"))
    replica = ctx.args.get("replica")
    config = ServerConfig(
        max_jobs=_arg(ctx.args, "max_jobs", 64, int),
        inline_budget=parse_duration(ctx.args.get("inline_budget", "50ms")),
        replica=None if replica is None else str(replica),
    )
    if module == replica_functions.__name__:
        misbehave(ctx)
    ep = await ctx.endpoint()
    trust = ctx.trust  # (a trust block: answers signed naming this service's certificate)
    rmi = RmiServer(
        ep,
        prefix,
        functions,
        config=config,
        identity=None if trust is None else trust.identity,
        certificate=None if trust is None else trust.cert,
        validator=await ctx.validator(),
    )
    await rmi.start()
    if ctx.metrics_registry is not None:  # a scenario's metrics: calls, durations, counters
        from compute.rmi.metrics import register_rmi_metrics

        register_rmi_metrics(rmi, ctx.metrics_registry)

    def report() -> None:
        c = rmi.counters
        ctx.metric("calls", c["calls"] + c["session_calls"])
        ctx.metric("overloaded", c["overloaded"])
        ctx.metric("cancelled_clone", c["cancelled_clone"])

    try:
        async with ctx.reporting(report):
            ctx.ready()
            await ep.wait_closed()
    finally:
        await rmi.close()
        ctx.log(f"counters {dict(rmi.counters)}")


def misbehave(ctx: ServiceContext) -> None:
    """Configure :mod:`apps.demos.replica_functions` for this replica from ``ctx.args``."""
    bad = replica_functions.MISBEHAVIOUR
    bad.slow_factor = _arg(ctx.args, "slow_factor", 1.0, float)
    bad.stall_every = _arg(ctx.args, "stall_every", 0, int)
    bad.stall_for = parse_duration(ctx.args.get("stall_for", "0s"))
    if bad.slow_factor < 1 or bad.stall_every < 0:
        raise SystemExit("args.slow_factor must be >= 1 and args.stall_every >= 0")

    def slow_down() -> None:
        bad.slowed = True
        ctx.log(f"slowed down {bad.slow_factor:g}x")

    ctx.on_signal(slow_down)


ANSWERED = "answered_or_typed_error"  # the invariant every call of a caller is checked for
NO_ANSWER_AFTER = 5.0  # seconds past the call's own timeout: the call is taken as unanswered


async def caller(ctx: WorkloadContext) -> None:
    """Call ``args.function`` with ``args.args`` (a list) and ``args.kwargs`` (a map) at
    ``args.rate`` calls/s (default 10), at most ``args.concurrency`` (default 16) at once,
    until the duration ends or ``args.count`` calls were made.  ``args.private`` encrypts;
    ``args.timeout`` (default 30s) bounds each call; ``args.lifetime`` (default 1s) is every
    Interest's lifetime.  ``args.vary`` names a keyword argument that gets each call's number
    (calls of a pure function then differ, and none is answered by a cache).  ``args.warmup``
    calls (default 0) are made first, one at a time and not recorded: the first call agrees
    the keys and learns what the function is (pure, idempotent), and calls made meanwhile wait
    for it.  Records each call's latency, or its error type.

    Each call is also a check of the invariant ``answered_or_typed_error``: it held when the
    call returned (equal to ``args.expect``, when given) or raised one of the typed errors of
    :mod:`compute.rmi.errors`; it is violated by a wrong result, any other exception, or no
    end at all (``NO_ANSWER_AFTER`` s past the timeout, or still running when the caller
    stops)."""
    function, positional, kwargs = call_arguments(ctx.args)
    rate = _arg(ctx.args, "rate", 10.0, float)
    concurrency = _arg(ctx.args, "concurrency", 16, int)
    count = ctx.args.get("count")
    if count is not None and (not isinstance(count, int) or count < 1):
        raise SystemExit(f"args.count: expected a whole number of calls >= 1, got {count!r}")
    private = bool(ctx.args.get("private", False))
    timeout = parse_duration(ctx.args.get("timeout", "30s"))
    lifetime_ms = int(parse_duration(ctx.args.get("lifetime", "1s")) * 1000)
    check_result = "expect" in ctx.args
    expected = ctx.args.get("expect")
    vary = ctx.args.get("vary")
    if vary is not None and (not isinstance(vary, str) or not vary.isidentifier()):
        raise SystemExit(f"args.vary: expected the name of a keyword argument, got {vary!r}")
    trust = ctx.trust  # (a trust block: answers validated, the credential carries the cert)
    client = Client(
        await ctx.endpoint(),
        lifetime_ms=lifetime_ms,
        timeout=timeout,
        identity=None if trust is None else trust.identity,
        certificate=None if trust is None else trust.cert,
        validator=await ctx.validator(),
    )
    pending: dict[int, float] = {}  # call number -> when it was sent
    for n in range(_arg(ctx.args, "warmup", 0, int)):
        named = kwargs if vary is None else {**kwargs, vary: -1 - n}
        try:
            await client.invoke(function, positional, named, private=private)
        except RmiError as exc:
            ctx.log(f"warm-up call {n}: {type(exc).__name__}: {exc}")

    async def one(n: int) -> None:
        sent = time.time()
        pending[n] = sent
        try:
            async with asyncio.timeout(timeout + NO_ANSWER_AFTER):
                named = kwargs if vary is None else {**kwargs, vary: n}
                result = await client.invoke(function, positional, named, private=private)
        except RmiError as exc:
            ctx.record(False, sent=sent, error=type(exc).__name__)
            ctx.check(ANSWERED, True, f"typed error {type(exc).__name__}")
        except TimeoutError:
            ctx.record(False, sent=sent, error="no answer")
            ctx.check(ANSWERED, False, "no answer", f"call {n}: no end {timeout:g} s + 5 s on")
        except Exception as exc:
            ctx.record(False, sent=sent, error=type(exc).__name__)
            ctx.check(ANSWERED, False, f"untyped error {type(exc).__name__}", f"call {n}: {exc}")
        else:
            if check_result and result != expected:
                ctx.record(False, time.time() - sent, sent=sent, error="wrong result")
                ctx.check(ANSWERED, False, "wrong result", f"call {n}: {result!r}")
            else:
                ctx.record(True, time.time() - sent, sent=sent)
                ctx.check(ANSWERED, True, "answered")
        finally:
            pending.pop(n, None)

    try:
        made = await run_paced(
            ctx,
            rate,
            concurrency,
            one,
            tail=timeout + NO_ANSWER_AFTER + 1.0,
            count=count,
        )
        ctx.log(f"made {made} calls; {client.polls} result polls")
        if client.validator is not None:  # answers signed by the server's certificate
            ctx.metric("answers_validated", client.validator.counters["trust.ok"])
            ctx.metric("answers_refused", client.ep.counters["data_refused"])
    finally:
        for n, sent in sorted(pending.items()):  # the caller stops with these unanswered
            ctx.record(False, sent=sent, error="no answer")
            ctx.check(ANSWERED, False, "no answer", f"call {n}: still running at the end")


def call_arguments(args: dict[str, Any]) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """``args.function``, ``args.args`` and ``args.kwargs`` checked: the message names the
    field and what to write (the process exits with it, and the launcher shows it)."""
    function = str(args.get("function", ""))
    try:
        split_function(function)
    except ValueError as exc:
        raise SystemExit(f"args.function: {exc}") from None
    positional = args.get("args", [])
    if not isinstance(positional, list):
        raise SystemExit(
            f"args.args: expected a list of arguments, e.g. [1, 2], got {positional!r}"
        )
    kwargs = args.get("kwargs", {})
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise SystemExit(f"args.kwargs: expected a map of names to values, got {kwargs!r}")
    return function, tuple(positional), kwargs
