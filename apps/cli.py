"""The ``icn`` command."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help="ICN forwarder and tools.")


def main() -> None:
    app()
