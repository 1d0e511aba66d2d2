"""The ``icn`` command as a whole (issue 37): every command and option of the tree, walked.

One name for the forwarder to use (``--transport URI``), one reader for durations (units
required: a bare number is refused, since options used to mean seconds in one command and
milliseconds in the next), ``-h`` and ``--help`` everywhere, ``--version``, help in panels, the
legacy ``demo`` hidden but working, and ``icn key`` with explicit verbs.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from apps.cli import app
from apps.cli.options import PANELS, DurationParser, parse_duration_option
from apps.compiled import compiled_status
from icn.security.keys import Identity
from tests.interpreted import compiled_sources

ROOT = Path(__file__).resolve().parents[3]
WIDE = 400  # no line wrapping in help and error boxes, so a message is matched whole

# An option with one of these words in its name is about time.  Checked by name, so a new
# option such as --probe-every or --grace is held to the duration reader without being listed.
DURATION_WORDS = re.compile(
    r"timeout|interval|lifetime|period|delay|duration|deadline|every|wait|grace|freshness|"
    r"expires|expiry|rto|validity|jitter|budget|ttl|linger|backoff|keepalive|age|after"
)
# A unit in the name or the help is the old way (--rto-ms, "seconds"): the unit goes in the value.
UNIT_IN_NAME = re.compile(r"-(ms|s|sec|secs|seconds|us|min|minutes)$")
UNIT_IN_HELP = re.compile(r"\b(seconds|milliseconds|in ms|, ms|ms\))", re.IGNORECASE)
# Another name for the forwarder (the four names of issue 37, and their likes).
FORWARDER_NAME = re.compile(r"connect|remote|forwarder|router|nfd|^--address$|^--fwd")
FORWARDER_HELP = re.compile(r"forwarder to |forwarder's|\bconnect|\bremote\b", re.IGNORECASE)

# Every command that talks to a forwarder, each with --transport.
TALKS_TO_A_FORWARDER = {
    "status", "peek", "poke", "ping", "ping-server", "serve", "call", "flow run",
    "loadgen consume", "face list", "face create", "face destroy", "face shape", "face shaping",
    "route list", "route add", "route remove", "strategy list", "strategy set", "strategy show",
    "strategy unset", "cs info", "cs erase", "cs config", "tasks executor", "tasks status",
}  # fmt: skip
PANEL_OF = {
    "fwd": "Daemon",
    **dict.fromkeys(("status", "face", "route", "strategy", "cs"), "Management"),
    **dict.fromkeys(("peek", "poke", "ping", "ping-server", "pcap", "loadgen"), "Tools"),
    **dict.fromkeys(("key", "cert"), "Identities"),
    **dict.fromkeys(("serve", "call", "tasks"), "Functions"),
    **dict.fromkeys(("scenario", "flow"), "Experiments"),
}

ROOT_COMMAND = typer.main.get_command(app)


def walk(command: Any = ROOT_COMMAND, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """(``"face shape"``, its click command) for the app, every group and every command."""
    yield " ".join(path), command
    for name, sub in getattr(command, "commands", {}).items():
        yield from walk(sub, (*path, name))


def options() -> Iterator[tuple[str, Any]]:
    """(command path, option) for every option of every command, the app's own included."""
    for path, command in walk():
        for param in command.params:
            if param.param_type_name == "option" and param.name != "help":
                yield path, param


def names(option: Any) -> list[str]:
    return [*option.opts, *option.secondary_opts]


def parser_of(option: Any) -> Any:
    """The function typer reads the option's value with (``parser=``), or None.  typer keeps it
    on the option's type descriptor; if typer moves it, every duration check fails, loudly."""
    info = getattr(getattr(option, "type_descriptor", None), "parameter_info", None)
    return getattr(info, "parser", None)


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), terminal_width=WIDE)


