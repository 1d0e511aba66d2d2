"""Node counters sampled through the status datasets, mapped onto the scenario's links.

NFD's status/general dataset carries a dozen counters (``n_in_interests``...); the forwarder
keeps many more (``fw.cs_hit``, ``fw.cs_hit_bytes``, drops by reason...).  Those come from the
counters line a forwarder logs on SIGUSR1 (the launcher started it, so it has its PID and its
log), or for a node packed with others from its host's control socket
(:class:`~apps.scenario.forwarders.PackedForwarder`), and join the sample under their own names.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from apps.procs import Child
from apps.scenario.fabric import Fabric
from forwarder.daemon import COUNTERS_TAG, FACE_TIMED_OUT_PREFIX
from icn.dataplane import mgmt_client
from icn.errors import IcnError

if TYPE_CHECKING:
    from apps.scenario.forwarders import NodeForwarder

SAMPLE_TIMEOUT = 2.0
NODE_FIELDS = (
    "n_in_interests",
    "n_out_interests",
    "n_in_data",
    "n_out_data",
    "n_in_nacks",
    "n_out_nacks",
    "n_satisfied_interests",
    "n_unsatisfied_interests",
    "n_cs_entries",
    "n_pit_entries",
    "n_fib_entries",
)


POLL_EVERY = 0.02


def _is_gauge(key: str) -> bool:
    """The table sizes in a forwarder's counters line: levels, not counts."""
    return key.endswith(".size") or key in ("cs.bytes", "uptime_s")


async def forwarder_counters(child: Child, timeout: float = SAMPLE_TIMEOUT) -> dict[str, int]:
    """Every counter of the forwarder ``child`` (SIGUSR1, then the line it logs); gauges and
    non-integers left out.  Empty if it is not running or does not answer in time."""
    if child.proc.poll() is not None:
        return {}
    try:
        offset = child.stderr_path.stat().st_size
    except OSError:
        return {}
    child.proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(child.stderr_path, "rb") as f:
            f.seek(offset)
            chunk = f.read()
        for line in chunk.split(b"\n")[:-1]:  # complete lines only
            _, tag, rest = line.partition(COUNTERS_TAG.encode())
            if not tag:
                continue
            try:
                values = json.loads(rest)
            except ValueError:
                return {}
            return counter_values(values)
        await asyncio.sleep(POLL_EVERY)
    return {}


def counter_values(values: Mapping[str, Any]) -> dict[str, int]:
    """The counters of a forwarder's snapshot: gauges and non-integers left out."""
    return {
        str(k): v
        for k, v in values.items()
        if isinstance(v, int) and not isinstance(v, bool) and not _is_gauge(str(k))
    }


FACE_FIELDS = (
    "n_in_interests",
    "n_out_interests",
    "n_in_data",
    "n_out_data",
    "n_in_nacks",
    "n_out_nacks",
    "n_in_bytes",
    "n_out_bytes",
    "n_satisfied_interests",
    "n_timed_out_interests",
)


def face_counters(
    faces: list[dict[str, Any]], counters: dict[str, int] | None = None
) -> dict[str, dict[str, Any]]:
    """Each non-internal face's counters (faces/list), by face id, with its remote URI.

    faces/list is NFD's FaceStatus, without satisfied and timed-out Interests: satisfied is
    the Data sent to the face (what FaceStats counts it as: this forwarder sends a face Data
    only for its pending Interest or a content store hit), and the timed-out counts come
    from the node's ``counters`` (``face_timed_out.<id>`` keys of its snapshot), which are
    taken out of ``counters`` here so they stay out of the node's own totals."""
    timed_out: dict[str, int] = {}
    if counters is not None:
        for key in [k for k in counters if k.startswith(FACE_TIMED_OUT_PREFIX)]:
            timed_out[key[len(FACE_TIMED_OUT_PREFIX) :]] = counters.pop(key)
    out: dict[str, dict[str, Any]] = {}
    for f in faces:
        face_id = int(f["face_id"])
        if face_id < 256:  # the management face and other internal ones
            continue
        entry: dict[str, Any] = {k: int(f.get(k, 0) or 0) for k in FACE_FIELDS}
        if "n_satisfied_interests" not in f:
            entry["n_satisfied_interests"] = entry["n_out_data"]
        if "n_timed_out_interests" not in f:
            entry["n_timed_out_interests"] = timed_out.get(str(face_id), 0)
        entry["uri"] = str(f.get("uri", ""))
        out[str(face_id)] = entry
    return out


