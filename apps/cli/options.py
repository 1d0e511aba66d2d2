"""The options every ``icn`` command writes the same way: the forwarder to use, durations, and
the help panels the commands are listed in.

One name for the forwarder (``--transport URI``, resolved by
:func:`apps.cli.common.pick_transport`) and one reader for durations
(:func:`parse_duration_option`, through :func:`icn.units.parse_duration`): before issue 37 the
forwarder option had four names and a duration was float seconds in one command and integer
milliseconds in the next, so ``4000`` could mean either.  A duration on the command line must
therefore carry its unit.  ``tests/unit/cli/test_cli_options.py`` walks the command tree and
holds every command to this.

This module imports typer only (no endpoint, no rich): ``icn fwd --help`` and the
management commands load it on their way.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from icn.units import parse_duration

# The panels of `icn --help`, in the order they are shown.
PANEL_DAEMON = "Daemon"
PANEL_MANAGEMENT = "Management"
PANEL_TOOLS = "Tools"
PANEL_IDENTITIES = "Identities"
PANEL_FUNCTIONS = "Functions"
PANEL_EXPERIMENTS = "Experiments"
PANELS = (
    PANEL_DAEMON,
    PANEL_MANAGEMENT,
    PANEL_TOOLS,
    PANEL_IDENTITIES,
    PANEL_FUNCTIONS,
    PANEL_EXPERIMENTS,
)

TRANSPORT_EXAMPLES = "unix:///run/nfd/nfd.sock or tcp4://127.0.0.1:6363"
TRANSPORT_HELP = (
    f"forwarder to talk to, e.g. {TRANSPORT_EXAMPLES} (default: NDN_CLIENT_TRANSPORT, "
    "client.conf, NFD's socket, else the per-user socket of `icn fwd`)"
)

TransportOpt = Annotated[
    str | None,
    typer.Option("--transport", metavar="URI", help=TRANSPORT_HELP, show_default=False),
]


class Seconds(float):
    """A duration in seconds that prints as it was written (``4s``), so that a default shows in
    ``--help`` with its unit, as a user must type it."""

    text: str

    def __new__(cls, text: str) -> Seconds:
        value = super().__new__(cls, parse_duration(text))
        value.text = text
        return value

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"duration({self.text!r})"


def duration(text: str) -> Seconds:
    """A duration default written with its unit, ``= duration("4s")``, beside
    :func:`duration_option`."""
    return Seconds(text)


def parse_duration_option(text: str) -> float:
    """A command-line duration with a unit (``500ms``, ``2s``, ``1m``) in seconds, through
    :func:`icn.units.parse_duration`; ValueError with the fix otherwise.

    A bare number is refused: options used to mean seconds in one command and milliseconds in
    another, so ``4000`` said nothing certain; the message gives the two readings to choose.
    """
    text = text.strip()
    try:
        float(text)
    except ValueError:
        return parse_duration(text)
    raise ValueError(f"{text!r} has no unit; give a unit: {text}ms or {text}s (also us, m, h, d)")


class DurationParser:
    """How typer reads one duration option (``parser=``): a default (a float, :class:`Seconds`)
    as it is, a command-line value by :func:`parse_duration_option`.  A bad value is one line,
    ``error: --timeout: ...``, and exit 2, as every other bad argument of the CLI
    (:func:`apps.cli.common.fail`), so scripts and people read the same."""

    def __init__(self, flag: str) -> None:
        self.flag = flag

    def __call__(self, value: object) -> float:
        if isinstance(value, float):
            return float(value)  # a plain float on, whatever the default's class
        try:
            return parse_duration_option(str(value))
        except ValueError as exc:
            from apps.cli.common import EXIT_USAGE  # (its imports only on this way out)

            typer.echo(f"error: {self.flag}: {exc}", err=True)
            raise typer.Exit(EXIT_USAGE) from None


def duration_option(name: str, *more: str, help: str) -> Any:
    """A ``typer.Option`` read by a :class:`DurationParser`; its help asks for a unit."""
    flag = next(n for n in (name, *more) if n.startswith("--"))
    return typer.Option(
        name,
        *more,
        parser=DurationParser(flag),
        metavar="DURATION",
        help=f"{help} (with a unit: 500ms, 2s, 1m)",
    )
