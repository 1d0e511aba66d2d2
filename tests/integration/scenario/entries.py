"""Service entries for the scenario tests (``entry: tests.integration.scenario.entries:...``)."""

from __future__ import annotations

import asyncio
from typing import Any

from apps.scenario.entry import ServiceContext
from icn.wire.encode import DataTemplate
from icn.wire.name import from_uri
from icn.wire.packet import InterestView


async def counting_producer(ctx: ServiceContext) -> None:
    """Answer Interests under ``args.prefix`` and report how many as the metric ``served``."""
    template = DataTemplate(freshness=10_000)
    served = 0

    def answer(iv: InterestView, reply: Any) -> None:
        nonlocal served
        served += 1
        reply(template.build(iv.name, b"x" * 100))

    ep = await ctx.endpoint()
    await ep.serve(from_uri(str(ctx.args["prefix"])), answer)
    ctx.ready()
    while not ep.closed:
        ctx.metric("served", served)
        await asyncio.sleep(0.2)


async def failing(ctx: ServiceContext) -> None:
    """Get ready, report a metric, then fail."""
    ctx.ready()
    ctx.metric("before_failing", 1)
    await asyncio.sleep(0.5)
    raise RuntimeError("boom")
