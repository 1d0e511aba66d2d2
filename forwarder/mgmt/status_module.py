"""The status/general dataset (NFD's ForwarderStatus), from the daemon's counters."""

from __future__ import annotations

import time

from forwarder.fw.asf import AsfStrategy
from forwarder.mgmt.context import Managed
from forwarder.mgmt.dispatcher import Dispatcher

VERSION = "icn-fwd 0.1"


def install(dispatcher: Dispatcher, ctx: Managed) -> None:
    def general(_requester: int, _extra: list[bytes]) -> bytes:
        from ndn.app_support.nfd_mgmt import GeneralStatus

        c = ctx.counters
        fw = ctx.fw
        msg = GeneralStatus()
        msg.nfd_version = VERSION
        msg.start_timestamp = int(ctx.started_at * 1000)
        msg.current_timestamp = int(time.time() * 1000)
        msg.n_name_tree_entries = len(fw.fib) + len(fw.pit)
        msg.n_fib_entries = len(fw.fib)
        msg.n_pit_entries = len(fw.pit)
        msg.n_measurement_entries = sum(
            len(s.measurements) for s in fw.strategies() if isinstance(s, AsfStrategy)
        )
        msg.n_cs_entries = len(fw.cs)
        msg.n_in_interests = c["fw.in_interest"]
        msg.n_in_data = c["fw.in_data"]
        msg.n_in_nacks = c["fw.in_nack"]
        msg.n_out_interests = c["fw.out_interest"]
        msg.n_out_data = c["fw.out_data"]
        msg.n_out_nacks = c["fw.out_nack"]
        msg.n_satisfied_interests = c["fw.interest_satisfied"]
        msg.n_unsatisfied_interests = c["fw.interest_unsatisfied"]
        return bytes(msg.encode())

    dispatcher.add_dataset("status", "general", general)
