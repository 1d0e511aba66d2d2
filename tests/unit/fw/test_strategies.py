"""best-route and multicast decisions, retransmission suppression, strategy choice."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from forwarder.fw.best_route import BestRouteStrategy
from forwarder.fw.forwarder_base import ForwarderBase
from forwarder.fw.multicast import MulticastStrategy
from forwarder.fw.retx_suppression import RetxDecision, RetxSuppressionExponential
from forwarder.fw.strategy import InterestContext, watcher_of
from forwarder.fw.strategy_registry import STRATEGIES, canonical_name, known_names, resolve
from forwarder.table.pit import PitEntry
from icn.errors import ConfigError
from icn.wire import tlv_types as T
from icn.wire.name import from_uri
from icn.wire.packet import DataView

from .fakes import Net, data, interest, nonce


def test_best_route_picks_lowest_cost() -> None:
    net = Net(n_faces=5)
    net.route("/a", 4, cost=20)
    net.route("/a", 3, cost=10)
    net.route("/a", 5, cost=30)
    net.interest(1, interest("/a"))
    assert list(net.sent()) == [3]


def test_retx_suppressed_within_interval_then_allowed_and_interval_doubles() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a", 1))
    net.clock.advance(0.005)
    net.interest(1, interest("/a", 2))  # 5 ms after: suppressed
    assert len(net.faces[3].sent) == 1
    assert net.counters["fw.retx_suppressed"] == 1
    net.clock.advance(0.010)
    net.interest(1, interest("/a", 3))  # 15 ms after the first: allowed
    assert len(net.faces[3].sent) == 2
    assert net.faces[3].interests()[-1].nonce == (3).to_bytes(4, "big")
    net.clock.advance(0.015)
    net.interest(1, interest("/a", 4))  # 15 ms < the doubled 20 ms: suppressed
    assert len(net.faces[3].sent) == 2
    net.clock.advance(0.010)
    net.interest(1, interest("/a", 5))  # 25 ms: allowed
    assert len(net.faces[3].sent) == 3
    assert net.counters["fw.retx_suppressed"] == 2


def test_best_route_retransmission_prefers_unused_then_earliest() -> None:
    net = Net(n_faces=5)
    net.route("/a", 3, cost=0)
    net.route("/a", 4, cost=10)
    net.interest(1, interest("/a", 1))
    net.clock.advance(0.020)
    net.interest(1, interest("/a", 2))
    net.clock.advance(0.040)
    net.interest(1, interest("/a", 3))
    sent = [(fid, i.nonce) for fid in (3, 4) for i in net.faces[fid].interests()]
    n = [(k).to_bytes(4, "big") for k in (1, 2, 3)]
    # new -> cheapest (3); retx -> the unused one (4); retx -> the one used earliest (3)
    assert sorted(sent) == [(3, n[0]), (3, n[2]), (4, n[1])]


def test_retx_after_out_record_expired_is_new() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a", 1, lifetime=10))
    net.interest(2, interest("/a", 2, lifetime=4000))  # suppressed, keeps the entry alive
    net.clock.advance(0.011)
    net.interest(1, interest("/a", 3))  # out-record expired: nothing pending, forwarded
    assert len(net.faces[3].sent) == 2


@pytest.mark.parametrize("strategy", ["best-route", "asf"])
def test_another_consumer_joins_a_pending_interest_instead_of_resending_it(strategy: str) -> None:
    # NFD would take face 2's Interest, 300 ms on, as a retransmission past its interval and
    # send it up; the Data of the pending one is on its way and would come down twice
    net = Net(n_faces=4, default_strategy=strategy)
    net.route("/a", 3)
    net.interest(1, interest("/a", 1))
    net.clock.advance(0.300)
    net.interest(2, interest("/a", 2))
    assert len(net.faces[3].sent) == 1
    assert net.counters["fw.joined_pending"] == 1
    net.data(3, data("/a"))  # one Data upstream, one to each consumer
    assert [len(net.faces[f].of("data")) for f in (1, 2)] == [1, 1]


def test_a_consumer_that_joins_after_the_pending_interest_expired_sends_it_again() -> None:
    net = Net(n_faces=5)
    net.route("/a", 3)
    net.interest(1, interest("/a", 1, lifetime=10))
    net.clock.advance(0.001)
    net.interest(2, interest("/a", 2, lifetime=4000))  # joins: keeps the entry alive
    assert net.counters["fw.joined_pending"] == 1
    net.clock.advance(0.020)  # the upstream Interest expired: nothing pending any more
    net.interest(4, interest("/a", 3))
    assert len(net.faces[3].sent) == 2
    assert net.counters["fw.joined_pending"] == 1


def test_multicast_sends_to_all_eligible_nexthops() -> None:
    net = Net(n_faces=5, default_strategy="multicast")
    for f in (1, 3, 4, 5):
        net.route("/a", f)
    w = interest("/a")
    net.interest(1, w)
    assert net.sent() == {f: [("interest", w, None, None)] for f in (3, 4, 5)}
    entry = next(iter(net.fw.pit))
    assert sorted(entry.out_records) == [3, 4, 5]


def test_multicast_no_route_nacks() -> None:
    net = Net(default_strategy="multicast")
    net.route("/a", 1)
    w = interest("/a")
    net.interest(1, w)
    assert net.sent() == {1: [("nack", w, None, T.NACK_NO_ROUTE)]}
    assert len(net.fw.pit) == 0


def test_multicast_suppression_per_upstream() -> None:
    net = Net(n_faces=5, default_strategy="multicast")
    net.route("/a", 3)
    net.interest(1, interest("/a", 1))
    net.clock.advance(0.005)
    net.route("/a", 4)  # a new upstream appears while the Interest is pending
    net.interest(1, interest("/a", 2))
    # 3 was used 5 ms ago: suppressed; 4 is new for this entry: sent at once
    assert len(net.faces[3].sent) == 1
    assert len(net.faces[4].sent) == 1
    assert net.counters["fw.retx_suppressed"] == 1
    assert net.faces[1].sent == []  # suppressed is not "no route"


def test_strategy_chosen_per_prefix() -> None:
    net = Net(n_faces=5)
    for f in (3, 4):
        net.route("/", f)
    net.fw.set_strategy(from_uri("/m"), "/localhost/nfd/strategy/multicast/v=5")
    net.interest(1, interest("/m/x", 1))
    assert sorted(net.sent()) == [3, 4]
    net.clear()
    net.interest(1, interest("/b/x", 2))
    assert list(net.sent()) == [3]
    net.clear()
    assert net.fw.unset_strategy(from_uri("/m"))
    assert not net.fw.unset_strategy(from_uri("/m"))
    net.interest(1, interest("/m/y", 3))
    assert list(net.sent()) == [3]
    assert isinstance(net.fw.strategy_choice.find(b"", []), BestRouteStrategy)


def test_set_strategy_unknown_name_lists_known() -> None:
    net = Net()
    with pytest.raises(ConfigError) as info:
        net.fw.set_strategy(from_uri("/a"), "fastest")
    assert "best-route" in str(info.value) and "multicast" in str(info.value)


def test_strategy_names() -> None:
    assert resolve("best-route") is BestRouteStrategy
    assert resolve("/localhost/nfd/strategy/multicast") is MulticastStrategy
    assert resolve("/localhost/nfd/strategy/multicast/v=5") is MulticastStrategy
    assert resolve("/localhost/nfd/strategy/best-route/") is BestRouteStrategy
    assert canonical_name("best-route") == "/localhost/nfd/strategy/best-route/v=5"
    assert known_names() == [
        "/localhost/nfd/strategy/best-route/v=5",
        "/localhost/nfd/strategy/multicast/v=5",
        "/localhost/nfd/strategy/asf/v=5",
        "/localhost/nfd/strategy/multipath/v=1",
    ]
    for bad in (
        "/localhost/nfd/strategy/best-route/v=4",
        "/localhost/nfd/strategy/random",
        "",
    ):
        with pytest.raises(ConfigError, match="unknown strategy"):
            resolve(bad)
    with pytest.raises(ConfigError, match="takes no parameters"):
        resolve("/localhost/nfd/strategy/best-route/v=5/x~1")


def test_default_strategy_and_bad_default() -> None:
    net = Net(default_strategy="multicast")
    assert isinstance(net.fw.strategy_choice.find(b"", []), MulticastStrategy)
    with pytest.raises(ConfigError):
        Net(default_strategy="nope")


def test_retx_suppression_exponential_caps_at_maximum() -> None:
    net = Net()
    net.route("/a", 3)
    net.interest(1, interest("/a", 1))
    entry = next(iter(net.fw.pit))
    retx = RetxSuppressionExponential()
    now = net.clock.t
    allowed = 0
    for _ in range(200):
        now += 0.005
        if retx.decide_per_pit_entry(entry, now) is RetxDecision.FORWARD:
            entry.insert_out_record(3, b"\x00\x00\x00\x09", now, 4000)
            allowed += 1
    # intervals 10, 20, 40, 80, 160, then 250 ms: within 1 s about 7 retransmissions pass
    assert 6 <= allowed <= 8
    assert entry.strategy_info["retx.interval"] == pytest.approx(0.250)
    with pytest.raises(ValueError):
        RetxSuppressionExponential(initial=0.5, maximum=0.1)


class _Recorder(BestRouteStrategy):
    """best-route that watches its entries and records what the pipelines tell it."""

    name = "recorder"
    version = 1

    def __init__(self, fw: ForwarderBase, parameters: Mapping[str, str] | None = None) -> None:
        super().__init__(fw, parameters)
        self.events: list[tuple[str, object]] = []

    @classmethod
    def check_parameters(cls, parameters: Mapping[str, str]) -> dict[str, str]:
        return dict(parameters)  # any, to see them arrive

    def after_receive_interest(self, entry: PitEntry, ctx: InterestContext) -> None:
        self.watch(entry)
        super().after_receive_interest(entry, ctx)

    def before_satisfy_interest(
        self, entry: PitEntry, ingress_id: int, now: float, data: DataView
    ) -> None:
        assert data.name == entry.name  # the Data that satisfies it
        self.events.append(("satisfy", (ingress_id, sorted(entry.out_records))))

    def on_interest_expired(self, entry: PitEntry, now: float) -> None:
        self.events.append(("expired", sorted(entry.out_records)))

    def after_receive_unsolicited_data(self, face_id: int, data: DataView, now: float) -> bool:
        self.events.append(("unsolicited", face_id))
        return face_id == 4  # "expected" from 4 only

    def tick(self, now: float) -> None:
        self.events.append(("tick", now))


def test_pipelines_tell_a_watching_strategy_how_its_interests_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(STRATEGIES, "recorder", _Recorder)
    net = Net()
    net.route("/a", 3)
    net.fw.set_strategy(from_uri("/a"), "/localhost/nfd/strategy/recorder/v=1/k~v")
    rec = net.fw.strategy_choice.get(from_uri("/a"))
    assert isinstance(rec, _Recorder) and rec.parameters == {"k": "v"}
    assert rec.full_name == "/localhost/nfd/strategy/recorder/v=1/k~v"
    net.interest(1, interest("/a/1", 1))
    net.data(3, data("/a/1"))  # satisfies: told first, with the out-records still there
    net.data(3, data("/a/1"))  # matches nothing now: offered, not expected from 3
    net.data(4, data("/a/1"))  # expected from 4: not counted as unsolicited
    net.interest(1, interest("/a/2", 2, lifetime=10))
    net.clock.advance(0.02)
    net.fw.tick()
    assert rec.events == [
        ("satisfy", (3, [3])),
        ("unsolicited", 3),
        ("unsolicited", 4),
        ("expired", [3]),
        ("tick", net.clock.t),
    ]
    assert net.counters["fw.drop_unsolicited_data"] == 1
    # entries of other strategies are not watched: best-route at / sees nothing of this
    net.route("/b", 3)
    net.interest(1, interest("/b", 5))
    assert watcher_of(next(e for e in net.fw.pit if e.name == from_uri("/b"))) is None


def test_a_strategy_may_send_elsewhere_after_the_last_nack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Nack pipeline ends the entry only if the strategy left nothing pending."""
    net = Net(n_faces=5)
    w = interest("/a", 1)
    sent_on: list[int] = []

    class Resend(BestRouteStrategy):
        """Sends to face 4 on the last Nack, as a strategy trying elsewhere would."""

        name = "resend"
        version = 1

        def after_receive_nack(
            self, entry: PitEntry, ingress_id: int, reason: int, now: float
        ) -> None:
            ctx = InterestContext(net.faces[1], w, nonce(1), 4000, True, now)
            self.send_interest(entry, net.faces[4], ctx)
            sent_on.append(4)

    monkeypatch.setitem(STRATEGIES, "resend", Resend)
    net.route("/a", 3)
    net.fw.set_strategy(from_uri("/a"), "/localhost/nfd/strategy/resend/v=1")
    net.interest(1, w)
    net.nack(3, w, T.NACK_NO_ROUTE)
    net.fw.tick()
    assert sent_on == [4] and len(net.fw.pit) == 1  # still waiting for 4
