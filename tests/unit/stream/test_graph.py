"""Graph files: wiring derived from partitions, and errors that name the operator, the field
and the fix.  Also the batch codec and the names of a flow."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from compute.stream.batch import decode_batch, encode_batches
from compute.stream.errors import GraphError, StreamError
from compute.stream.graph import parse_graph
from compute.stream.names import Ack, FlowNames
from compute.stream.operators import partition_of


def ops(*extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "flow": "/f",
        "operators": [
            {"name": "gen", "type": "generator", "count": 10, "partitions": 2},
            *extra,
        ],
    }


def problems(spec: dict[str, Any]) -> str:
    with pytest.raises(GraphError) as info:
        parse_graph(spec, "g.yaml")
    return str(info.value)


def test_wiring_forward_merge_and_key_by() -> None:
    g = parse_graph(
        ops(
            {"name": "m", "type": "map", "input": "gen", "fn": "a.b:c"},
            {"name": "one", "type": "filter", "input": "m", "fn": "a.b:c", "partitions": 1},
            {"name": "k", "type": "key_by", "input": "m", "field": "x", "partitions": 3},
            {"name": "w", "type": "window", "input": "k", "tumbling": "1s", "aggregate": "count"},
            {"name": "s1", "type": "stdout", "input": "one"},
            {"name": "s2", "type": "stdout", "input": "w"},
        )
    )
    assert g.partitions == {"gen": 2, "m": 2, "one": 1, "k": 3, "w": 3, "s1": 1, "s2": 3}
    assert g.inputs_of("m", 1) == [("gen", 1)]  # forward
    assert g.inputs_of("one", 0) == [("m", 0), ("m", 1)]  # merge
    assert g.inputs_of("k", 2) == [("m", 0), ("m", 1)]  # every key_by partition reads all
    assert g.consumers_of(("m", 0)) == ["one.0", "k.0", "k.1", "k.2"]
    assert g.consumers_of(("s2", 0)) == []
    assert g.keyed["w"] and not g.keyed["one"]
    assert g.instances()[0] == ("gen", 0)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (
            {"name": "m", "type": "mapx", "input": "gen"},
            "operators[1].type: unknown type 'mapx' (did you mean 'map'? valid types:",
        ),
        ({"name": "m", "type": "map", "input": "gen", "fn": "nofn"}, "[1].fn: 'nofn' is not"),
        (
            {"name": "m", "type": "map", "input": "gen", "fn": "a:b", "fnn": 1},
            "operators[1].fnn: unknown field 'fnn' (did you mean 'fn'? valid fields: fn, input,",
        ),
        (
            {"name": "m", "type": "map", "input": "nope", "fn": "a:b"},
            "operators[1].input: 'nope' is not an operator (valid operators: gen, m, tail)",
        ),
        (
            {"name": "m", "type": "map", "input": "gen", "fn": "a:b", "partitions": 4},
            "partitions: 4 but its input 'gen' has 2",
        ),
        (
            {"name": "w", "type": "window", "input": "gen", "tumbling": "1s", "aggregate": "sum"},
            "put a key_by with partitions: 2 before it",
        ),
        (
            {"name": "w", "type": "window", "input": "gen", "aggregate": "sum", "partitions": 1},
            "give exactly one of tumbling",
        ),
        (
            {
                "name": "w",
                "type": "window",
                "input": "gen",
                "tumbling": "1s",
                "aggregate": "reduce",
                "partitions": 1,
            },
            "aggregate: reduce needs reduce",
        ),
        (
            {
                "name": "w",
                "type": "window",
                "input": "gen",
                "tumbling": "soon",
                "aggregate": "sum",
                "partitions": 1,
            },
            "'soon' is not a duration",
        ),
        ({"name": "k", "type": "key_by", "input": "gen"}, "exactly one of field"),
        ({"name": "bad name", "type": "stdout", "input": "gen"}, "use letters, digits"),
    ],
)
def test_bad_operators_are_named_with_the_fix(extra: dict[str, Any], needle: str) -> None:
    spec = ops(extra, {"name": "tail", "type": "stdout", "input": extra["name"]})
    assert needle in problems(spec)


def test_graph_level_problems() -> None:
    assert "nothing reads its output" in problems(ops())
    assert "defined twice" in problems(ops({"name": "gen", "type": "stdout", "input": "gen"}))
    cyc = {
        "flow": "/f",
        "operators": [
            {"name": "a", "type": "map", "input": "b", "fn": "x:y"},
            {"name": "b", "type": "map", "input": "a", "fn": "x:y"},
            {"name": "s", "type": "stdout", "input": "b"},
        ],
    }
    assert "cycle: a -> b -> a" in problems(cyc) or "cycle: b -> a -> b" in problems(cyc)
    one = {
        "flow": "/f",
        "operators": [
            {"name": "f", "type": "file_source", "path": "x", "partitions": 2},
            {"name": "s", "type": "stdout", "input": "f"},
        ],
    }
    assert "a file_source has one partition" in problems(one)


def test_batches_split_to_fit_and_only_the_last_carries_the_new_watermark() -> None:
    records = [[i, f"k{i}", {"v": "x" * 50}] for i in range(400)]
    parts = encode_batches(records, 900, True, limit=4000, previous_watermark=100)
    assert len(parts) > 1 and all(len(p) <= 4000 for p in parts)
    batches = [decode_batch(p) for p in parts]
    assert [r for b in batches for r in b.records] == records
    assert [b.watermark for b in batches] == [100] * (len(parts) - 1) + [900]
    assert [b.end for b in batches] == [False] * (len(parts) - 1) + [True]
    with pytest.raises(StreamError, match="exceeds batch_bytes 100"):
        encode_batches([[0, None, "y" * 200]], 0, False, limit=100, previous_watermark=0)
    with pytest.raises(StreamError, match="does not decode"):
        decode_batch(msgpack.packb({"not": "a batch"}))


def test_names_parse_batches_and_reports_and_refuse_the_rest() -> None:
    names = FlowNames("/f")
    stream = names.stream("op", 3)
    assert FlowNames.parse(stream, FlowNames.batch(stream, 77)) == 77
    assert FlowNames.parse(stream, FlowNames.ack(stream, "w.1", 5, 4)) == Ack("w.1", 5, 4)
    assert FlowNames.parse(stream, stream) is None
    assert FlowNames.parse(stream, stream + b"\x08\x01x") is None
    assert FlowNames.parse(names.stream("op", 4), FlowNames.batch(stream, 1)) is None


def test_partition_of_is_stable_across_processes() -> None:
    assert partition_of("s1", 4) == partition_of("s1", 4)
    assert partition_of(7, 4) == 3
    assert {partition_of(f"s{i}", 4) for i in range(50)} == {0, 1, 2, 3}
    assert partition_of(("a", 1), 4) == partition_of(("a", 1), 4)


def test_watermark_step_is_the_gcd_of_the_window_boundaries_downstream() -> None:
    from compute.stream.graph import parse_graph

    graph = parse_graph(
        {
            "flow": "/w",
            "operators": [
                {"name": "gen", "type": "generator", "count": 10},
                {"name": "m", "type": "map", "input": "gen", "fn": "apps.demos.stream_demo:scale"},
                {
                    "name": "w1",
                    "type": "window",
                    "input": "m",
                    "sliding": {"size": "1s", "slide": "300ms"},
                    "aggregate": "count",
                },
                {
                    "name": "w2",
                    "type": "window",
                    "input": "w1",
                    "tumbling": "2s",
                    "allowed_lateness": "250ms",
                    "aggregate": "count",
                },
                {"name": "out", "type": "stdout", "input": "w2"},
            ],
        }
    )
    # w1's ends are multiples of gcd(1000, 300) = 100 ms; w2's of 2000, its purges of 250
    assert graph.watermark_step("gen") == 50
    assert graph.watermark_step("m") == 50
    assert graph.watermark_step("w1") == 250
    assert graph.watermark_step("w2") is None  # only a sink reads it


def test_a_tiny_lead_does_not_make_readers_report_in_a_spin() -> None:

    from compute.stream.graph import parse_graph
    from compute.stream.instance import MIN_REPORT_EVERY, Instance

    ops = [
        {"name": "gen", "type": "generator", "count": 10},
        {"name": "a", "type": "stdout", "input": "gen"},
        {"name": "b", "type": "stdout", "input": "gen"},  # a shared stream: reports per lead
    ]
    graph = parse_graph({"flow": "/l", "settings": {"lead": "1us"}, "operators": ops})
    ep: Any = None
    assert Instance(graph, "a", 0, ep)._report_every == MIN_REPORT_EVERY
    graph = parse_graph({"flow": "/l", "settings": {"lead": "20ms"}, "operators": ops})
    assert Instance(graph, "a", 0, ep)._report_every == 0.005
