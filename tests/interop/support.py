"""Helpers for the interop tests: start python-ndn programs and talk NDN to the forwarder directly.

The programs under ``programs/`` and the python-ndn console tools run as separate processes
(:func:`run_to_end`, or ``ProcessGroup.start`` for long-running ones).  :class:`RawFace` is a bare
socket that speaks TLV, for what an app library hides: exact command bytes, replays, reading the
management datasets without starting a process, and faces with a chosen source address.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any, TypeVar

from ndn.app_support.nfd_mgmt import (
    FaceStatusMsg,
    FibStatus,
    RibStatus,
    StrategyChoiceMsg,
    make_command_v2,
    parse_response,
)
from ndn.encoding import (
    Component,
    InterestParam,
    Name,
    Signer,
    make_interest,
    parse_data,
    parse_tl_num,
)
from ndn.encoding.ndnlp_v2 import parse_lp_packet
from ndn.security import DigestSha256Signer
from ndn.utils import gen_nonce

from apps.procs import Child, ProcessGroup

PROGRAMS = Path(__file__).resolve().parent / "programs"
BIN = Path(sys.executable).parent

T = TypeVar("T")

INTEREST, DATA, LP_PACKET, NONCE = 0x05, 0x06, 0x64, 0x0A


def program_argv(name: str, *args: str) -> list[str]:
    """``python tests/interop/programs/NAME.py ARGS`` with the interpreter running the tests."""
    return [sys.executable, str(PROGRAMS / f"{name}.py"), *args]


def nfdc_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "ndn.bin.nfdc", *args]


def tool_argv(tool: str, *args: str) -> list[str]:
    """A python-ndn console script (pyndntools, pyndnsec) from the same virtualenv."""
    script = BIN / tool
    if script.exists():
        return [str(script), *args]
    module = {"pyndntools": "ndn.bin.tools", "pyndnsec": "ndn.bin.sec"}[tool]
    return [sys.executable, "-m", module, *args]


_run_ids = count()


def run_to_end(
    group: ProcessGroup,
    name: str,
    argv: list[str],
    env: dict[str, str] | None = None,
    timeout: float = 30.0,
    check: bool = True,
) -> Child:
    """Start ``argv`` in ``group`` and wait (bounded) until it exits; its output is in files.

    On timeout the child is stopped by its PID and TimeoutError carries its output; with
    ``check`` a non-zero exit raises AssertionError with the output.
    """
    child = group.start(f"{name}-{next(_run_ids)}", argv, env)
    try:
        rc = child.wait(timeout)
    except Exception:
        child.stop(grace=2)
        raise TimeoutError(
            f"{' '.join(argv)} did not finish within {timeout} s\n"
            f"stdout:\n{child.output()[-3000:]}\nstderr:\n{child.errors()[-3000:]}"
        ) from None
    if check and rc != 0:
        raise AssertionError(
            f"{' '.join(argv)} exited with {rc}\n"
            f"stdout:\n{child.output()[-3000:]}\nstderr:\n{child.errors()[-3000:]}"
        )
    return child


def wait_until(
    probe: Callable[[], T], timeout: float = 15.0, interval: float = 0.1, what: str = "condition"
) -> T:
    """Poll ``probe`` until it returns something truthy; return that, or raise after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: T = probe()
    while not last:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout} s (last: {last!r})")
        time.sleep(interval)
        last = probe()
    return last


