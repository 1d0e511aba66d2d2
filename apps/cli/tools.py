"""``icn peek``, ``poke``, ``ping`` and ``ping-server``: ndnpeek, ndnpoke and ndnping for our
forwarder (or NFD), on the app endpoint, for checking by hand that a name is reachable."""

from __future__ import annotations

import asyncio
import math
import secrets
import signal
import sys
import time
from collections.abc import Awaitable
from typing import Annotated, Any

import typer

from apps.cli.common import (
    EXIT_CODES_HELP,
    EXIT_FAILED,
    EXIT_TIMEOUT,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    JsonOpt,
    connected,
    fail,
    parse_name,
    print_json,
    run,
    with_endpoint,
)
from apps.cli.options import PANEL_TOOLS, TransportOpt, duration, duration_option
from icn.dataplane.endpoint import Endpoint
from icn.dataplane.segments import data_content
from icn.errors import InterestNack, InterestTimeout
from icn.units import format_duration
from icn.wire import tlv_types as T
from icn.wire.encode import make_data
from icn.wire.name import generic, to_uri
from icn.wire.packet import DataView, InterestView

# Room left in a Data packet for the content once the name, MetaInfo and signature are in.
CONTENT_ROOM = T.MAX_PACKET_SIZE - 400


def _content_json(dv: DataView) -> dict[str, Any]:
    content = data_content(dv)
    try:
        text, encoding = content.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, encoding = content.hex(), "hex"
    return {
        "name": to_uri(dv.name),
        "content_type": dv.content_type,
        "freshness_ms": dv.freshness,
        "content_length": len(content),
        "content_encoding": encoding,
        "content": text,
    }


