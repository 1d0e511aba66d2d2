"""bench/rmi.py --netns: the client and the servers on two "hosts", network namespaces joined by
one veth pair (root only), made and removed by the scenario launcher's netns backend.

    client namespace                                 server namespace
    bench/rmi.py --inside-netns  (the measuring      forwarder <- Unix -> bench/rmi_server.py
      loop, rmi Client, grpc channel, ceiling          ^ UDP face udp4://<server>:6363
      client)                                          |          bench/grpc_server.py  (TCP)
    forwarder -- UDP face over the veth (MTU 1500) ----+          bench/rmi_ceiling_server.py

The launcher (this module's :func:`launch`, in the caller's namespace) creates both namespaces,
starts a forwarder in each (UDP listener on 0.0.0.0:6363, Unix socket for the apps), the three
servers in the server namespace, makes the client forwarder's face to the server's and routes
/bench there (faces/create, rib/register), then runs the measuring part of bench/rmi.py as a
child inside the client namespace, whose output is the benchmark's.  The child finds everything
in a spec file (:class:`Spec`).  Everything is stopped by PID and the namespaces deleted on
every way out (end, failure, ^C, SIGTERM).

Both forwarders carry packets up to ``UDP_MAX_PACKET`` on their UDP faces (``udp_max_packet``:
jumbo packets, a fabric whose forwarders are all set alike, as bench/allreduce_net.py's
``tcp_max_packet``), so a 64 KiB call's arguments ride whole in its Interest and its result in
its Data: one of each on the veth, each cut into two NDNLPv2 fragments (the UDP faces' MTU,
65467) and those into IP fragments by the kernel, instead of 8800-byte segments.

The child reads the forwarders' counters by SIGUSR1 and their logs (:class:`LoggedForwarder`),
and what crossed the veth (:class:`Link`) from the kernel's counters of each namespace (read
through /proc/<forwarder pid>/net/snmp) and the forwarders' UDP faces (faces/list).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from apps.procs import Child, ProcessGroup, icn_argv
from apps.scenario.netns import NetnsBackend
from apps.scenario.runs import run_command
from apps.scenario.schema import LinkSpec, NodeSpec, Scenario
from forwarder.daemon import COUNTERS_TAG
from icn.dataplane import mgmt_client
from icn.dataplane.endpoint import Endpoint

ROOT = Path(__file__).resolve().parent.parent
CLIENT, SERVER = "client", "server"
PORT = 6363
# the forwarders' udp_max_packet: a 64 KiB call's arguments or result whole in one packet with
# room for its name, envelope and signature (the rmi client keeps 1 KiB of a packet for those);
# a power of two with headroom rather than the bare minimum (about 66 KiB)
UDP_MAX_PACKET = 128 << 10


def preflight() -> str | None:
    """What this machine or user lacks for --netns, as a message naming the fix; else None."""
    if os.geteuid() != 0:
        return (
            "bench/rmi.py --netns creates network namespaces and a veth pair, which needs root: "
            "run it as root (e.g. with sudo), or leave out --netns to measure on one host"
        )
    if shutil.which("ip") is None:
        return "bench/rmi.py --netns needs the 'ip' command: apt-get install iproute2"
    return None


@dataclass
class Spec:
    """What the measuring child needs to know, written by :func:`launch`."""

    run_id: str
    client_sock: str
    server_sock: str
    client_fwd: tuple[int, str]  # PID, stderr log (its counters are logged there)
    server_fwd: tuple[int, str]
    server_addr: str
    face_uri: str  # the client forwarder's face to the server's
    mtu: int  # the veth's
    udp_max_packet: int  # the forwarders'
    rmi_ready: str  # the servers' output once ready (their ports and event loops)
    grpc_ready: str
    ceiling_ready: str

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def read(cls, path: Path) -> Spec:
        data = json.loads(path.read_text())
        data["client_fwd"], data["server_fwd"] = (
            tuple(data[k]) for k in ("client_fwd", "server_fwd")
        )
        return cls(**data)

    def intro(self) -> str:
        return (
            f"--netns: two network namespaces (icn-{self.run_id}-client, -server) joined by one "
            f"veth pair (MTU {self.mtu}), a forwarder in each, a UDP face between them "
            f"({self.face_uri}; udp_max_packet {self.udp_max_packet} in both forwarders, a "
            f"fabric set alike: larger packets in NDNLPv2 fragments); grpc and the ceiling over "
            f"TCP across the same veth"
        )


class LoggedForwarder:
    """A forwarder this process did not start: its counters by SIGUSR1 and its log file, as
    :meth:`apps.procs.Child.counters` reads them for a child."""

    def __init__(self, pid: int, log: str) -> None:
        self.pid = pid
        self.log = Path(log)

    def counters(self, timeout: float = 10.0) -> dict[str, int]:
        before = self.log.read_text(errors="replace").count(COUNTERS_TAG)
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = [
                ln for ln in self.log.read_text(errors="replace").splitlines() if COUNTERS_TAG in ln
            ]
            if len(lines) > before:
                return json.loads(lines[-1].split(COUNTERS_TAG, 1)[1])  # type: ignore[no-any-return]
            time.sleep(0.05)
        raise TimeoutError(f"forwarder {self.pid} did not log its counters within {timeout} s")


def snmp(pid: int) -> dict[str, dict[str, int]]:
    """The kernel's IP and UDP counters of the network namespace process ``pid`` is in."""
    out: dict[str, dict[str, int]] = {}
    lines = Path(f"/proc/{pid}/net/snmp").read_text().splitlines()
    for head, values in zip(lines[::2], lines[1::2], strict=True):
        proto, _, names = head.partition(":")
        out[proto] = dict(
            zip(names.split(), map(int, values.partition(":")[2].split()), strict=True)
        )
    return out


