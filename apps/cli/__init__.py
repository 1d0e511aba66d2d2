"""The ``icn`` command's entry point: ``icn fwd`` without typer, everything else through it.

A topology runs a forwarder per node, so ``icn fwd`` with options :mod:`apps.cli.fwd` can
read starts the daemon without importing typer, click and rich (issue 23: a lean daemon).  Every
other command line, ``icn fwd --help`` and a bad ``icn fwd`` option included, goes to the typer
app of :mod:`apps.cli.root`, with only the module of the command it names.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from apps.cli.fwd import build_fwd_config, parse_fwd_options, run_fwd

__all__ = ["OWN_COMMANDS", "add_commands", "app", "build_fwd_config", "main"]

# the commands of apps.cli.root itself; the others come from their own modules
OWN_COMMANDS = frozenset({"fwd", "demo", "loadgen"})


def add_commands(args: Sequence[str]) -> None:
    """Add to the typer app the module of the command ``args`` (the arguments after ``icn``)
    runs; none for the app's own commands; all when it names none of theirs (``--help``, no
    command, a typo), so typer lists them or suggests among them as before."""
    # ``icn`` itself takes no option with a value, so the first word is the command.
    word = next((a for a in args if not a.startswith("-")), None)
    if word in OWN_COMMANDS or (word is None and "--version" in args):
        return  # (--version is answered before any command is looked at)
    from apps.cli.root import add_lazy_commands

    add_lazy_commands(word)


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["fwd"]:
        opts = parse_fwd_options(args[1:])
        if opts is not None:
            run_fwd(opts)
            return
    add_commands(args)
    from apps.cli.root import app

    try:
        app()
    except BrokenPipeError:
        sys.exit(1)


def __getattr__(name: str) -> Any:
    """``from apps.cli import app``: the typer app with every command added (the reference pages
    and tests read the whole tree), imported only when asked for so ``icn fwd`` stays lean."""
    if name == "app":
        from apps.cli.root import add_lazy_commands, app

        add_lazy_commands(None)
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
