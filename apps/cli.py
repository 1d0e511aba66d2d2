"""The ``icn`` command's entry point: ``icn fwd`` without typer, everything else through it.

A topology runs a forwarder per node, so ``icn fwd`` with options :mod:`apps.fwd_command` can
read starts the daemon without importing typer, click and rich (issue 23: a lean daemon).  Every
other command line, ``icn fwd --help`` and a bad ``icn fwd`` option included, goes to the typer
app of :mod:`apps.cli_app`, with only the module of the command it names.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from apps.fwd_command import build_fwd_config, parse_fwd_options, run_fwd

__all__ = ["OWN_COMMANDS", "add_commands", "build_fwd_config", "main"]

# the commands of apps.cli_app itself; the others come from their own modules
OWN_COMMANDS = frozenset({"fwd", "demo", "loadgen"})


def add_commands(args: Sequence[str]) -> None:
    """Add to the typer app the module of the command ``args`` (the arguments after ``icn``)
    runs; none for the app's own commands; all when it names none of theirs (``--help``, no
    command, a typo), so typer lists them or suggests among them as before."""
    # ``icn`` itself takes no option with a value, so the first word is the command.
    word = next((a for a in args if not a.startswith("-")), None)
    if word in OWN_COMMANDS:
        return
    from apps.cli_app import add_lazy_commands

    add_lazy_commands(word)


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["fwd"]:
        opts = parse_fwd_options(args[1:])
        if opts is not None:
            run_fwd(opts)
            return
    add_commands(args)
    from apps.cli_app import app

    try:
        app()
    except BrokenPipeError:
        sys.exit(1)