class Link:
    """What crossed the veth between the forwarders, both directions together: the NDN packets
    the two forwarders sent on their UDP faces, the UDP datagrams the two namespaces sent (only
    the forwarders send UDP there) and the IP fragments the kernel made of them."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.tcp_resent: list[int] = []  # TCP segments re-sent (grpc, ceiling) in each cell

    async def read(self) -> Counter[str]:
        moved: Counter[str] = Counter()
        for pid, _ in (self.spec.client_fwd, self.spec.server_fwd):
            kernel = snmp(pid)
            moved["datagrams"] += kernel["Udp"]["OutDatagrams"]
            moved["ip_fragments"] += kernel["Ip"]["FragCreates"]
            moved["udp_rcvbuf_errors"] += kernel["Udp"]["RcvbufErrors"]
            moved["udp_in_errors"] += kernel["Udp"]["InErrors"]
            moved["ip_reassembly_failures"] += kernel["Ip"]["ReasmFails"]
            moved["tcp_resent"] += kernel["Tcp"]["RetransSegs"]
        for sock in (self.spec.client_sock, self.spec.server_sock):
            ep = await Endpoint.connect(f"unix://{sock}")
            try:
                faces = await mgmt_client.status(ep, "faces/list")
            finally:
                ep.close()
            for face in faces:
                if str(face.get("uri", "")).startswith("udp"):
                    for key in ("n_out_interests", "n_out_data", "n_out_nacks"):
                        moved["packets"] += int(face.get(key) or 0)
        return moved

    def per_call(self, moved: Counter[str], calls: int) -> str:
        n = max(calls, 1)
        self.tcp_resent.append(moved["tcp_resent"])
        return (
            f"{moved['packets'] / n:.1f} packets, {moved['datagrams'] / n:.1f} datagrams, "
            f"{moved['ip_fragments'] / n:.1f} IP fragments"
        )

    def notes(self, moved: Counter[str]) -> list[str]:
        lp = moved["datagrams"] - moved["packets"]
        drops = ", ".join(
            f"{key.replace('_', ' ')} {moved[key]}"
            for key in ("udp_rcvbuf_errors", "udp_in_errors", "ip_reassembly_failures")
        )
        return [
            "  (both directions: NDN packets the forwarders sent on their UDP faces, the UDP "
            "datagrams that carried them, and the IP fragments the kernel cut those into for "
            f"the veth's MTU {self.spec.mtu}; datagrams beyond packets, i.e. NDNLPv2 fragments, "
            f"in all cells: {lp})",
            f"  drops in the kernel, all cells: {drops}; TCP segments re-sent (grpc and the "
            f"ceiling) in each cell: {', '.join(map(str, self.tcp_resent))}",
        ]


async def route(sock: Path, face_uri: str, prefix: str) -> None:
    """The client forwarder's face to the server's, and ``prefix`` routed to it."""
    ep = await Endpoint.connect(f"unix://{sock}")
    try:
        body = await mgmt_client.command(ep, "faces", "create", uri=face_uri)
        face_id = int(body["face_id"])
        await mgmt_client.command(ep, "rib", "register", name=prefix, face_id=face_id)
    finally:
        ep.close()


def relay(child: Child, poll: float = 0.1) -> int:
    """Copy the child's stdout and stderr to ours as they grow, until it ends; its exit code."""
    sinks: list[tuple[Path, IO[bytes], int]] = [
        (child.stdout_path, sys.stdout.buffer, 0),
        (child.stderr_path, sys.stderr.buffer, 0),
    ]
    while True:
        ended = child.proc.poll() is not None
        for i, (path, sink, offset) in enumerate(sinks):
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read()
            if data:
                sink.write(data)
                sink.flush()
                sinks[i] = (path, sink, offset + len(data))
        if ended:
            return int(child.proc.returncode)
        time.sleep(poll)


