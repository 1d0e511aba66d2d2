"""The asf/list dataset: what the adaptive strategy has measured, for ``icn strategy show``.

An icn extension (NFD has no such dataset; its ASF logs instead).  The Interest is
``/localhost/nfd/asf/list`` for every measured prefix, or ``/localhost/nfd/asf/list/<Name>`` with
one more component holding a Name TLV for the prefixes related to that name: the prefix itself,
those under it, and those above it (the FIB entry that serves it).  The Name travels as one
component, like a command's ControlParameters, so that a prefix ending in a version or segment
component is not taken for a follow-up of the dataset.

The content is one JSON object (like link/list, no TLV model to agree on):

- ``prefix``: the name asked about (``/`` for all), ``strategy``: the strategy it uses (the
  instance name, parameters included), ``asf``: whether that is the adaptive one;
- ``namespaces``: per measured prefix, its ``prefix``, the ``strategy`` instance that measured
  it with ``probing_interval_ms``, ``max_timeouts``, ``clone_after_ms`` (null: no cloning, or
  cloning by percentile) and ``clone_percentile`` (NN of ``clone-after~pNN``, else null),
  ``next_probe_in_ms`` (0: the next Interest probes), ``idle_ms`` since its last Interest, and
  ``nexthops``: one object per FIB next hop, in FIB order: ``face_id``, ``cost``, ``best`` (where
  a new Interest would go now), ``status`` (working, unmeasured, congested or failed),
  ``srtt_ms``, ``rttvar_ms`` (null until the first sample), ``rto_ms``, ``samples``,
  ``timeouts``, ``nacks`` (those that count as failures), ``congestion_nacks``, ``failures`` (in
  a row, since it last answered), ``last_probe_ago_ms`` (null: never probed) and
  ``retry_in_ms`` (a failed hop's back-off left, or a congested hop's hold, else null), and when
  the prefix clones, ``clone_after_ms`` (how long after its send an Interest sent to that hop is
  cloned) and ``clone_by`` ("fixed", "pNN": that percentile of the hop's last RTT samples, or
  "rto": too few samples yet, its RTO), both null without cloning.
"""

from __future__ import annotations

import json
import math
from typing import Any

from forwarder.fw.asf import AsfStrategy
from forwarder.fw.nexthop_stats import STATUS_NAMES, Namespace, NextHopStats
from forwarder.mgmt.context import Managed
from forwarder.mgmt.control import BAD_PARAMS, ControlError
from forwarder.mgmt.dispatcher import Dispatcher
from icn.errors import DecodeError
from icn.wire import tlv_types as T
from icn.wire.name import component_ends, to_uri
from icn.wire.tlv import read_tl


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


def filter_prefix(extra: list[bytes]) -> bytes:
    """The Name asked about: none (b"", all), or one component holding a Name TLV."""
    if not extra:
        return b""
    try:
        if len(extra) != 1:
            raise DecodeError(f"{len(extra)} components")
        typ, start, end = read_tl(extra[0], 0, len(extra[0]))
        if typ != T.COMP_GENERIC:
            raise DecodeError("not a generic component")
        inner = extra[0][start:end]
        typ, start, end = read_tl(inner, 0, len(inner))
        if typ != T.NAME or end != len(inner):
            raise DecodeError("not one Name TLV")
        prefix = inner[start:end]
        component_ends(prefix)
    except (DecodeError, ValueError) as exc:
        raise ControlError(
            BAD_PARAMS, f"asf/list takes one component holding a Name TLV ({exc})"
        ) from None
    return prefix


def _related(a: bytes, b: bytes) -> bool:
    # Name values are whole TLVs: a byte prefix is a component prefix.
    return a.startswith(b) or b.startswith(a)


def _hold_end(hop: NextHopStats) -> float:
    """When a hop that is held off gets Interests again: its back-off's end if it failed,
    else its congestion hold's."""
    return hop.retry_at if hop.failed else hop.congested_until


