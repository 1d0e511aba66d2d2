"""Face URI parsing and formatting."""

from __future__ import annotations

import pytest

from forwarder.face.uri import FaceUri, is_loopback, parse_face_uri
from icn.errors import FaceError


@pytest.mark.parametrize(
    ("text", "expected", "canonical"),
    [
        ("udp4://127.0.0.1:6363", FaceUri("udp4", "127.0.0.1", 6363), "udp4://127.0.0.1:6363"),
        ("tcp4://10.0.0.1", FaceUri("tcp4", "10.0.0.1", 6363), "tcp4://10.0.0.1:6363"),
        ("udp://192.168.1.2:7000", FaceUri("udp4", "192.168.1.2", 7000), "udp4://192.168.1.2:7000"),
        ("tcp://[::1]:9", FaceUri("tcp6", "::1", 9), "tcp6://[::1]:9"),
        ("udp6://[fe80::1]:6363", FaceUri("udp6", "fe80::1", 6363), None),
        ("tcp4://example.net:6363", FaceUri("tcp4", "example.net", 6363), None),
        ("UDP4://127.0.0.1:1", FaceUri("udp4", "127.0.0.1", 1), "udp4://127.0.0.1:1"),
        ("unix:///run/nfd/nfd.sock", FaceUri("unix", path="/run/nfd/nfd.sock"), None),
        ("memory://", FaceUri("memory"), None),
        ("memory://app", FaceUri("memory", path="app"), None),
    ],
)
def test_parse_valid(text: str, expected: FaceUri, canonical: str | None) -> None:
    uri = parse_face_uri(text)
    assert uri == expected
    assert str(uri) == (canonical or text)
    assert parse_face_uri(str(uri)) == uri


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("127.0.0.1:6363", "expected scheme://"),
        ("http://x:80", "unknown scheme"),
        ("udp4://", "missing host"),
        ("udp4://127.0.0.1:0", "port must be 1-65535"),
        ("udp4://127.0.0.1:99999", "udp4://127.0.0.1:99999"),
        ("tcp4://127.0.0.1:abc", "tcp4://127.0.0.1:abc"),
        ("udp4://[::1]:6363", "IPv6 address but the scheme is udp4"),
        ("tcp6://127.0.0.1", "IPv4 address but the scheme is tcp6"),
        ("unix://run/nfd.sock", "absolute path"),
        ("udp4://1.2.3.4:5/path", "only udp4://host:port"),
        ("memory://a/b", "memory://<name>"),
    ],
)
def test_parse_errors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(FaceError, match="bad face URI") as info:
        parse_face_uri(text)
    assert message in str(info.value)


def test_loopback_scope() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("127.3.4.5") and is_loopback("::1")
    assert is_loopback("::ffff:127.0.0.1")
    assert not is_loopback("10.0.0.1") and not is_loopback("::2") and not is_loopback("x")
