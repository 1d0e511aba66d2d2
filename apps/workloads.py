"""Built-in services and workloads for scenario files (``entry: apps.workloads:producer``).

- ``producer``: serves every name under ``prefix`` with ``size`` bytes of content.
- ``consumer``: requests new names under ``prefix`` at ``rate`` per second (at most ``window``
  outstanding), each with ``lifetime`` and ``retries``, and records latency or the error.

They are also the models for user-written entries: see :mod:`apps.scenario.entry`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from apps.scenario.entry import ServiceContext, WorkloadContext
from icn.errors import IcnError, InterestNack, InterestTimeout
from icn.units import parse_duration
from icn.wire.encode import DataTemplate
from icn.wire.name import from_uri, generic
from icn.wire.packet import InterestView


def _arg(args: dict[str, Any], key: str, default: Any, kind: type) -> Any:
    value = args.get(key, default)
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise SystemExit(f"args.{key}: expected a {kind.__name__}, got {value!r}") from None


async def producer(ctx: ServiceContext) -> None:
    """Answer Interests under ``args.prefix`` with ``args.size`` bytes (default 1024), fresh for
    ``args.freshness`` (default 10s)."""
    prefix = str(ctx.args.get("prefix", ""))
    size = _arg(ctx.args, "size", 1024, int)
    freshness_ms = int(parse_duration(ctx.args.get("freshness", "10s")) * 1000)
    payload = bytes(size)
    served = 0
    ep = await ctx.endpoint()
    # signed as the endpoint signs (with the process's certificate under a trust block)
    template = DataTemplate(freshness=freshness_ms, signer=ep.signer)

    def answer(iv: InterestView, reply: Any) -> None:
        nonlocal served
        served += 1
        reply(template.build(iv.name, payload))

    await ep.serve(from_uri(prefix), answer)
    ctx.ready()
    try:
        await ep.wait_closed()
    finally:
        ctx.log(f"served {served} Interests")


async def consumer(ctx: WorkloadContext) -> None:
    """Fetch ``prefix``/<n> for n = 0, 1, ... at ``rate``/s (default 100) until the duration ends.

    ``window`` (default 64) bounds the Interests outstanding; ``lifetime`` (default 1s) and
    ``retries`` (default 2) are per request.  Names are new each time, so every request
    travels to the producer unless ``repeat`` names how many distinct names to cycle through.
    """
    prefix = from_uri(str(ctx.args.get("prefix", "")))
    rate = _arg(ctx.args, "rate", 100.0, float)
    window = _arg(ctx.args, "window", 64, int)
    lifetime_ms = int(parse_duration(ctx.args.get("lifetime", "1s")) * 1000)
    retries = _arg(ctx.args, "retries", 2, int)
    repeat = ctx.args.get("repeat")
    ep = await ctx.endpoint()
    validator = await ctx.validator()  # (a trust block: every Data validated, else refused)

    async def one(n: int) -> None:
        name = prefix + generic(str(n))
        sent = time.time()
        # the retries are made here, not by express(retries=...), so that the record knows
        # how many there were and when the last one left (ndnSIM's AppDelayTracer: RetxCount,
        # LastDelay beside FullDelay); as express's own: a new Nonce each, after the lifetime
        # ends, a Nack final
        retx = 0
        while True:
            last = time.time()
            try:
                dv = await ep.express(name, lifetime_ms=lifetime_ms, validator=validator)
            except InterestTimeout:
                if retx < retries:
                    retx += 1
                    continue
                ctx.record(False, sent=sent, error="timeout", retx=retx)
            except InterestNack as exc:
                ctx.record(False, sent=sent, error=f"nack {exc.reason_name}", retx=retx)
            except IcnError as exc:
                ctx.record(False, sent=sent, error=type(exc).__name__, retx=retx)
            else:
                done = time.time()
                ctx.record(
                    True,
                    done - sent,
                    sent=sent,
                    nbytes=len(dv.wire),
                    retx=retx,
                    last_delay=done - last,
                )
            return

    n = await run_paced(
        ctx,
        rate,
        window,
        lambda n: one(n % int(repeat) if repeat else n),
        tail=lifetime_ms / 1000 * (retries + 1) + 0.5,
        stop=lambda: ep.closed,
    )
    if validator is not None:  # what the trust block's validation did, for the report
        ctx.metric("data_validated", validator.counters["trust.ok"])
        ctx.metric("data_refused", ep.counters["data_refused"])
        for key, value in sorted(validator.counters.items()):  # why: refused_schema...
            if key.startswith("trust.refused_"):
                ctx.metric("data_" + key.removeprefix("trust."), value)
    ctx.log(f"sent {n} requests")


async def run_paced(
    ctx: WorkloadContext,
    rate: float,
    window: int,
    start: Callable[[int], Awaitable[None]],
    *,
    tail: float,
    count: int | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> int:
    """Start ``start(n)`` for n = 0, 1, ... at ``rate`` per second, at most ``window`` at once,
    until the duration ends, ``count`` were started or ``stop()``; then give those in flight
    ``tail`` seconds.  Returns how many were started.  Behind schedule it does not burst to
    catch up."""
    slots = asyncio.Semaphore(window)
    tasks: set[asyncio.Future[None]] = set()

    async def bounded(n: int) -> None:
        try:
            await start(n)
        finally:
            slots.release()

    interval = 1.0 / rate if rate > 0 else 0.0
    n = 0
    next_at = time.monotonic()
    while ctx.remaining > 0 and (count is None or n < count) and not stop():
        await slots.acquire()
        task = asyncio.ensure_future(bounded(n))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        n += 1
        next_at += interval
        delay = next_at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            next_at = time.monotonic()
    if tasks:  # the last ones get their time (the launcher allows for it)
        await asyncio.wait(tasks, timeout=tail)
    return n
