"""``icn pcap FILE``: a capture's packets, one line each, as ndndump prints them.

Reads what ``icn fwd --pcap`` writes (pcapng, a face per interface, PPP 0x0077) and classic
pcap with PPP, as ndnSIM writes.  Each line: time, face (its id and remote URI, from the
interface's description), direction, type (INTEREST, DATA, NACK with its reason, a fragment
i/n), name and size.  ``--json`` prints one JSON object per packet instead.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from apps.cli.options import PANEL_TOOLS
from icn.errors import DecodeError
from icn.wire import tlv_types as T
from icn.wire.lp import parse_lp
from icn.wire.name import to_uri
from icn.wire.packet import parse_data, parse_interest
from icn.wire.pcapng import CapturedPacket, read_capture

EXIT_BAD_FILE = 2
NACK_REASONS = {
    T.NACK_NONE: "None",
    T.NACK_CONGESTION: "Congestion",
    T.NACK_DUPLICATE: "Duplicate",
    T.NACK_NO_ROUTE: "NoRoute",
}


@dataclass
class PacketLine:
    """One packet as ``icn pcap`` shows it."""

    time: float
    face: str  # "257 udp4://127.0.0.1:6364", or the interface's name
    direction: str  # in, out or "?" when the file does not say
    type: str  # INTEREST, DATA, NACK, FRAGMENT, LP (header only), OTHER, MALFORMED
    name: str
    size: int  # bytes of the link packet
    nack_reason: str | None = None
    fragment: str | None = None  # "i/n" of a fragment

    def text(self) -> str:
        try:
            when = datetime.fromtimestamp(self.time, UTC).strftime("%H:%M:%S.%f")
        except (ValueError, OverflowError, OSError):  # a damaged timestamp: shown as it is
            when = f"{self.time:.6f}"
        kind = self.type
        if self.nack_reason is not None:
            kind += f" {self.nack_reason}"
        if self.fragment is not None:
            kind += f" {self.fragment}"
        name = f" {self.name}" if self.name else ""
        return f"{when} {self.face} {self.direction:>3} {kind}{name}, size {self.size}"


def _face_label(pkt: CapturedPacket) -> str:
    iface = pkt.interface
    desc = iface.description
    if desc.startswith("face "):  # ours: "face 257 local=..."
        return f"{desc.split()[1]} {iface.name}"
    return iface.name or "-"


def _network_packet(wire: bytes) -> tuple[str, str]:
    kind = wire[0] if wire else -1
    if kind == T.INTEREST:
        return "INTEREST", to_uri(parse_interest(wire).name)
    if kind == T.DATA:
        return "DATA", to_uri(parse_data(wire).name)
    return "OTHER", ""


def describe(pkt: CapturedPacket) -> PacketLine:
    """What ``pkt`` carries; a packet our parsers refuse is MALFORMED, never an exception."""
    direction = {True: "in", False: "out", None: "?"}[pkt.inbound]
    line = PacketLine(pkt.time, _face_label(pkt), direction, "OTHER", "", len(pkt.frame))
    wire = pkt.ndn
    if wire is None:
        return line
    line.size = len(wire)
    try:
        if wire and wire[0] == T.LP_PACKET:
            lp = parse_lp(wire)
            if lp.fragment is None:
                line.type = "LP"
            elif lp.frag_count > 1:
                line.type, line.fragment = "FRAGMENT", f"{lp.frag_index + 1}/{lp.frag_count}"
                if lp.frag_index == 0:  # the first fragment starts with the packet's name
                    line.name = _first_fragment_name(lp.fragment)
            else:
                line.type, line.name = _network_packet(lp.fragment)
                if lp.nack_reason is not None:
                    line.type = "NACK"
                    line.nack_reason = NACK_REASONS.get(lp.nack_reason, str(lp.nack_reason))
        else:
            line.type, line.name = _network_packet(wire)
    except DecodeError:
        line.type = "MALFORMED"
    return line


def _first_fragment_name(fragment: bytes) -> str:
    """The name at the start of a first fragment (its packet's TLV is cut short, so only the
    type and length are read of it), or "" when the fragment is too short to hold it."""
    from icn.wire.tlv import read_varnum

    try:
        end = len(fragment)
        _outer, off = read_varnum(fragment, 0, end)
        _length, off = read_varnum(fragment, off, end)
        typ, off = read_varnum(fragment, off, end)
        length, off = read_varnum(fragment, off, end)
        if typ == T.NAME and off + length <= end:
            return to_uri(fragment[off : off + length])
    except DecodeError:
        pass
    return ""


def pcap(
    file: Annotated[Path, typer.Argument(help="capture file (pcapng or pcap) to read")],
    count: Annotated[int | None, typer.Option(help="stop after this many packets")] = None,
    face: Annotated[int | None, typer.Option(help="only this face id's packets")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per packet")] = False,
) -> None:
    """Print a capture's packets, one line each, as ndndump does."""
    try:
        data = file.read_bytes()
    except OSError as exc:
        typer.echo(f"error: cannot read {file}: {exc.strerror}", err=True)
        raise typer.Exit(EXIT_BAD_FILE) from None
    shown = 0
    try:
        for pkt in read_capture(data):
            line = describe(pkt)
            if face is not None and line.face.split()[0] != str(face):
                continue
            typer.echo(json.dumps(asdict(line)) if as_json else line.text())
            shown += 1
            if count is not None and shown >= count:
                break
    except DecodeError as exc:
        typer.echo(f"error: {file}: {exc} (after {shown} packets)", err=True)
        raise typer.Exit(EXIT_BAD_FILE) from None


def register(app: typer.Typer) -> None:
    app.command("pcap", rich_help_panel=PANEL_TOOLS)(pcap)
