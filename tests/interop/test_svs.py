"""python-ndn State Vector Sync (``ndn.app_support.svs``) through a live ``icn fwd``: three
members on one sync group prefix with the multicast strategy converge on each other's latest
sequence numbers."""

from __future__ import annotations

import json
from pathlib import Path

from apps.procs import ProcessGroup
from tests.interop.conftest import start_forwarder
from tests.interop.support import program_argv, rib_routes, strategies

GROUP = "/interop/sync/group"
MEMBERS = {"/interop/node/a": 3, "/interop/node/b": 4, "/interop/node/c": 5}


def test_three_svs_members_converge(group: ProcessGroup, workdir: Path, ndn_home: Path) -> None:
    """Each member publishes its own number of sequence numbers and ends up with every member's
    latest one; sync Interests reach all other members because the group prefix uses multicast
    (set with ``icn fwd --strategy``).  One member talks over TCP, two over the Unix socket."""
    fwd = start_forwarder(group, workdir, ndn_home, "--strategy", "/interop/sync=multicast")
    assert "/multicast" in strategies(fwd.socket)["/interop/sync"]
    expect = [arg for node, n in MEMBERS.items() for arg in ("--expect", f"{node}={n}")]
    members = []
    for i, (node, count) in enumerate(MEMBERS.items()):
        env = fwd.env_over_tcp() if i == 1 else fwd.env
        argv = program_argv("svs_member", GROUP, node, "--count", str(count), *expect)
        members.append(group.start(f"svs-{node.rsplit('/', 1)[1]}", argv, env))
    for m in members:
        m.wait_for("ready", timeout=30, stream="stdout")
    assert len(rib_routes(fwd.socket)[GROUP]) == 3  # every member registered the group
    for m in members:
        m.wait_for("converged", timeout=30, stream="stdout")
    for m in members:
        line = next(ln for ln in m.output().splitlines() if ln.startswith("converged "))
        assert json.loads(line.split(" ", 1)[1]) == MEMBERS, m.output()
        assert "result FAIL" not in m.output()
