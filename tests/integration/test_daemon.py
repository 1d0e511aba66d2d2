"""The forwarder daemon as a process: fuzzed traffic, clean shutdown, counters, config errors."""

from __future__ import annotations

import random
import socket
import subprocess
import time
from pathlib import Path

from apps.loadgen import Consumer, object_names
from apps.procs import ProcessGroup, icn_argv
from apps.topology import free_udp_port
from icn.encode import make_interest
from icn.name import from_uri
from tests.fuzz_packets import Mutator, seeds

HOST = "127.0.0.1"


async def fetch(port: int, prefix: str, count: int) -> int:
    c = Consumer((HOST, port), window=16, rto=0.3, max_retries=20)
    try:
        return (await c.fetch(object_names(prefix, count), timeout=60)).received
    finally:
        c.close()


async def test_daemon_survives_100k_fuzzed_datagrams_and_keeps_forwarding(workdir: Path) -> None:
    fwd_port, prod_port = free_udp_port(), free_udp_port()
    sock_path = workdir / "fwd.sock"
    with ProcessGroup(workdir) as group:
        producer = group.start(
            "producer",
            icn_argv("loadgen", "produce", "--listen", f"{HOST}:{prod_port}", "--prefix", "/good"),
        )
        producer.wait_for("ready", stream="stdout")
        fwd = group.start(
            "fwd",
            icn_argv(
                "fwd",
                "--udp",
                f"{HOST}:{fwd_port}",
                "--unix",
                str(sock_path),
                "--route",
                f"/good=udp4://{HOST}:{prod_port}",
                "--route",
                f"/=udp4://{HOST}:{prod_port}",
            ),
        )
        fwd.wait_for("forwarder ready", stream="stderr")
        assert await fetch(fwd_port, "/good/before", 50) == 50

        mutator = Mutator(random.Random(7), seeds())
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as attacker:
            attacker.connect((HOST, fwd_port))
            for i in range(100_000):
                attacker.send(mutator.next() or b"\x00")
                if i % 200 == 199:
                    time.sleep(0.004)  # pace the flood so the kernel does not drop most of it
        # a stream peer that sends garbage loses its own face, nothing else
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as junk:
            junk.settimeout(5)
            junk.connect(str(sock_path))
            junk.sendall(b"\x05\xff\xff\xff\xff\xff" + bytes(64))
            assert junk.recv(100) == b""  # the forwarder closed it
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as app:
            app.settimeout(5)
            app.connect(str(sock_path))
            app.sendall(make_interest(from_uri("/good/over-unix/1"), lifetime=2000))
            assert app.recv(65536)[:1] == b"\x06"

        assert await fetch(fwd_port, "/good/after", 200) == 200
        counters = fwd.counters()
        assert fwd.proc.poll() is None
    assert counters.get("face.receive_error", 0) == 0
    assert counters.get("daemon.tick_error", 0) == 0
    assert counters["face.malformed"] > 1000
    assert counters.get("face.bad_tlv", 0) + counters.get("face.oversize", 0) >= 1
    received = counters["fw.in_interest"] + counters["fw.in_data"] + counters.get("fw.in_nack", 0)
    assert received > 1000
    assert "Traceback" not in fwd.errors()


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
