"""Fixtures for python-ndn interop: a key database, a live forwarder process, the apps' environment.

Every process is started through a :class:`ProcessGroup` and stopped by its PID at teardown (apps
first, the forwarder last); the temporary directories are removed.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from apps.procs import Child, ProcessGroup, icn_argv
from tests.interop.support import free_tcp_port, run_to_end, tool_argv

IDENTITY = "/interop/test"


@pytest.fixture(scope="session")
def ndn_home() -> Iterator[Path]:
    """A HOME whose ``~/.ndn`` holds a PIB with the default identity /interop/test.

    Made once per session with ``pyndnsec Init-Pib`` and ``pyndnsec New-Item``; apps only read it.
    """
    home = Path(tempfile.mkdtemp(prefix="icn-interop-home-"))
    logs = home / "logs"
    logs.mkdir()
    env = pib_env(home)
    try:
        with ProcessGroup(logs) as group:
            run_to_end(group, "init-pib", tool_argv("pyndnsec", "Init-Pib"), env)
            run_to_end(group, "new-item", tool_argv("pyndnsec", "New-Item", IDENTITY), env)
            who = run_to_end(group, "get-default", tool_argv("pyndnsec", "Get-Default"), env)
        assert IDENTITY in who.output(), who.output()
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def pib_env(home: Path) -> dict[str, str]:
    ndn = home / ".ndn"
    return {
        "HOME": str(home),
        # explicit, so a PIB/TPM setting in the caller's environment cannot leak in
        "NDN_CLIENT_PIB": f"pib-sqlite3:{ndn}",
        "NDN_CLIENT_TPM": f"tpm-file:{ndn / 'ndnsec-key-file'}",
        "PYTHONUNBUFFERED": "1",
    }


@dataclass
class Forwarder:
    """A running ``icn fwd`` and how python-ndn children reach it."""

    child: Child
    socket: Path
    tcp_port: int
    env: dict[str, str]  # HOME, NDN_CLIENT_TRANSPORT=unix://..., PIB/TPM for python-ndn children

    def counters(self) -> dict[str, int]:
        return self.child.counters()

    def env_over_tcp(self) -> dict[str, str]:
        return {**self.env, "NDN_CLIENT_TRANSPORT": f"tcp://127.0.0.1:{self.tcp_port}"}


def start_forwarder(
    group: ProcessGroup,
    workdir: Path,
    home: Path,
    *args: str,
    config: dict[str, Any] | None = None,
    name: str = "fwd",
) -> Forwarder:
    """``icn fwd --unix <workdir>/NAME.sock --tcp 127.0.0.1:<free>`` plus ``args``; wait ready."""
    sock = workdir / f"{name}.sock"
    port = free_tcp_port()
    argv = ["fwd", "--unix", str(sock), "--tcp", f"127.0.0.1:{port}", *args]
    if config is not None:
        cfg = workdir / f"{name}.yaml"
        cfg.write_text(yaml.safe_dump(config))
        argv += ["--config", str(cfg)]
    child = group.start(name, icn_argv(*argv))
    child.wait_for("forwarder ready", timeout=30, stream="stderr")
    env = {**pib_env(home), "NDN_CLIENT_TRANSPORT": f"unix://{sock}"}
    return Forwarder(child, sock, port, env)


@pytest.fixture
def group(workdir: Path) -> Iterator[ProcessGroup]:
    """Processes of one test, stopped by PID (last started first) when it ends."""
    with ProcessGroup(workdir) as g:
        yield g


@pytest.fixture
def fwd(group: ProcessGroup, workdir: Path, ndn_home: Path) -> Forwarder:
    """A forwarder on a Unix socket in the workdir and TCP on a free loopback port."""
    return start_forwarder(group, workdir, ndn_home)


@pytest.fixture
def env(fwd: Forwarder) -> dict[str, str]:
    """Environment for python-ndn children: HOME with the PIB, NDN_CLIENT_TRANSPORT."""
    return fwd.env
