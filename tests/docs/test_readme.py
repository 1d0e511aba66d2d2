"""The top-level pages a clone opens first (README.md, CONTRIBUTING.md, CHANGELOG.md): the README
stays short, and every relative link in them names a file of the repository (mkdocs checks the
links between pages under docs/, not these)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250  # issue 37: a new user's first page, not the manual
PAGES = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md"]
# [text](target) outside code spans and fenced blocks; a target with a scheme is not checked
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")


def links(markdown: str) -> list[tuple[int, str]]:
    """(line, target) of every Markdown link outside code."""
    text = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), markdown)
    found = []
    for n, line in enumerate(text.split("\n"), start=1):
        for m in _LINK.finditer(_CODE.sub("", line)):
            found.append((n, m.group(1)))
    return found


def broken(page: Path, text: str | None = None) -> list[str]:
    """Each relative link of ``page`` (or of ``text`` read as if it were there) whose file does
    not exist, or that leaves the repository."""
    problems = []
    for line, target in links(page.read_text() if text is None else text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # https:, mailto:, an anchor in the page itself
        path = (page.parent / target.split("#", 1)[0]).resolve()
        where = f"{page.relative_to(ROOT)}:{line}: {target}"
        if not path.is_relative_to(ROOT):
            problems.append(f"{where}: points outside the repository")
        elif not path.exists():
            problems.append(f"{where}: no such file ({path.relative_to(ROOT)})")
    return problems


def test_readme_is_short() -> None:
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= README_MAX_LINES, (
        f"README.md has {n} lines, more than {README_MAX_LINES}: move the detail to a page "
        "under docs/ and link it"
    )


@pytest.mark.parametrize("name", PAGES)
def test_every_relative_link_names_a_file_of_the_repository(name: str) -> None:
    problems = broken(ROOT / name)
    assert not problems, "\n".join(problems)


def test_a_link_outside_the_repository_or_to_nothing_is_found() -> None:
    text = (
        "[notes](../outside/notes.md)\n"
        "`[in code](nowhere.md)`\n"
        "```\n[in a block](nowhere.md)\n```\n"
        "[gone](docs/no-such-page.md#x) [web](https://example.org) [here](#top) [ok](LICENSE)\n"
    )
    assert broken(ROOT / "README.md", text) == [
        "README.md:1: ../outside/notes.md: points outside the repository",
        "README.md:6: docs/no-such-page.md#x: no such file (docs/no-such-page.md)",
    ]
