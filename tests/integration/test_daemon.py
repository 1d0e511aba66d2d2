"""The forwarder daemon as a process: clean shutdown, counters, config errors (fuzzed traffic on
every transport: test_daemon_fuzz.py)."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from apps.procs import ProcessGroup, icn_argv

HOST = "127.0.0.1"


def test_sigterm_removes_unix_socket_and_sigusr1_logs_counters(workdir: Path) -> None:
    sock_path = workdir / "fwd.sock"
    with ProcessGroup(workdir) as group:
        fwd = group.start("fwd", icn_argv("fwd", "--unix", str(sock_path), "--cs-capacity", "10"))
        fwd.wait_for("forwarder ready", stream="stderr")
        assert sock_path.exists()
        counters = fwd.counters()
        assert counters["faces.size"] == 0
        assert counters["pit.size"] == 0
        assert fwd.stop() == 0
    assert not sock_path.exists()


def test_stale_socket_file_is_replaced(workdir: Path) -> None:
    sock_path = workdir / "fwd.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(sock_path))
    stale.close()  # the file stays, nobody listens: what a crashed daemon leaves behind
    with ProcessGroup(workdir) as group:
        fwd = group.start("fwd", icn_argv("fwd", "--unix", str(sock_path)))
        fwd.wait_for("forwarder ready", stream="stderr")
        assert fwd.stop() == 0


def test_bad_config_names_the_field_and_exits_2(workdir: Path) -> None:
    cfg = workdir / "bad.yaml"
    cfg.write_text("listen:\n  udp: ['127.0.0.1:notaport']\ntabels: {}\n")
    proc = subprocess.run(
        icn_argv("fwd", "--config", str(cfg)), capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2
    assert "listen.udp" in proc.stderr
    assert "tabels" in proc.stderr and "unknown field" in proc.stderr
    bad_route = subprocess.run(
        icn_argv("fwd", "--route", "/a"), capture_output=True, text=True, timeout=30
    )
    assert bad_route.returncode != 0
    assert "--route" in bad_route.stderr and "PREFIX=FACE_URI" in bad_route.stderr
