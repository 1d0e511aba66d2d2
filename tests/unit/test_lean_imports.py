"""What ``icn fwd`` and ``icn status`` import before they run (issue 23: a lean daemon).

Each case imports an entry in a fresh interpreter, as the ``icn`` process does, and lists the
modules it loaded: heavy modules (numpy, plotting, scenarios, compute, rich, python-ndn's
security and management models, cryptography) must be imported where they are used, not on the
way to a forwarder or a management command.  The footprint of a running daemon is measured in
tests/integration/test_daemon_footprint.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Modules neither path may load (a name also stands for its submodules).
HEAVY = (
    "numpy",
    "matplotlib",
    "apps.scenario",
    "compute",
    "rich",
    "ndn.security",
    "ndn.app_support",  # nfd_mgmt: imported when a management message is encoded or decoded
    "Cryptodome",
    "cryptography",
    # the forwarder's config is checked by forwarder/schema.py: pydantic and its own imports
    # cost an idle daemon about 8 MB (issue 23)
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "typing_inspection",
)
# The CLI's subcommand modules: only the one of the command being run is imported.
COMMAND_MODULES = (
    "apps.cli.mgmt",
    "apps.cli.tools",
    "apps.cli.rmi",
    "apps.cli.trust",
    "apps.cli.scenario",
    "apps.cli.flow",
)

# What `icn fwd --unix PATH` imports and builds before it opens its listeners: the CLI entry and
# its fwd option parser, the config from flags, the daemon and its management (run_fwd imports
# the daemon when it runs), the event loop.
FWD_ENTRY = """
import json, sys
from apps.cli import add_commands, build_fwd_config
from apps.cli.fwd import parse_fwd_options
add_commands(["fwd", "--unix", "x.sock"])
opts = parse_fwd_options(["--unix", "x.sock"])
from forwarder.daemon import ForwarderDaemon
from forwarder.mgmt.manager import install_management
daemon = ForwarderDaemon(build_fwd_config(None, opts.unix, [], [], None, None, [], [], []))
install_management(daemon)
import uvloop
print(json.dumps(sorted(sys.modules)))
"""
# What a forwarder started with a well-formed command line does without (issue 23: each cost the
# idle daemon memory): the CLI framework, which only help and option errors need.
NOT_IN_FWD = ("typer", "click", "shellingham", "apps.cli.root")

STATUS_ENTRY = """
import json, sys
from apps.cli import add_commands
add_commands(["status", "--json"])
print(json.dumps(sorted(sys.modules)))
"""


def _modules(code: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    modules: list[str] = json.loads(proc.stdout.splitlines()[-1])
    return modules


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


def test_fwd_entry_imports_only_what_forwarding_needs() -> None:
    modules = _modules(FWD_ENTRY)
    assert "forwarder.daemon" in modules and "forwarder.mgmt.rib_module" in modules
    assert _loaded(modules, HEAVY) == []
    assert _loaded(modules, COMMAND_MODULES) == []
    # an app's endpoint and a YAML reader: a daemon started with flags needs neither
    assert _loaded(modules, ("icn.dataplane", "yaml")) == []
    assert _loaded(modules, NOT_IN_FWD) == []


def test_fwd_with_a_json_config_reads_it_without_yaml(tmp_path: Path) -> None:
    """A launcher may write the config as JSON (which is YAML too): no YAML parser then."""
    cfg = tmp_path / "fwd.yaml"
    cfg.write_text(json.dumps({"listen": {"unix": "x.sock"}, "tables": {"cs_max_entries": 9}}))
    code = f"""
import json, sys
from pathlib import Path
from apps.cli.fwd import build_fwd_config
cfg = build_fwd_config(Path({str(cfg)!r}), None, [], [], None, None, [], [], [])
assert cfg.tables.cs_max_entries == 9 and cfg.effective_listen.unix == "x.sock"
print(json.dumps(sorted(sys.modules)))
"""
    modules = _modules(code)
    assert "forwarder.config" in modules
    assert _loaded(modules, ("yaml",)) == []
    assert _loaded(modules, HEAVY) == []


def test_status_entry_imports_the_management_client_only() -> None:
    modules = _modules(STATUS_ENTRY)
    assert "apps.cli.mgmt" in modules and "icn.dataplane.mgmt_client" in modules
    assert _loaded(modules, HEAVY) == []
    assert _loaded(modules, tuple(m for m in COMMAND_MODULES if m != "apps.cli.mgmt")) == []
    assert _loaded(modules, ("forwarder", "yaml")) == []


def test_a_named_function_client_and_server_load_no_numpy() -> None:
    """``icn call``, ``icn serve`` and every script calling a function start without numpy
    (about 0.1 s and 15 MB): the memory file of calls on one host needs none."""
    modules = _modules(
        "import json, sys\nimport compute.rmi.client, compute.rmi.server\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    assert "compute.rmi.local" in modules and "icn.dataplane.memfile" in modules
    assert _loaded(modules, ("numpy",)) == []


def test_a_run_writes_its_timeline_without_the_web_server() -> None:
    """Every ``icn scenario run`` writes ``timeline.json`` through the live page's module;
    aiohttp (about 0.1-0.2 s of a launcher's CPU, 54 modules) is imported only to serve the
    page (``--ui``, ``icn scenario view``)."""
    modules = _modules(
        "import json, sys\nimport apps.cli.scenario\nfrom apps.scenario.ui.server import timeline"
        "\nprint(json.dumps(sorted(sys.modules)))"
    )
    assert "apps.scenario.ui.server" in modules
    assert _loaded(modules, ("aiohttp",)) == []
