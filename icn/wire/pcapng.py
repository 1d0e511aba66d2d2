"""Capture files: pcapng blocks written and read, classic pcap read.

What a forwarder's capture writes (``icn fwd --pcap``): pcapng, one Interface Description Block
per face (``if_name`` its remote URI, ``if_description`` its id and local URI), link type PPP
(9), each packet as PPP protocol 0x0077 (``00 77``) followed by the link packet exactly as the
face carried it (a bare Interest or Data, or an NDNLPv2 LpPacket, fragments as fragments), and
the direction in each Enhanced Packet Block's ``epb_flags``.  PPP 0x0077 is how ndnSIM writes
NDN packets, and what ndndump and ndn-tools' Wireshark dissector decode; pcapng adds what a
classic pcap cannot hold: a name per face and the direction.  Timestamps are microseconds.

The reader takes pcapng of either byte order and classic pcap (micro- or nanosecond), as
:func:`read_capture`, and raises :class:`~icn.errors.DecodeError` with what is wrong.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from icn.errors import DecodeError

LINKTYPE_PPP = 9
PPP_NDN = b"\x00\x77"  # PPP protocol number 0x0077: NDN

SHB, IDB, SPB, EPB = 0x0A0D0D0A, 1, 3, 6
_BYTE_ORDER_MAGIC = 0x1A2B3C4D
_OPT_END, _OPT_COMMENT = 0, 1
_IF_NAME, _IF_DESCRIPTION, _IF_TSRESOL = 2, 3, 9
_EPB_FLAGS = 2
_INBOUND, _OUTBOUND = 1, 2  # epb_flags bits 0-1
# the least a block of each kind holds with no option: its fixed fields are read unchecked
_MIN_BLOCK = {SHB: 28, IDB: 20, EPB: 32, SPB: 16}

_PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1e-6),
    b"\xa1\xb2\xc3\xd4": (">", 1e-6),
    b"\x4d\x3c\xb2\xa1": ("<", 1e-9),
    b"\xa1\xb2\x3c\x4d": (">", 1e-9),
}


def _pad(n: int) -> int:
    return -n & 3


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + b"\0" * _pad(len(value))


def _block(kind: int, body: bytes) -> bytes:
    total = 12 + len(body)
    return struct.pack("<II", kind, total) + body + struct.pack("<I", total)


def section_header(application: str = "icn-net") -> bytes:
    """A Section Header Block (little-endian, unknown section length): a file's first block."""
    options = _option(4, application.encode()) + _option(_OPT_END, b"")  # shb_userappl
    return _block(SHB, struct.pack("<IHHq", _BYTE_ORDER_MAGIC, 1, 0, -1) + options)


def interface_description(name: str, description: str, nanoseconds: bool = False) -> bytes:
    """An Interface Description Block for one face: PPP, no snap length, its packets' times
    in microseconds (pcapng's default) or ``nanoseconds`` (a capture then stores
    ``time.time_ns()`` as it is, with no division per packet)."""
    options = (
        _option(_IF_NAME, name.encode())
        + _option(_IF_DESCRIPTION, description.encode())
        + _option(_IF_TSRESOL, b"\x09" if nanoseconds else b"\x06")
        + _option(_OPT_END, b"")
    )
    return _block(IDB, struct.pack("<HHI", LINKTYPE_PPP, 0, 0) + options)


# An Enhanced Packet Block around an NDN packet is: EPB_HEAD (type, length, interface, time
# high and low, captured and original length, then PPP 0x0077), the packet, and EPB_TAILS[...]
# (padding to 4 bytes, the direction option, the end of options) and the length again.  Kept as
# templates so a capture builds a block with one struct call and three appends.
EPB_HEAD = struct.Struct("<7I2s")
EPB_OVERHEAD = EPB_HEAD.size + 12 + 4  # without the packet and its padding
_FLAGS_IN = _option(_EPB_FLAGS, struct.pack("<I", _INBOUND)) + _option(_OPT_END, b"")
_FLAGS_OUT = _option(_EPB_FLAGS, struct.pack("<I", _OUTBOUND)) + _option(_OPT_END, b"")
# indexed by padding (0-3) + 4 for inbound
EPB_TAILS = tuple(b"\0" * (i % 4) + (_FLAGS_IN if i >= 4 else _FLAGS_OUT) for i in range(8))
U32 = struct.Struct("<I")


def enhanced_packet(interface: int, micros: int, inbound: bool, packet: bytes) -> bytes:
    """An Enhanced Packet Block: ``packet`` (an NDN link packet) as a PPP frame, whole."""
    n = len(packet)
    pad = -(n + 2) & 3
    total = EPB_OVERHEAD + n + pad
    head = EPB_HEAD.pack(
        EPB, total, interface, micros >> 32, micros & 0xFFFFFFFF, n + 2, n + 2, PPP_NDN
    )
    return head + packet + EPB_TAILS[pad + 4 * inbound] + U32.pack(total)


@dataclass(frozen=True)
class Interface:
    """One interface of a capture: for ours, one face."""

    linktype: int
    name: str = ""
    description: str = ""


