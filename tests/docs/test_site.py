"""The documentation site: ``mkdocs build --strict`` passes offline, the generated reference
matches the code it is generated from, and no file of the repository points outside it.

The build runs once per module, as a subprocess with a bound, into a temporary directory, with
every HTTP(S) proxy pointed at a closed loopback port: a plugin or theme that fetched anything
at build time would fail it (the site must build, and read, without the internet).  The checks
then read the built HTML against the code itself (the Typer app, the pydantic models, the
settings classes, the packages' ``__all__``), not against the generator's own walk of it.
"""

from __future__ import annotations

import dataclasses
import html
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# one worker builds the site once for all of them (a module fixture is per worker)
pytestmark = pytest.mark.xdist_group(name="docs_site")

ROOT = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT = 120  # seconds; the build takes about 4 s on 2 cores


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed, by us)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    nowhere = f"http://127.0.0.1:{_closed_port()}"
    env = {
        **os.environ,
        "NO_MKDOCS_2_WARNING": "1",
        **{k: nowhere for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")},
        "no_proxy": "",
        "NO_PROXY": "",
    }
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)]
    proc = subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT
    )
    assert proc.returncode == 0, (
        f"`{' '.join(cmd[1:])}` failed (exit {proc.returncode}); its warnings:\n"
        + "\n".join(
            line for line in proc.stderr.splitlines() if "WARNING" in line or "Error" in line
        )
        + f"\n--- last lines ---\n{proc.stderr[-3000:]}"
    )
    return out


def _page(site: Path, path: str) -> str:
    page = site / path / "index.html"
    assert page.is_file(), f"{page} was not built; is {path}.md in mkdocs.yml's nav?"
    return page.read_text()


def _ids(page: str) -> set[str]:
    return {html.unescape(m) for m in re.findall(r'\bid="([^"]+)"', page)}


def _codes(page: str) -> set[str]:
    """The text of every <code> element (table cells name fields and options so)."""
    return {
        html.unescape(re.sub(r"<[^>]+>", "", m)) for m in re.findall(r"<code>(.*?)</code>", page)
    }


