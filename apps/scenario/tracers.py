"""ndnSIM-style tables from a run's samples: per face per interval, and the content store's.

ndnSIM's L3RateTracer gives, per node, face and interval, Interests, Data and Nacks in and out,
satisfied and timed-out Interests, as rates and raw counts; its CsTracer the cache hits and
misses per interval.  The sampler (:mod:`apps.scenario.metrics`) keeps each face's cumulative
counters every ``report.interval``; a row here is the difference between two samples.

A face's satisfied and timed-out Interests are its FaceStats' (the sampler reads them, see
:func:`apps.scenario.metrics.face_counters`): the Interests from it that got Data, and those
whose PIT entry expired while it waited.  A face made during an interval counts from zero; the
counts a face gained after the last sample before it closed are not seen.  Rows are bounded
(:data:`MAX_FACE_ROWS`); past the bound they are counted in ``left_out``, not kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

from apps.scenario.metrics import FACE_FIELDS

MAX_FACE_ROWS = 50_000  # about 15 MB of report.json; a 200-node, 10-minute run has ~300,000
# (field in the table, counter of faces/list): ndnSIM's names, lower case
_FACE_COLUMNS = tuple((f.removeprefix("n_"), f) for f in FACE_FIELDS)


def _delta(now: int, before: int) -> int:
    """What a counter gained; a counter that went down (its node restarted) from zero."""
    return now - before if now >= before else now


def face_table(
    samples: Sequence[Mapping[str, Any]], max_rows: int = MAX_FACE_ROWS
) -> dict[str, Any]:
    """``{"interval_rows": [...], "left_out": n}``: one row per node, face and interval."""
    rows: list[dict[str, Any]] = []
    left_out = 0
    for prev, cur in pairwise(samples):
        seconds = float(cur["t"]) - float(prev["t"])
        if seconds <= 0:
            continue
        for node, faces in (cur.get("faces") or {}).items():
            before_faces = (prev.get("faces") or {}).get(node)
            if before_faces is None:
                continue  # the node did not answer the sample before: no baseline
            for face_id, now in faces.items():
                # a face that appeared in this interval counted from zero since it was made
                # (an app's face often lives a second or two: its whole life is in the table)
                was = before_faces.get(face_id) or {}
                if len(rows) >= max_rows:
                    left_out += 1
                    continue
                counts = {
                    col: _delta(int(now.get(key, 0)), int(was.get(key, 0)))
                    for col, key in _FACE_COLUMNS
                }
                rows.append(
                    {
                        "node": node,
                        "face": int(face_id),
                        "uri": now.get("uri", ""),
                        "t0": float(prev["t"]),
                        "t1": float(cur["t"]),
                        "counts": counts,
                        "rates": {k: round(v / seconds, 3) for k, v in counts.items()},
                    }
                )
    return {"interval_rows": rows, "left_out": left_out}


def cs_table(samples: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per node and interval: content store hits (``fw.cs_hit``) and misses (``cs.miss``)."""
    rows: list[dict[str, Any]] = []
    for prev, cur in pairwise(samples):
        for node, counters in (cur.get("nodes") or {}).items():
            before = (prev.get("nodes") or {}).get(node)
            if counters is None or before is None:
                continue
            hits = _delta(int(counters.get("fw.cs_hit", 0)), int(before.get("fw.cs_hit", 0)))
            misses = _delta(int(counters.get("cs.miss", 0)), int(before.get("cs.miss", 0)))
            rows.append(
                {
                    "node": node,
                    "t0": float(prev["t"]),
                    "t1": float(cur["t"]),
                    "hits": hits,
                    "misses": misses,
                    "hit_ratio": round(hits / (hits + misses), 4) if hits + misses else None,
                }
            )
    return rows


MAX_DELAY_ROWS = 20_000  # per run, all workloads together: about 3 MB of report.json


def _ms(seconds: Any) -> float | None:
    return round(float(seconds) * 1000.0, 3) if isinstance(seconds, int | float) else None


def app_delay_table(
    records: Mapping[str, Sequence[Mapping[str, Any]]],
    workloads: Sequence[str],
    t0: float,
    max_rows: int = MAX_DELAY_ROWS,
) -> dict[str, Any]:
    """ndnSIM's AppDelayTracer: one row per request of each workload (its operations, as
    ``ctx.record`` wrote them), in the order they were sent, with its full delay (from its first
    transmission), last delay (from its last) and retransmission count.  Past ``max_rows``
    requests are counted in ``left_out``; the bound is shared fairly, each workload keeping its
    first ``max_rows / len(workloads)`` rows."""
    rows: list[dict[str, Any]] = []
    left_out = 0
    share = max_rows // max(1, len(workloads))
    for name in workloads:
        ops = [r for r in records.get(name, ()) if "ok" in r]
        ops.sort(key=lambda r: float(r.get("sent") or r.get("t") or 0.0))
        left_out += max(0, len(ops) - share)
        for r in ops[:share]:
            full = r.get("latency") if r.get("ok") else None
            retx = r.get("retx")
            last = r.get("last_delay", full if retx in (None, 0) else None)
            sent = r.get("sent")
            rows.append(
                {
                    "workload": name,
                    "sent": round(float(sent) - t0, 4) if sent is not None else None,
                    "ok": bool(r.get("ok")),
                    "full_delay_ms": _ms(full),
                    "last_delay_ms": _ms(last),
                    "retx": retx if isinstance(retx, int) else None,
                    "error": r.get("error"),
                }
            )
    return {"request_rows": rows, "left_out": left_out}
