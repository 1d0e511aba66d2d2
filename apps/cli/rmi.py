"""``icn serve`` and ``icn call``: named functions from the command line (``icn key`` is in
:mod:`apps.cli.trust`)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from apps.cli.common import (
    EXIT_FAILED,
    EXIT_TIMEOUT,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    JsonOpt,
    connected,
    fail,
    parse_name,
    run,
)
from apps.cli.options import PANEL_FUNCTIONS, TransportOpt, duration, duration_option
from compute.rmi.identity import IDENTITY_ENV, resolve_identity
from icn.errors import ConfigError, ForwarderUnreachable

if TYPE_CHECKING:
    from icn.security.certs import Certificate
    from icn.security.trust import TrustSchema

RMI_EXIT_HELP = (
    "Exit codes: 0 success; 1 the call failed (the function raised, unauthorized, no such "
    "function, bad arguments, overloaded); 2 bad argument; 3 no forwarder or no server; "
    "4 timeout; 130 interrupted."
)

KeyOpt = Annotated[
    Path | None,
    typer.Option(
        "--key",
        help=f"Ed25519 identity file (created 0600 if missing; default: ${IDENTITY_ENV}, else a "
        "new key for this run only)",
        show_default=False,
    ),
]


def import_functions(module: str) -> Any:
    """A module name (``pkg.mod``) or a ``.py`` path, importable from the current directory."""
    from compute.rmi import collect

    if module.endswith(".py"):
        path = Path(module).resolve()
        if not path.is_file():
            raise ConfigError(f"no such file: {module}")
        sys.path.insert(0, str(path.parent))
        module = path.stem
    elif "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return collect(module)


def serve(
    module: Annotated[str, typer.Argument(help="module (pkg.mod or file.py) with @function")],
    prefix: Annotated[str, typer.Option("--prefix", help="name prefix to serve under")] = "/svc",
    key: KeyOpt = None,
    max_jobs: Annotated[
        int, typer.Option(help="calls in progress before new ones are Nacked (Congestion)")
    ] = 64,
    max_arg_mb: Annotated[float, typer.Option(help="largest accepted arguments, MiB")] = 64.0,
    inline_budget: Annotated[
        float,
        duration_option(
            "--inline-budget",
            help="how long a call may run and still be answered in its first Data; a longer "
            "one is answered with a thunk and its result fetched by poll",
        ),
    ] = duration("50ms"),
    replica: Annotated[
        str | None,
        typer.Option(
            help="this server's id among several serving PREFIX (e.g. r1): its thunks and "
            "memos are named under PREFIX/_r/ID, which must be routed to it"
        ),
    ] = None,
    trust_schema: Annotated[
        Path | None,
        typer.Option(
            help="LightVerSec schema for callers' certificates (authorize='namespace:/P' or "
            "'rule:#R' functions need it, with --anchor)"
        ),
    ] = None,
    anchor: Annotated[
        list[Path] | None,
        typer.Option(help="trust anchor certificate file or directory (repeatable)"),
    ] = None,
    metrics: Annotated[
        str | None,
        typer.Option(help="serve Prometheus /metrics on HOST:PORT, e.g. 127.0.0.1:9401 (0: any)"),
    ] = None,
    transport: TransportOpt = None,
) -> None:
    """Serve a module's @function functions under PREFIX until SIGINT/SIGTERM.

    Prints "rmi server ready" on stdout once the prefix is registered, and its counters at exit.
    """
    from compute.rmi import ServerConfig
    from compute.rmi.wire import replica_component

    if max_jobs < 1 or max_arg_mb <= 0:
        fail("--max-jobs must be >= 1 and --max-arg-mb positive", EXIT_USAGE)
    try:
        functions = import_functions(module)
        parse_name(prefix)
        identity = resolve_identity(key)
        if replica is not None:
            replica_component(replica)
        trust = load_trust(trust_schema, anchor or [])
        if trust is None:
            from compute.rmi.server import require_validator

            require_validator(functions, None)
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    config = ServerConfig(
        max_jobs=max_jobs,
        max_arg_bytes=int(max_arg_mb * (1 << 20)),
        inline_budget=inline_budget,
        replica=replica,
    )

    async def main() -> dict[str, int]:
        from compute.rmi.serving import Serving
        from compute.rmi.serving import serve as serving

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)

        def ready(started: Serving) -> None:
            if started.metrics_url is not None:
                typer.echo(f"metrics on {started.metrics_url}")
            typer.echo(f"rmi server ready: {started.describe()}")

        async with connected(transport) as ep:
            try:
                return await serving(
                    functions,
                    prefix,
                    endpoint=ep,
                    config=config,
                    identity=identity,
                    trust=trust,
                    metrics=metrics,
                    ready=ready,
                    stop=stop,
                )
            except ConfigError as exc:
                fail(str(exc), EXIT_USAGE)
            except ForwarderUnreachable as exc:
                fail(f"serve: {exc}", EXIT_UNREACHABLE)

    counters = run("serve", main)
    typer.echo("rmi server stopped: " + json.dumps(counters, sort_keys=True))


def load_trust(
    schema: Path | None, anchors: list[Path]
) -> tuple[TrustSchema, list[Certificate]] | None:
    """``--trust-schema`` and ``--anchor``: both or neither (ConfigError says which is missing)."""
    if schema is None and not anchors:
        return None
    if schema is None or not anchors:
        missing = "--trust-schema FILE" if schema is None else "--anchor CERT"
        raise ConfigError(f"a trust policy needs {missing} too")
    from icn.security.trust import TrustSchema, anchors_from

    return TrustSchema.load(schema), anchors_from(anchors)


def parse_value(text: str) -> Any:
    """A command-line argument: JSON when it parses (42, 1.5, "s", [1,2], {"a":1}, true,
    null), else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def call(
    function: Annotated[str, typer.Argument(help="function name, e.g. /svc/add")],
    args: Annotated[list[str] | None, typer.Argument(help="arguments (JSON, else text)")] = None,
    kw: Annotated[
        list[str] | None, typer.Option("--kw", help="keyword argument NAME=VALUE, repeatable")
    ] = None,
    private: Annotated[bool, typer.Option(help="encrypt arguments and result")] = False,
    timeout: Annotated[
        float, duration_option("--timeout", help="time for the whole call")
    ] = duration("60s"),
    as_json: JsonOpt = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress display")] = False,
    key: KeyOpt = None,
    cert: Annotated[
        Path | None,
        typer.Option(
            help="certificate of the --key's key, sent to servers that authorize by certificate"
        ),
    ] = None,
    transport: TransportOpt = None,
) -> None:
    """Call a named function and print its result (a progress line while it runs long)."""
    from compute.rmi import Client
    from compute.rmi.client import split_function

    try:
        split_function(function)
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    if timeout <= 0:
        fail("--timeout must be more than 0, e.g. 60s", EXIT_USAGE)
    kwargs: dict[str, Any] = {}
    for item in kw or []:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            fail(f"--kw {item!r}: expected NAME=VALUE with a Python identifier", EXIT_USAGE)
        kwargs[name] = parse_value(value)
    positional = tuple(parse_value(a) for a in args or [])
    try:
        identity = resolve_identity(key)
        certificate = None
        if cert is not None:
            from icn.security import certs

            certificate = certs.load(cert)
            if certificate.public_key != identity.public_bytes:
                raise ConfigError(
                    f"certifies key {certificate.fingerprint[:16]}, not the --key's "
                    f"({identity.fingerprint[:16]}); give the key it certifies"
                )
    except ConfigError as exc:
        fail(str(exc) if cert is None else f"--cert {cert}: {exc}", EXIT_USAGE)
    show = not quiet and sys.stderr.isatty()

    async def main() -> Any:
        async with connected(transport) as ep:
            client = Client(ep, identity=identity, certificate=certificate, timeout=timeout)
            return await client.invoke(
                function,
                positional,
                kwargs,
                private=private,
                progress=_progress_printer(function) if show else None,
            )

    try:
        result = run_rmi(main)
    finally:
        if show:
            typer.echo("\r\033[K", err=True, nl=False)
    _print_result(result, as_json)


