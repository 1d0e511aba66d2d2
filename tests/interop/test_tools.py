"""python-ndn's own command-line tools against a live ``icn fwd``: pyndntools (segmented RDR
content) and pynfdc (faces, routes, status, route add/remove, strategy set/unset)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from apps.procs import ProcessGroup
from tests.interop.conftest import Forwarder
from tests.interop.support import (
    nfdc_argv,
    program_argv,
    rib_routes,
    run_to_end,
    tool_argv,
    wait_until,
)

MB = 1 << 20


def test_rdrcontent_serves_and_fetches_1mb_file(
    fwd: Forwarder, group: ProcessGroup, workdir: Path
) -> None:
    """pyndntools serve-rdrcontent publishes a 1 MiB random file as versioned 8000-byte segments
    plus RDR metadata; fetch-rdrcontent discovers the version (CanBePrefix metadata Interest) and
    fetches every segment through the forwarder; the result is byte-identical."""
    src = workdir / "random.bin"
    src.write_bytes(os.urandom(MB))
    out = workdir / "fetched.bin"
    server = group.start(
        "serve-rdr", tool_argv("pyndntools", "serve-rdrcontent", "/interop/file", str(src)), fwd.env
    )
    server.wait_for("Start serving", timeout=30, stream="stdout")
    # The tool prints before it registers: wait for the route itself.
    wait_until(lambda: "/interop/file" in rib_routes(fwd.socket), timeout=15, what="route")
    fetch = run_to_end(
        group,
        "fetch-rdr",
        tool_argv("pyndntools", "fetch-rdrcontent", "-o", str(out), "/interop/file"),
        fwd.env,
        timeout=60,
    )
    segments = (MB + 7999) // 8000
    assert f"Segment Count: {segments}  Content size: {MB}" in fetch.output(), fetch.output()
    assert out.read_bytes() == src.read_bytes()


def _nfdc(group: ProcessGroup, env: dict[str, str], *args: str) -> str:
    return run_to_end(group, "pynfdc", nfdc_argv(*args), env, timeout=30).output()


def _parse_routes(text: str) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
    """pynfdc ``route`` output -> (FIB prefix -> face ids, RIB prefix -> face ids)."""
    fib_text, _, rib_text = text.partition("Routing Table (RIB)")
    assert "Forwarding Table (FIB)" in fib_text, text

    def table(section: str) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        prefix = None
        for line in section.splitlines():
            if line.startswith("/"):
                prefix = line.strip()
                out[prefix] = set()
            elif (m := re.search(r"FaceID=(\d+)", line)) and prefix is not None:
                out[prefix].add(int(m.group(1)))
        return out

    return table(fib_text), table(rib_text)


def _parse_faces(text: str) -> dict[int, str]:
    faces = {}
    for line in text.splitlines():
        if m := re.match(r"^(\d+)\s+(\S+)\s+(\S+)", line):
            faces[int(m.group(1))] = m.group(2)
    return faces


def _parse_strategies(text: str) -> dict[str, str]:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return dict(zip(lines[::2], lines[1::2], strict=True))


def test_pynfdc_lists_and_changes_routes_and_strategies(
    fwd: Forwarder, group: ProcessGroup, workdir: Path
) -> None:
    """pynfdc reads faces/list, rib/list, fib/list, status/general and strategy-choice/list, and
    its rib register/unregister and strategy-choice set/unset commands take effect."""
    content = workdir / "c.bin"
    content.write_bytes(b"x" * 100)
    producer = group.start(
        "producer", program_argv("v2_producer", "/interop/nfdc/app", str(content)), fwd.env
    )
    producer.wait_for("ready", timeout=30, stream="stdout")
    env = fwd.env

    faces = _parse_faces(_nfdc(group, env, "face"))
    assert faces.get(1) == "internal://", faces
    fib, rib = _parse_routes(_nfdc(group, env, "route"))
    (app_face,) = rib["/interop/nfdc/app"]
    assert fib["/interop/nfdc/app"] == {app_face}
    assert app_face in faces and app_face != 1
    assert fib["/localhost/nfd"] == {1}

    status = _nfdc(group, env, "status")
    fields = dict(re.findall(r"^\s*(\w+)\t(.*)$", status, re.M))
    assert fields["version"].strip(), status
    assert int(fields["nFibEntries"]) == len(fib)
    assert int(fields["nInInterests"]) > 0

    # route add (rib/register with an explicit FaceId) and remove
    assert "200" in _nfdc(group, env, "nr", "/interop/nfdc/extra", str(app_face))
    fib, rib = _parse_routes(_nfdc(group, env, "route"))
    assert rib["/interop/nfdc/extra"] == {app_face}
    assert fib["/interop/nfdc/extra"] == {app_face}
    assert "200" in _nfdc(group, env, "rr", "/interop/nfdc/extra", str(app_face))
    fib, rib = _parse_routes(_nfdc(group, env, "route"))
    assert "/interop/nfdc/extra" not in rib and "/interop/nfdc/extra" not in fib
    assert rib["/interop/nfdc/app"] == {app_face}  # untouched

    # strategy set and unset
    assert "200" in _nfdc(group, env, "ss", "/interop/nfdc", "multicast")
    chosen = _parse_strategies(_nfdc(group, env, "strategy"))
    assert "/multicast" in chosen["/interop/nfdc"], chosen
    assert "/best-route" in chosen["/"], chosen
    assert "200" in _nfdc(group, env, "rs", "/interop/nfdc")
    chosen = _parse_strategies(_nfdc(group, env, "strategy"))
    assert "/interop/nfdc" not in chosen, chosen
