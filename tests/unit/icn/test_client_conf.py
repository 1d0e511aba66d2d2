"""Transport discovery follows python-ndn's rules; transport URIs are checked with clear errors.

Each test gets its own HOME and an empty list of system-wide client.conf paths, so the machine's
own configuration never leaks in.  Where the machine has no system-wide client.conf, the result
is also compared with python-ndn's own ``read_client_conf``.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from ndn.client_conf import read_client_conf

from icn.dataplane import client_conf as cc
from icn.errors import ConfigError

_SYSTEM_CONFS = [p for p in cc.CLIENT_CONF_PATHS[1:] if os.path.exists(p)]


@pytest.fixture
def home(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(workdir))
    monkeypatch.delenv(cc.ENV_VAR, raising=False)
    monkeypatch.setattr(cc, "CLIENT_CONF_PATHS", ("~/.ndn/client.conf",))
    monkeypatch.setattr(cc, "DEFAULT_SOCKET", str(workdir / "nfd" / "nfd.sock"))
    monkeypatch.setattr(cc, "OLD_DEFAULT_SOCKET", str(workdir / "nfd.sock"))
    return workdir


def _write_conf(home: Path, text: str) -> Path:
    path = home / ".ndn" / "client.conf"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def _same_as_python_ndn(got: str) -> None:
    if not _SYSTEM_CONFS and got != cc.default_transport():
        assert read_client_conf()["transport"] == got


def test_default_is_nfd_socket(home: Path) -> None:
    assert cc.resolve_transport() == f"unix://{home}/nfd/nfd.sock"


def test_old_socket_only_when_it_exists_and_the_new_one_does_not(home: Path) -> None:
    (home / "nfd.sock").touch()
    assert cc.resolve_transport() == f"unix://{home}/nfd.sock"
    (home / "nfd").mkdir()
    (home / "nfd" / "nfd.sock").touch()
    assert cc.resolve_transport() == f"unix://{home}/nfd/nfd.sock"


def test_client_conf_then_env_then_explicit(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_conf(home, "; a comment\npib=pib-sqlite3\ntransport=tcp4://127.0.0.1:7000\n")
    assert cc.resolve_transport() == "tcp4://127.0.0.1:7000"
    _same_as_python_ndn("tcp4://127.0.0.1:7000")
    monkeypatch.setenv(cc.ENV_VAR, "unix:///tmp/x.sock")
    assert cc.resolve_transport() == "unix:///tmp/x.sock"
    _same_as_python_ndn("unix:///tmp/x.sock")
    assert cc.resolve_transport("udp://[::1]") == "udp://[::1]"


def test_client_conf_without_transport_gives_the_default(home: Path) -> None:
    _write_conf(home, "pib=pib-sqlite3\n")
    assert cc.resolve_transport() == cc.default_transport()


def test_only_the_first_existing_conf_is_read(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _write_conf(home, "pib=x\n")
    second = home / "second.conf"
    second.write_text("transport=tcp://127.0.0.1\n")
    monkeypatch.setattr(cc, "CLIENT_CONF_PATHS", (str(first), str(second)))
    assert cc.resolve_transport() == cc.default_transport()
    first.unlink()
    assert cc.resolve_transport() == "tcp://127.0.0.1"


def test_bad_client_conf_names_the_file(home: Path) -> None:
    path = _write_conf(home, "transport\n[section\n")
    with pytest.raises(ConfigError, match=str(path)):
        cc.resolve_transport()


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("unix:///run/nfd/nfd.sock", ("unix", "/run/nfd/nfd.sock", 0)),
        ("tcp://127.0.0.1", ("tcp", "127.0.0.1", 6363)),
        ("tcp4://127.0.0.1:7000", ("tcp4", "127.0.0.1", 7000)),
        ("tcp6://[::1]:7000", ("tcp6", "::1", 7000)),
        ("udp://localhost", ("udp", "localhost", 6363)),
        ("udp4://10.0.0.1:1/", ("udp4", "10.0.0.1", 1)),
        ("UDP6://[::1]", ("udp6", "::1", 6363)),
    ],
)
def test_parse_transport(uri: str, expected: tuple[str, str, int]) -> None:
    assert cc.parse_transport(uri) == expected


@pytest.mark.parametrize(
    ("uri", "match"),
    [
        ("", "empty transport"),
        ("/run/nfd/nfd.sock", "no scheme"),
        ("unix://run/nfd.sock", "three slashes"),
        ("unix://relative.sock", "three slashes"),
        ("http://127.0.0.1", "unknown scheme"),
        ("tcp://127.0.0.1:99999", "port"),
        ("tcp://127.0.0.1:x", "port"),
        ("tcp://", "no host"),
        ("udp://:6363", "no host"),
        ("tcp4://[::1]", "IPv4"),
        ("udp6://127.0.0.1", "IPv6"),
        ("tcp://127.0.0.1/path", "HOST"),
    ],
)
def test_parse_transport_errors(uri: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        cc.parse_transport(uri)


@pytest.mark.parametrize(
    ("uri", "local"),
    [
        ("unix:///run/nfd/nfd.sock", True),
        ("tcp://127.0.0.1", True),
        ("tcp4://127.5.6.7:9", True),
        ("udp6://[::1]", True),
        ("tcp://localhost", True),
        ("tcp://192.0.2.1", False),
        ("udp6://[2001:db8::1]", False),
    ],
)
def test_is_local_transport(uri: str, local: bool) -> None:
    assert cc.is_local_transport(uri) is local


def test_host_names_are_local_only_if_every_address_is_loopback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers: dict[str, list[str]] = {"lo": ["127.0.0.1", "::1"], "mixed": ["127.0.0.1", "10.1.1.1"]}

    def fake_getaddrinfo(host: str, port: int) -> list[tuple[object, ...]]:
        if host not in answers:
            raise socket.gaierror("not found")
        return [(0, 0, 0, "", (a, port)) for a in answers[host]]

    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)
    assert cc.is_local_transport("tcp://lo")
    assert not cc.is_local_transport("tcp://mixed")
    assert not cc.is_local_transport("udp://unknown.invalid")