async def _node_sample(
    fabric: Fabric, node: str, fwd: NodeForwarder | None
) -> tuple[dict[str, int], list[dict[str, Any]], dict[int, int]]:
    ep = fabric.endpoints[node]
    async with asyncio.timeout(SAMPLE_TIMEOUT):
        general = await mgmt_client.status(ep, "status/general")
        faces = await mgmt_client.status(ep, "faces/list")
        shaped = await mgmt_client.link_list(ep)
    counters = {k: int(general.get(k, 0) or 0) for k in NODE_FIELDS}
    if fwd is not None:
        counters.update(await fwd.counters())
    dropped = {int(f["face_id"]): int(f.get("dropped", 0)) for f in shaped}
    return counters, faces, dropped


async def sample(
    fabric: Fabric, t: float, forwarders: Mapping[str, NodeForwarder] | None = None
) -> dict[str, Any]:
    """One sample: ``{"t", "nodes": {node: counters | None}, "links": {link: {"a>b": ...}}}``.
    With ``forwarders`` (node -> its forwarder), a node's counters hold all of the
    forwarder's counters besides status/general's."""
    nodes = list(fabric.sc.nodes)
    live = [n for n in nodes if n in fabric.endpoints]
    fwds = forwarders or {}
    results = await asyncio.gather(
        *(_node_sample(fabric, n, fwds.get(n)) for n in live), return_exceptions=True
    )
    out_nodes: dict[str, dict[str, int] | None] = dict.fromkeys(nodes)
    faces_of: dict[str, dict[int, dict[str, Any]]] = {}
    face_table: dict[str, dict[str, dict[str, Any]]] = {}
    dropped_of: dict[str, dict[int, int]] = {}
    for node, res in zip(live, results, strict=True):
        if isinstance(res, BaseException):
            if not isinstance(res, IcnError | TimeoutError | OSError):
                raise res
            continue
        counters, faces, dropped = res
        out_nodes[node] = counters
        faces_of[node] = {int(f["face_id"]): f for f in faces}
        face_table[node] = face_counters(faces, counters)
        dropped_of[node] = dropped
    links: dict[str, dict[str, dict[str, int]]] = {}
    for link in fabric.sc.links:
        a, b = link.between
        entry: dict[str, dict[str, int]] = {}
        for src, dst in ((a, b), (b, a)):
            face_id = fabric.link_faces[link.name].get(src)
            face = faces_of.get(src, {}).get(face_id) if face_id is not None else None
            if face is None or face_id is None:
                continue
            packets = sum(
                int(face.get(k, 0) or 0) for k in ("n_out_interests", "n_out_data", "n_out_nacks")
            )
            entry[f"{src}>{dst}"] = {
                "bytes": int(face.get("n_out_bytes", 0) or 0),
                "packets": packets,
                "dropped": dropped_of.get(src, {}).get(face_id, 0),
            }
        links[link.name] = entry
    return {"t": round(t, 3), "nodes": out_nodes, "links": links, "faces": face_table}


async def sample_quietly(
    fabric: Fabric, t: float, forwarders: Mapping[str, NodeForwarder] | None = None
) -> dict[str, Any] | None:
    with contextlib.suppress(IcnError, TimeoutError, OSError):
        return await sample(fabric, t, forwarders)
    return None
