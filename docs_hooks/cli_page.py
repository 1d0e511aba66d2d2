"""``reference/cli.md`` from the ``icn`` Typer app and ``reference/exit-codes.md`` from the
``EXIT_*`` constants of the CLI's modules.

The CLI page walks the click command tree :func:`typer.main.get_command` makes of the app, as
``icn --help`` sees it (every lazily added command module included): each visible command and
subcommand with its usage, its help and one row per argument and option, the rows being what
``--help`` prints for them (:meth:`get_help_record`), defaults included.
"""

from __future__ import annotations

import ast
import importlib.util
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
import typer.main

from docs_hooks.markdown import cell, code, comments_by_line, relative, table

DEFAULT_PANEL = "Commands"


def icn_app() -> typer.Typer:
    """The ``icn`` command's Typer app with every command module added, as ``icn --help``
    lists them."""
    from apps.cli import app  # (a lazy attribute: the app with every command module added)

    assert isinstance(app, typer.Typer), f"apps.cli.app is a {type(app).__name__}, not a Typer"
    return app


@dataclass(frozen=True)
class Entry:
    """One command of the tree: its words after ``icn``, the command and its context."""

    path: tuple[str, ...]
    command: Any  # typer's click Command or Group
    ctx: typer.Context

    @property
    def title(self) -> str:
        return " ".join(("icn", *self.path))

    @property
    def anchor(self) -> str:
        return "-".join(("icn", *self.path))

    @property
    def panel(self) -> str:
        panel = getattr(self.command, "rich_help_panel", None)
        return panel if isinstance(panel, str) else DEFAULT_PANEL


def walk(command: Any, ctx: typer.Context, path: tuple[str, ...] = ()) -> Iterator[Entry]:
    """Every visible command under ``command`` (itself first), in the order help lists them."""
    if path:
        yield Entry(path, command, ctx)
    if not hasattr(command, "list_commands"):
        return
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        if sub is None or sub.hidden:
            continue
        yield from walk(sub, typer.Context(sub, info_name=name, parent=ctx), (*path, name))


def root_entry() -> Entry:
    """``icn`` itself (its own options, such as ``--version``), with the context its
    commands' contexts descend from."""
    root = typer.main.get_command(icn_app())
    settings = getattr(root, "context_settings", None) or {}
    return Entry((), root, typer.Context(root, info_name="icn", **settings))


def command_tree() -> list[Entry]:
    """The ``icn`` command's visible commands and subcommands, in help's order."""
    root = root_entry()
    return list(walk(root.command, root.ctx))


def _help_text(command: Any) -> str:
    """A command's help as Markdown paragraphs (click's ``\\b`` no-rewrap markers dropped)."""
    text = command.help or command.short_help or ""
    lines = [line for line in text.strip().splitlines() if line.strip() != "\b"]
    return "\n".join(lines)


def _usage(entry: Entry) -> str:
    pieces = entry.command.collect_usage_pieces(entry.ctx)
    return " ".join([entry.title, *pieces])


def _param_rows(entry: Entry) -> dict[str, list[list[str]]]:
    """Rows per option panel (typer's ``rich_help_panel``; "" for the default one)."""
    panels: dict[str, list[list[str]]] = {}
    for param in entry.command.params:
        if getattr(param, "hidden", False):
            continue
        record = param.get_help_record(entry.ctx)
        if record is None:
            continue
        names, help_ = record
        panel = getattr(param, "rich_help_panel", None)
        kind = "argument" if param.param_type_name == "argument" else "option"
        panels.setdefault(panel if isinstance(panel, str) else "", []).append(
            [code(names), kind, cell(help_)]
        )
    return panels


def _command_section(entry: Entry) -> str:
    level = "#" * min(2 + len(entry.path) - 1, 4)
    out = [f"{level} {entry.title} {{#{entry.anchor}}}\n"]
    help_ = _help_text(entry.command)
    if help_:
        out.append(help_ + "\n")
    out.append(f"```\n{_usage(entry)}\n```\n")
    for panel, rows in _param_rows(entry).items():
        if panel:
            out.append(f"**{panel}**\n")
        out.append(table(["Argument or option", "Kind", "Help"], rows))
    return "\n".join(out)


