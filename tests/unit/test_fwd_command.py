"""``icn fwd``'s own option parser against typer's ``fwd`` command (issue 23: a lean daemon).

apps.cli starts a forwarder without typer when :func:`parse_fwd_options` reads the command line;
it must then read it exactly as typer would, and leave to typer whatever it is not sure of.
"""

from __future__ import annotations

import dataclasses

import pytest
import typer.main

from apps.cli import root as cli_app
from apps.cli.fwd import FLAGS, FwdOptions, parse_fwd_options


def _typer_reads(args: list[str], monkeypatch: pytest.MonkeyPatch) -> FwdOptions:
    """What typer's fwd command hands to run_fwd for ``icn fwd ARGS``."""
    got: list[FwdOptions] = []
    monkeypatch.setattr(cli_app, "run_fwd", got.append)
    cli_app.app(["fwd", *args], standalone_mode=False)
    (opts,) = got
    return opts


def test_the_parser_knows_the_options_of_typers_command() -> None:
    command = typer.main.get_command(cli_app.app).commands["fwd"]  # type: ignore[attr-defined]
    flags = {opt: param.name for param in command.params for opt in param.opts}
    assert flags == FLAGS
    repeatable = {param.name for param in command.params if param.multiple}
    lists = {f.name for f in dataclasses.fields(FwdOptions) if f.default_factory is list}
    assert repeatable == lists


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--unix", "/tmp/f.sock"],
        ["--unix=/tmp/f.sock", "--unix", "/tmp/g.sock"],  # the last one wins
        ["--config", "fwd.yaml", "--cs-capacity", "0", "--log-level", "debug"],
        ["--cs-capacity=12", "--udp", "127.0.0.1:1", "--udp=127.0.0.1:2", "--tcp", "[::1]:3"],
        ["--face", "udp4://127.0.0.1:7000", "--route", "/a=udp4://127.0.0.1:7000"],
        ["--strategy", "/sync=multicast", "--strategy=/x=asf", "--unix", ""],
    ],
)
def test_what_it_reads_typer_reads_alike(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    ours = parse_fwd_options(args)
    assert ours is not None
    assert ours == _typer_reads(args, monkeypatch)


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["-h"],
        ["--un", "/tmp/f.sock"],  # click offers "--unix"
        ["--unix"],
        ["--cs-capacity", "many"],
        ["--cs-capacity", "-1"],  # a value that looks like an option
        ["--route", "-x"],
        ["stray"],
        ["--", "--unix", "x"],
    ],
)
def test_anything_else_goes_to_typer(args: list[str]) -> None:
    assert parse_fwd_options(args) is None
