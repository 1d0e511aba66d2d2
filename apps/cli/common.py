"""What every operator command (``icn status``, ``face``, ``route``, ``peek``...) shares.

An operator or a script runs these commands, so a failure must be one line on stderr that says
what to do, with an exit code a script can branch on, never a traceback.  All commands find the
forwarder the same way (:func:`pick_transport`), run through :func:`run`, which owns the mapping
from the project's exceptions to those lines and codes, and print either rich tables for people
or JSON for scripts.  rich is imported where a table is printed, so JSON output and the
commands that print no table do not load it.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

from apps.loop import run_loop
from icn.dataplane.client_conf import DEFAULT_SOCKET, ENV_VAR, resolve_transport
from icn.dataplane.endpoint import Endpoint
from icn.errors import (
    CommandFailed,
    ConfigError,
    DecodeError,
    EncodeError,
    FaceError,
    ForwarderUnreachable,
    IcnError,
    InterestCanceled,
    InterestNack,
    InterestTimeout,
)
from icn.wire.name import from_uri

if TYPE_CHECKING:
    from rich.console import Console

T = TypeVar("T")

EXIT_FAILED = 1  # the command ran but did not get what it wanted (ping without any reply)
EXIT_USAGE = 2  # a bad argument: name, URI, option value (typer's own usage errors also use 2)
EXIT_UNREACHABLE = 3  # no forwarder at the transport URI, or the connection to it was lost
EXIT_TIMEOUT = 4  # no Data (or, for poke, no Interest) in time
EXIT_NACK = 5  # the network answered with a Nack
EXIT_REFUSED = 6  # the forwarder refused a management command (status >= 400) or lacks the face
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = (
    "Exit codes: 0 success; 1 failed (ping got no reply, malformed reply); 2 bad argument "
    "(name, URI, option); 3 no forwarder (start `icn fwd`, or set NDN_CLIENT_TRANSPORT or "
    "--transport); 4 timeout; 5 Nack; 6 the forwarder refused the command; 130 interrupted."
)

JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON for scripts instead of text")]


def fail(message: str, code: int) -> NoReturn:
    """One line on stderr, in the format of ``icn fwd``'s errors, then exit with ``code``."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def pick_transport(explicit: str | None) -> str:
    """The forwarder's URI by python-ndn's rules, except that when those fall through to NFD's
    socket and it is absent, the per-user socket ``icn fwd`` listens on without root is used,
    so an operator who started ``icn fwd`` as themselves needs no configuration."""
    uri = resolve_transport(explicit)
    if (
        explicit is None
        and uri == f"unix://{DEFAULT_SOCKET}"
        and not os.path.exists(DEFAULT_SOCKET)
    ):
        from forwarder.config import default_unix_socket

        own = default_unix_socket()
        if os.path.exists(own):
            return f"unix://{own}"
    return uri


def quantity(option: str, value: str | None, parse: Callable[[object], float]) -> float | None:
    """An option with a unit (``10ms``, ``5%``, ``10Mbit``) in its base unit; exit 2 if bad."""
    if value is None:
        return None
    try:
        return parse(value)
    except ValueError as exc:
        fail(f"{option}: {exc}", EXIT_USAGE)


def unreachable_message(uri: str) -> str:
    return f"no forwarder at {uri}: is `icn fwd` running? set {ENV_VAR} or --transport"


@asynccontextmanager
async def connected(transport: str | None) -> AsyncIterator[Endpoint]:
    """An endpoint to the forwarder, closed on the way out (also on errors)."""
    uri = pick_transport(transport)
    try:
        ep = await Endpoint.connect(uri)
    except ForwarderUnreachable:
        raise ForwarderUnreachable(unreachable_message(uri)) from None
    try:
        yield ep
    finally:
        ep.close()
        await ep.wait_closed()


def parse_name(uri: str) -> bytes:
    """A name from the command line; ConfigError (exit 2) with python-ndn's reason if bad."""
    if not uri.startswith(("/", "ndn:")):
        raise ConfigError(f"invalid NDN name {uri!r}: a name starts with '/', e.g. /example/data")
    return from_uri(uri)


def with_endpoint(
    action: str, transport: str | None, body: Callable[[Endpoint], Awaitable[T]]
) -> T:
    """Connect, return ``await body(ep)``, with failures mapped as :func:`run` does."""

    async def main() -> T:
        async with connected(transport) as ep:
            return await body(ep)

    return run(action, main)


def run(action: str, main: Callable[[], Awaitable[T]]) -> T:
    """Run ``main()`` on the event loop and turn each failure into one line and its exit code.

    ``action`` names the command in messages ("route add failed: 410 face 999 does not exist").
    """

    try:
        return run_loop(main())  # type: ignore[no-any-return]
    except CommandFailed as exc:
        fail(f"{action} failed: {exc.status} {exc.text}", EXIT_REFUSED)
    except (ConfigError, EncodeError, FaceError) as exc:
        fail(str(exc), EXIT_USAGE)
    except (ForwarderUnreachable, InterestCanceled) as exc:
        fail(str(exc), EXIT_UNREACHABLE)
    except InterestTimeout as exc:
        if exc.name.startswith(("/localhost/nfd/", "/localhop/nfd/")):
            fail(f"{action} failed: the forwarder did not answer the command in time", EXIT_TIMEOUT)
        fail(f"{action}: timeout: {exc}", EXIT_TIMEOUT)
    except InterestNack as exc:
        fail(f"{action}: {exc}", EXIT_NACK)
    except DecodeError as exc:
        fail(f"{action}: malformed reply from the forwarder: {exc}", EXIT_FAILED)
    except IcnError as exc:
        fail(f"{action} failed: {exc}", EXIT_FAILED)
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None


# ---- output --------------------------------------------------------------------------------


def _console() -> Console:
    """Rich console; when piped, wide enough that no cell is cut at 80 columns."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=240)


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2))


def emit(as_json: bool, data: Any, text: str | Callable[[], None]) -> None:
    """``data`` as JSON for scripts, else ``text`` (a line, or a function printing tables)."""
    if as_json:
        print_json(data)
    elif callable(text):
        text()
    else:
        typer.echo(text)


def print_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A table whose cells fold rather than being cut, so URIs stay whole."""
    from rich import box
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE, title_justify="left")
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    _console().print(table)


def yes_no(value: Any) -> Any:
    """Booleans as an operator reads them; other values unchanged."""
    return ("yes" if value else "no") if isinstance(value, bool) else value


def print_fields(title: str | None, fields: Sequence[tuple[str, Any]]) -> None:
    """Key/value pairs as a two-column table (status, cs info); booleans as yes/no."""
    from rich.table import Table

    table = Table(title=title, box=None, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in fields:
        table.add_row(key, "" if value is None else str(yes_no(value)))
    _console().print(table)
