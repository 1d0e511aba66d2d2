"""``fw.cs_hit_bytes``: the wire bytes of the Data the content store answered with."""

from __future__ import annotations

from .fakes import Net, data, interest


def test_cs_hit_bytes_counts_the_wire_of_each_hit_and_nothing_on_misses() -> None:
    net = Net()
    net.route("/a", 3)
    small, large = data("/a/s", b"x" * 10), data("/a/l", b"y" * 5000)
    for n, (uri, wire) in enumerate((("/a/s", small), ("/a/l", large)), start=1):
        net.interest(1, interest(uri, n))  # a miss: forwarded, then the Data fills the CS
        net.data(3, wire)
    assert net.counters["fw.cs_hit"] == 0 and net.counters["fw.cs_hit_bytes"] == 0
    net.clear()
    net.interest(2, interest("/a/s", 10))
    net.interest(2, interest("/a/l", 11))
    net.interest(2, interest("/a/l", 12))
    assert [s[1] for s in net.faces[2].sent] == [small, large, large]
    assert net.counters["fw.cs_hit"] == 3
    assert net.counters["fw.cs_hit_bytes"] == len(small) + 2 * len(large)
    net.interest(2, interest("/a/none", 13))  # a miss adds nothing
    assert net.counters["fw.cs_hit_bytes"] == len(small) + 2 * len(large)