def _visible_commands(command: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every command help lists under ``command`` (hidden ones left out), by its words."""
    found: dict[tuple[str, ...], Any] = {}
    for name, sub in getattr(command, "commands", {}).items():
        if not sub.hidden:
            found[(*path, name)] = sub
            found.update(_visible_commands(sub, (*path, name)))
    return found


def test_cli_page_lists_every_command_and_option(site: Path) -> None:
    import typer.main

    from docs_hooks.cli_page import icn_app

    page = _page(site, "reference/cli")
    ids, codes = _ids(page), " ".join(_codes(page))
    root = typer.main.get_command(icn_app())
    commands = _visible_commands(root)
    assert len(commands) > 20, f"the icn app has only {sorted(commands)}: were its modules added?"
    for words, command in commands.items():
        anchor = "-".join(("icn", *words))
        assert anchor in ids, f"`icn {' '.join(words)}` has no section (#{anchor}) on the CLI page"
        for param in command.params:
            if getattr(param, "hidden", False) or param.param_type_name != "option":
                continue
            assert param.opts[0] in codes, (
                f"`icn {' '.join(words)}`'s option {param.opts[0]} is not on the CLI page"
            )
    for name, command in getattr(root, "commands", {}).items():
        if command.hidden:
            assert f"icn-{name}" not in ids, f"hidden `icn {name}` is listed on the CLI page"


def test_scenario_schema_page_lists_every_field(site: Path) -> None:
    from apps.scenario.schema import Scenario

    page = _page(site, "reference/scenario-schema")
    codes = _codes(page)
    top = [f.alias or name for name, f in Scenario.model_fields.items()]
    missing = [name for name in top if name not in codes]
    assert not missing, f"top-level scenario fields missing from the schema page: {missing}"
    # the sections a scenario's fields hold (nodes, links, chaos...) have their fields too
    for name in ("between", "ready_timeout", "kinds", "min_success_ratio", "max_bytes"):
        assert name in codes, f"scenario field {name!r} is not on the schema page"


def test_forwarder_config_page_lists_every_field(site: Path) -> None:
    from forwarder.config import ForwarderConfig, TablesConfig

    codes = _codes(_page(site, "reference/forwarder-config"))
    for cls in (ForwarderConfig, TablesConfig):
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in codes]
        assert not missing, f"{cls.__name__} fields missing from the config page: {missing}"


def test_exit_codes_page_lists_every_shared_code(site: Path) -> None:
    import apps.cli.common as common

    codes = _codes(_page(site, "reference/exit-codes"))
    shared = [
        n for n in vars(common) if n.startswith("EXIT_") and isinstance(getattr(common, n), int)
    ]
    assert shared, "apps.cli.common defines no EXIT_* codes"
    assert not [n for n in shared if n not in codes], "exit codes missing from their page"


def test_counters_page_has_the_forwarder_counters_and_families(site: Path) -> None:
    codes = _codes(_page(site, "reference/counters-metrics"))
    # keys counted in the tables and pipelines, and a family of each collector
    for name in (
        "pit.insert",
        "cs.hit",
        "fw.drop_hop_limit",
        "pit.refused_face_share",
        "icn_interests_total",
        "icn_rmi_calls_total",
        "icn_stream_records_in_total",
        "icn_collective_chunks_total",
    ):
        assert name in codes, f"{name} is not on the counters and metrics page"


@pytest.mark.parametrize(
    ("page", "module"),
    [
        ("reference/api/rmi", "compute.rmi"),
        ("reference/api/collective", "compute.collective"),
        ("reference/api/stream", "compute.stream"),
        ("reference/api/tasks", "compute.tasks"),
    ],
)
def test_api_page_documents_every_public_name(site: Path, page: str, module: str) -> None:
    import importlib

    names = list(getattr(importlib.import_module(module), "__all__", []))
    assert names, f"{module} exports nothing (__all__), so its API page documents nothing"
    ids = _ids(_page(site, page))
    missing = [n for n in names if f"{module}.{n}" not in ids]
    assert not missing, f"{module} names without an entry on {page}: {missing}"


def test_api_forwarder_page_documents_the_daemon(site: Path) -> None:
    ids = _ids(_page(site, "reference/api/forwarder"))
    for name in ("forwarder.daemon.ForwarderDaemon", "forwarder.config.ForwarderConfig"):
        assert name in ids, f"{name} has no entry on the forwarder API page"


def test_site_loads_nothing_from_the_internet(site: Path) -> None:
    """Scripts, stylesheets and fonts all come from the built site (no CDN)."""
    external = re.compile(r'<(?:script[^>]*\bsrc|link[^>]*\bhref)="(?:https?:)?//[^"]+"')
    found = {
        f"{p.relative_to(site)}: {m}"
        for p in site.rglob("*.html")
        for m in external.findall(p.read_text())
        if 'rel="canonical"' not in m
    }
    assert not found, "pages that load from the internet:\n" + "\n".join(sorted(found)[:10])


# what a file of the repository may not name: places outside it (the shared design notes)
OUTSIDE = re.compile(
    "|".join(
        re.escape(s)
        for s in ("../" + "shared", "/work/" + "shared", "DESIGN" + ".md", "protocols" + ".md")
    )
    + "|DESIGN"
    + r" (?:section|§)"
)


def test_no_file_refers_outside_the_repository() -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=30
    ).stdout.split(b"\0")
    found = []
    for name in filter(None, listed):
        path = ROOT / name.decode()
        try:
            data = path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            continue  # deleted in the working tree, or a submodule
        if b"\0" in data[:8192]:
            continue  # binary (images, captures)
        text = data.decode("utf-8", errors="replace")
        for lineno, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{name.decode()}:{lineno}: {line.strip()[:120]}")
    assert not found, (
        "these lines point outside the repository; cite docs/design.md sections (or the "
        "specification itself) instead:\n" + "\n".join(found)
    )
