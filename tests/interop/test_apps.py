"""python-ndn applications as separate processes through a live ``icn fwd``.

Producers and consumers are the small programs in ``programs/``; each prints ``ready`` once its
prefix is registered and a ``result`` line, and exits non-zero on failure.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from apps.procs import ProcessGroup
from tests.chaos.harness import CpuLoad
from tests.interop.conftest import Forwarder, start_forwarder
from tests.interop.support import (
    face_ids,
    fib_nexthops,
    program_argv,
    rib_routes,
    run_to_end,
    wait_until,
)

LONG_LIFETIME_MS = 100_000  # an Interest that must be Nacked long before it expires


def _content(workdir: Path, size: int = 4000) -> Path:
    path = workdir / "content.bin"
    path.write_bytes(os.urandom(size))
    return path


def _registered_face(fwd: Forwarder, prefix: str) -> int:
    """The one face the RIB routes ``prefix`` to; the FIB agrees."""
    routes = rib_routes(fwd.socket)
    assert prefix in routes, f"{prefix} not in the RIB: {routes}"
    (face,) = routes[prefix]
    assert fib_nexthops(fwd.socket).get(prefix) == {face}
    return face


def test_v1_producer_and_v1_consumer(fwd: Forwarder, group: ProcessGroup, workdir: Path) -> None:
    """ndn.app.NDNApp: @app.route producer on the Unix socket, express_interest consumer over TCP;
    the consumer receives exactly the producer's bytes for three names."""
    content = _content(workdir)
    producer = group.start(
        "v1-producer", program_argv("v1_producer", "/interop/v1", str(content)), fwd.env
    )
    producer.wait_for("ready /interop/v1", timeout=30, stream="stdout")
    _registered_face(fwd, "/interop/v1")
    consumer = run_to_end(
        group,
        "v1-consumer",
        program_argv("v1_consumer", "/interop/v1", str(content), "--count", "3"),
        fwd.env_over_tcp(),
    )
    assert "result ok 3" in consumer.output()
    assert producer.output().count("served /interop/v1/") >= 3


def test_v2_producer_and_v2_consumer(fwd: Forwarder, group: ProcessGroup, workdir: Path) -> None:
    """ndn.appv2.NDNApp: @app.route producer over TCP, express consumer on the Unix socket."""
    content = _content(workdir)
    producer = group.start(
        "v2-producer",
        program_argv("v2_producer", "/interop/v2", str(content)),
        fwd.env_over_tcp(),
    )
    producer.wait_for("ready /interop/v2", timeout=30, stream="stdout")
    _registered_face(fwd, "/interop/v2")
    consumer = run_to_end(
        group,
        "v2-consumer",
        program_argv("v2_consumer", "/interop/v2", str(content), "--count", "3"),
        fwd.env,
    )
    assert "result ok 3" in consumer.output()
    assert producer.output().count("served /interop/v2/") >= 3


def test_signed_request_with_application_parameters(fwd: Forwarder, group: ProcessGroup) -> None:
    """Signed Interests with ApplicationParameters reach the producer unchanged: it verifies the
    parameters digest and the ECDSA signature of the PIB key and answers from the parameters; a
    request signed by another key and one with parameters altered after signing are dropped."""
    producer = group.start(
        "signed-producer", program_argv("signed_producer", "/interop/rpc"), fwd.env
    )
    producer.wait_for("ready /interop/rpc", timeout=30, stream="stdout")
    _registered_face(fwd, "/interop/rpc")
    consumer = run_to_end(
        group, "signed-consumer", program_argv("signed_consumer", "/interop/rpc"), fwd.env
    )
    out = consumer.output()
    assert "first: answered sum=42" in out
    assert "second: answered sum=43" in out
    assert "result ok" in out
    served = producer.output()
    assert served.count("answered /interop/rpc/") == 2
    assert "rejected /interop/rpc/forged" in served and "bad ECDSA signature" in served
    assert "Drop malformed Interest" in producer.errors()  # the tampered one