def free_tcp_port(host: str = "127.0.0.1") -> int:
    """A TCP port free right now (the kernel picks it; tiny race until the child binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


# -- a bare NDN face -------------------------------------------------------------------------------


def _read_varnum(buf: bytes | bytearray, pos: int) -> tuple[int, int] | None:
    """(value, size) of the VAR-NUMBER at ``pos``, or None if ``buf`` ends inside it."""
    if pos >= len(buf):
        return None
    first = buf[pos]
    size = {0xFD: 3, 0xFE: 5, 0xFF: 9}.get(first, 1)
    if pos + size > len(buf):
        return None
    if size == 1:
        return first, 1
    return int.from_bytes(buf[pos + 1 : pos + size], "big"), size


@dataclass
class Packet:
    """One network-layer packet received: type 5 (Interest) or 6 (Data), LpPacket unwrapped."""

    typ: int
    wire: bytes
    nack_reason: int | None = None


class RawFace:
    """A Unix-stream or UDP socket to the forwarder that sends and receives whole TLV packets."""

    def __init__(self, sock: socket.socket, stream: bool) -> None:
        self.sock = sock
        self.stream = stream
        self._buf = bytearray()

    @classmethod
    def unix(cls, path: str | os.PathLike[str]) -> RawFace:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(os.fspath(path))
        return cls(s, stream=True)

    @classmethod
    def udp(cls, remote: tuple[str, int], bind_host: str = "127.0.0.1") -> RawFace:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((bind_host, 0))
        s.connect(remote)
        return cls(s, stream=False)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawFace:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def send(self, wire: bytes) -> None:
        if self.stream:
            self.sock.sendall(wire)
        else:
            self.sock.send(wire)

    def _next_tlv(self, timeout: float) -> bytes | None:
        deadline = time.monotonic() + timeout
        while True:
            if self.stream:
                t = _read_varnum(self._buf, 0)
                ln = _read_varnum(self._buf, t[1]) if t else None
                if t and ln and len(self._buf) >= t[1] + ln[1] + ln[0]:
                    end = t[1] + ln[1] + ln[0]
                    wire = bytes(self._buf[:end])
                    del self._buf[:end]
                    return wire
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                return None
            chunk = self.sock.recv(1 << 16)
            if not chunk and self.stream:
                raise ConnectionError("the forwarder closed the connection")
            if not self.stream:
                return chunk
            self._buf += chunk

    def recv(self, timeout: float = 5.0) -> Packet | None:
        """The next Interest/Data/Nack, or None if nothing arrives within ``timeout``."""
        wire = self._next_tlv(timeout)
        if wire is None:
            return None
        typ, _ = parse_tl_num(wire)
        if typ != LP_PACKET:
            return Packet(typ, wire)
        nack, fragment = parse_lp_packet(wire, with_tl=True)
        frag = bytes(fragment)
        return Packet(parse_tl_num(frag)[0], frag, nack)

    def express(self, interest: bytes, timeout: float = 5.0) -> Packet | None:
        """Send an Interest and return the first Data or Nack that comes back (None: silence)."""
        self.send(interest)
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            pkt = self.recv(left)
            if pkt is None:
                return None
            if pkt.typ == DATA or pkt.nack_reason is not None:
                return pkt
        return None


# -- management commands and datasets --------------------------------------------------------------


def command_interest(
    module: str,
    verb: str,
    *,
    signer: Signer | None = None,
    nonce: int | None = None,
    **params: Any,
) -> bytes:
    """A v2 (NDN 0.3 signed Interest) management command, as pynfdc and appv2 build it."""
    name = make_command_v2(module, verb, **params)
    param = InterestParam(nonce=gen_nonce() if nonce is None else nonce, lifetime=1000)
    wire = make_interest(
        name, param, app_param=b"", signer=signer or DigestSha256Signer(for_interest=True)
    )
    return bytes(wire)


def with_nonce(interest: bytes, nonce: int) -> bytes:
    """The same Interest with another Nonce (the Nonce is outside the signed portion)."""
    typ, tsize = parse_tl_num(interest)
    assert typ == INTEREST
    length, lsize = parse_tl_num(interest, tsize)
    pos = tsize + lsize
    end = pos + length
    while pos < end:
        t, ts = parse_tl_num(interest, pos)
        ln, ls = parse_tl_num(interest, pos + ts)
        vstart = pos + ts + ls
        if t == NONCE:
            assert ln == 4
            return interest[:vstart] + nonce.to_bytes(4, "big") + interest[vstart + 4 :]
        pos = vstart + ln
    raise ValueError("Interest has no Nonce")


def control_response(pkt: Packet | None) -> dict[str, Any]:
    """The ControlResponse in a command's reply Data, parsed by python-ndn."""
    assert pkt is not None, "no reply to the command"
    assert pkt.nack_reason is None, f"command was Nacked (reason {pkt.nack_reason})"
    _, _, content, _ = parse_data(pkt.wire)
    return parse_response(bytes(content))


def fetch_dataset(face: RawFace, prefix: str, timeout: float = 5.0) -> bytes:
    """All segments of a management dataset (``/localhost/nfd/rib/list`` ...), concatenated."""
    first = make_interest(
        prefix, InterestParam(can_be_prefix=True, must_be_fresh=True, lifetime=2000)
    )
    parts: list[bytes] = []
    pkt = face.express(bytes(first), timeout)
    while True:
        assert pkt is not None and pkt.typ == DATA, f"no Data for {prefix}: {pkt}"
        name, meta, content, _ = parse_data(pkt.wire)
        parts.append(bytes(content or b""))
        last = name[-1]
        if Component.get_type(last) != Component.TYPE_SEGMENT:
            return b"".join(parts)  # unsegmented
        if meta.final_block_id is None or bytes(meta.final_block_id) == bytes(last):
            return b"".join(parts)
        nxt = [*name[:-1], Component.from_segment(Component.to_number(last) + 1)]
        pkt = face.express(bytes(make_interest(nxt, InterestParam(lifetime=2000))), timeout)


def rib_routes(sock: str | os.PathLike[str]) -> dict[str, set[int]]:
    """RIB prefix -> face ids of its routes, read through a fresh Unix face."""
    with RawFace.unix(sock) as face:
        msg = RibStatus.parse(fetch_dataset(face, "/localhost/nfd/rib/list"))
    return {Name.to_str(e.name): {r.face_id for r in e.routes} for e in msg.entries}


def fib_nexthops(sock: str | os.PathLike[str]) -> dict[str, set[int]]:
    """FIB prefix -> next-hop face ids."""
    with RawFace.unix(sock) as face:
        msg = FibStatus.parse(fetch_dataset(face, "/localhost/nfd/fib/list"))
    return {Name.to_str(e.name): {nh.face_id for nh in e.next_hop_records} for e in msg.entries}


def face_ids(sock: str | os.PathLike[str]) -> set[int]:
    with RawFace.unix(sock) as face:
        msg = FaceStatusMsg.parse(fetch_dataset(face, "/localhost/nfd/faces/list"))
    return {f.face_id for f in msg.face_status}


def strategies(sock: str | os.PathLike[str]) -> dict[str, str]:
    with RawFace.unix(sock) as face:
        msg = StrategyChoiceMsg.parse(fetch_dataset(face, "/localhost/nfd/strategy-choice/list"))
    return {Name.to_str(s.name): Name.to_str(s.strategy.name) for s in msg.strategy_choices}
