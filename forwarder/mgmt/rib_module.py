"""rib/register, rib/unregister and the rib/list dataset.

Register answers 200 once the route is in the RIB, which has already pushed it into the FIB
(NFD answers before its FIB update; ours is synchronous, so success means routable).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from forwarder.mgmt.context import Managed, checked_prefix, target_face
from forwarder.mgmt.control import FACE_GONE, INTERNAL, ControlError, set_name
from forwarder.mgmt.dispatcher import Dispatcher
from forwarder.mgmt.rib import ORIGIN_APP, ROUTE_CHILD_INHERIT, Route

if TYPE_CHECKING:
    from ndn.app_support.nfd_mgmt import ControlParametersValue


def install(dispatcher: Dispatcher, ctx: Managed) -> None:
    def register(params: ControlParametersValue, requester: int) -> ControlParametersValue:
        from ndn.app_support.nfd_mgmt import ControlParametersValue

        prefix = checked_prefix(params)
        face_id = target_face(params, requester)
        if face_id not in ctx.fw.faces:
            raise ControlError(FACE_GONE, f"face {face_id} does not exist")
        origin = ORIGIN_APP if params.origin is None else int(params.origin)
        cost = 0 if params.cost is None else int(params.cost)
        flags = ROUTE_CHILD_INHERIT if params.flags is None else int(params.flags)
        expires_at = None
        if params.expiration_period is not None:
            expires_at = ctx.fw.clock() + int(params.expiration_period) / 1000.0
        route = Route(face_id, origin, cost, flags, expires_at)
        if not ctx.rib.register(prefix, route):
            raise ControlError(INTERNAL, "RIB or FIB is full: raise tables.fib_max_entries")
        body = ControlParametersValue()
        set_name(body, prefix)
        body.face_id = face_id
        body.origin = origin
        body.cost = cost
        body.flags = flags
        if params.expiration_period is not None:
            body.expiration_period = int(params.expiration_period)
        return body

    def unregister(params: ControlParametersValue, requester: int) -> ControlParametersValue:
        from ndn.app_support.nfd_mgmt import ControlParametersValue

        prefix = checked_prefix(params)
        face_id = target_face(params, requester)
        origin = ORIGIN_APP if params.origin is None else int(params.origin)
        ctx.rib.unregister(prefix, face_id, origin)  # absent route: still 200, as NFD
        body = ControlParametersValue()
        set_name(body, prefix)
        body.face_id = face_id
        body.origin = origin
        return body

    def rib_list(_requester: int, _extra: list[bytes]) -> bytes:
        from ndn.app_support.nfd_mgmt import RibEntry, RibStatus
        from ndn.app_support.nfd_mgmt import Route as RouteMsg

        now = ctx.fw.clock()
        msg = RibStatus()
        msg.entries = []
        for prefix, routes in ctx.rib:
            entry = RibEntry()
            set_name(entry, prefix)
            entry.routes = []
            for r in routes:
                rm = RouteMsg()
                rm.face_id = r.face_id
                rm.origin = r.origin
                rm.cost = r.cost
                rm.flags = r.flags
                if r.expires_at is not None:
                    rm.expiration_period = max(0, int((r.expires_at - now) * 1000))
                entry.routes.append(rm)
            msg.entries.append(entry)
        return bytes(msg.encode())

    dispatcher.add_command("rib", "register", register)
    dispatcher.add_command("rib", "unregister", unregister)
    dispatcher.add_dataset("rib", "list", rib_list)
