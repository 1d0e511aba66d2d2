"""``Endpoint.serve`` registers its prefix with ``rib/register``, which is idempotent: a command
the forwarder left unanswered for its lifetime (4 s) is sent once more before serve gives up
(a forwarder busy beside other work once took longer, and ``icn serve`` failed with the
forwarder alive).  Against an in-memory forwarder, on the virtual clock."""

from __future__ import annotations

import asyncio

import pytest

from forwarder.mgmt.control import encode_response
from icn.errors import InterestTimeout
from icn.wire.encode import make_data
from icn.wire.name import to_uri
from icn.wire.packet import InterestView
from tests.unit.dataplane.memory_producer import endpoint
from tests.virtual_time import virtual_time


def forwarder(unanswered: int) -> tuple[list[float], object]:
    """Leaves the first ``unanswered`` register commands unanswered, says 200 to the others;
    the times the commands came at."""
    times: list[float] = []

    def answer(iv: InterestView) -> bytes | None:
        assert to_uri(iv.name).startswith("/localhost/nfd/rib/register/")
        times.append(asyncio.get_running_loop().time())
        if len(times) <= unanswered:
            return None
        return make_data(iv.name, encode_response(200, "OK"))

    return times, answer


@virtual_time
async def test_an_unanswered_register_is_sent_once_more() -> None:
    times, answer = forwarder(unanswered=1)
    ep, _ = endpoint(answer)  # type: ignore[arg-type]
    served = await ep.serve("/app", lambda iv, reply: None)
    assert served.registered and len(times) == 2
    assert times[1] - times[0] == pytest.approx(4.0)  # after the first one's lifetime
    assert "/app" in ep.handlers


@virtual_time
async def test_serve_gives_up_after_two_unanswered_registers_and_drops_its_handler() -> None:
    times, answer = forwarder(unanswered=2)
    ep, _ = endpoint(answer)  # type: ignore[arg-type]
    with pytest.raises(InterestTimeout):
        await ep.serve("/app", lambda iv, reply: None)
    assert len(times) == 2
    assert "/app" not in ep.handlers
