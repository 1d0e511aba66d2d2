"""Names, chunk encoding, reductions and plans of compute/collective (no sockets)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from compute.collective.combine import combine, encode_part, read_part
from compute.collective.errors import CollectiveError, PlanError
from compute.collective.names import JobNames
from compute.collective.ops import finish, fold
from compute.collective.plan import Plan
from compute.collective.ring import ring_reference, segment_bounds
from compute.collective.wire import Layout, encode_chunk, encode_error
from icn.errors import ConfigError, DecodeError
from icn.wire.name import from_uri, to_uri

# ---- names ---------------------------------------------------------------------------------


def test_names_follow_the_design() -> None:
    names = JobNames("/train/run7")
    assert to_uri(JobNames.piece(names.worker_prefix("3"), 5, 17)) == "/train/run7/w/3/5/17"
    assert to_uri(JobNames.piece(names.sum_prefix(), 5, 17)) == "/train/run7/sum/5/17"
    assert to_uri(JobNames.piece(names.agg_prefix("b"), 0, 1)) == "/train/run7/agg/b/0/1"
    assert to_uri(JobNames.piece(names.ring_prefix("2"), 1, 2, 3)) == "/train/run7/ring/2/1/2/3"


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("/ar/sum/5/17", (5, 17)),
        ("/ar/sum/5", None),  # too short
        ("/ar/sum/5/17/1", None),  # too long
        ("/ar/sum/x/17", None),  # not a number
        ("/ar/sum/-1/17", None),
        ("/ar/sum/seg=1/17", None),  # not a generic component
        ("/other/sum/5/17", None),
        ("/ar/sum/1234567890123/1", None),  # absurdly large
    ],
)
def test_numbers_after_accepts_only_the_expected_shape(uri: str, expected: object) -> None:
    prefix = JobNames("/ar").sum_prefix()
    assert JobNames.numbers_after(prefix, from_uri(uri), 2) == expected


def test_a_job_must_be_a_name() -> None:
    with pytest.raises(ConfigError, match="job"):
        JobNames("/")


# ---- chunks ----------------------------------------------------------------------------------


def test_layout_cuts_whole_items_and_covers_the_array() -> None:
    arr = np.arange(1001, dtype=np.float64)
    layout = Layout.of(arr, 1001)  # 1001 bytes is not a whole number of 8-byte items
    assert layout.chunk_bytes == 1000
    spans = [layout.span(c) for c in range(layout.chunks)]
    assert spans[0] == (0, 1000) and spans[-1][1] == arr.nbytes
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    empty = Layout.of(np.zeros((0, 3), np.int8), 64)
    assert empty.chunks == 1 and empty.span(0) == (0, 0)


def test_chunk_round_trip_and_errors() -> None:
    arr = np.arange(10, dtype=np.int32)
    layout = Layout.of(arr, 4096)
    header, part = read_part(encode_chunk(layout.header("sum", 1), arr.tobytes()), "w")
    assert header["n"] == 1 and np.array_equal(part, arr)
    with pytest.raises(CollectiveError, match="worker 9 did not"):
        read_part(encode_error("worker 9 did not contribute"), "agg")
    for garbage in (b"", b"\x00", b"\xff\xff" + b"x" * 10, b"\x00\x01\xc1", b"\x00\x01\x05"):
        with pytest.raises(CollectiveError, match="malformed"):
            read_part(garbage, "w")
    with pytest.raises(DecodeError):
        Layout.from_header({"dt": "|O", "shape": [1], "cb": 8})  # no Python objects


def test_combine_folds_in_order_and_counts_workers() -> None:
    a = np.array([1e16, 1.0], dtype=np.float64)
    b = np.array([-1e16, 1.0], dtype=np.float64)
    c = np.array([1.0, 1.0], dtype=np.float64)
    layout = Layout.of(a, 64)
    parts = [read_part(encode_chunk(layout.header("sum", 1), x.tobytes()), "w") for x in (a, b, c)]
    header, total = combine(parts, ["a", "b", "c"])
    assert header["n"] == 3
    assert total.tobytes() == ((a + b) + c).tobytes()  # (1e16 - 1e16) + 1 = 1, not 0
    again = read_part(encode_part((header, total)), "agg")
    assert again[0]["n"] == 3 and np.array_equal(again[1], total)


def test_combine_refuses_children_that_disagree() -> None:
    a = np.zeros(4, np.float32)
    ok = read_part(encode_chunk(Layout.of(a, 64).header("sum", 1), a.tobytes()), "x")
    other_op = read_part(encode_chunk(Layout.of(a, 64).header("max", 1), a.tobytes()), "y")
    b = np.zeros(4, np.float64)
    other_dtype = read_part(encode_chunk(Layout.of(b, 64).header("sum", 1), b.tobytes()), "z")
    for bad in (other_op, other_dtype):
        with pytest.raises(CollectiveError, match="disagrees"):
            combine([ok, bad], ["w0", "w1"])


def test_fold_and_finish() -> None:
    xs = [np.array([1, 5], np.int64), np.array([3, 2], np.int64)]
    assert fold(xs, "max").tolist() == [3, 5]
    assert fold(xs, "min").tolist() == [1, 2]
    assert finish(fold(xs, "mean"), "mean", 2).tolist() == [2.0, 3.5]
    big = [np.array([2**62], np.int64)] * 2
    assert fold(big, "sum")[0] == np.int64(-(2**63))  # wraps as numpy does, exactly
    assert fold(xs, "prod").tolist() == [3, 10]
    with pytest.raises(ConfigError, match="op 'median'"):
        fold(xs, "median")


@pytest.mark.parametrize("count", [1, 2, 5])
def test_fold_into_a_reused_buffer_gives_the_same_bits(count: int) -> None:
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(1000).astype(np.float32) * 10.0**k for k in range(count)]
    buffer = np.full(1000, np.nan, np.float32)  # what the last chunk left there
    for op in ("sum", "max", "min"):
        got = fold(xs, op, out=buffer)
        assert got is buffer and got.tobytes() == fold(xs, op).tobytes()
    assert all(x.flags.writeable for x in xs)  # no part was folded into in place


# ---- plans -------------------------------------------------------------------------------------

TWO_LEVEL = [("r", "m1"), ("r", "m2"), ("m1", "a"), ("m1", "b"), ("m2", "c"), ("m2", "d")]
PLACES = {"w0": "a", "w1": "a", "w2": "b", "w3": "b", "w4": "c", "w5": "c", "w6": "d", "w7": "d"}


def test_plan_from_topology_follows_the_paths_to_the_root() -> None:
    plan = Plan.from_topology("/ar", TWO_LEVEL, PLACES, ["r", "m1", "m2"])
    assert plan.root == "r"
    assert plan.children == {
        "r": ("m1", "m2"),
        "m1": ("w0", "w1", "w2", "w3"),
        "m2": ("w4", "w5", "w6", "w7"),
    }
    assert Plan.from_dict(plan.to_dict()) == plan
    flat = Plan.from_topology("/ar", TWO_LEVEL, PLACES, ["r"])
    assert flat.children == {"r": tuple(PLACES)}


def test_plan_reference_folds_like_the_tree() -> None:
    plan = Plan.from_topology("/ar", TWO_LEVEL, PLACES, ["r", "m1", "m2"])
    rng = np.random.default_rng(3)
    arrays = {w: rng.standard_normal(1000).astype(np.float32) for w in PLACES}
    tree = plan.reference(arrays, "sum")
    by_hand = fold(
        [
            fold([arrays[f"w{i}"] for i in range(4)], "sum"),
            fold([arrays[f"w{i}"] for i in range(4, 8)], "sum"),
        ],
        "sum",
    )
    assert tree.tobytes() == by_hand.tobytes()
    sequential = fold([arrays[w] for w in PLACES], "sum")
    assert tree.tobytes() != sequential.tobytes()  # the order matters for floats


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"job": "/ar", "workers": [], "root": "r", "aggregators": {"r": []}}, "at least one"),
        ({"job": "/ar", "workers": ["a", "a"], "root": "r", "aggregators": {"r": ["a"]}}, "twice"),
        (
            {"job": "/ar", "workers": ["a", "b"], "root": "r", "aggregators": {"r": ["a"]}},
            "under no aggregator",
        ),
        ({"job": "/ar", "workers": ["a"], "root": "x", "aggregators": {"r": ["a"]}}, "root"),
        (
            {"job": "/ar", "workers": ["a"], "root": "r", "aggregators": {"r": ["a", "zz"]}},
            "neither",
        ),
        (
            {
                "job": "/ar",
                "workers": ["a"],
                "root": "r",
                "aggregators": {"r": ["a"], "s": ["t"], "t": ["s"]},
            },
            "neither|child of both|lead to the root|cycle",
        ),
        (
            {"job": "/ar", "workers": ["a/b"], "root": "r", "aggregators": {"r": ["a/b"]}},
            "name component",
        ),
        ({"workers": ["a"], "root": "r", "aggregators": {"r": ["a"]}}, "missing field 'job'"),
    ],
)
def test_bad_plans_are_refused_with_the_reason(data: dict[str, object], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        Plan.from_dict(data)


def test_balanced_tree_and_flat_plans() -> None:
    plan = Plan.tree("/ar", [str(i) for i in range(8)], fan_in=2)
    assert len(plan.workers_under(plan.root)) == 8
    assert all(len(kids) <= 2 for kids in plan.children.values())
    assert Plan.flat("/ar", ["0", "1"]).children == {"ps": ("0", "1")}


def test_ring_reference_segments() -> None:
    assert segment_bounds(10, 3) == [(0, 3), (3, 6), (6, 10)]
    arrays = [np.full(6, float(i), np.float64) for i in range(3)]
    assert ring_reference(arrays, "sum").tolist() == [3.0] * 6


def test_a_worker_refuses_chunks_no_face_can_carry() -> None:
    from compute.collective import Collective

    plan = Plan.flat("/ar", ["a", "b"])
    for size in (8, 5 << 20):
        with pytest.raises(CollectiveError, match="chunk_bytes"):
            Collective(plan, "a", object(), chunk_bytes=size)  # type: ignore[arg-type]
    with pytest.raises(CollectiveError, match="not a worker"):
        Collective(plan, "zz", object())  # type: ignore[arg-type]
