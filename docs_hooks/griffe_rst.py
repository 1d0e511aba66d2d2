"""A griffe extension (mkdocs.yml, mkdocstrings' ``extensions``): the reStructuredText of our
docstrings read as Markdown on the API pages.

The code's docstrings are written for ``help()`` and for Sphinx habits: ``:func:`name```
roles and paragraphs that end in ``::`` before an indented example.  Markdown shows the first as
a stray ``:func:`` and the second as a doubled colon; this rewrites both (a role becomes inline
code of the name, ``~`` keeping only its last part; ``::`` a single colon) and leaves the rest,
which Markdown already reads (double backticks are code spans, indented blocks code blocks).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?[a-z]+:`(~?)([^`<]+?)(?:\s*<[^>]*>)?`")
LITERAL_MARKER = re.compile(r"(\S)::[ \t]*$", re.MULTILINE)
BARE_MARKER = re.compile(r"^[ \t]*::[ \t]*$", re.MULTILINE)


def _role(m: re.Match[str]) -> str:
    name = m.group(2).strip()
    return f"`{name.rsplit('.', 1)[-1] if m.group(1) else name}`"


def rst_to_markdown(text: str) -> str:
    text = ROLE.sub(_role, text)
    text = BARE_MARKER.sub("", text)
    return LITERAL_MARKER.sub(r"\1:", text)


class RstToMarkdown(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rst_to_markdown(obj.docstring.value)