def flat(text: str) -> str:
    """Output with rich's box characters and line breaks taken out."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_the_forwarder_option_has_one_name() -> None:
    seen: set[str] = set()
    for path, option in options():
        flags = names(option)
        if "--transport" in flags:
            assert flags == ["--transport"], f"icn {path}: {flags}: --transport has no alias"
            assert option.metavar == "URI", f"icn {path} --transport: metavar URI"
            assert re.search(r"(unix|udp4)://", option.help), f"icn {path} --transport: example"
            seen.add(path)
            continue
        for flag in flags:
            assert not FORWARDER_NAME.search(flag.lower()), (
                f"icn {path} {flag}: a second name for the forwarder option; use --transport URI"
            )
        assert not FORWARDER_HELP.search(option.help or ""), (
            f"icn {path} {flags}: its help says it picks the forwarder; name it --transport "
            "(or say what else it is)"
        )
    assert seen == TALKS_TO_A_FORWARDER


def test_every_duration_option_takes_units() -> None:
    durations = []
    for path, option in options():
        flags = names(option)
        long_names = [f.removeprefix("--") for f in flags if f.startswith("--")]
        for flag in flags:
            assert not UNIT_IN_NAME.search(flag), (
                f"icn {path} {flag}: a unit in the option's name; take a duration with units"
            )
        assert not UNIT_IN_HELP.search(option.help or ""), (
            f"icn {path} {flags}: its help names a unit; take a duration with units instead"
        )
        words = [w for n in long_names for w in n.split("-")]
        if any(DURATION_WORDS.fullmatch(w) for w in words):
            assert isinstance(parser_of(option), DurationParser), (
                f"icn {path} {flags}: a duration must be read by "
                "apps.cli.options.duration_option (units required)"
            )
            durations.append((path, option))
        elif isinstance(parser_of(option), DurationParser):
            durations.append((path, option))
    assert len(durations) >= 15  # the walk found them (peek, ping, route add, call, ...)
    for path, option in durations:
        assert option.metavar == "DURATION", f"icn {path} {names(option)}"
        assert parser_of(option).flag in names(option)  # the name its errors give
        if option.default is not None:  # shown as it must be typed: 4s, not 4.0
            assert re.fullmatch(r"[0-9.]+(us|ms|s|m|h|d)", str(option.default)), (path, option)


def test_a_bare_number_is_refused_with_the_option_and_the_fix() -> None:
    for path, option in options():
        parser = parser_of(option)
        if not isinstance(parser, DurationParser):
            continue
        for flag in names(option):  # -i as well as --interval
            ran = invoke(*path.split(), flag, "4000")
            assert ran.exit_code == 2, (path, flag, ran.output)
            # one line, like every bad argument of the CLI, with the option's long name
            assert ran.output == (
                f"error: {parser.flag}: '4000' has no unit; give a unit: 4000ms or 4000s "
                "(also us, m, h, d)\n"
            ), (path, flag)


def test_durations_with_units_and_their_errors() -> None:
    assert parse_duration_option("250ms") == 0.25
    assert parse_duration_option("2s") == 2.0 and parse_duration_option(" 1m") == 60.0
    with pytest.raises(ValueError, match=re.escape("has no unit; give a unit: 1.5ms or 1.5s")):
        parse_duration_option("1.5")
    ran = invoke("ping", "/x", "-i", "3 parsecs")
    assert ran.exit_code == 2
    assert ran.output.startswith("error: --interval: '3 parsecs': unknown time unit 'parsecs'")
    help_text = flat(invoke("peek", "-h").output)
    assert "--lifetime DURATION" in help_text and "[default: 4s]" in help_text


def test_version_is_the_installed_distributions_and_says_it_runs_compiled() -> None:
    # the suite runs the built tree: every module pyproject.toml lists is compiled and current
    expected = [
        f"icn (icn-net) {version('icn-net')}",
        f"hot paths: {len(compiled_sources())} modules compiled (mypyc)",
    ]
    assert invoke("--version").output.strip().splitlines() == expected
    ran = subprocess.run(  # the entry point itself: no command looked at first
        [sys.executable, "-c", "from apps.cli import main; main()", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert ran.returncode == 0 and ran.stdout.strip().splitlines() == expected, ran.stderr


def test_version_names_a_tree_without_a_build_or_with_a_stale_one(tmp_path: Path) -> None:
    pkg = tmp_path / "icn"
    pkg.mkdir()
    (pkg / "tlv.py").write_text("")
    assert compiled_status(tmp_path).line().startswith("hot paths: interpreted (no compiled")
    built = pkg / ("tlv" + importlib.machinery.EXTENSION_SUFFIXES[0])
    built.write_bytes(b"")
    assert compiled_status(tmp_path).line() == "hot paths: 1 module compiled (mypyc)"
    os.utime(built, (1, 1))  # built before the source was edited
    line = compiled_status(tmp_path).line()
    assert "0 modules compiled, 1 built before their source was edited (icn.tlv)" in line
    assert "scripts/bootstrap.sh" in line


def test_h_and_help_on_the_app_and_every_command_and_group() -> None:
    commands = list(walk())
    assert len(commands) > 40
    for path, command in commands:
        # -h everywhere; --help (click's own) on the app and the groups, whose context the
        # commands' contexts inherit the names from
        for flag in ("-h", "--help") if hasattr(command, "commands") else ("-h",):
            ran = invoke(*path.split(), flag)
            assert ran.exit_code == 0 and "Usage:" in ran.output, (path, flag, ran.output)


def test_help_is_grouped_in_panels_in_order() -> None:
    shown = {
        name: getattr(command, "rich_help_panel", None)
        for name, command in ROOT_COMMAND.commands.items()  # type: ignore[attr-defined]
        if not command.hidden
    }
    assert shown == PANEL_OF
    text = invoke("--help").output
    at = [text.index(f"─ {panel} ") for panel in PANELS]
    assert at == sorted(at), "panels out of order"
    assert "─ Commands " not in text  # no command left outside a panel


def test_demo_is_hidden_and_still_runs() -> None:
    demo = ROOT_COMMAND.commands["demo"]  # type: ignore[attr-defined]
    assert demo.hidden
    assert not re.search(r"^│ demo ", invoke("--help").output, re.MULTILINE)
    ran = subprocess.run(
        [sys.executable, "-c", "from apps.cli import main; main()", "demo", "--count", "30"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "OK: pass 2 served 30 objects from fwd0's content store" in ran.stdout


def test_key_has_explicit_verbs(tmp_path: Path) -> None:
    key_group = ROOT_COMMAND.commands["key"]  # type: ignore[attr-defined]
    assert list(key_group.commands) == ["generate", "show", "list"]
    key = tmp_path / "a.key"
    # no default action: `icn key FILE` is not a way to make or show a key
    ran = invoke("key", str(key))
    assert ran.exit_code == 2 and "No such command" in flat(ran.output)
    ran = invoke("key", "show", str(key))  # showing never makes one
    assert ran.exit_code == 2 and f"make one with `icn key generate {key}`" in flat(ran.output)
    assert not key.exists()

    made = invoke("key", "generate", str(key))
    assert made.exit_code == 0, made.output
    fingerprint = Identity.load(key).fingerprint
    assert made.output.split() == [fingerprint, str(key)]
    again = invoke("key", "generate", str(key))
    assert again.exit_code == 1 and "exists; pass --force" in again.output
    assert invoke("key", "show", str(key)).output.split() == [fingerprint, str(key)]

    (tmp_path / "notes.txt").write_text("not a key\n")
    Identity.generate().save(tmp_path / "b.key")
    listed = invoke("key", "list", str(tmp_path), "--json")
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)
    assert [r["file"] for r in rows] == [str(key), str(tmp_path / "b.key")]
    assert rows[0]["fingerprint"] == fingerprint


def test_key_defaults_to_the_identity_file_serve_and_call_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("ICN_IDENTITY", raising=False)
    default = tmp_path / "icn" / "id_ed25519"
    assert invoke("key", "show").exit_code == 2 and not default.exists()
    assert invoke("key", "generate").exit_code == 0 and default.exists()
    listed = invoke("key", "list")
    assert listed.exit_code == 0 and str(default) in flat(listed.output)
    other = tmp_path / "other.key"
    monkeypatch.setenv("ICN_IDENTITY", str(other))
    assert invoke("key", "generate").exit_code == 0 and other.exists()


def test_loadgen_consume_takes_a_udp_transport_only() -> None:
    ran = invoke("loadgen", "consume", "--transport", "unix:///tmp/f.sock", "--prefix", "/a")
    assert ran.exit_code == 2
    assert "loadgen consume speaks UDP only" in flat(ran.output)
    ran = invoke("loadgen", "consume", "--transport", "udp4://[::1]:6363", "--prefix", "/a")
    assert ran.exit_code == 2 and "--transport: " in ran.output and "IPv4" in ran.output
