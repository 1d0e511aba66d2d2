"""Whether this install runs its hot paths compiled (``icn --version`` says it).

mypyc builds a module as an extension beside its source (``tlv.py`` and
``tlv.cpython-311-x86_64-linux-gnu.so``); Python imports the extension first.  A checkout
without a build, or a source edited after its build, runs the ``.py`` or an old build: both
work, but the first is several times slower and the second is not what the source says.
No list is read here: the pairs on disk are the build (pyproject.toml ``[tool.icn] compiled``
is what setup.py builds from).
"""

from __future__ import annotations

import importlib.machinery
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("icn", "forwarder", "compute", "apps")
REBUILD = "run scripts/bootstrap.sh (pip install -e .) to build them"


@dataclass
class CompiledStatus:
    compiled: list[str] = field(default_factory=list)  # modules with a current build
    stale: list[str] = field(default_factory=list)  # built, but older than their source

    def line(self) -> str:
        """One line for ``icn --version``."""
        if not self.compiled and not self.stale:
            return f"hot paths: interpreted (no compiled module found; {REBUILD})"
        modules = f"{len(self.compiled)} module" + ("" if len(self.compiled) == 1 else "s")
        if self.stale:
            names = ", ".join(self.stale[:3]) + (" ..." if len(self.stale) > 3 else "")
            return (
                f"hot paths: {modules} compiled, {len(self.stale)} built "
                f"before their source was edited ({names}): {REBUILD}"
            )
        return f"hot paths: {modules} compiled (mypyc)"


def compiled_status(root: Path = ROOT) -> CompiledStatus:
    """The modules under ``root``'s packages that have an extension build beside their source."""
    status = CompiledStatus()
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    for package in PACKAGES:
        for source in sorted((root / package).rglob("*.py")):
            built = [source.with_name(source.stem + s) for s in suffixes]
            found = next((b for b in built if b.exists()), None)
            if found is None:
                continue
            name = ".".join(source.relative_to(root).with_suffix("").parts)
            if found.stat().st_mtime < source.stat().st_mtime:
                status.stale.append(name)
            else:
                status.compiled.append(name)
    return status
