"""cs/config, cs/erase and the cs/info dataset."""

from __future__ import annotations

from typing import TYPE_CHECKING

from forwarder.mgmt.context import Managed, checked_prefix
from forwarder.mgmt.control import BAD_PARAMS, ControlError, set_name
from forwarder.mgmt.dispatcher import Dispatcher
from icn.wire.tlv import encode_tlv

if TYPE_CHECKING:
    from ndn.app_support.nfd_mgmt import ControlParametersValue

CS_ENABLE_ADMIT = 1
CS_ENABLE_SERVE = 2
CS_INFO = 0x80


def install(dispatcher: Dispatcher, ctx: Managed) -> None:
    cs = ctx.fw.cs

    def flags() -> int:
        return (CS_ENABLE_ADMIT if cs.admit else 0) | (CS_ENABLE_SERVE if cs.serve else 0)

    def config(params: ControlParametersValue, _requester: int) -> ControlParametersValue:
        from ndn.app_support.nfd_mgmt import ControlParametersValue

        if params.flags is not None and params.mask is None:
            raise ControlError(BAD_PARAMS, "Flags needs a Mask saying which bits to change")
        if params.capacity is not None:
            cs.set_limits(max_entries=int(params.capacity))
        if params.flags is not None:
            mask, value = int(params.mask or 0), int(params.flags)
            if mask & CS_ENABLE_ADMIT:
                cs.admit = bool(value & CS_ENABLE_ADMIT)
            if mask & CS_ENABLE_SERVE:
                cs.serve = bool(value & CS_ENABLE_SERVE)
        body = ControlParametersValue()
        body.capacity = cs.max_entries
        body.flags = flags()
        return body

    def erase(params: ControlParametersValue, _requester: int) -> ControlParametersValue:
        from ndn.app_support.nfd_mgmt import ControlParametersValue

        prefix = checked_prefix(params)
        limit = None if params.count is None else int(params.count)
        if limit is not None and limit <= 0:
            raise ControlError(BAD_PARAMS, "Count must be positive")
        erased = cs.erase(prefix, limit)
        body = ControlParametersValue()
        set_name(body, prefix)
        if limit is not None and erased >= limit:
            body.capacity = limit  # NFD: the limit was reached, there may be more
        body.count = erased
        return body

    def info(_requester: int, _extra: list[bytes]) -> bytes:
        from ndn.app_support.nfd_mgmt import CsInfo

        msg = CsInfo()
        msg.capacity = cs.max_entries
        msg.flags = flags()
        msg.n_cs_entries = len(cs)
        msg.n_hits = ctx.counters["cs.hit"]
        msg.n_misses = ctx.counters["cs.miss"]
        return encode_tlv(CS_INFO, bytes(msg.encode()))

    dispatcher.add_command("cs", "config", config)
    dispatcher.add_command("cs", "erase", erase)
    dispatcher.add_dataset("cs", "info", info)