def _hop_row(
    strategy: AsfStrategy, hop: NextHopStats | None, face_id: int, cost: int, best: bool, now: float
) -> dict[str, Any]:
    cloning = strategy.clone_after is not None or strategy.clone_percentile is not None
    if hop is None:  # a next hop no Interest has considered yet
        # (its first Interest makes its stats, with the RTO before any sample)
        clone = strategy.clone_delay(NextHopStats(face_id, strategy.policy)) if cloning else None
        return {
            "face_id": face_id,
            "cost": cost,
            "best": best,
            "status": "unmeasured",
            "srtt_ms": None,
            "rttvar_ms": None,
            "rto_ms": None,
            "samples": 0,
            "timeouts": 0,
            "nacks": 0,
            "congestion_nacks": 0,
            "failures": 0,
            "last_probe_ago_ms": None,
            "retry_in_ms": None,
            "clone_after_ms": None if clone is None else _ms(clone[0]),
            "clone_by": None if clone is None else clone[1],
        }
    rtt = hop.rtt
    clone = strategy.clone_delay(hop) if cloning else None
    return {
        "face_id": face_id,
        "cost": cost,
        "best": best,
        "status": STATUS_NAMES[hop.status(now)],
        "srtt_ms": None if rtt.srtt is None else _ms(rtt.srtt),
        "rttvar_ms": None if rtt.srtt is None else _ms(rtt.rttvar),
        "rto_ms": _ms(rtt.rto),
        "samples": rtt.samples,
        "timeouts": hop.timeouts,
        "nacks": hop.nacks,
        "congestion_nacks": hop.congestion_nacks,
        "failures": hop.failures,
        "last_probe_ago_ms": None if hop.last_probe is None else _ms(now - hop.last_probe),
        "retry_in_ms": _ms(_hold_end(hop) - now) if hop.backing_off(now) else None,
        "clone_after_ms": None if clone is None else _ms(clone[0]),
        "clone_by": None if clone is None else clone[1],
    }


def namespace_row(strategy: AsfStrategy, ns: Namespace, ctx: Managed, now: float) -> dict[str, Any]:
    fib_entry = ctx.fw.fib.get(ns.prefix)
    nexthops = [] if fib_entry is None else fib_entry.nexthops
    best = strategy.best_face(ns, nexthops, now)
    next_probe = 0.0 if math.isinf(ns.next_probe) else max(0.0, ns.next_probe - now)
    return {
        "prefix": to_uri(ns.prefix),
        "strategy": strategy.full_name,
        "probing_interval_ms": _ms(strategy.probing_interval),
        "max_timeouts": strategy.policy.max_failures,
        "clone_after_ms": None if strategy.clone_after is None else _ms(strategy.clone_after),
        "clone_percentile": strategy.clone_percentile,
        "next_probe_in_ms": _ms(next_probe),
        "idle_ms": _ms(now - ns.last_used),
        "nexthops": [
            _hop_row(
                strategy, ns.hops.get(nh.face_id), nh.face_id, nh.cost, nh.face_id == best, now
            )
            for nh in nexthops
        ],
    }


def install(dispatcher: Dispatcher, ctx: Managed) -> None:
    def listing(_requester: int, extra: list[bytes]) -> bytes:
        prefix = filter_prefix(extra)
        fw = ctx.fw
        now = fw.clock()
        chosen = fw.strategy_choice.find(prefix, component_ends(prefix))
        rows = [
            namespace_row(strategy, ns, ctx, now)
            for strategy in fw.strategies()
            if isinstance(strategy, AsfStrategy)
            for ns in strategy.measurements
            if _related(ns.prefix, prefix)
        ]
        rows.sort(key=lambda row: (row["prefix"], row["strategy"]))
        out = {
            "prefix": to_uri(prefix),
            "strategy": chosen.full_name,
            "asf": isinstance(chosen, AsfStrategy),
            "namespaces": rows,
        }
        return json.dumps(out).encode()

    dispatcher.add_dataset("asf", "list", listing)