def run_rmi(main: Any) -> Any:
    """:func:`apps.cli.common.run`, with the call's own errors mapped to exit codes."""
    from compute.rmi import RmiError, ServerUnavailable, Timeout

    async def guarded() -> Any:
        try:
            return await main()
        except Timeout as exc:
            fail(f"call timed out: {exc}", EXIT_TIMEOUT)
        except ServerUnavailable as exc:
            fail(f"call failed: {exc}", EXIT_UNREACHABLE)
        except RmiError as exc:
            fail(f"call failed: {type(exc).__name__}: {exc}", EXIT_FAILED)

    return run("call", guarded)


def _progress_printer(function: str) -> Any:
    def show(state: str, elapsed: float, eta: float) -> None:
        if state == "running":
            line = f"{function}: running {elapsed:.1f} s, expected in {eta:.1f} s"
            typer.echo(f"\r\033[K{line}", err=True, nl=False)

    return show


def _print_result(result: Any, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(_jsonable(result)))
    elif isinstance(result, str):
        typer.echo(result)
    else:
        typer.echo(repr(result))


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"bytes_hex": value.hex()}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    return value


def register(app: typer.Typer) -> None:
    app.command("serve", epilog=RMI_EXIT_HELP, rich_help_panel=PANEL_FUNCTIONS)(serve)
    app.command("call", epilog=RMI_EXIT_HELP, rich_help_panel=PANEL_FUNCTIONS)(call)
