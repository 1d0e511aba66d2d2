"""The ``icn`` command's typer app: ``fwd``, ``demo`` and ``loadgen``, and the other modules'
commands added on demand.

The other commands live in their own modules of :mod:`apps.cli` (``mgmt``, ``tools``, ``rmi``,
``trust``, ``pcap``, ``scenario``, ``flow``), and :func:`add_lazy_commands` adds only the one the
command line runs: every ``icn`` process (management commands, services) would otherwise pay the
imports of all of them (the endpoint, cryptography, rich) before doing anything.  ``icn fwd``
usually does not come here at all (see :mod:`apps.cli`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from apps.cli.fwd import FwdOptions, fail, run_fwd
from apps.cli.options import (
    PANEL_DAEMON,
    PANEL_EXPERIMENTS,
    PANEL_TOOLS,
    PANELS,
    TRANSPORT_EXAMPLES,
    duration,
    duration_option,
)
from apps.loop import run_loop
from icn.errors import ConfigError

DISTRIBUTION = "icn-net"  # the name pyproject.toml installs the package under


class PanelOrder(TyperGroup):
    """Lists the commands panel by panel in the order of :data:`PANELS` (typer shows panels in
    the order their first command comes, and the lazily added modules come in any order)."""

    # ctx: typer's own (vendored) click Context, which typer does not export
    def list_commands(self, ctx: Any) -> list[str]:
        def panel(name: str) -> int:
            which = getattr(self.commands[name], "rich_help_panel", None)
            return PANELS.index(which) if which in PANELS else len(PANELS)

        return sorted(super().list_commands(ctx), key=panel)


def installed_version() -> str:
    """The installed icn-net's version, as pip knows it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown (not installed: pip install -e . in the repository)"


def _print_version(value: bool) -> None:
    if value:
        from apps.compiled import compiled_status

        typer.echo(f"icn ({DISTRIBUTION}) {installed_version()}")
        typer.echo(compiled_status().line())
        raise typer.Exit()


app = typer.Typer(
    cls=PanelOrder,
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="ICN forwarder and tools: an NDN forwarder daemon, its management, named functions, "
    "identities and scenario experiments.",
)
loadgen_app = typer.Typer(no_args_is_help=True, help="Lean consumer and producer for load tests.")
app.add_typer(loadgen_app, name="loadgen", rich_help_panel=PANEL_TOOLS)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_print_version,
            help="print the installed version, and whether the hot paths run compiled; then exit",
        ),
    ] = False,
) -> None:
    """The options of ``icn`` itself (its help text is the app's, above)."""


@app.command(rich_help_panel=PANEL_DAEMON)
def fwd(
    config: Annotated[Path | None, typer.Option(help="YAML config file")] = None,
    unix: Annotated[str | None, typer.Option(help="Unix socket path to listen on")] = None,
    udp: Annotated[list[str], typer.Option(help="HOST:PORT to listen on (UDP), repeatable")] = [],  # noqa: B006
    tcp: Annotated[list[str], typer.Option(help="HOST:PORT to listen on (TCP), repeatable")] = [],  # noqa: B006
    cs_capacity: Annotated[
        int | None, typer.Option(help="content store capacity (packets)")
    ] = None,
    log_level: Annotated[str | None, typer.Option(help="debug, info, warning or error")] = None,
    face: Annotated[list[str], typer.Option(help="static face URI, repeatable")] = [],  # noqa: B006
    route: Annotated[list[str], typer.Option(help="PREFIX=FACE_URI static route")] = [],  # noqa: B006
    strategy: Annotated[list[str], typer.Option(help="PREFIX=NAME strategy choice")] = [],  # noqa: B006
    metrics: Annotated[
        str | None,
        typer.Option(help="serve Prometheus /metrics on HOST:PORT, e.g. 127.0.0.1:9400 (0: any)"),
    ] = None,
    pcap: Annotated[
        str | None,
        typer.Option(help="capture every face's packets to this pcapng file (rotated at 64 MiB)"),
    ] = None,
) -> None:
    """Run a forwarder daemon until SIGTERM or SIGINT (SIGUSR1 logs its counters)."""
    # apps.cli runs the same without typer when it can read the command line itself
    opts = FwdOptions(
        config=config,
        unix=unix,
        udp=udp,
        tcp=tcp,
        cs_capacity=cs_capacity,
        log_level=log_level,
        face=face,
        route=route,
        strategy=strategy,
        metrics=metrics,
        pcap=pcap,
    )
    run_fwd(opts)


# Hidden: the scenario launcher (icn scenario run scenarios/quickstart.yaml) shows the same and
# more; kept as a quick self-contained check of two forwarders and a content store.
@app.command(hidden=True)
def demo(
    count: Annotated[int, typer.Option(help="objects to fetch")] = 1000,
    keep_logs: Annotated[bool, typer.Option(help="keep the processes' logs")] = False,
) -> None:
    """Start two forwarders and a producer on loopback and fetch data through them."""
    from apps.cli.demo import run_demo

    if not run_demo(count, keep_logs):
        raise typer.Exit(1)


