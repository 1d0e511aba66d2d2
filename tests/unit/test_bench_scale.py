"""bench/scale.py's last line: never a time for a node that did not become ready."""

from __future__ import annotations

from bench.scale import Result, at_size, headline


def result(shape: str, ready_s: float | None, error: str | None = None) -> Result:
    return Result(shape, 100, 25, 4, ready_s, ready_s, 230.0, 1.0, error is None, error)


def test_ready_shapes_give_the_slower_time() -> None:
    line = headline(100, [result("line", 1.4), result("random", 1.6)])
    assert line == "scale: 100 nodes ready in 1.6 s, 2.3 MB per node"


def test_a_shape_never_ready_is_named_not_timed() -> None:
    line = headline(100, [result("line", 1.4), result("random", None)])
    assert line == "scale: 100 nodes not ready (random never ready)"
    assert "0.0 s" not in line


def test_a_failed_run_is_named() -> None:
    line = headline(100, [result("line", None, "forwarder n3 exited")])
    assert line == "scale: 100 nodes not ready (line failed: forwarder n3 exited)"


def test_the_size_spoken_of() -> None:
    assert at_size([25, 100, 200]) == 100
    assert at_size([5, 10]) == 10