def launch(
    argv: list[str],
    prefix: str,
    rmi_server: Callable[[str], list[str]],
    tcp_server: Callable[[str, str], list[str]],
) -> int:
    """Build the two hosts, run bench/rmi.py ``argv`` in the client namespace as the measuring
    child, tear everything down.  ``rmi_server(connect)`` and ``tcp_server(which, host)`` give
    the servers' commands.  Returns the child's exit code."""
    run_dir = Path(tempfile.mkdtemp(prefix="icn-bench-rmi-netns-"))
    scenario = Scenario(
        name="rmi-netns",
        backend="netns",
        nodes={CLIENT: NodeSpec(), SERVER: NodeSpec()},
        links=[LinkSpec(between=(CLIENT, SERVER), transport="udp")],
    )
    backend = NetnsBackend(scenario, secrets.token_hex(3), run_dir)
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    group = ProcessGroup(run_dir)
    # SIGTERM like ^C: the finally below runs either way
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        # which namespaces are this run's
        print(f"namespaces: icn-{backend.run_id}-*", file=sys.stderr, flush=True)
        backend.setup()
        link = scenario.links[0]
        server_addr = backend.address_on(link, SERVER)
        dev = backend.interface_on(link, CLIENT)
        shown = run_command(["ip", "-n", backend.namespaces[CLIENT], "-j", "link", "show", dev])
        mtu = int(json.loads(shown)[0]["mtu"])
        socks = {node: backend.unix_socket(node) for node in (CLIENT, SERVER)}

        def start(node: str, name: str, argv: list[str]) -> Child:
            return group.start(name, backend.argv_for(node, argv), env)

        # jumbo packets on the UDP faces: both forwarders set alike
        fwd_config = run_dir / "fwd.json"
        fwd_config.write_text(json.dumps({"udp_max_packet": UDP_MAX_PACKET}))
        fwds = {
            node: start(
                node,
                f"fwd-{node}",
                icn_argv(
                    "fwd",
                    "--config",
                    str(fwd_config),
                    "--unix",
                    str(sock),
                    "--udp",
                    f"0.0.0.0:{PORT}",
                    "--log-level",
                    "info",
                ),
            )
            for node, sock in socks.items()
        }
        gsrv = start(SERVER, "grpc", tcp_server("grpc", server_addr))
        csrv = start(SERVER, "ceiling", tcp_server("ceiling", server_addr))
        for fwd in fwds.values():
            fwd.wait_for("forwarder ready", stream="stderr")
        srv = start(SERVER, "rmi_server", rmi_server(f"unix://{socks[SERVER]}"))
        face_uri = f"udp4://{server_addr}:{PORT}"
        asyncio.run(route(socks[CLIENT], face_uri, prefix))
        for child in (srv, gsrv, csrv):
            child.wait_for("ready", stream="stdout")
        spec = Spec(
            run_id=backend.run_id,
            client_sock=str(socks[CLIENT]),
            server_sock=str(socks[SERVER]),
            client_fwd=(fwds[CLIENT].pid, str(fwds[CLIENT].stderr_path)),
            server_fwd=(fwds[SERVER].pid, str(fwds[SERVER].stderr_path)),
            server_addr=server_addr,
            face_uri=face_uri,
            mtu=mtu,
            udp_max_packet=UDP_MAX_PACKET,
            rmi_ready=srv.output(),
            grpc_ready=gsrv.output(),
            ceiling_ready=csrv.output(),
        )
        spec_path = run_dir / "spec.json"
        spec.write(spec_path)
        rmi_py = str(ROOT / "bench" / "rmi.py")
        mine = [a for a in argv if a != "--netns"]
        measuring = [sys.executable, rmi_py, *mine, "--inside-netns", str(spec_path)]
        return relay(start(CLIENT, "bench", measuring))
    finally:
        # nothing interrupts the teardown: a second ^C would leave namespaces behind
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            group.stop_all()
        finally:
            backend.teardown()
            shutil.rmtree(run_dir, ignore_errors=True)
