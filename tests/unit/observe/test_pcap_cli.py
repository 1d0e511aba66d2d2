"""``icn pcap FILE``: a line per packet (Interest, Data, Nack with its reason, fragments),
--count, --face, --json, and one error line with exit 2 for a file that is not a capture."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from apps.cli import pcap as cli_pcap
from apps.cli.pcap import describe
from icn.errors import DecodeError
from icn.wire import tlv_types as T
from icn.wire.encode import make_data, make_interest
from icn.wire.fragment import Fragmenter
from icn.wire.lp import encode_lp
from icn.wire.name import from_uri
from icn.wire.pcapng import enhanced_packet, interface_description, read_capture, section_header

T0 = 1_700_000_000_000_000  # microseconds: 2023-11-14 22:13:20 UTC


def app() -> typer.Typer:
    cli = typer.Typer()
    cli.callback()(lambda: None)  # a group, as in `icn`: the command is named
    cli_pcap.register(cli)
    return cli


def capture() -> bytes:
    interest = make_interest(from_uri("/a/b"), nonce=b"\0\0\0\1")
    data = make_data(from_uri("/a/b"), b"hello")
    nack = encode_lp(
        make_interest(from_uri("/a/c"), nonce=b"\0\0\0\2"), nack_reason=T.NACK_NO_ROUTE
    )
    fragments = Fragmenter(600).fragment(make_data(from_uri("/big"), b"z" * 1000))
    assert len(fragments) == 2
    out = section_header()
    out += interface_description("udp4://127.0.0.1:6364", "face 257 local=udp4://127.0.0.1:6363")
    out += interface_description("unix:///tmp/x.sock", "face 258 local=unix:///tmp/x.sock")
    out += enhanced_packet(1, T0, True, interest)
    out += enhanced_packet(0, T0 + 250, False, interest)
    out += enhanced_packet(0, T0 + 1_000, True, data)
    out += enhanced_packet(1, T0 + 1_500, False, nack)
    out += enhanced_packet(0, T0 + 2_000, True, fragments[0])
    out += enhanced_packet(0, T0 + 2_001, True, fragments[1])
    return out


def run(tmp_path: Path, data: bytes, *args: str) -> tuple[int, list[str]]:
    f = tmp_path / "c.pcapng"
    f.write_bytes(data)
    result = CliRunner().invoke(app(), ["pcap", str(f), *args])
    return result.exit_code, result.output.splitlines()


def test_lines_as_ndndump_prints_them(tmp_path: Path) -> None:
    code, lines = run(tmp_path, capture())
    assert code == 0
    i = len(make_interest(from_uri("/a/b"), nonce=b"\0\0\0\1"))
    assert lines[:3] == [
        f"22:13:20.000000 258 unix:///tmp/x.sock  in INTEREST /a/b, size {i}",
        f"22:13:20.000250 257 udp4://127.0.0.1:6364 out INTEREST /a/b, size {i}",
        f"22:13:20.001000 257 udp4://127.0.0.1:6364  in DATA /a/b, size "
        f"{len(make_data(from_uri('/a/b'), b'hello'))}",
    ]
    assert " out NACK NoRoute /a/c, size " in lines[3] and lines[3].startswith(
        "22:13:20.001500 258"
    )
    assert " in FRAGMENT 1/2 /big, size " in lines[4]
    assert lines[5].split(" size ")[0].endswith(" in FRAGMENT 2/2,")
    assert len(lines) == 6


def test_count_face_and_json(tmp_path: Path) -> None:
    assert len(run(tmp_path, capture(), "--count", "2")[1]) == 2
    code, lines = run(tmp_path, capture(), "--face", "258")
    assert code == 0 and len(lines) == 2 and all(" 258 unix://" in ln for ln in lines)
    code, lines = run(tmp_path, capture(), "--json", "--face", "258")
    rows = [json.loads(ln) for ln in lines]
    assert [(r["type"], r["name"], r["direction"]) for r in rows] == [
        ("INTEREST", "/a/b", "in"),
        ("NACK", "/a/c", "out"),
    ]
    assert rows[1]["nack_reason"] == "NoRoute" and rows[0]["time"] == pytest.approx(T0 / 1e6)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"", "not a pcapng or pcap file"),
        (b"GET / HTTP/1.1\r\n\r\n", "not a pcapng or pcap file"),
        (b"\n\r\r\n\x0c\x00\x00\x00\x4d\x3c\x2b\x1a", "truncated"),  # a header too short
        (b"\n\r\r\n\x1c\x00\x00\x00\x4d\x3c\x2b\x1a", "truncated"),  # cut after 12 bytes
        (  # a packet block too short for its own fixed fields
            section_header() + interface_description("x", "y") + b"\x06\0\0\0\x0c\0\0\0\x0c\0\0\0",
            "truncated or malformed",
        ),
    ],
)
def test_a_file_that_is_not_a_capture_is_one_error_line_and_exit_2(
    tmp_path: Path, data: bytes, words: str
) -> None:
    code, lines = run(tmp_path, data)
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith("error: ") and words in lines[0]


def test_a_truncated_capture_prints_what_it_holds_then_the_error(tmp_path: Path) -> None:
    code, lines = run(tmp_path, capture()[:-10])
    assert code == 2
    assert len(lines) == 6 and "INTEREST /a/b" in lines[0]
    assert lines[-1].startswith("error: ") and "truncated" in lines[-1]
    assert "(after 5 packets)" in lines[-1]


def test_a_missing_file_is_one_error_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app(), ["pcap", str(tmp_path / "none.pcapng")])
    assert result.exit_code == 2
    assert result.output.strip().startswith("error: cannot read")


def test_damaged_captures_give_decode_errors_never_other_exceptions() -> None:
    good = capture()
    rng = random.Random(7)
    for _ in range(2000):
        data = bytearray(good)
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = data[: rng.randrange(len(data) + 1)] if rng.random() < 0.3 else data
        try:
            for pkt in read_capture(bytes(data)):
                describe(pkt).text()  # a damaged packet is MALFORMED or OTHER, never raises
        except DecodeError:
            pass
