"""Shaping a live ``icn fwd``'s faces at run time (link/shape, an icn extension).

Two forwarders on loopback: A routes /srv over a UDP face to B, where ``icn ping-server`` runs.
``icn face shape`` on A's face cuts the link (loss 100%), restores it and adds delay, and ping
through both forwarders shows each change.  The client functions are driven through an Endpoint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apps.cli.common import EXIT_FAILED, EXIT_REFUSED, EXIT_USAGE
from apps.procs import icn_argv
from apps.topology import free_udp_port
from icn.dataplane import mgmt_client as mc
from icn.dataplane.client_conf import ENV_VAR
from icn.dataplane.endpoint import Endpoint
from icn.errors import CommandFailed
from tests.chaos.harness import CpuLoad
from tests.integration.test_cli_mgmt import as_json, err, forwarder, icn, out

HOST = "127.0.0.1"


def ping(env: dict[str, str], count: int, *, code: int = 0) -> Any:
    proc = icn(env, "ping", "/srv", "-c", str(count), "-i", "50ms", "--timeout", "500ms", "--json",
               code=code)  # fmt: skip
    return json.loads(proc.stdout)


@pytest.mark.fault
def test_face_shape_cuts_restores_and_delays_a_udp_link(workdir: Path, cpu: CpuLoad) -> None:
    port_b = free_udp_port()
    (workdir / "a").mkdir()
    (workdir / "b").mkdir()
    with (
        forwarder(workdir / "b", "--udp", f"{HOST}:{port_b}") as (group_b, env_b),
        forwarder(workdir / "a") as (group_a, env),
    ):
        server = group_b.start("ping-server", icn_argv("ping-server", "/srv"), env_b)
        server.wait_for("ping server ready", stream="stdout", timeout=cpu.budget(15))
        face_id = as_json(env, "route", "add", "/srv", f"udp4://{HOST}:{port_b}")["face_id"]
        assert ping(env, 2)["received"] == 2
        assert as_json(env, "face", "shaping") == []

        cut = as_json(env, "face", "shape", str(face_id), "--loss", "100%")
        assert cut["face_id"] == face_id and cut["loss"] == 1.0 and cut["shaped"]
        lost = ping(env, 2, code=EXIT_FAILED)
        assert lost["received"] == 0 and lost["timeouts"] == 2
        (row,) = as_json(env, "face", "shaping")
        assert row == {
            "face_id": face_id,
            "delay_ms": 0.0,
            "jitter_ms": 0.0,
            "loss": 1.0,
            "rate_mbps": None,
            "dropped": row["dropped"],
        }
        assert row["dropped"] >= 2
        table = out(env, "face", "shaping")
        assert "dropped" in table and "100%" in table

        assert out(env, "face", "shape", str(face_id)).strip() == f"face unshaped: id={face_id}"
        # unshaped, but listed while its shapers' drops are worth reporting (the cut's stay)
        (after,) = as_json(env, "face", "shaping")
        assert after == {**row, "loss": 0.0, "dropped": after["dropped"]}
        assert after["dropped"] >= row["dropped"]
        assert ping(env, 2)["received"] == 2

        text = out(env, "face", "shape", f"udp4://{HOST}:{port_b}", "--delay", "60ms",
                   "--jitter", "1ms", "--rate", "100Mbit", "--loss", "0")  # fmt: skip
        assert text.strip() == (
            f"face shaped: id={face_id} delay=60ms jitter=1ms loss=0% rate=100Mbit/s"
        )
        slow = ping(env, 2)
        assert slow["received"] == 2 and slow["rtt_ms"]["min"] >= 55

        gone = err(env, EXIT_REFUSED, "face", "shape", "999", "--loss", "5%")
        assert gone == "error: face shape failed: 404 face 999 does not exist\n"
        bad = err(env, EXIT_USAGE, "face", "shape", str(face_id), "--delay", "10xs")
        assert bad.startswith("error: --delay: ") and "unknown time unit" in bad
        assert "--loss: " in err(env, EXIT_USAGE, "face", "shape", str(face_id), "--loss", "150%")

        counters = group_a.children[0].counters()
        assert counters["mgmt.link_shape"] == 3
        assert counters["shaper.loss"] >= 2
        assert server.stop() == 0


async def test_shape_face_and_link_list_through_an_endpoint(workdir: Path) -> None:
    with forwarder(workdir) as (_, env):
        ep = await Endpoint.connect(env[ENV_VAR])
        try:
            created = await mc.command(
                ep, "faces", "create", uri=f"udp4://{HOST}:{free_udp_port()}"
            )
            face_id = created["face_id"]
            got = await mc.shape_face(
                ep, face_id, delay_ms=20, jitter_ms=1.5, loss=0.1, rate_mbps=5, seed=4
            )
            assert got == {
                "face_id": face_id,
                "delay_ms": 20,
                "jitter_ms": 1.5,
                "loss": 0.1,
                "rate_mbps": 5,
                "seed": 4,
            }
            assert await mc.link_list(ep) == [
                {
                    "face_id": face_id,
                    "delay_ms": 20.0,
                    "jitter_ms": 1.5,
                    "loss": 0.1,
                    "rate_mbps": 5.0,
                    "dropped": 0,
                }
            ]
            with pytest.raises(CommandFailed) as bad:
                await mc.shape_face(ep, face_id, loss=2.0)
            assert bad.value.status == 400 and "LinkShape.loss" in bad.value.text
            with pytest.raises(CommandFailed) as negative:
                await mc.shape_face(ep, face_id, delay_ms=-5)
            assert negative.value.status == 400 and "LinkShape.delay_ms" in negative.value.text
            with pytest.raises(CommandFailed) as missing:
                await mc.shape_face(ep, 999, loss=0.5)
            assert missing.value.status == 404

            own = await mc.shape_face(ep, 0, delay_ms=1)  # FaceId 0: this endpoint's face
            assert own["face_id"] not in (0, face_id)
            await mc.shape_face(ep, face_id)  # all zero: unshaped
            rows = await mc.link_list(ep)
            assert [r["face_id"] for r in rows] == [own["face_id"]]
        finally:
            ep.close()
            await ep.wait_closed()
