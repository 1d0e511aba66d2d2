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
from apps.topology import free_udp_port
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
    udp_port: int | None
    env: dict[str, str]  # HOME, NDN_CLIENT_TRANSPORT=unix://..., PIB/TPM for python-ndn children

    def counters(self) -> dict[str, int]:
        return self.child.counters()

    def env_over_tcp(self) -> dict[str, str]:
        return {**self.env, "NDN_CLIENT_TRANSPORT": f"tcp://127.0.0.1:{self.tcp_port}"}

    def env_over_udp(self) -> dict[str, str]:
        assert self.udp_port is not None, "start the forwarder with udp=True"
        return {**self.env, "NDN_CLIENT_TRANSPORT": f"udp://127.0.0.1:{self.udp_port}"}


def start_forwarder(
    group: ProcessGroup,
    workdir: Path,
    home: Path,
    *args: str,
    udp: bool = False,
    config: dict[str, Any] | None = None,
    name: str = "fwd",
) -> Forwarder:
    """``icn fwd --unix <workdir>/NAME.sock --tcp 127.0.0.1:<free> [--udp 127.0.0.1:<free>]``
    plus ``args`` (and ``--config`` with ``config`` as YAML); wait until it is ready.

    Free ports are picked by the kernel and then handed to the child, so another process may
    take one in between: then the start is retried with new ports (at most 3 times).
    """
    sock = workdir / f"{name}.sock"
    cfg_args: list[str] = []
    if config is not None:
        cfg = workdir / f"{name}.yaml"
        cfg.write_text(yaml.safe_dump(config))
        cfg_args = ["--config", str(cfg)]
    for attempt in range(3):
        port = free_tcp_port()
        udp_port = free_udp_port() if udp else None
        argv = ["fwd", "--unix", str(sock), "--tcp", f"127.0.0.1:{port}", *args, *cfg_args]
        if udp_port is not None:
            argv += ["--udp", f"127.0.0.1:{udp_port}"]
        child = group.start(name if attempt == 0 else f"{name}-retry{attempt}", icn_argv(*argv))
        try:
            child.wait_for("forwarder ready", timeout=30, stream="stderr")
            break
        except RuntimeError:
            if attempt == 2 or "cannot listen on" not in child.errors():
                raise
    env = {**pib_env(home), "NDN_CLIENT_TRANSPORT": f"unix://{sock}"}
    return Forwarder(child, sock, port, udp_port, env)


@pytest.fixture
def group(workdir: Path) -> Iterator[ProcessGroup]:
    """Processes of one test, stopped by PID (last started first) when it ends.

    Afterwards no forwarder may have logged a traceback (a management handler or pipeline
    error that the daemon survived is still a bug)."""
    with ProcessGroup(workdir) as g:
        yield g
    for child in g.children:
        if child.name.startswith("fwd"):
            assert "Traceback" not in child.errors(), child.errors()[-5000:]


@pytest.fixture
def fwd(group: ProcessGroup, workdir: Path, ndn_home: Path) -> Forwarder:
    """A forwarder on a Unix socket in the workdir and TCP on a free loopback port."""
    return start_forwarder(group, workdir, ndn_home)


@pytest.fixture
def env(fwd: Forwarder) -> dict[str, str]:
    """Environment for python-ndn children: HOME with the PIB, NDN_CLIENT_TRANSPORT."""
    return fwd.env
