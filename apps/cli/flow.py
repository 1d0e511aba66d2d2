"""``icn flow run|check``: run a stream operator graph, on a forwarder of its own (in this
process) or on a running one (``--transport``), all of it or some operators (``--only``,
``--node``), with a line on stderr once every instance is open ("flow ready /f: a.0, ..."), a
progress line per second and a table of counters at the end."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from apps.cli.common import pick_transport
from apps.cli.options import TRANSPORT_EXAMPLES, duration_option
from apps.loop import run_loop
from icn.errors import ConfigError, IcnError
from icn.units import format_duration

if TYPE_CHECKING:
    from icn.observe.endpoint import MetricsEndpoint

flow_app = typer.Typer(
    no_args_is_help=True,
    help="Run IceFlow-like stream operator graphs (YAML) over named data.\n\n"
    "Exit codes: 0 every sink here ended; 1 an operator failed or --timeout passed; 2 the graph "
    "is invalid; 130 interrupted.",
)
EXIT_FAILED, EXIT_INVALID, EXIT_INTERRUPTED = 1, 2, 130
READY = "flow ready"  # then the flow's name and the instances run here
SHOWN = ("records_in", "records", "records_out", "batches", "interests_retransmitted", "losses")


def load_checked(path: Path):  # type: ignore[no-untyped-def]
    """The graph, its functions imported (a typo in module:function fails now, not mid-run).

    The functions' modules import from the graph file's directory and the current one, as
    ``icn serve``'s module does from the current directory: a graph beside its functions runs
    with no PYTHONPATH."""
    from compute.stream.graph import load_graph

    for where in (str(Path.cwd()), str(path.resolve().parent)):
        if where not in sys.path:
            sys.path.insert(0, where)

    try:
        graph = load_graph(path, check_functions=True)  # every function that fails, at its line
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_INVALID) from None
    return graph


@flow_app.command("check")
def check(graph_file: Annotated[Path, typer.Argument(help="graph YAML file")]) -> None:
    """Validate a graph file and import its functions, without running anything."""
    graph = load_checked(graph_file)
    n = sum(graph.partitions.values())
    typer.echo(f"{graph_file}: OK: flow {graph.flow}, {len(graph.ops)} operators, {n} instances")


def _progress_line(run: object, started: float) -> str:
    from compute.stream.flow import FlowRun

    assert isinstance(run, FlowRun)
    per_op: Counter[str] = Counter()
    for inst in run.instances:
        per_op[inst.name] += inst.counters["records_out" if inst.sink else "records"]
    parts = " | ".join(f"{op} {n:,}" for op, n in per_op.items())
    return f"[{time.monotonic() - started:5.1f}s] records: {parts}"


@flow_app.command("run")
def run(
    graph_file: Annotated[Path, typer.Argument(help="graph YAML file")],
    transport: Annotated[
        str | None,
        typer.Option(
            "--transport",
            metavar="URI",
            help=f"forwarder to use, e.g. {TRANSPORT_EXAMPLES} (default: a forwarder of its own "
            "in this process, which only the graph's operators run here use)",
            show_default=False,
        ),
    ] = None,
    only: Annotated[
        str | None, typer.Option(help="run only these operators, comma-separated")
    ] = None,
    node: Annotated[str | None, typer.Option(help="run only the operators placed on NODE")] = None,
    state_dir: Annotated[
        Path | None, typer.Option(help="checkpoints and source logs (default: settings)")
    ] = None,
    timeout: Annotated[
        float | None, duration_option("--timeout", help="give up after this long")
    ] = None,
    quiet: Annotated[bool, typer.Option(help="no progress line")] = False,
    metrics: Annotated[
        str | None,
        typer.Option(
            help="serve the operators' Prometheus /metrics on HOST:PORT, e.g. 127.0.0.1:9401 "
            "(0: any free port; the address is printed on stderr)"
        ),
    ] = None,
) -> None:
    """Run a graph until every sink run here has ended (forever with an endless source).

    Prints "flow ready <flow>: <instances>" on stderr once every instance run here is open
    (streams registered, MQTT sources subscribed)."""
    graph = load_checked(graph_file)
    which = graph.instances(node)
    if only:
        names = [n.strip() for n in only.split(",") if n.strip()]
        unknown = [n for n in names if n not in graph.ops]
        if unknown:
            typer.echo(f"error: --only: no operator {', '.join(unknown)} in {graph_file}", err=True)
            raise typer.Exit(EXIT_INVALID)
        which = [(n, p) for n, p in which if n in names]
    if not which:
        typer.echo(f"error: no operator of {graph_file} matches --only/--node", err=True)
        raise typer.Exit(EXIT_INVALID)

    if timeout is not None and timeout <= 0:
        typer.echo("error: --timeout must be more than 0, e.g. 60s", err=True)
        raise typer.Exit(EXIT_INVALID)
    uri = None
    if transport is not None:
        from icn.dataplane.client_conf import parse_transport

        uri = pick_transport(transport)
        try:  # a malformed URI is the command line's mistake: said before anything starts
            parse_transport(uri)
        except ConfigError as exc:
            typer.echo(f"error: --transport: {exc}", err=True)
            raise typer.Exit(EXIT_INVALID) from None
    code = run_loop(_run(graph, which, uri, state_dir, timeout, quiet, metrics))
    raise typer.Exit(code)


async def _run(graph, which, transport, state_dir, timeout, quiet, metrics) -> int:  # type: ignore[no-untyped-def]
    from compute.stream.flow import FlowRun
    from icn.dataplane.endpoint import Endpoint

    daemon = None
    if transport is None:
        from apps.inproc import attach_endpoint
        from forwarder.config import config_from_dict
        from forwarder.daemon import ForwarderDaemon

        daemon = ForwarderDaemon(config_from_dict({"listen": {}}))
        await daemon.start()

        async def new_endpoint() -> Endpoint:
            assert daemon is not None
            return attach_endpoint(daemon, label="flow")
    else:

        async def new_endpoint() -> Endpoint:
            return await Endpoint.connect(transport)

    flow = FlowRun(graph, new_endpoint, which, state_dir=state_dir)
    endpoint = None
    if metrics is not None:
        try:
            endpoint = await _serve_metrics(flow, metrics)
        except ConfigError as exc:  # a malformed or taken address: nothing has run yet
            print(f"error: --metrics: {exc}", file=sys.stderr)
            if daemon is not None:
                await daemon.stop()
            return EXIT_INVALID
        print(f"metrics on {endpoint.url}", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    started = time.monotonic()
    code = 0
    try:
        await flow.start()
        for inst in flow.instances:
            if inst.counters["restored"]:
                print(
                    f"{inst.id}: resumed from its checkpoint at input {inst.in_pos}",
                    file=sys.stderr,
                )
        # every instance here is open: its stream registered, an MQTT source subscribed (from
        # now on the broker keeps its messages); scripts and tests wait for this line
        ids = ", ".join(inst.id for inst in flow.instances)
        print(f"{READY} {graph.flow}: {ids}", file=sys.stderr, flush=True)
        waiter = asyncio.ensure_future(
            flow.wait(
                timeout,
                None if quiet else lambda r: print(_progress_line(r, started), file=sys.stderr),
            )
        )
        stopper = asyncio.ensure_future(stop.wait())
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if stopper.done():
            waiter.cancel()
            code = EXIT_INTERRUPTED
        elif waiter.exception() is not None:
            print(f"error: {waiter.exception()}", file=sys.stderr)
            code = EXIT_FAILED
        elif not waiter.result():
            waited = format_duration(timeout)
            print(f"error: --timeout {waited} passed before the sinks ended", file=sys.stderr)
            code = EXIT_FAILED
        stopper.cancel()
    except IcnError as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = EXIT_FAILED
    finally:
        took = time.monotonic() - started
        if endpoint is not None:
            await endpoint.close()
        await flow.stop()
        if daemon is not None:
            await daemon.stop()
    _summary(flow, took)
    return code


async def _serve_metrics(flow: object, listen: str) -> MetricsEndpoint:
    """``/metrics`` of the run's operators (and this process' CPU and memory) on ``listen``."""
    from prometheus_client import CollectorRegistry, ProcessCollector

    from compute.stream.flow import FlowRun
    from compute.stream.metrics import register_stream_metrics
    from icn.observe.endpoint import serve_metrics

    assert isinstance(flow, FlowRun)
    registry = CollectorRegistry(auto_describe=False)
    register_stream_metrics(flow, registry)
    ProcessCollector(namespace="icn", registry=registry)
    return await serve_metrics(listen, registry)


def _summary(flow: object, took: float) -> None:
    from compute.stream.flow import FlowRun

    assert isinstance(flow, FlowRun)
    print(f"flow {flow.graph.flow}: {took:.2f}s", file=sys.stderr)
    print(f"  {'instance':<24}" + "".join(f"{c:>{len(c) + 2}}" for c in SHOWN), file=sys.stderr)
    for inst in flow.instances:
        row = "".join(f"{inst.counters[c]:>{len(c) + 2},}" for c in SHOWN)
        print(f"  {inst.id:<24}{row}", file=sys.stderr)
