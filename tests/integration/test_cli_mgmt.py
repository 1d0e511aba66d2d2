"""The operator CLI against a real ``icn fwd`` process: status, face, route, strategy, cs.

The first call of each command in a test is a subprocess (about 0.3 s of CPU), the later ones
run in the test's process (tests/integration/icn_runs.py); one test walks through several
commands of one forwarder; every error path asserts the one-line message and its exit code.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from apps.cli.common import EXIT_FAILED, EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_USAGE
from apps.procs import ProcessGroup, icn_argv
from apps.topology import free_udp_port
from icn.dataplane.client_conf import ENV_VAR
from tests.integration.icn_runs import run_icn

HOST = "127.0.0.1"


@contextmanager
def forwarder(workdir: Path, *extra: str) -> Iterator[tuple[ProcessGroup, dict[str, str]]]:
    """A forwarder on a Unix socket in ``workdir``, and the env that points the CLI at it."""
    sock = workdir / "fwd.sock"
    with ProcessGroup(workdir) as group:
        fwd = group.start("fwd", icn_argv("fwd", "--unix", str(sock), *extra))
        fwd.wait_for("forwarder ready", stream="stderr")
        yield group, {ENV_VAR: f"unix://{sock}"}
        assert "Traceback" not in fwd.errors()


def icn(env: dict[str, str], *args: str, code: int = 0, stdin: bytes | None = None) -> Any:
    """Run ``icn ARGS`` (the first time in a test as a process, then in this one: see
    tests/integration/icn_runs.py); check the exit code, and that failures are one line, no
    traceback."""
    proc = run_icn(args, env, stdin)
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == code, f"icn {' '.join(args)} -> {proc.returncode}: {err}"
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    # one error line, last; ping reports "no reply" with its summary and exit 1 alone
    assert errors == ([] if code in (0, EXIT_FAILED) else [err.splitlines()[-1]]), err
    return proc


def out(env: dict[str, str], *args: str) -> str:
    return str(icn(env, *args).stdout.decode())


def err(env: dict[str, str], code: int, *args: str) -> str:
    return str(icn(env, *args, code=code).stderr.decode())


def as_json(env: dict[str, str], *args: str) -> Any:
    return json.loads(out(env, *args, "--json"))


def test_no_forwarder_bad_transport_and_help(workdir: Path) -> None:
    missing = {ENV_VAR: f"unix://{workdir}/nobody.sock"}
    msg = err(missing, EXIT_UNREACHABLE, "status")
    assert f"no forwarder at unix://{workdir}/nobody.sock: is `icn fwd` running?" in msg
    assert "NDN_CLIENT_TRANSPORT or --transport" in msg
    assert "has no scheme" in err({}, EXIT_USAGE, "route", "list", "--transport", "bogus")
    helptext = out({}, "route", "add", "--help")
    assert "Exit codes" in helptext and "--no-inherit" in helptext and "--capture" in helptext


def test_default_socket_of_icn_fwd_is_found_without_configuration(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not root: the daemon's per-user socket is where the CLI looks when python-ndn's default
    (NFD's socket) is absent.  Run in-process so it holds whoever runs the suite."""
    from apps.cli import common as ctl_common

    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("HOME", str(workdir))  # no ~/.ndn/client.conf
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(workdir))
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    nfd = str(workdir / "no-nfd" / "nfd.sock")  # python-ndn's default, absent
    monkeypatch.setattr(ctl_common, "DEFAULT_SOCKET", nfd)
    monkeypatch.setattr(ctl_common, "resolve_transport", lambda e: e or f"unix://{nfd}")
    own = workdir / "icn-fwd.sock"
    own.touch()
    assert ctl_common.pick_transport(None) == f"unix://{own}"
    assert ctl_common.pick_transport("tcp://127.0.0.1") == "tcp://127.0.0.1"
    own.unlink()  # neither exists: stay with python-ndn's answer (the error names it)
    assert ctl_common.pick_transport(None) == f"unix://{nfd}"


