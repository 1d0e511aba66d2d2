"""MkDocs hook (``hooks:`` in mkdocs.yml): adds the generated reference pages to the build.

Each page is made from the code when the site is built and handed to MkDocs as a generated
file, never written into ``docs/``: a committed copy would go stale the day the code changes.
The pages are listed in :data:`PAGES`; the nav in mkdocs.yml names them like any other page.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

# MkDocs loads this file by its path; the generators beside it are imported as the package
# they are (mypy checks them so), which needs the repository's root on the path even when
# `mkdocs` is run as a script rather than `python -m mkdocs` from the root
ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from docs_hooks import cli_page, config_pages, metrics_page  # noqa: E402

PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page.cli_page,
    "reference/exit-codes.md": cli_page.exit_codes_page,
    **config_pages.PAGES,
    "reference/counters-metrics.md": metrics_page.counters_metrics_page,
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add every generated page; a file of the same name under docs/ is an error (it would be
    a stale copy of what the code says)."""
    for path, make in PAGES.items():
        if files.get_file_from_path(path) is not None:
            raise PluginError(
                f"docs/{path} is generated from the code at build time "
                f"(docs_hooks/reference.py); delete the file from docs/"
            )
        files.append(File.generated(config, path, content=make()))
    return files