def test_disconnected_apps_leave_no_route(
    fwd: Forwarder, group: ProcessGroup, workdir: Path
) -> None:
    """When a producer process ends (SIGKILL for the appv2 one, SIGTERM for the v1 one), its
    face closes and its routes leave the RIB and the FIB (datasets and counters agree)."""
    content = _content(workdir)
    before = fwd.counters()
    v1 = group.start(
        "v1-leaver", program_argv("v1_producer", "/interop/leave/v1", str(content)), fwd.env
    )
    v2 = group.start(
        "v2-leaver", program_argv("v2_producer", "/interop/leave/v2", str(content)), fwd.env
    )
    v1.wait_for("ready", timeout=30, stream="stdout")
    v2.wait_for("ready", timeout=30, stream="stdout")
    faces = {p: _registered_face(fwd, p) for p in ("/interop/leave/v1", "/interop/leave/v2")}
    assert set(faces.values()) <= face_ids(fwd.socket)
    during = fwd.counters()
    assert during["rib.size"] == before["rib.size"] + 2
    assert during["fib.size"] == before["fib.size"] + 2

    v2.proc.send_signal(signal.SIGKILL)
    v2.wait(10)
    wait_until(
        lambda: (
            "/interop/leave/v2" not in rib_routes(fwd.socket)
            and "/interop/leave/v2" not in fib_nexthops(fwd.socket)
        ),
        timeout=10,
        what="appv2 route removed",
    )
    assert "/interop/leave/v1" in rib_routes(fwd.socket)  # the other app is untouched

    v1.stop()
    wait_until(
        lambda: (
            not any(p.startswith("/interop/leave") for p in rib_routes(fwd.socket))
            and not any(p.startswith("/interop/leave") for p in fib_nexthops(fwd.socket))
        ),
        timeout=10,
        what="v1 route removed",
    )
    assert not set(faces.values()) & face_ids(fwd.socket)
    after = fwd.counters()
    assert after["rib.size"] == before["rib.size"]
    assert after["fib.size"] == before["fib.size"]


def test_nack_without_route_then_root_prefix_producer(
    fwd: Forwarder, group: ProcessGroup, workdir: Path, cpu: CpuLoad
) -> None:
    """With no route an appv2 consumer gets a NoRoute Nack (150) at once, not a timeout; once a
    v1 producer registers the root prefix ``/`` (as ndn-python-repo does), the same consumer
    fetches any name through it (v1 producer, appv2 consumer)."""
    content = _content(workdir)
    # the lifetime far beyond the bound below, as much as the CPU is slow (at most 8 x 8 s):
    # a consumer's start (python-ndn's imports) is counted in, and under load takes seconds
    cpu.budget(8)
    start = time.monotonic()
    nacked = run_to_end(
        group,
        "v2-noroute",
        program_argv(
            "v2_consumer",
            "/interop/noroute",
            str(content),
            "--count",
            "1",
            "--attempts",
            "1",
            "--lifetime-ms",
            str(LONG_LIFETIME_MS),
            "--max-seconds",
            str(LONG_LIFETIME_MS // 1000),
        ),
        fwd.env,
        timeout=cpu.budget(30),
        check=False,
    )
    assert nacked.proc.returncode == 1
    assert "InterestNack(150)" in nacked.output(), nacked.output()
    assert time.monotonic() - start < cpu.budget(8), "waited for the lifetime, not a Nack"

    producer = group.start("v1-root", program_argv("v1_producer", "/", str(content)), fwd.env)
    producer.wait_for("ready /", timeout=30, stream="stdout")
    _registered_face(fwd, "/")
    consumer = run_to_end(
        group,
        "v2-via-root",
        program_argv("v2_consumer", "/interop/noroute", str(content), "--count", "2"),
        fwd.env,
    )
    assert "result ok 2" in consumer.output()


def test_apps_over_udp(group: ProcessGroup, workdir: Path, ndn_home: Path) -> None:
    """python-ndn's UDP transport (``udp://127.0.0.1:PORT``, one packet per datagram): an appv2
    producer registers over UDP (a local face: loopback) and a v1 consumer fetches over UDP."""
    fwd = start_forwarder(group, workdir, ndn_home, udp=True)
    env = fwd.env_over_udp()
    content = _content(workdir)
    producer = group.start(
        "v2-udp-producer", program_argv("v2_producer", "/interop/udp", str(content)), env
    )
    producer.wait_for("ready /interop/udp", timeout=30, stream="stdout")
    _registered_face(fwd, "/interop/udp")
    consumer = run_to_end(
        group,
        "v1-udp-consumer",
        program_argv("v1_consumer", "/interop/udp", str(content), "--count", "3"),
        env,
    )
    assert "result ok 3" in consumer.output()
