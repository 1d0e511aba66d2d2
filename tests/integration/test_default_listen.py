"""With no listen section the daemon is where unmodified NDN apps look for NFD.

As root that is /run/nfd/nfd.sock (python-ndn's default transport, no environment needed), and
for everyone TCP and UDP 127.0.0.1:6363.  pynfdc, an unmodified python-ndn program, reads the
status dataset through each.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from apps.procs import ProcessGroup, icn_argv
from forwarder.config import NFD_SOCKET, default_unix_socket


def _port_free(kind: int) -> bool:
    with socket.socket(socket.AF_INET, kind) as s:
        try:
            s.bind(("127.0.0.1", 6363))
        except OSError:
            return False
    return True


def _pynfdc_status(env: dict[str, str]) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "ndn.bin.nfdc", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_default_places_serve_unmodified_python_ndn_tools(workdir: Path) -> None:
    assert _port_free(socket.SOCK_STREAM) and _port_free(socket.SOCK_DGRAM), (
        "127.0.0.1:6363 is taken on this machine; stop what holds it to run this test"
    )
    config = workdir / "fwd.yaml"
    config.write_text("log_level: info\n")  # no listen section: the defaults
    expected_socket = default_unix_socket()
    if os.geteuid() == 0:
        assert expected_socket == NFD_SOCKET
        assert not os.path.exists(NFD_SOCKET), f"{NFD_SOCKET} exists: is NFD running here?"
    home = workdir / "home"
    home.mkdir()
    base_env = {k: v for k, v in os.environ.items() if k != "NDN_CLIENT_TRANSPORT"}
    base_env["HOME"] = str(home)  # no ~/.ndn/client.conf: python-ndn's built-in default
    with ProcessGroup(workdir) as group:
        fwd = group.start("fwd", icn_argv("fwd", "--config", str(config)))
        fwd.wait_for("forwarder ready", stream="stderr")
        log = fwd.errors()
        assert "tcp4://127.0.0.1:6363" in log and "udp4://127.0.0.1:6363" in log
        assert f"unix://{expected_socket}" in log
        assert os.stat(expected_socket).st_mode & 0o777 == 0o666

        unix_env = dict(base_env)
        if expected_socket != NFD_SOCKET:
            # not root: the daemon says where it is; apps are pointed there
            assert f"NDN_CLIENT_TRANSPORT=unix://{expected_socket}" in log
            unix_env["NDN_CLIENT_TRANSPORT"] = f"unix://{expected_socket}"
        assert "icn-fwd" in _pynfdc_status(unix_env)
        tcp_env = dict(base_env, NDN_CLIENT_TRANSPORT="tcp://127.0.0.1")
        assert "icn-fwd" in _pynfdc_status(tcp_env)
    assert not os.path.exists(expected_socket), "socket file left behind"
