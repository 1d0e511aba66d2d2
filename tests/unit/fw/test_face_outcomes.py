"""Per-face Interest outcomes (ndnSIM's SatisfiedInterests and TimedOutInterests per face, the
report's per-face table): an expiry counts every downstream still waiting; Data counts as
satisfied on each face it answers."""

from __future__ import annotations

from dataclasses import dataclass, field

from forwarder.face.link_service import FaceStats

from .fakes import FakeFace, Net, data, interest


@dataclass
class CountingFace(FakeFace):
    """A fake face with the daemon's faces' FaceStats (its Data counted as a link service's)."""

    stats: FaceStats = field(default_factory=FaceStats)

    def send_data(
        self, wire: bytes, pit_token: bytes | None = None, congestion_mark: int = 0
    ) -> None:
        self.stats.n_out_data += 1
        super().send_data(wire, pit_token, congestion_mark)


def net_with_counting_faces() -> tuple[Net, dict[int, CountingFace]]:
    net = Net(n_faces=0)
    faces = {}
    for i in (1, 2, 3):
        faces[i] = net.faces[i] = CountingFace(i)
        net.fw.add_face(faces[i])
    net.route("/a", 3)
    return net, faces


def test_expiry_counts_each_waiting_downstream_once() -> None:
    net, faces = net_with_counting_faces()
    net.interest(1, interest("/a/x", 1, lifetime=1000))
    net.interest(2, interest("/a/x", 2, lifetime=1000))  # aggregated: same entry, two in-records
    net.interest(1, interest("/a/y", 3, lifetime=1000))
    net.clock.advance(0.5)
    net.fw.tick()
    assert faces[1].stats.n_timed_out_interests == 0  # not yet expired
    net.clock.advance(0.6)
    net.fw.tick()
    assert [faces[i].stats.n_timed_out_interests for i in (1, 2, 3)] == [2, 1, 0]
    assert faces[1].stats.as_dict()["n_timed_out_interests"] == 2


def test_answered_interests_are_satisfied_not_timed_out() -> None:
    net, faces = net_with_counting_faces()
    net.interest(1, interest("/a/x", 1, lifetime=1000))
    net.interest(2, interest("/a/x", 2, lifetime=1000))
    net.data(3, data("/a/x"))
    net.clock.advance(2.0)
    net.fw.tick()
    got = [faces[i].stats.as_dict() for i in (1, 2)]
    assert [d["n_satisfied_interests"] for d in got] == [1, 1]
    assert [d["n_timed_out_interests"] for d in got] == [0, 0]
