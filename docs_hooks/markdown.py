"""Markdown pieces the generated pages share: table cells, tables, and the comments a source
file puts on a definition (the settings classes keep their fields' explanations there)."""

from __future__ import annotations

import ast
import inspect
import io
import re
import textwrap
import tokenize
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cell(text: object) -> str:
    """``text`` fit for one table cell: no line breaks, pipes escaped, in Markdown."""
    return rst_to_md(" ".join(str(text).split())).replace("|", "\\|")


def code(text: object) -> str:
    """Inline code, safe in a table cell (a backtick inside is doubled around)."""
    s = str(text)
    fence = "``" if "`" in s else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{s}{pad}{fence}".replace("|", "\\|")


def table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def relative(path: str | Path) -> str:
    """A source file's path from the repository's root (as a reader finds it in a clone)."""
    return Path(path).resolve().relative_to(ROOT).as_posix()


def rst_to_md(text: str) -> str:
    """The reStructuredText bits of our docstrings in Markdown: ``code`` and :func:`x`."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return re.sub(r"``(.+?)``", r"`\1`", text, flags=re.S)


def doc(obj: object) -> str:
    """The class's own docstring, dedented, in Markdown; empty when it has none (not the
    signature a dataclass makes up for a class without one)."""
    raw = vars(obj).get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    if not isinstance(raw, str):
        return ""
    if isinstance(obj, type) and raw.startswith(f"{obj.__name__}("):
        return ""
    return rst_to_md(inspect.cleandoc(raw))


def comments_by_line(source: str) -> dict[int, str]:
    """Line number -> the text of the comment on that line (tokenized: a ``#`` in a string is
    no comment)."""
    found: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            found[tok.start[0]] = tok.string.lstrip("#").strip()
    return found


def class_field_comments(cls: type) -> dict[str, str]:
    """A class body's fields -> their comment: the comment lines right above the field and the
    one at the end of its line, joined.  The settings classes explain their fields so."""
    source = textwrap.dedent(inspect.getsource(cls))
    comments = comments_by_line(source)
    lines = source.splitlines()
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.ClassDef)
    found: dict[str, str] = {}
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            name = stmt.target.id
        elif (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            name = stmt.targets[0].id
        else:
            continue
        above: list[str] = []
        line = stmt.lineno - 1
        while line >= 1 and lines[line - 1].strip().startswith("#"):
            above.insert(0, comments[line])
            line -= 1
        end = stmt.end_lineno or stmt.lineno
        trailing = comments.get(end) if not lines[end - 1].strip().startswith("#") else None
        text = " ".join([*above, *([trailing] if trailing else [])])
        if text:
            found[name] = text
    return found


def module_constant_comments(path: Path, prefix: str) -> list[tuple[str, object, str]]:
    """The module-level constants of ``path`` whose name starts with ``prefix``: (name, value,
    the comment at the end of its line), in the file's order."""
    source = path.read_text()
    comments = comments_by_line(source)
    found: list[tuple[str, object, str]] = []
    for stmt in ast.parse(source).body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id.startswith(prefix)
            and isinstance(stmt.value, ast.Constant)
        ):
            line = stmt.end_lineno or stmt.lineno
            found.append((stmt.targets[0].id, stmt.value.value, comments.get(line, "")))
    return found
