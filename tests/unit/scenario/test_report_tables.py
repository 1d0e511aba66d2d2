"""ndnSIM-style tables from samples: per face per interval, content store hits and misses."""

from __future__ import annotations

from typing import Any

from apps.scenario.metrics import face_counters
from apps.scenario.tracers import app_delay_table, cs_table, face_table


def face(n: int, timed_out: int = 0, uri: str = "udp4://127.1.1.2:6363") -> dict[str, Any]:
    return {
        "n_in_interests": 10 * n,
        "n_out_interests": 0,
        "n_in_data": 0,
        "n_out_data": 9 * n,
        "n_in_nacks": 0,
        "n_out_nacks": n,
        "n_in_bytes": 500 * n,
        "n_out_bytes": 9000 * n,
        "n_satisfied_interests": 9 * n,
        "n_timed_out_interests": timed_out,
        "uri": uri,
    }


def sample(t: float, n: int, timed_out: int, hits: int, misses: int) -> dict[str, Any]:
    return {
        "t": t,
        "nodes": {
            "a": {"fw.cs_hit": hits, "cs.miss": misses},
            "b": None,
        },
        "faces": {"a": {"257": face(n, timed_out)}, "b": {}},
    }


def test_face_rows_are_interval_counts_and_rates() -> None:
    samples = [sample(0.0, 0, 0, 0, 0), sample(0.5, 2, 1, 4, 6), sample(1.5, 3, 1, 4, 6)]
    table = face_table(samples)
    first, second = table["interval_rows"]
    assert (first["node"], first["face"], first["t0"], first["t1"]) == ("a", 257, 0.0, 0.5)
    assert first["counts"]["in_interests"] == 20 and first["rates"]["in_interests"] == 40.0
    assert first["counts"]["satisfied_interests"] == 18
    assert first["counts"]["timed_out_interests"] == 1
    assert first["counts"]["out_nacks"] == 2 and first["counts"]["out_bytes"] == 18_000
    assert second["counts"]["timed_out_interests"] == 0
    assert second["rates"]["in_interests"] == 10.0


def test_face_rows_are_bounded_and_a_restart_counts_from_zero() -> None:
    samples = [sample(float(t), 5 if t < 2 else 1, 0, 0, 0) for t in range(5)]
    table = face_table(samples, max_rows=3)
    assert len(table["interval_rows"]) == 3 and table["left_out"] == 1
    restarted = table["interval_rows"][1]  # t 1 -> 2: the counter fell from 50 to 10
    assert restarted["counts"]["in_interests"] == 10


def test_a_new_face_counts_from_zero_a_silent_node_gives_no_rows() -> None:
    first = sample(0.0, 1, 0, 0, 0)
    second = sample(1.0, 2, 0, 0, 0)
    second["faces"]["a"]["300"] = face(3, timed_out=4, uri="fd://9")  # an app came
    second["faces"]["b"] = {"257": face(1)}  # b answered, not the sample before
    del first["faces"]["b"]
    rows = face_table([first, second])["interval_rows"]
    assert [(r["node"], r["face"]) for r in rows] == [("a", 257), ("a", 300)]
    assert rows[1]["counts"]["in_interests"] == 30
    assert rows[1]["counts"]["timed_out_interests"] == 4


def test_faces_list_rows_get_satisfied_and_timed_out_from_the_node() -> None:
    # faces/list is NFD's FaceStatus: no satisfied or timed-out fields; the node's snapshot
    # has the timed-out counts per face, which leave the node's own counters
    listed: list[dict[str, Any]] = [
        {"face_id": 1, "n_in_interests": 5},  # internal: left out
        {"face_id": 257, "uri": "udp4://127.1.1.2:6363", "n_in_interests": 7, "n_out_data": 6},
        {"face_id": 258, "uri": "fd://4", "n_in_interests": 2},
    ]
    counters = {"fw.cs_hit": 3, "face_timed_out.258": 2}
    table = face_counters(listed, counters)
    assert sorted(table) == ["257", "258"]
    assert table["257"]["n_satisfied_interests"] == 6 and table["257"]["n_timed_out_interests"] == 0
    assert table["258"]["n_timed_out_interests"] == 2 and table["258"]["uri"] == "fd://4"
    assert counters == {"fw.cs_hit": 3}


def test_cs_hits_and_misses_per_interval() -> None:
    rows = cs_table([sample(0.0, 0, 0, 0, 0), sample(1.0, 0, 0, 3, 1)])
    assert rows == [{"node": "a", "t0": 0.0, "t1": 1.0, "hits": 3, "misses": 1, "hit_ratio": 0.75}]


def test_request_rows_have_full_and_last_delay_and_retransmissions() -> None:
    records: dict[str, list[dict[str, Any]]] = {
        "w": [
            {"t": 101.5, "sent": 100.2, "ok": True, "latency": 1.3, "last_delay": 0.3, "retx": 1},
            {"t": 100.15, "sent": 100.1, "ok": True, "latency": 0.05, "retx": 0},
            {"t": 103.0, "sent": 100.3, "ok": False, "error": "timeout", "retx": 2},
        ]
    }
    table = app_delay_table(records, ["w"], t0=100.0)
    assert table["left_out"] == 0
    first, retried, lost = table["request_rows"]  # in the order sent
    assert (first["sent"], first["full_delay_ms"], first["last_delay_ms"]) == (0.1, 50.0, 50.0)
    assert (retried["full_delay_ms"], retried["last_delay_ms"], retried["retx"]) == (
        1300.0,
        300.0,
        1,
    )
    assert (lost["ok"], lost["retx"], lost["full_delay_ms"], lost["error"]) == (
        False,
        2,
        None,
        "timeout",
    )


def test_request_rows_are_bounded_per_workload() -> None:
    ops = [{"t": float(i), "sent": float(i), "ok": True, "latency": 0.01} for i in range(10)]
    table = app_delay_table({"w": ops, "v": ops[:2]}, ["w", "v"], t0=0.0, max_rows=8)
    assert [r["workload"] for r in table["request_rows"]] == ["w"] * 4 + ["v"] * 2
    assert table["left_out"] == 6