def test_status_faces_and_routes(workdir: Path) -> None:
    port, other = free_udp_port(), free_udp_port()
    uri, other_uri = f"udp4://{HOST}:{port}", f"udp4://{HOST}:{other}"
    with forwarder(workdir) as (_, env):
        st = as_json(env, "status")
        assert st["nfd_version"].startswith("icn-fwd") and st["uptime_s"] >= 0
        assert st["n_fib_entries"] >= 1 and "n_in_interests" in st
        text = out(env, "status")
        assert "version" in text and "uptime" in text and "pit entries" in text

        created = as_json(env, "face", "create", uri)
        assert created["result"] == "created" and created["uri"] == uri
        face_id = created["face_id"]
        faces = as_json(env, "face", "list")
        assert {"face_id": face_id, "uri": uri}.items() <= next(
            f for f in faces if f["face_id"] == face_id
        ).items()
        assert uri in out(env, "face", "list")
        again = out(env, "face", "create", f"udp://{HOST}:{port}")  # same face, alias scheme
        assert again.strip() == f"face exists: id={face_id} remote={uri}"

        added = out(env, "route", "add", "/app", str(face_id), "--cost", "7", "--capture")
        assert f"route added: /app -> face {face_id}" in added
        assert "cost=7" in added and "capture" in added and "origin=255" in added
        # a URI without a face: faces/create first, as nfdc does
        auto = as_json(env, "route", "add", "/other", other_uri, "--no-inherit", "--expires", "60s")
        assert auto["flags"] == 0 and auto["expiration_period"] == 60000
        routes = as_json(env, "route", "list")
        rib = {e["name"]: e["routes"] for e in routes["rib"]}
        assert rib["/app"] == [{"face_id": face_id, "origin": 255, "cost": 7, "flags": 3}]
        assert rib["/other"][0]["face_id"] != face_id
        fib = {e["name"]: e["next_hop_records"] for e in routes["fib"]}
        assert fib["/app"] == [{"face_id": face_id, "cost": 7}]
        listing = out(env, "route", "list")
        assert "RIB" in listing and "FIB" in listing and "/other" in listing

        msg = err(env, EXIT_REFUSED, "route", "add", "/x", "999")
        assert msg == "error: route add failed: 410 face 999 does not exist\n"
        assert "invalid NDN name" in err(env, EXIT_USAGE, "route", "add", "app", str(face_id))
        assert "bad face URI" in err(env, EXIT_USAGE, "route", "add", "/x", "udp4://h:99999")

        removed = out(env, "route", "remove", "/app", uri)
        assert removed.strip() == f"route removed: /app -> face {face_id} (origin=255)"
        assert "/app" not in {e["name"] for e in as_json(env, "route", "list")["rib"]}

        assert out(env, "face", "destroy", uri).strip() == f"face destroyed: id={face_id}"
        assert face_id not in {f["face_id"] for f in as_json(env, "face", "list")}
        gone = err(env, EXIT_REFUSED, "face", "destroy", uri)
        assert f"face destroy failed: no face with remote URI {uri}" in gone
        assert "face 999 does not exist" in err(env, EXIT_REFUSED, "face", "destroy", "999")


def test_strategy_and_content_store(workdir: Path) -> None:
    with forwarder(workdir, "--cs-capacity", "500") as (_, env):
        assert "multicast" in out(env, "strategy", "set", "/a", "multicast")
        full = as_json(env, "strategy", "set", "/b", "/localhost/nfd/strategy/best-route")
        assert full["strategy"].startswith("/localhost/nfd/strategy/best-route")
        choices = {c["name"]: c["strategy"] for c in as_json(env, "strategy", "list")}
        assert choices["/a"].startswith("/localhost/nfd/strategy/multicast")
        assert "/" in choices and "/b" in choices
        unknown = err(env, EXIT_REFUSED, "strategy", "set", "/a", "nope")
        assert unknown.startswith("error: strategy set failed: 404 unknown strategy")
        root = err(env, EXIT_REFUSED, "strategy", "unset", "/")
        assert root.startswith("error: strategy unset failed: 400 ")
        assert out(env, "strategy", "unset", "/a").strip() == "strategy unset: /a"
        assert "/a" not in out(env, "strategy", "list")

        info = as_json(env, "cs", "info")
        assert info["capacity"] == 500 and info["admit"] and info["serve"]
        assert info["n_cs_entries"] == 0 and "n_hits" in info
        conf = as_json(env, "cs", "config", "--capacity", "50", "--no-serve")
        assert conf == {"capacity": 50, "admit": True, "serve": False}
        assert "admit=yes serve=no" in out(env, "cs", "config")
        erased = as_json(env, "cs", "erase", "/a", "--count", "2")
        assert erased["count"] == 0 and erased["name"] == "/a"
        assert "erased 0 entries under /" in out(env, "cs", "erase", "/")
        assert "capacity" in out(env, "cs", "info")
