"""``icn fwd``: its options, the config built from them, its run, and a parser without typer.

A forwarder is the process a topology runs a hundred of, so its command line is read here with
a few lines of plain Python instead of typer, click and rich (about 3 MB of every daemon's
memory, issue 23).  Only a command line this parser is sure of takes that way: anything else
(``--help``, an unknown or misspelt option, a missing or non-integer value, a value that starts
with ``-``) returns None and goes to typer's ``fwd`` command in :mod:`apps.cli.root`, so users
get typer's help and typer's errors exactly as before.  The options are declared once, as
:class:`FwdOptions`; a test holds typer's command to the same names, types and repetitions.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from apps.loop import run_loop
from icn.errors import ConfigError, IcnError

if TYPE_CHECKING:
    from forwarder.config import ForwarderConfig


@dataclass
class FwdOptions:
    """The options of ``icn fwd``, named as their flags (``cs_capacity`` is ``--cs-capacity``)."""

    config: Path | None = None
    unix: str | None = None
    udp: list[str] = field(default_factory=list)
    tcp: list[str] = field(default_factory=list)
    cs_capacity: int | None = None
    log_level: str | None = None
    face: list[str] = field(default_factory=list)
    route: list[str] = field(default_factory=list)
    strategy: list[str] = field(default_factory=list)
    metrics: str | None = None
    pcap: str | None = None


# flag -> field, and how values are read: from the dataclass, so the parser cannot drift from it
FLAGS = {"--" + f.name.replace("_", "-"): f.name for f in dataclasses.fields(FwdOptions)}
_REPEATABLE = frozenset(f.name for f in dataclasses.fields(FwdOptions) if f.default_factory is list)
_CONVERT: dict[str, Any] = {"config": Path, "cs_capacity": int}  # the others are str


def parse_fwd_options(args: Sequence[str]) -> FwdOptions | None:
    """``args`` (what follows ``icn fwd``) as options, or None when typer must read them."""
    values: dict[str, Any] = {}
    i = 0
    while i < len(args):
        flag, sep, value = args[i].partition("=")
        name = FLAGS.get(flag)
        if name is None:
            return None  # --help, a typo, a stray word, "--"
        if not sep:
            if i + 1 == len(args):
                return None  # the value is missing
            i += 1
            value = args[i]
        if value.startswith("-"):
            return None  # click reads it as the value; rare enough to leave to it
        convert = _CONVERT.get(name, str)
        try:
            converted = convert(value)
        except ValueError:
            return None
        if name in _REPEATABLE:
            values.setdefault(name, []).append(converted)
        else:
            values[name] = converted  # the last one wins, as with click
        i += 1
    return FwdOptions(**values)


def fail(msg: str, code: int = 1) -> NoReturn:
    """One line on stderr, ``error: ...``, and exit ``code`` (what typer.Exit would give)."""
    print(f"error: {msg}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def _split_pair(value: str, flag: str, example: str) -> tuple[str, str]:
    left, sep, right = value.partition("=")
    if not sep or not left or not right:
        fail(f"{flag} {value!r}: expected {example}")
    return left, right


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    """A config section a flag adds to; one that is not a mapping is left for the checker to
    report with its path, the flag's value then only replaces it."""
    value = data.get(key)
    return dict(value) if isinstance(value, dict) else {}


def build_fwd_config(
    config: Path | None,
    unix: str | None,
    udp: list[str],
    tcp: list[str],
    cs_capacity: int | None,
    log_level: str | None,
    face: list[str],
    route: list[str],
    strategy: list[str],
    metrics: str | None = None,
    pcap: str | None = None,
) -> ForwarderConfig:
    """Merge a config file (if any) with command-line flags; flags win."""
    from forwarder.config import config_from_dict, read_config_mapping

    data: dict[str, Any] = {}
    source = "command line"
    if config is not None:
        data = read_config_mapping(config)
        source = str(config)
    listen = dict(data.get("listen") or {})
    if unix is not None:
        listen["unix"] = unix
    if udp:
        listen["udp"] = udp
    if tcp:
        listen["tcp"] = tcp
    if listen or "listen" in data:
        data["listen"] = listen  # else the daemon listens where NFD does
    if cs_capacity is not None:
        data["tables"] = {**(data.get("tables") or {}), "cs_max_entries": cs_capacity}
    if log_level is not None:
        data["log_level"] = log_level
    faces = list(data.get("faces") or [])
    known = {f.get("uri") for f in faces if isinstance(f, dict)}
    for uri in face:
        if uri not in known:
            faces.append({"uri": uri})
            known.add(uri)
    routes = list(data.get("routes") or [])
    for r in route:
        prefix, uri = _split_pair(r, "--route", "PREFIX=FACE_URI, e.g. /app=udp4://127.0.0.1:6364")
        if uri not in known:
            faces.append({"uri": uri})
            known.add(uri)
        routes.append({"prefix": prefix, "face": uri})
    data["faces"], data["routes"] = faces, routes
    strategies = list(data.get("strategies") or [])
    for s in strategy:
        prefix, name = _split_pair(s, "--strategy", "PREFIX=NAME, e.g. /sync=multicast")
        strategies.append({"prefix": prefix, "strategy": name})
    data["strategies"] = strategies
    if metrics is not None:
        data["metrics"] = {**_section(data, "metrics"), "listen": metrics}
    if pcap is not None:
        data["capture"] = {**_section(data, "capture"), "file": pcap}
    return config_from_dict(data, source)


def run_fwd(opts: FwdOptions) -> None:
    """Run a forwarder daemon until SIGTERM or SIGINT; a bad config exits 2, other errors 1."""
    from forwarder.daemon import run_daemon

    try:
        cfg = build_fwd_config(
            opts.config,
            opts.unix,
            opts.udp,
            opts.tcp,
            opts.cs_capacity,
            opts.log_level,
            opts.face,
            opts.route,
            opts.strategy,
            opts.metrics,
            opts.pcap,
        )
        run_loop(run_daemon(cfg))
    except ConfigError as exc:
        fail(str(exc), 2)
    except IcnError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        pass
