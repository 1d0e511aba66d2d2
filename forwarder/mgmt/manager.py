"""Assemble management for a daemon: dispatcher, every module, and the internal face."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from forwarder.mgmt import (
    asf_module,
    channel_module,
    cs_module,
    face_module,
    fib_module,
    link_module,
    rib_module,
    status_module,
    strategy_module,
)
from forwarder.mgmt.command_auth import CommandValidator
from forwarder.mgmt.context import Managed
from forwarder.mgmt.dispatcher import Dispatcher
from forwarder.mgmt.mgmt_face import ManagementFace

if TYPE_CHECKING:
    from forwarder.mgmt.localhop import TrustSettings

MODULES = (
    rib_module,
    face_module,
    channel_module,
    fib_module,
    strategy_module,
    cs_module,
    status_module,
    link_module,
    asf_module,
)


def install_management(
    ctx: Managed,
    *,
    defer: Callable[..., object] | None = None,
    localhop: TrustSettings | None = None,
) -> ManagementFace:
    """Create the management face of ``ctx``'s forwarder, attached and routed.  With
    ``localhop`` (the config's trust policy), ``/localhop/nfd/rib`` commands from non-local
    faces run when their signer is trusted; without it they are refused."""
    face: ManagementFace | None = None

    async def fetch_from(face_id: int, name: bytes, lifetime_ms: int) -> bytes | None:
        return None if face is None else await face.fetch_from(face_id, name, lifetime_ms)

    policy = None
    if localhop is not None:  # (its validator and schema compiler load only when configured)
        from forwarder.mgmt.localhop import LocalhopPolicy

        policy = LocalhopPolicy.from_config(localhop, fetch_from, ctx.counters)

    def make_dispatcher(reply: Callable[[bytes], None]) -> Dispatcher:
        def face_is_local(face_id: int) -> bool:
            face = ctx.faces.get(face_id)
            return face is not None and face.is_local

        dispatcher = Dispatcher(
            reply,
            validator=CommandValidator(counters=ctx.counters),
            counters=ctx.counters,
            face_is_local=face_is_local,
            localhop=policy,
        )
        for module in MODULES:
            module.install(dispatcher, ctx)
        return dispatcher

    face = ManagementFace(ctx.fw, make_dispatcher, defer=defer, counters=ctx.counters)
    face.attach()
    return face
