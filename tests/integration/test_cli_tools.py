"""peek, poke, ping and ping-server against a real ``icn fwd`` process.

Long-running tools (poke, ping-server) are children stopped by PID; one-shot ones run to
completion.  Several commands share one forwarder, since each process costs about half a second.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from apps.cli.common import EXIT_FAILED, EXIT_NACK, EXIT_TIMEOUT, EXIT_UNREACHABLE, EXIT_USAGE
from apps.procs import icn_argv
from apps.topology import free_udp_port
from icn.dataplane.client_conf import ENV_VAR
from tests.integration.test_cli_mgmt import err, forwarder, icn, out

PAYLOAD = b"\x00\x01binary\xff\xfe payload\n"


def start_poke(
    workdir: Path, env: dict[str, str], name: str, *args: str
) -> subprocess.Popen[bytes]:
    """``icn poke NAME`` reading PAYLOAD from a file; returns once it has registered NAME."""
    src = workdir / "payload.bin"
    src.write_bytes(PAYLOAD)
    errfile = workdir / "poke.err"
    with open(src, "rb") as stdin, open(errfile, "wb") as stderr:
        proc = subprocess.Popen(
            icn_argv("poke", name, *args),
            stdin=stdin,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, **env},
        )
    deadline = time.monotonic() + 15
    while "waiting for an Interest" not in errfile.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait(5)
            raise AssertionError(f"poke did not register: {errfile.read_text()}")
        time.sleep(0.05)
    return proc


def test_peek_and_poke(workdir: Path) -> None:
    missing = {ENV_VAR: f"unix://{workdir}/nobody.sock"}
    assert "no forwarder at unix://" in err(missing, EXIT_UNREACHABLE, "peek", "/a")
    with forwarder(workdir) as (_, env):
        poke = start_poke(workdir, env, "/demo/greeting", "--freshness", "60s")
        try:
            assert icn(env, "peek", "/demo/greeting").stdout == PAYLOAD  # binary-safe
            assert poke.wait(10) == 0
        finally:
            if poke.poll() is None:
                poke.kill()
                poke.wait(5)
        # poke is gone: what follows comes from the forwarder's content store
        info = json.loads(out(env, "peek", "/demo", "--prefix", "--json"))
        assert info["name"] == "/demo/greeting" and info["freshness_ms"] == 60000
        assert info["content_length"] == len(PAYLOAD) and info["content_type"] == 0
        assert info["content_encoding"] == "hex" and bytes.fromhex(info["content"]) == PAYLOAD
        raw = icn(env, "peek", "/demo/greeting", "--raw").stdout
        assert raw[:1] == b"\x06" and PAYLOAD in raw

        nack = err(env, EXIT_NACK, "peek", "/nothing/here")
        assert "Nack" in nack and "NoRoute" in nack and "/nothing/here" in nack
        # a route to a UDP port nobody listens on: the Interest goes out, nothing comes back
        out(env, "route", "add", "/void", f"udp4://127.0.0.1:{free_udp_port()}")
        slow = err(env, EXIT_TIMEOUT, "peek", "/void/x", "--timeout", "300ms")
        assert "timeout" in slow and "/void/x" in slow
        bad = err(env, EXIT_USAGE, "peek", "/a/sha256digest=zz")
        assert "invalid NDN name '/a/sha256digest=zz'" in bad
        lonely = err(env, EXIT_TIMEOUT, "poke", "/nobody/asks", "--timeout", "300ms")
        assert "no Interest for /nobody/asks within 300ms" in lonely
        text = icn(env, "poke", "/x", "--timeout", "5s", stdin=b"x" * 9000, code=EXIT_USAGE)
        assert b"stdin has 9000 bytes" in text.stderr


def test_ping_and_ping_server(workdir: Path) -> None:
    with forwarder(workdir) as (group, env):
        server = group.start("ping-server", icn_argv("ping-server", "/srv", "--size", "16"), env)
        server.wait_for("ping server ready: serving /srv/ping", stream="stdout")

        lines = out(env, "ping", "/srv", "-c", "3", "-i", "50ms").splitlines()
        replies = [ln for ln in lines if ln.startswith("content from /srv: seq=")]
        assert [r.split()[3] for r in replies] == ["seq=0", "seq=1", "seq=2"], lines
        assert all(r.endswith(" ms") for r in replies)
        assert "3 packets transmitted, 3 received, 0 nacked, 0% lost" in "\n".join(lines)
        assert any(ln.startswith("rtt min/avg/max/mdev = ") for ln in lines)

        summary = json.loads(out(env, "ping", "/srv", "-c", "2", "-i", "50ms", "--json"))
        assert summary["transmitted"] == 2 and summary["received"] == 2
        assert summary["loss_percent"] == 0 and summary["timeouts"] == 0
        rtt = summary["rtt_ms"]
        assert 0 < rtt["min"] <= rtt["avg"] <= rtt["max"] and rtt["mdev"] >= 0

        lost = icn(env, "ping", "/nobody", "-c", "2", "-i", "50ms", "--json", code=EXIT_FAILED)
        none = json.loads(lost.stdout)
        assert none["transmitted"] == 2 and none["received"] == 0 and none["nacked"] == 2
        assert none["loss_percent"] == 100 and none["rtt_ms"] is None
        text = icn(env, "ping", "/nobody", "-c", "1", code=EXIT_FAILED).stdout.decode()
        assert "nack from /nobody: seq=0" in text and "reason=NoRoute" in text
        assert "100% lost" in text

        assert server.stop() == 0
        assert "ping server: answered 5 probes" in server.output()
        assert "Traceback" not in server.errors()
