"""Service entries for the scenario tests (``entry: tests.integration.scenario.entries:...``)."""

from __future__ import annotations

import asyncio
import time
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


async def forger(ctx: ServiceContext) -> None:
    """An attacker inside a run with a trust block: answers Interests under ``args.prefix``
    (registered on its own node, announced to nobody) with Data signed as ``args.mode`` says:
    ``own``, with its own certificate, which the run's CA issued for another namespace;
    ``stranger``, with a key of its own and a self-made certificate claiming the identity
    ``args.claim`` (a forged chain), which it serves too."""
    from icn.security import certs
    from icn.security.keys import Identity

    ep = await ctx.endpoint()  # (signs with this process's certificate, and serves it)
    signer = ep.signer
    if ctx.args["mode"] == "stranger":
        key = Identity.generate()
        fake = certs.self_signed(key, from_uri(str(ctx.args["claim"])), 86400.0, time.time() - 60)
        signer = certs.CertSigner.of(key, fake)
        wire = fake.wire

        def serve_fake(iv: InterestView, reply: Any) -> None:
            reply(wire)

        await ep.serve(fake.key_name, serve_fake)
    template = DataTemplate(freshness=10_000, signer=signer)

    def answer(iv: InterestView, reply: Any) -> None:
        reply(template.build(iv.name, b"pay mallory"))

    # CAPTURE: the producer's route above it is not inherited, so the Interests come here
    await ep.serve(from_uri(str(ctx.args["prefix"])), answer, flags=3)
    ctx.ready()
    await ep.wait_closed()
