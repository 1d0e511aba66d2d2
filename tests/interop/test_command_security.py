"""Management command security seen from the wire: replayed and stale signed commands get 403,
and ``/localhost`` commands from a non-local face are dropped without effect.

Commands are built with python-ndn (``make_command_v2`` + a DigestSha256-signed v0.3 Interest,
exactly what pynfdc and appv2 send) and written to raw sockets, so the test controls every byte.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ndn.security import DigestSha256Signer
from ndn.utils import timestamp

from apps.procs import ProcessGroup
from tests.interop.conftest import Forwarder, start_forwarder
from tests.interop.support import (
    RawFace,
    command_interest,
    control_response,
    fib_nexthops,
    rib_routes,
    with_nonce,
)


class CommandSigner(DigestSha256Signer):
    """DigestSha256 for Interests with a SignatureTime ``skew_ms`` away from now and, if given,
    a chosen SignatureNonce."""

    def __init__(self, skew_ms: int = 0, nonce: int | None = None) -> None:
        super().__init__(for_interest=True)
        self.skew_ms = skew_ms
        self.nonce = nonce

    def write_signature_info(self, signature_info: Any) -> None:
        super().write_signature_info(signature_info)
        signature_info.signature_time = timestamp() + self.skew_ms
        if self.nonce is not None:
            signature_info.signature_nonce = self.nonce


def test_replayed_and_stale_commands_get_403(fwd: Forwarder) -> None:
    """A signed rib/register is accepted once (200); the same bytes with only a new Interest
    Nonce (so the PIT does not take it for a duplicate) are refused (403: SignatureNonce and
    SignatureTime already used) and do not re-create the route, also when sent from another
    face; a new command (later time) that reuses the SignatureNonce is refused; commands signed
    10 minutes in the past or the future are refused and register nothing."""
    sig_nonce = 0x1122334455667788
    with RawFace.unix(fwd.socket) as face:
        register = command_interest(
            "rib",
            "register",
            name="/interop/replay",
            nonce=0x01020304,
            signer=CommandSigner(nonce=sig_nonce),
        )
        first = control_response(face.express(register))
        assert first["status_code"] == 200, first
        assert first["name"] is not None
        (app_face,) = rib_routes(fwd.socket)["/interop/replay"]
        assert first["face_id"] == app_face

        # remove it with a fresh command, then replay the register: it must not come back
        unregister = command_interest("rib", "unregister", name="/interop/replay")
        assert control_response(face.express(unregister))["status_code"] == 200
        assert "/interop/replay" not in rib_routes(fwd.socket)
        replay = with_nonce(register, 0x0A0B0C0D)
        assert replay != register
        second = control_response(face.express(replay))
        assert second["status_code"] == 403, second
        assert "/interop/replay" not in rib_routes(fwd.socket)
        with RawFace.unix(fwd.socket) as other_app:  # replayed by someone else: still caught
            third = control_response(other_app.express(with_nonce(register, 0x0E0F1011)))
        assert third["status_code"] == 403, third
        assert "/interop/replay" not in rib_routes(fwd.socket)

        reused = command_interest(
            "rib", "register", name="/interop/reused", signer=CommandSigner(nonce=sig_nonce)
        )
        assert control_response(face.express(reused))["status_code"] == 403
        assert "/interop/reused" not in rib_routes(fwd.socket)

        for skew_min in (-10, 10):
            stale = command_interest(
                "rib",
                "register",
                name="/interop/stale",
                signer=CommandSigner(skew_ms=skew_min * 60_000),
            )
            resp = control_response(face.express(stale))
            assert resp["status_code"] == 403, (skew_min, resp)
        assert "/interop/stale" not in rib_routes(fwd.socket)

        # the face itself is still fine: a fresh command works
        fresh = command_interest("rib", "register", name="/interop/fresh")
        assert control_response(face.express(fresh))["status_code"] == 200
        assert "/interop/fresh" in rib_routes(fwd.socket)


def test_digest_signed_commands_of_two_apps_are_ordered_separately(fwd: Forwarder) -> None:
    """DigestSha256 commands name no key, so all local apps share one: app B's command, signed
    a moment before app A's but arriving after it (two processes reading their clocks), must
    still be accepted, as apps starting together would otherwise fail to register at random."""
    with RawFace.unix(fwd.socket) as app_a, RawFace.unix(fwd.socket) as app_b:
        later = command_interest("rib", "register", name="/interop/a", signer=CommandSigner(200))
        earlier = command_interest("rib", "register", name="/interop/b", signer=CommandSigner(0))
        assert control_response(app_a.express(later))["status_code"] == 200
        assert control_response(app_b.express(earlier))["status_code"] == 200
        # within one app, times must still increase
        older = command_interest("rib", "register", name="/interop/c", signer=CommandSigner(-5000))
        assert control_response(app_b.express(older))["status_code"] == 403
        routes = rib_routes(fwd.socket)
    assert "/interop/a" in routes and "/interop/b" in routes and "/interop/c" not in routes


def test_localhost_command_from_non_local_face_is_dropped(
    group: ProcessGroup, workdir: Path, ndn_home: Path
) -> None:
    """With ``local_networks: [127.0.0.1/32]`` a UDP peer at 127.0.0.2 is non-local: its
    /localhost/nfd/rib/register gets no reply, is counted in fw.drop_scope and changes neither
    RIB nor FIB; the same command from 127.0.0.1 (local) is answered 200 and registers."""
    fwd = start_forwarder(
        group, workdir, ndn_home, udp=True, config={"local_networks": ["127.0.0.1/32"]}
    )
    assert fwd.udp_port is not None
    port = fwd.udp_port
    before = fwd.counters()
    with RawFace.udp(("127.0.0.1", port), bind_host="127.0.0.2") as remote:
        cmd = command_interest("rib", "register", name="/interop/remote")
        assert remote.express(cmd, timeout=1.5) is None  # silence: no Data, no Nack
        after = fwd.counters()
    assert after.get("fw.drop_scope", 0) > before.get("fw.drop_scope", 0)
    assert after["rib.size"] == before["rib.size"]
    assert after["fib.size"] == before["fib.size"]
    assert "/interop/remote" not in rib_routes(fwd.socket)
    assert "/interop/remote" not in fib_nexthops(fwd.socket)

    with RawFace.udp(("127.0.0.1", port), bind_host="127.0.0.1") as local:
        cmd = command_interest("rib", "register", name="/interop/local")
        resp = control_response(local.express(cmd, timeout=5))
        assert resp["status_code"] == 200, resp
        routes = rib_routes(fwd.socket)
        assert "/interop/local" in routes
        assert fib_nexthops(fwd.socket)["/interop/local"] == routes["/interop/local"]
        final = fwd.counters()
    assert final["rib.size"] == before["rib.size"] + 1
    assert final.get("fw.drop_scope", 0) == after.get("fw.drop_scope", 0)
