"""Built-in services and workloads for scenario files (``entry: apps.workloads:producer``).

- ``producer``: serves every name under ``prefix`` with ``size`` bytes of content.
- ``consumer``: requests new names under ``prefix`` at ``rate`` per second (at most ``window``
  outstanding), each with ``lifetime`` and ``retries``, and records latency or the error.

They are also the models for user-written entries: see :mod:`apps.scenario.entry`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from apps.scenario.entry import ServiceContext, WorkloadContext
from apps.scenario.units import parse_duration
from icn.encode import DataTemplate
from icn.errors import IcnError, InterestNack, InterestTimeout
from icn.name import from_uri, generic
from icn.packet import InterestView


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
    template = DataTemplate(freshness=freshness_ms)
    payload = bytes(size)
    served = 0

    def answer(iv: InterestView, reply: Any) -> None:
        nonlocal served
        served += 1
        reply(template.build(iv.name, payload))

    ep = await ctx.endpoint()
    await ep.register(from_uri(prefix), answer)
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
    slots = asyncio.Semaphore(window)
    tasks: set[asyncio.Task[None]] = set()

    async def one(n: int) -> None:
        name = prefix + generic(str(n))
        sent = time.time()
        try:
            dv = await ep.express(name, lifetime_ms=lifetime_ms, retries=retries)
            ctx.record(True, time.time() - sent, sent=sent, nbytes=len(dv.wire))
        except InterestTimeout:
            ctx.record(False, sent=sent, error="timeout")
        except InterestNack as exc:
            ctx.record(False, sent=sent, error=f"nack {exc.reason_name}")
        except IcnError as exc:
            ctx.record(False, sent=sent, error=type(exc).__name__)
        finally:
            slots.release()

    stop_sending = ctx.started + ctx.duration
    interval = 1.0 / rate if rate > 0 else 0.0
    n = 0
    next_at = time.monotonic()
    while time.time() < stop_sending and not ep.closed:
        await slots.acquire()
        seq = n % int(repeat) if repeat else n
        task = asyncio.ensure_future(one(seq))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        n += 1
        next_at += interval
        delay = next_at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            next_at = time.monotonic()  # behind schedule: do not burst to catch up
    if tasks:  # the last requests get their lifetime and retries (the launcher allows for it)
        await asyncio.wait(tasks, timeout=lifetime_ms / 1000 * (retries + 1) + 0.5)
    ctx.log(f"sent {n} requests")
