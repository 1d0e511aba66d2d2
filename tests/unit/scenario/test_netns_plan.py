"""The netns backend's names and addresses, and its errors, without creating anything."""

from __future__ import annotations

import ipaddress
import os
import shutil
from pathlib import Path

import pytest

from apps.scenario import netns
from apps.scenario.netns import (
    MAX_LINKS,
    NetnsBackend,
    NetnsUnavailable,
    link_addresses,
    veth_names,
)
from apps.scenario.schema import Scenario
from icn.errors import ConfigError


def chain(n: int) -> Scenario:
    nodes: dict[str, dict[str, object]] = {f"n{i}": {} for i in range(n)}
    links = [{"between": [f"n{i}", f"n{i + 1}"]} for i in range(n - 1)]
    return Scenario.model_validate({"name": "chain", "nodes": nodes, "links": links})


def test_names_and_addresses(tmp_path: Path) -> None:
    sc = Scenario.model_validate(
        {
            "name": "t",
            "backend": "netns",
            "nodes": {"a": {}, "b": {}, "c": {}},
            "links": [{"between": ["a", "b"]}, {"between": ["c", "b"]}],
        }
    )
    be = NetnsBackend(sc, "0a1b2c", tmp_path)
    assert be.resources() == ["icn-0a1b2c-a", "icn-0a1b2c-b", "icn-0a1b2c-c"]
    assert be.argv_for("b", ["x", "-y"]) == ["ip", "netns", "exec", "icn-0a1b2c-b", "x", "-y"]
    assert be.listen_hosts("a") == ["0.0.0.0"]
    ab, cb = sc.links
    x = netns.run_octet("0a1b2c")
    assert 1 <= x <= 254
    assert be.address_on(ab, "a") == f"10.{x}.0.1" and be.address_on(ab, "b") == f"10.{x}.0.2"
    assert be.address_on(cb, "c") == f"10.{x}.0.5" and be.address_on(cb, "b") == f"10.{x}.0.6"
    assert be.interface_on(cb, "c") == "i0a1b2cl1a" and be.interface_on(cb, "b") == "i0a1b2cl1b"
    with pytest.raises(ValueError, match="not an end"):
        be.address_on(ab, "c")


def test_every_link_has_its_own_subnet() -> None:
    nets = set()
    for i in range(MAX_LINKS):
        a, b = link_addresses("ffffff", i)
        net = ipaddress.ip_network(f"{a}/30", strict=False)
        assert ipaddress.ip_address(b) in net and net not in nets
        assert a == str(net.network_address + 1) and b == str(net.network_address + 2)
        nets.add(net)
    assert link_addresses("ffffff", 64)[0].endswith(".1.1")
    with pytest.raises(ConfigError, match="at most 16384 links"):
        link_addresses("ffffff", MAX_LINKS)


def test_interface_names_fit() -> None:
    assert veth_names("abcdef", MAX_LINKS - 1) == ("iabcdefl16383a", "iabcdefl16383b")
    assert all(len(n) <= 15 for n in veth_names("abcdef", MAX_LINKS - 1))
    with pytest.raises(ConfigError, match="longer than 15 characters"):
        veth_names("abcdef", 10**6)


def test_many_links(tmp_path: Path) -> None:
    be = NetnsBackend(chain(300), "123abc", tmp_path)
    assert len(be.veths) == 299 and len(set(be.addresses)) == 299


def test_bad_run_id(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="6 lowercase hex"):
        NetnsBackend(chain(2), "ABCDEF", tmp_path)


def test_unavailable_without_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    be = NetnsBackend(chain(2), "abcdef", tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(NetnsUnavailable, match="needs root: run the launcher as root"):
        be.setup()
    assert not be.sock_dir.exists() and be.record is None


def test_unavailable_without_ip(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    be = NetnsBackend(chain(2), "abcdef", tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda cmd: None)
    with pytest.raises(NetnsUnavailable, match="apt-get install iproute2") as info:
        be.setup()
    assert isinstance(info.value, ConfigError)


def test_teardown_before_setup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # nothing was made: nothing to do (no ip command, no namespace looked for, no PID killed),
    # nothing left behind, and a second call the same
    done: list[object] = []
    for name in ("run_command", "list_namespaces", "namespace_pids", "kill_pid"):
        monkeypatch.setattr(netns, name, lambda *args, name=name: done.append((name, args)))
    monkeypatch.setattr(netns.shutil, "which", lambda cmd: f"/usr/sbin/{cmd}")  # ip is there
    be = NetnsBackend(chain(2), "abcdef", tmp_path)
    for _ in range(2):
        be.teardown()
        assert done == [] and list(tmp_path.iterdir()) == [] and not be.sock_dir.exists()