def cli_page() -> str:
    root = root_entry()
    entries = list(walk(root.command, root.ctx))
    top = [e for e in entries if len(e.path) == 1]
    panels: dict[str, list[Entry]] = {}
    for e in top:
        panels.setdefault(e.panel, []).append(e)
    out = [
        "# Command line: `icn`\n",
        "Generated from the `icn` command's Typer app when the site is built (every command "
        "and subcommand `icn --help` lists, with what `--help` prints for each of its "
        "arguments and options), so it always matches the installed command. "
        "`icn COMMAND --help` prints the same on a terminal; the exit codes every command "
        "shares are on [Exit codes](exit-codes.md).\n",
        f"```\n{_usage(root)}\n```\n",
        f"Help: {', '.join(code(o) for o in root.ctx.help_option_names)} (on `icn` and on "
        "every command).\n",
    ]
    for rows in _param_rows(root).values():
        out.append(table(["Option of `icn`", "Kind", "Help"], rows))
    for panel, group in panels.items():
        out.append(f"## {panel}\n")
        rows = []
        for e in group:
            subs = [s for s in entries if s.path[:1] == e.path and len(s.path) > 1]
            summary = cell(e.command.get_short_help_str(limit=120))
            if subs:
                summary += " Subcommands: " + ", ".join(
                    f"[{s.path[-1]}](#{s.anchor})" for s in subs if len(s.path) == 2
                )
            rows.append([f"[`{e.title}`](#{e.anchor})", summary])
        out.append(table(["Command", "What it does"], rows))
    for group in panels.values():
        for e in group:
            for s in entries:
                if s.path[: len(e.path)] == e.path:
                    out.append(_command_section(s))
    return "\n".join(out)


def exit_constants() -> list[tuple[str, str, int, str]]:
    """Every ``EXIT_*`` constant of the CLI's modules: (module file, name, code, comment)."""
    import apps.cli

    found: list[tuple[str, str, int, str]] = []
    for info in sorted(pkgutil.iter_modules(apps.cli.__path__), key=lambda i: i.name):
        spec = importlib.util.find_spec(f"apps.cli.{info.name}")
        if spec is None or spec.origin is None:
            continue
        path = Path(spec.origin)
        source = path.read_text()
        comments = comments_by_line(source)
        for stmt in ast.parse(source).body:
            if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
                continue
            target, value = stmt.targets[0], stmt.value
            pairs: list[tuple[ast.expr, ast.expr]] = []
            if isinstance(target, ast.Name):
                pairs = [(target, value)]
            elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                pairs = list(zip(target.elts, value.elts, strict=True))
            for t, v in pairs:
                if (
                    isinstance(t, ast.Name)
                    and t.id.startswith("EXIT_")
                    and isinstance(v, ast.Constant)
                    and isinstance(v.value, int)
                ):
                    comment = comments.get(stmt.end_lineno or stmt.lineno, "")
                    found.append((relative(path), t.id, v.value, comment))
    return found


def _meaning(name: str) -> str:
    """What a code without a comment means, read from its name (``EXIT_BAD_FILE``: bad file)."""
    return name.removeprefix("EXIT_").replace("_", " ").lower()


def exit_codes_page() -> str:
    import apps.cli.common as common

    constants = exit_constants()
    shared = [c for c in constants if c[0] == relative(Path(common.__file__))]
    others = [c for c in constants if c not in shared]
    out = [
        "# Exit codes\n",
        "Every `icn` command ends with one line on stderr that says what went wrong and what "
        "to do (`error: ...`), never a traceback, and an exit code a script can branch on. "
        "The codes below are generated from the `EXIT_*` constants of the CLI's modules when "
        "the site is built. Typer's own usage errors (an unknown option, a missing argument) "
        "exit with 2, like a bad argument.\n",
        "## Codes every command shares\n",
        f"Defined in `{relative(Path(common.__file__))}`; the management and tool commands "
        "(`icn status`, `face`, `route`, `strategy`, `cs`, `peek`, `poke`, `ping`, `call`, "
        "`serve` ...) map the project's exceptions to them in one place.\n",
        table(
            ["Code", "Constant", "Meaning"],
            [["0", "—", "success"]]
            + [
                [str(code_), code(name), cell(comment or _meaning(name))]
                for _f, name, code_, comment in shared
            ],
        ),
        f"`icn --help` says the same in one line:\n\n> {cell(common.EXIT_CODES_HELP)}\n",
    ]
    if others:
        out += [
            "## Codes of single commands\n",
            "Some commands name their codes in their own module; the numbers agree with the "
            "shared ones (1: the run or command failed, 2: a bad file or argument, 130: "
            "interrupted).\n",
            table(
                ["Code", "Constant", "Module", "Meaning"],
                [
                    [str(code_), code(name), code(file), cell(comment or _meaning(name))]
                    for file, name, code_, comment in others
                ],
            ),
        ]
    return "\n".join(out)
