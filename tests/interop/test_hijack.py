"""The prefix hijack, as an attacker on the next host runs it: two network namespaces joined by
a veth pair, ``icn fwd`` listening on UDP in one, a stranger in the other sending python-ndn's
own ``rib/register`` commands for a non-local face (the DigestSha256 name-embedded form, and a
v0.3 signed Interest under a fresh Ed25519 key nobody trusts).  Before the fix both got 200 and
the prefix went into the RIB.  Now: 403, nothing registered, each refusal counted.

Needs root and ``ip`` (CI has both and fails without them; skipped by hand elsewhere).
Namespaces come from the netns backend (this test's own run id) and go with its teardown;
every process is stopped by PID."""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path

import pytest

from apps.procs import Child, icn_argv
from apps.scenario import runs
from apps.scenario.netns import NetnsBackend
from apps.scenario.schema import Scenario
from tests.chaos.harness import CpuLoad
from tests.interop.support import program_argv, rib_routes
from tests.needs import is_root_with, needs

pytestmark = needs(is_root_with("ip"), "the hijack test needs root and the ip command (iproute2)")

TWO_HOSTS = {
    "name": "hijack",
    "backend": "netns",
    "nodes": {"victim": {}, "stranger": {}},
    "links": [{"between": ["victim", "stranger"]}],
}


def test_a_stranger_on_the_next_host_cannot_register_a_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu: CpuLoad
) -> None:
    monkeypatch.setenv(runs.STATE_ENV, str(tmp_path / "state"))
    sc = Scenario.model_validate(TWO_HOSTS)
    be = NetnsBackend(sc, secrets.token_hex(3), tmp_path / "run")
    link = sc.links[0]
    victim = be.address_on(link, "victim")
    fwd: Child | None = None
    try:
        be.setup()
        sock = be.unix_socket("victim")
        fwd = be.spawn(
            "victim", "fwd", icn_argv("fwd", "--udp", f"{victim}:6363", "--unix", str(sock))
        )
        fwd.wait_for("forwarder ready", timeout=cpu.budget(20), stream="stderr")
        attack = subprocess.run(
            be.argv_for("stranger", program_argv("hijack_attacker", victim, "6363", "/bank")),
            capture_output=True,
            timeout=cpu.budget(30),
        )
        assert attack.returncode == 0, attack.stderr.decode()[-3000:]
        answers = [json.loads(line) for line in attack.stdout.decode().splitlines()]
        assert [a["form"] for a in answers] == ["v1-digest", "v2-ed25519-stranger"]
        for a in answers:
            assert a["response"] != "no answer", a  # answered, so the test reached the forwarder
            assert a["response"]["status_code"] == 403, a
            assert "trust policy" in a["response"]["status_text"], a
        routes = rib_routes(sock)  # from the root namespace, over the victim's Unix socket
        assert not any(prefix.startswith("/bank") for prefix in routes), routes
        counters = fwd.counters()
        assert counters["mgmt.refused_localhop_no_policy"] == 2, counters
        assert counters.get("mgmt.status_200", 0) == 0, counters
    finally:
        if fwd is not None:
            fwd.stop(grace=3)
        be.teardown()