@dataclass(frozen=True)
class CapturedPacket:
    """One packet: when (seconds since the epoch), on which interface, which way, the frame."""

    time: float
    interface: Interface
    inbound: bool | None  # None: the file does not say
    frame: bytes

    @property
    def ndn(self) -> bytes | None:
        """The NDN link packet inside the frame (PPP 0x0077, with or without FF 03 before it,
        or a raw NDN TLV), or None when the frame holds something else."""
        frame = self.frame
        if self.interface.linktype == LINKTYPE_PPP:
            if frame[:2] == b"\xff\x03":
                frame = frame[2:]
            return frame[2:] if frame[:2] == PPP_NDN else None
        return None


def read_capture(data: bytes) -> Iterator[CapturedPacket]:
    """Every packet of a pcapng or classic pcap file's bytes, in file order."""
    if data[:4] in _PCAP_MAGICS:
        yield from _read_pcap(data)
        return
    if len(data) < 12 or struct.unpack_from("<I", data)[0] != SHB:
        raise DecodeError("not a pcapng or pcap file (no section header or pcap magic)")
    yield from _read_pcapng(data)


def _read_pcap(data: bytes) -> Iterator[CapturedPacket]:
    order, unit = _PCAP_MAGICS[data[:4]]
    if len(data) < 24:
        raise DecodeError("pcap file header truncated")
    linktype = struct.unpack_from(order + "I", data, 20)[0] & 0xFFFF
    iface = Interface(linktype)
    off = 24
    while off < len(data):
        if off + 16 > len(data):
            raise DecodeError(f"packet record header truncated at byte {off}")
        sec, frac, caplen, _ = struct.unpack_from(order + "IIII", data, off)
        off += 16
        if off + caplen > len(data):
            raise DecodeError(f"packet at byte {off} truncated ({caplen} bytes announced)")
        yield CapturedPacket(sec + frac * unit, iface, None, data[off : off + caplen])
        off += caplen


def _options(data: bytes, off: int, end: int, order: str) -> Iterator[tuple[int, bytes]]:
    while off + 4 <= end:
        code, length = struct.unpack_from(order + "HH", data, off)
        off += 4
        if code == _OPT_END:
            return
        if off + length > end:
            raise DecodeError(f"option {code} runs past its block at byte {off}")
        yield code, data[off : off + length]
        off += length + _pad(length)


def _read_pcapng(data: bytes) -> Iterator[CapturedPacket]:
    order = "<"
    interfaces: list[Interface] = []
    resolutions: list[float] = []
    off = 0
    while off < len(data):
        if off + 12 > len(data):
            raise DecodeError(f"block header truncated at byte {off}")
        kind = struct.unpack_from(order + "I", data, off)[0]
        if kind == SHB:
            magic = data[off + 8 : off + 12]
            order = "<" if magic == struct.pack("<I", _BYTE_ORDER_MAGIC) else ">"
            interfaces, resolutions = [], []
        total = struct.unpack_from(order + "I", data, off + 4)[0]
        if total < _MIN_BLOCK.get(kind, 12) or total % 4 or off + total > len(data):
            raise DecodeError(f"block at byte {off} truncated or malformed (length {total})")
        body, end = off + 8, off + total - 4
        if kind == IDB:
            linktype = struct.unpack_from(order + "H", data, body)[0]
            name = description = ""
            resolution = 1e-6
            for code, value in _options(data, body + 8, end, order):
                if code == _IF_NAME:
                    name = value.decode("utf-8", "replace")
                elif code == _IF_DESCRIPTION:
                    description = value.decode("utf-8", "replace")
                elif code == _IF_TSRESOL and value:
                    r = value[0]
                    resolution = 2.0 ** -(r & 0x7F) if r & 0x80 else 10.0**-r
            interfaces.append(Interface(linktype, name, description))
            resolutions.append(resolution)
        elif kind == EPB:
            index, high, low, caplen = struct.unpack_from(order + "IIII", data, body)
            if index >= len(interfaces):
                raise DecodeError(f"packet at byte {off} names interface {index}, not described")
            start = body + 20
            if start + caplen > end:
                raise DecodeError(f"packet at byte {off} runs past its block")
            inbound: bool | None = None
            opts_at = start + caplen + _pad(caplen)
            for code, value in _options(data, opts_at, end, order):
                if code == _EPB_FLAGS and len(value) == 4:
                    direction = struct.unpack(order + "I", value)[0] & 3
                    inbound = {_INBOUND: True, _OUTBOUND: False}.get(direction)
            when = ((high << 32) | low) * resolutions[index]
            yield CapturedPacket(when, interfaces[index], inbound, data[start : start + caplen])
        elif kind == SPB:
            if not interfaces:
                raise DecodeError(f"simple packet at byte {off} before any interface")
            length = struct.unpack_from(order + "I", data, body)[0]
            frame = data[body + 4 : body + 4 + min(length, end - body - 4)]
            yield CapturedPacket(0.0, interfaces[0], None, frame)
        off += total
