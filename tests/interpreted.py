"""Run the modules that mypyc compiles (pyproject.toml ``[tool.icn] compiled``) from their
Python source: ``python -m tests.interpreted -- PYTEST ARGS`` runs pytest with an import hook
that loads each of them from its ``.py`` even where its compiled build sits beside it, so the
suite can show the source still works without a build (tests/unit/test_compiled.py)."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def compiled_sources() -> list[Path]:
    """The compiled modules' sources, as pyproject.toml lists them."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [ROOT / rel for rel in config["tool"]["icn"]["compiled"]]


def module_name(source: Path) -> str:
    return ".".join(source.relative_to(ROOT).with_suffix("").parts)


class SourceFirst(importlib.abc.MetaPathFinder):
    """Finds the listed modules in their ``.py`` files, ahead of the path finder."""

    def __init__(self, sources: Sequence[Path]) -> None:
        self.sources = {module_name(path): path for path in sources}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        source = self.sources.get(fullname)
        if source is None:
            return None
        loader = importlib.machinery.SourceFileLoader(fullname, str(source))
        return importlib.util.spec_from_file_location(fullname, source, loader=loader)


def main(argv: list[str]) -> int:
    import pytest

    sys.meta_path.insert(0, SourceFirst(compiled_sources()))
    return int(pytest.main(argv))


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(args[1:] if args[:1] == ["--"] else args))
