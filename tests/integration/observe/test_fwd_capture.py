"""``icn fwd --metrics --pcap``: N Interests in, N more on the face's counter in /metrics, the N
names in ``icn pcap``'s lines, and Debian's tshark reads the file without an error."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

from apps.procs import ProcessGroup, icn_argv
from icn.wire.encode import make_interest
from icn.wire.name import from_uri

N = 25
METRICS_LINE = re.compile(r"metrics on (http://\S+/metrics)")
LISTEN_LINE = re.compile(r"listening on (?:.*?)udp4://127\.0\.0\.1:(\d+)")


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as reply:
        assert reply.status == 200
        assert reply.headers["Content-Type"].startswith("text/plain")
        return str(reply.read().decode())


def face_interests_in(text: str, face: str) -> int:
    m = re.search(
        rf'^icn_face_interests_total\{{direction="in",face="{face}"\}} (\S+)$', text, re.M
    )
    return 0 if m is None else int(float(m.group(1)))


def udp_face_id(text: str, port: int) -> str:
    for m in re.finditer(r"^icn_face_info\{(.*)\} 1\.0$", text, re.M):
        labels: dict[str, str] = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if labels["remote_uri"] == f"udp4://127.0.0.1:{port}":
            return labels["face"]
    raise AssertionError(f"no face for udp4://127.0.0.1:{port} in:\n{text[:2000]}")


@pytest.mark.slow
def test_interests_counted_in_metrics_and_named_in_the_capture(tmp_path: Path) -> None:
    pcap = tmp_path / "fwd.pcapng"
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(5)
    with ProcessGroup(tmp_path) as group:
        fwd = group.start(
            "fwd",
            icn_argv(
                "fwd",
                "--unix", str(tmp_path / "fwd.sock"),
                "--udp", "127.0.0.1:0",
                "--metrics", "127.0.0.1:0",
                "--pcap", str(pcap),
            ),
        )  # fmt: skip
        fwd.wait_for("forwarder ready", timeout=20)
        fwd.wait_for("metrics on", timeout=5)
        url = METRICS_LINE.search(fwd.errors())
        port = LISTEN_LINE.search(fwd.errors())
        assert url is not None and port is not None, fwd.errors()
        target = ("127.0.0.1", int(port.group(1)))
        # the first Interest makes the face (no route: it comes back as a Nack NoRoute)
        sock.sendto(make_interest(from_uri("/observe/first"), nonce=b"\0\0\0\1"), target)
        sock.recvfrom(9000)
        text = scrape(url.group(1))
        face = udp_face_id(text, sock.getsockname()[1])
        before = face_interests_in(text, face)
        assert before == 1
        names = [f"/observe/n{i:03d}" for i in range(N)]
        for i, name in enumerate(names):
            # one at a time, each Nacked before the next: none lost to a full socket buffer on
            # a loaded machine, and the forwarder has counted it before the scrape
            sock.sendto(make_interest(from_uri(name), nonce=(i + 2).to_bytes(4, "big")), target)
            sock.recvfrom(9000)
        after = face_interests_in(scrape(url.group(1)), face)
        assert after - before == N
        assert fwd.stop() == 0
    sock.close()

    out = subprocess.run(
        icn_argv("pcap", str(pcap)), capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    interests_in = [ln for ln in out if " in INTEREST /observe/n" in ln]
    assert len(interests_in) == N, "\n".join(out)
    for name, line in zip(names, interests_in, strict=True):
        assert line.split(" INTEREST ")[1].startswith(name + ",")
        assert f" {face} udp4://127.0.0.1:" in line
    nacks_out = [ln for ln in out if " out NACK NoRoute /observe/n" in ln]
    assert len(nacks_out) == N

    tshark = shutil.which("tshark")
    assert tshark is not None, "tshark is missing: run scripts/bootstrap.sh as root"
    ran = subprocess.run([tshark, "-r", str(pcap)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    # tshark's one remark as root is about running as root, not about the file
    remarks = [ln for ln in ran.stderr.splitlines() if ln.strip() and "as user" not in ln]
    assert remarks == [], ran.stderr
    assert len(ran.stdout.splitlines()) == len(out)
