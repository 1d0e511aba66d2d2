"""fib/add-nexthop, fib/remove-nexthop and the fib/list dataset.

Direct FIB edits, beside the RIB: the RIB recomputes the next hops of the prefixes it holds
when their routes change, and may then override a hop set here (NFD behaves the same).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from forwarder.mgmt.context import Managed, checked_prefix, target_face
from forwarder.mgmt.control import FACE_GONE, INTERNAL, ControlError, set_name
from forwarder.mgmt.dispatcher import Dispatcher

if TYPE_CHECKING:
    from ndn.app_support.nfd_mgmt import ControlParametersValue


def install(dispatcher: Dispatcher, ctx: Managed) -> None:
    def add_nexthop(params: ControlParametersValue, requester: int) -> ControlParametersValue:
        from ndn.app_support.nfd_mgmt import ControlParametersValue

        prefix = checked_prefix(params)
        face_id = target_face(params, requester)
        if face_id not in ctx.fw.faces:
            raise ControlError(FACE_GONE, f"face {face_id} does not exist")
        cost = 0 if params.cost is None else int(params.cost)
        if not ctx.fw.fib.add_nexthop(prefix, face_id, cost):
            raise ControlError(INTERNAL, "FIB is full: raise tables.fib_max_entries")
        body = ControlParametersValue()
        set_name(body, prefix)
        body.face_id = face_id
        body.cost = cost
        return body

    def remove_nexthop(params: ControlParametersValue, requester: int) -> ControlParametersValue:
        from ndn.app_support.nfd_mgmt import ControlParametersValue

        prefix = checked_prefix(params)
        face_id = target_face(params, requester)
        ctx.fw.fib.remove_nexthop(prefix, face_id)  # absent: still 200, as NFD
        body = ControlParametersValue()
        set_name(body, prefix)
        body.face_id = face_id
        return body

    def fib_list(_requester: int, _extra: list[bytes]) -> bytes:
        from ndn.app_support.nfd_mgmt import FibEntry, FibStatus, NextHopRecord

        msg = FibStatus()
        msg.entries = []
        for entry in ctx.fw.fib:
            fe = FibEntry()
            set_name(fe, entry.prefix)
            fe.next_hop_records = []
            for nh in entry.nexthops:
                rec = NextHopRecord()
                rec.face_id = nh.face_id
                rec.cost = nh.cost
                fe.next_hop_records.append(rec)
            msg.entries.append(fe)
        return bytes(msg.encode())

    dispatcher.add_command("fib", "add-nexthop", add_nexthop)
    dispatcher.add_command("fib", "remove-nexthop", remove_nexthop)
    dispatcher.add_dataset("fib", "list", fib_list)
