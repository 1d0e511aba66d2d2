"""bench/stream.py's headline lines: ours against bytewax on a process per core, columnar and
like for like (the last line), and a note where bytewax ran faster on one worker."""

from __future__ import annotations

import pytest

from bench import stream
from bench.stream import Measured, headlines
from tests.needs import has_module, needs


@pytest.fixture(autouse=True)
def two_procs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "BYTEWAX_PROCS", [2])


def rows(one: float, many: float) -> dict[str, Measured]:
    return {
        "ours-procs": Measured(300.0, 10.0, 20.0, 4.0),
        "ours-procs-vec": Measured(600.0, 5.0, 10.0, 2.0),
        "bytewax": Measured(one, 5.0, 10.0, 4.0),
        "bytewax-procs": Measured(many, 5.0, 10.0, 4.0),
    }


def test_like_for_like_is_the_last_line() -> None:
    lines = headlines(rows(100.0, 200.0))
    assert len(lines) == 2
    assert lines[0].startswith("ours-procs-vec/bytewax-procs records/s: 3.00, p50: 1.00, CPU: 0.50")
    assert "(columnar:" in lines[0]
    assert lines[1].startswith("ours-procs/bytewax-procs records/s: 1.50, p50: 2.00, CPU: 1.00")
    assert "(like for like: ours record by record" in lines[1]
    assert "bytewax 2 processes of one worker" in lines[1]


def test_a_faster_single_worker_is_noted_before_the_headlines() -> None:
    lines = headlines(rows(400.0, 200.0))
    assert len(lines) == 3
    assert lines[0].startswith("note: bytewax ran faster on one worker (400 records/s)")
    assert "columnar 1.50, like for like 0.75" in lines[0]
    assert lines[-1].startswith("ours-procs/bytewax-procs records/s: 1.50")


def test_one_worker_only() -> None:
    only = rows(100.0, 0.0)
    del only["bytewax-procs"]
    lines = headlines(only)
    assert lines[-1].startswith("ours-procs/bytewax records/s: 3.00")
    assert lines[-1].endswith("bytewax one worker)")


@needs(has_module("bytewax"), "bytewax (the .[bench] extra, which scripts/bootstrap.sh installs)")
def test_bytewax_workers_share_the_records_by_key() -> None:
    from bytewax.testing import cluster_main

    spec = stream.Spec(5000, 10, 1000.0)
    ref = stream.reference(spec)
    flow = stream.bytewax_flow(spec)
    stream.prepare(spec)
    # two workers, one process
    cluster_main(flow, [], 0, worker_count_per_proc=2)  # type: ignore[no-untyped-call]
    stream.check("bytewax, 2 workers", [r[:3] for r in stream.RECEIVED], ref)
    assert stream.MADE.keys() >= set(range(10))  # every key's first record, timed