def peek(
    name: Annotated[str, typer.Argument(help="name to fetch, e.g. /example/data")],
    prefix: Annotated[bool, typer.Option("--prefix", help="set CanBePrefix")] = False,
    fresh: Annotated[bool, typer.Option("--fresh", help="set MustBeFresh")] = False,
    lifetime: Annotated[
        float,
        duration_option("--lifetime", help="InterestLifetime: how long forwarders keep it pending"),
    ] = duration("4s"),
    timeout: Annotated[
        float | None,
        duration_option("--timeout", help="give up after this long (default: the lifetime)"),
    ] = None,
    raw: Annotated[
        bool, typer.Option("--raw", help="write the whole Data TLV, not its content")
    ] = False,
    transport: TransportOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fetch one Data and write its content to stdout, byte for byte."""
    if lifetime <= 0 or (timeout is not None and timeout <= 0):
        fail("--lifetime and --timeout must be positive", EXIT_USAGE)

    def fetch(ep: Endpoint) -> Awaitable[DataView]:
        value = parse_name(name)
        return ep.express(
            value,
            can_be_prefix=prefix,
            must_be_fresh=fresh,
            lifetime_ms=max(1, round(lifetime * 1000)),
            timeout=timeout,
        )

    dv = with_endpoint("peek", transport, fetch)
    if as_json:
        print_json(_content_json(dv))
        return
    sys.stdout.buffer.write(dv.wire if raw else data_content(dv))
    sys.stdout.buffer.flush()


def poke(
    name: Annotated[str, typer.Argument(help="name of the Data to publish")],
    freshness: Annotated[
        float, duration_option("--freshness", help="FreshnessPeriod of the Data")
    ] = duration("10s"),
    timeout: Annotated[
        float, duration_option("--timeout", help="how long to wait for an Interest")
    ] = duration("10s"),
    transport: TransportOpt = None,
) -> None:
    """Publish stdin as one Data: answer the first Interest for NAME, then exit.

    Prints a line on stderr once the name is registered (so a script knows when to fetch).
    """
    if timeout <= 0:
        fail("--timeout must be more than 0, e.g. 10s", EXIT_USAGE)
    content = sys.stdin.buffer.read()
    if len(content) > CONTENT_ROOM:
        fail(
            f"stdin has {len(content)} bytes; one Data holds at most about {CONTENT_ROOM}: "
            "split it, e.g. with segments",
            EXIT_USAGE,
        )

    async def main() -> None:
        value = parse_name(name)
        wire = make_data(value, content, freshness=round(freshness * 1000))
        answered = asyncio.get_running_loop().create_future()

        def handler(iv: InterestView, reply: Any) -> None:
            # A longer name under NAME cannot be satisfied by Data named NAME: leave it.
            if iv.name == value and not answered.done():
                reply(wire)
                answered.set_result(None)

        async with connected(transport) as ep:
            await ep.serve(value, handler)
            typer.echo(f"poke: serving {to_uri(value)}; waiting for an Interest", err=True)
            try:
                await asyncio.wait_for(asyncio.shield(answered), timeout)
            except TimeoutError:
                fail(
                    f"poke: no Interest for {to_uri(value)} within {format_duration(timeout)}",
                    EXIT_TIMEOUT,
                )

    run("poke", main)


def _summary(
    prefix: str, rtts: list[float], sent: int, nacks: int, elapsed: float
) -> dict[str, Any]:
    received = len(rtts)
    out: dict[str, Any] = {
        "prefix": prefix,
        "transmitted": sent,
        "received": received,
        "nacked": nacks,
        "timeouts": sent - received - nacks,
        "loss_percent": round(100.0 * (sent - received) / sent, 1) if sent else 0.0,
        "time_ms": round(elapsed * 1000, 1),
        "rtt_ms": None,
    }
    if rtts:
        avg = sum(rtts) / received
        mdev = math.sqrt(sum((r - avg) ** 2 for r in rtts) / received)
        values = {"min": min(rtts), "avg": avg, "max": max(rtts), "mdev": mdev}
        out["rtt_ms"] = {k: round(v, 3) for k, v in values.items()}
    return out


def _print_summary(s: dict[str, Any]) -> None:
    typer.echo(f"\n--- {s['prefix']} ping statistics ---")
    typer.echo(
        f"{s['transmitted']} packets transmitted, {s['received']} received, "
        f"{s['nacked']} nacked, {s['loss_percent']:g}% lost, time {s['time_ms']:g} ms"
    )
    rtt = s["rtt_ms"]
    if rtt:
        typer.echo(
            f"rtt min/avg/max/mdev = {rtt['min']}/{rtt['avg']}/{rtt['max']}/{rtt['mdev']} ms"
        )


def _on_stop_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)


def ping(
    prefix: Annotated[str, typer.Argument(help="prefix a ping-server serves, e.g. /example")],
    count: Annotated[
        int | None, typer.Option("-c", "--count", help="probes to send (default: until Ctrl-C)")
    ] = None,
    interval: Annotated[
        float, duration_option("-i", "--interval", help="time between probes")
    ] = duration("1s"),
    timeout: Annotated[
        float, duration_option("--timeout", help="how long to wait for each reply")
    ] = duration("4s"),
    transport: TransportOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Probe PREFIX like ndnping: Interests /PREFIX/ping/<random>/<seq> with MustBeFresh.

    One line per probe (reply, Nack or timeout), then a summary.  Exit 0 if any reply came.
    """
    if (count is not None and count <= 0) or interval <= 0 or timeout <= 0:
        fail("--count, --interval and --timeout must be positive", EXIT_USAGE)

    async def main() -> dict[str, Any]:
        base = parse_name(prefix)
        shown = to_uri(base)
        probe_base = base + generic("ping") + generic(secrets.token_hex(4))
        rtts: list[float] = []
        nacks = 0
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        _on_stop_signals(loop, stop)

        async def probe(ep: Any, seq: int) -> None:
            nonlocal nacks
            t0 = time.perf_counter()
            try:
                await ep.express(
                    probe_base + generic(str(seq)),
                    must_be_fresh=True,
                    lifetime_ms=max(1, int(timeout * 1000)),
                    timeout=timeout,
                )
            except InterestNack as exc:
                nacks += 1
                line = f"nack from {shown}: seq={seq} time={_ms(t0)} ms reason={exc.reason_name}"
            except InterestTimeout:
                line = f"timeout from {shown}: seq={seq} time={_ms(t0)} ms"
            else:
                rtts.append((time.perf_counter() - t0) * 1000)
                line = f"content from {shown}: seq={seq} time={rtts[-1]:.3f} ms"
            if not as_json:
                typer.echo(line)

        async with connected(transport) as ep:
            if not as_json:
                typer.echo(f"PING {shown}")
            started = time.perf_counter()
            tasks: list[asyncio.Task[None]] = []
            while (count is None or len(tasks) < count) and not ep.closed:
                tasks.append(asyncio.create_task(probe(ep, len(tasks))))
                if len(tasks) != count and await _stopped(stop, interval):
                    break  # SIGINT/SIGTERM: stop sending, summarize what came back
            if not stop.is_set():
                await _stopped(stop, None, asyncio.gather(*tasks, return_exceptions=True))
            for t in tasks:
                t.cancel()
            for result in await asyncio.gather(*tasks, return_exceptions=True):
                if isinstance(result, Exception):
                    raise result  # the connection was lost: report that, not a summary
            return _summary(shown, rtts, len(tasks), nacks, time.perf_counter() - started)

    summary = run("ping", main)
    if as_json:
        print_json(summary)
    else:
        _print_summary(summary)
    if summary["received"] == 0:
        raise typer.Exit(EXIT_FAILED)


async def _stopped(
    stop: asyncio.Event, timeout: float | None, other: Awaitable[Any] | None = None
) -> bool:
    """Wait until ``stop`` is set (SIGINT/SIGTERM), ``timeout`` passes or ``other`` ends;
    True if stopped."""
    waiters: set[asyncio.Future[Any]] = {asyncio.ensure_future(stop.wait())}
    if other is not None:
        waiters.add(asyncio.ensure_future(other))
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()  # (a gather of probes: they are cancelled after this anyway)
    return stop.is_set()


def _ms(t0: float) -> str:
    return f"{(time.perf_counter() - t0) * 1000:.3f}"


def ping_server(
    prefix: Annotated[str, typer.Argument(help="answer pings for PREFIX (registers PREFIX/ping)")],
    size: Annotated[int, typer.Option("--size", help="content bytes per reply")] = 0,
    freshness: Annotated[
        float, duration_option("--freshness", help="FreshnessPeriod of the replies")
    ] = duration("1s"),
    transport: TransportOpt = None,
) -> None:
    """Answer `icn ping` (and ndnping) probes until SIGINT/SIGTERM.

    Prints a ready line on stdout once registered, and how many probes it answered at the end.
    """
    if not 0 <= size <= CONTENT_ROOM:
        fail(f"--size must be in 0..{CONTENT_ROOM}", EXIT_USAGE)

    async def main() -> int:
        served = parse_name(prefix) + generic("ping")
        freshness_ms = round(freshness * 1000)
        content = b"\xbb" * size
        answered = 0

        def handler(iv: InterestView, reply: Any) -> None:
            nonlocal answered
            answered += 1
            reply(make_data(iv.name, content, freshness=freshness_ms))

        stop = asyncio.Event()
        _on_stop_signals(asyncio.get_running_loop(), stop)
        async with connected(transport) as ep:
            await ep.serve(served, handler)
            typer.echo(f"ping server ready: serving {to_uri(served)}")
            if not await _stopped(stop, None, ep.wait_closed()):
                fail(f"ping-server: lost the forwarder at {ep.uri}", EXIT_UNREACHABLE)
        return answered

    answered = run("ping-server", main)
    typer.echo(f"ping server: answered {answered} probes")


def register(app: typer.Typer) -> None:
    """Add the tools to the ``icn`` app."""
    app.command("peek", epilog=EXIT_CODES_HELP, rich_help_panel=PANEL_TOOLS)(peek)
    app.command("poke", epilog=EXIT_CODES_HELP, rich_help_panel=PANEL_TOOLS)(poke)
    app.command("ping", epilog=EXIT_CODES_HELP, rich_help_panel=PANEL_TOOLS)(ping)
    app.command("ping-server", epilog=EXIT_CODES_HELP, rich_help_panel=PANEL_TOOLS)(ping_server)