@loadgen_app.command("produce")
def loadgen_produce(
    listen: Annotated[str, typer.Option(help="HOST:PORT of the producer's UDP socket")],
    prefix: Annotated[str, typer.Option(help="answer Interests under this prefix")] = "/",
    size: Annotated[int, typer.Option(help="content bytes per Data")] = 1024,
    freshness: Annotated[
        float, duration_option("--freshness", help="FreshnessPeriod of the Data")
    ] = duration("10s"),
) -> None:
    """Answer Interests over UDP until SIGTERM/SIGINT; prints 'ready' when listening."""
    import signal

    from apps.loadgen import start_producer
    from icn.addr import parse_host_port

    try:
        host, port = parse_host_port(listen)
    except ValueError as exc:
        fail(f"--listen: {exc}", 2)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        transport, proto = await start_producer(
            host, port, prefix=prefix, payload_size=size, freshness_ms=round(freshness * 1000)
        )
        stop = loop.create_future()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda: None if stop.done() else stop.set_result(None))
        print("ready", flush=True)
        await stop
        transport.close()
        print(json.dumps({"served": proto.served, "ignored": proto.ignored}), flush=True)

    run_loop(main())


@loadgen_app.command("consume")
def loadgen_consume(
    transport: Annotated[
        str,
        typer.Option(
            "--transport",
            metavar="URI",
            help="the forwarder's UDP listener, e.g. udp4://127.0.0.1:6363 (this lean consumer "
            "speaks UDP only)",
        ),
    ],
    prefix: Annotated[str, typer.Option(help="fetch PREFIX/0 .. PREFIX/COUNT-1")],
    count: Annotated[int, typer.Option(help="number of objects")] = 1000,
    start: Annotated[int, typer.Option(help="first object number")] = 0,
    window: Annotated[int, typer.Option(help="Interests in flight")] = 64,
    rto: Annotated[
        float, duration_option("--rto", help="retransmission timeout of each Interest")
    ] = duration("250ms"),
    retries: Annotated[int, typer.Option(help="retransmissions per object")] = 10,
    timeout: Annotated[float, duration_option("--timeout", help="overall time limit")] = duration(
        "120s"
    ),
) -> None:
    """Fetch objects over UDP and print a JSON summary; exit 1 if any object failed."""
    from apps.loadgen import Consumer, object_names
    from icn.dataplane.client_conf import parse_transport

    if rto <= 0 or timeout <= 0:
        fail("--rto and --timeout must be more than 0, e.g. 250ms and 2m", 2)
    try:
        scheme, host, port = parse_transport(transport)
    except ConfigError as exc:
        fail(f"--transport: {exc}", 2)
    try:
        names = object_names(prefix, count, start)
    except ConfigError as exc:
        fail(f"--prefix: {exc}", 2)
    if not scheme.startswith("udp"):
        fail(
            f"--transport {transport!r}: loadgen consume speaks UDP only; give the forwarder's "
            f"UDP listener, e.g. udp4://127.0.0.1:6363 (not {TRANSPORT_EXAMPLES})",
            2,
        )

    async def main() -> Any:
        c = Consumer((host, port), window=window, rto=rto, max_retries=retries)
        try:
            return await c.fetch(names, timeout=timeout)
        finally:
            c.close()

    res = run_loop(main())
    out = res.summary()
    if res.missing:
        out["missing_sample"] = res.missing
    print(json.dumps(out), flush=True)
    if res.failed or res.received != res.requested:
        raise typer.Exit(1)


_added: set[Callable[[typer.Typer], None]] = set()


def _add_scenario(cli: typer.Typer) -> None:
    from apps.cli.scenario import scenario_app

    cli.add_typer(scenario_app, name="scenario", rich_help_panel=PANEL_EXPERIMENTS)


def _add_flow(cli: typer.Typer) -> None:
    from apps.cli.flow import flow_app

    cli.add_typer(flow_app, name="flow", rich_help_panel=PANEL_EXPERIMENTS)


def _add_mgmt(cli: typer.Typer) -> None:
    from apps.cli import mgmt

    mgmt.register(cli)


def _add_tools(cli: typer.Typer) -> None:
    from apps.cli import tools

    tools.register(cli)


def _add_rmi(cli: typer.Typer) -> None:
    from apps.cli import rmi

    rmi.register(cli)


def _add_tasks(cli: typer.Typer) -> None:
    from apps.cli import tasks

    tasks.register(cli)


def _add_trust(cli: typer.Typer) -> None:
    from apps.cli import trust

    trust.register(cli)


def _add_pcap(cli: typer.Typer) -> None:
    from apps.cli import pcap

    pcap.register(cli)


# The commands each module adds, in the order of their panels in `icn --help` (PanelOrder keeps
# that order however they were added).
LAZY_COMMANDS: tuple[tuple[frozenset[str], Callable[[typer.Typer], None]], ...] = (
    (frozenset({"status", "face", "route", "strategy", "cs"}), _add_mgmt),
    (frozenset({"peek", "poke", "ping", "ping-server"}), _add_tools),
    (frozenset({"pcap"}), _add_pcap),
    (frozenset({"key", "cert"}), _add_trust),
    (frozenset({"serve", "call"}), _add_rmi),
    (frozenset({"tasks"}), _add_tasks),
    (frozenset({"scenario"}), _add_scenario),
    (frozenset({"flow"}), _add_flow),
)


def add_lazy_commands(word: str | None) -> None:
    """Add to :data:`app` the module of the command ``word`` (the first word after ``icn``, not
    one of this module's commands); all of them when it names none (``--help``, no command, a
    typo), so typer lists them or suggests among them as before."""
    wanted = [add for names, add in LAZY_COMMANDS if word in names]
    for add in wanted or [add for _names, add in LAZY_COMMANDS]:
        if add not in _added:  # once per process, however often main() runs
            _added.add(add)
            add(app)
