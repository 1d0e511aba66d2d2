"""strategy-choice/set with parameters, and the asf/list dataset, in one process: two producer
apps announce /srv on memory faces, a consumer's Interests go through the real pipelines."""

from __future__ import annotations

import pytest
from ndn.app_support.nfd_mgmt import StrategyChoiceMsg
from ndn.encoding import Name

from apps.cli.mgmt import _show_text
from forwarder.daemon import ForwarderDaemon
from icn.dataplane import mgmt_client as mc
from icn.errors import CommandFailed
from icn.wire.encode import make_data, make_interest
from icn.wire.name import from_uri, generic
from icn.wire.packet import parse_interest
from tests.unit.mgmt.test_management import App, _content

ASF = "/localhost/nfd/strategy/asf/v=5"


async def asf_status(app: App, prefix: str = "/") -> dict[str, object]:
    app.send(make_interest(mc.asf_list_name(prefix), can_be_prefix=True, must_be_fresh=True))
    return mc.parse_asf_list(_content(await app.next_packet()))


async def test_strategy_set_with_parameters_and_its_errors(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    resp = await app.command(
        "strategy-choice", "set", name="/srv", strategy=ASF + "/clone-after~050"
    )
    assert resp["status_code"] == 200
    assert Name.to_str(resp["strategy"].name) == ASF + "/clone-after~50"
    msg = StrategyChoiceMsg.parse(await app.dataset("strategy-choice", "list"))
    listed = {Name.to_str(s.name): Name.to_str(s.strategy.name) for s in msg.strategy_choices}
    assert listed["/srv"] == ASF + "/clone-after~50"
    bad = await app.command("strategy-choice", "set", name="/srv", strategy=ASF + "/clone-after~0")
    assert bad["status_code"] == 409
    assert "clone-after~0 must be an integer in 1..3600000" in bad["status_text"]
    unknown = await app.command(
        "strategy-choice", "set", name="/x", strategy="/localhost/nfd/strategy/asf/v=9"
    )
    assert unknown["status_code"] == 404
    params = await app.command(
        "strategy-choice", "set", name="/x", strategy="/localhost/nfd/strategy/multicast/v=5/a~1"
    )
    assert params["status_code"] == 409 and "takes no parameters" in params["status_text"]


async def test_asf_list_shows_each_next_hop_and_the_best(daemon: ForwarderDaemon) -> None:
    slow, fast, consumer = App(daemon), App(daemon), App(daemon)
    for producer in (slow, fast):
        assert (await producer.command("rib", "register", name="/srv"))["status_code"] == 200
    assert (await consumer.command("strategy-choice", "set", name="/srv", strategy=ASF))[
        "status_code"
    ] == 200
    none = await asf_status(consumer, "/srv")
    assert none == {"prefix": "/srv", "strategy": ASF, "asf": True, "namespaces": []}

    consumer.send(make_interest(from_uri("/srv/1")))
    for producer in (slow, fast):  # the best (lowest face id) and the probe
        assert parse_interest(await producer.next_packet()).name == from_uri("/srv/1")
    fast.send(make_data(from_uri("/srv/1"), b"fast"))
    assert _content(await consumer.next_packet()) == b"fast"
    slow.send(make_data(from_uri("/srv/1"), b"slow"))  # late: measured, dropped
    status = await asf_status(consumer, "/srv/1")  # a name under the prefix finds it too
    assert status["asf"] is True and status["strategy"] == ASF
    (ns,) = status["namespaces"]  # type: ignore[misc]
    assert ns["prefix"] == "/srv" and ns["strategy"] == ASF and ns["clone_after_ms"] is None
    assert ns["probing_interval_ms"] == 1000 and ns["max_timeouts"] == 1
    assert 0 < ns["next_probe_in_ms"] <= 1000
    hops = {h["face_id"]: h for h in ns["nexthops"]}
    assert set(hops) == {slow.face_id, fast.face_id}
    h_fast, h_slow = hops[fast.face_id], hops[slow.face_id]
    assert h_fast["best"] and not h_slow["best"]
    assert h_fast["status"] == h_slow["status"] == "working"
    assert h_fast["samples"] == h_slow["samples"] == 1
    assert 0 <= h_fast["srtt_ms"] < h_slow["srtt_ms"]
    assert h_slow["last_probe_ago_ms"] is None and h_fast["last_probe_ago_ms"] >= 0
    for key in ("rttvar_ms", "rto_ms", "timeouts", "nacks", "congestion_nacks", "failures",
                "retry_in_ms", "cost"):  # fmt: skip
        assert key in h_fast
    assert h_fast["clone_after_ms"] is None and h_fast["clone_by"] is None  # no cloning
    assert daemon.counters["fw.asf_late_data"] == 1

    general = await app_general(consumer)
    assert general == 1  # NMeasurementsEntries

    other = await asf_status(consumer, "/elsewhere")
    assert other["asf"] is False and other["namespaces"] == []
    assert other["strategy"] == "/localhost/nfd/strategy/best-route/v=5"
    everything = await asf_status(consumer)
    assert everything["prefix"] == "/" and len(everything["namespaces"]) == 1  # type: ignore[arg-type]


async def app_general(app: App) -> int:
    from ndn.app_support.nfd_mgmt import GeneralStatus

    return int(GeneralStatus.parse(await app.dataset("status", "general")).n_measurement_entries)


async def test_asf_list_with_a_malformed_prefix_component_gets_400(daemon: ForwarderDaemon) -> None:
    app = App(daemon)
    name = mc.asf_list_name("/") + generic(b"not a name")
    app.send(make_interest(name, can_be_prefix=True))
    with pytest.raises(CommandFailed) as info:
        mc.parse_asf_list(_content(await app.next_packet()))
    assert info.value.status == 400 and "one component holding a Name TLV" in info.value.text


async def test_asf_list_shows_the_percentile_each_hop_clones_after(
    daemon: ForwarderDaemon, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    slow, fast, consumer = App(daemon), App(daemon), App(daemon)
    for producer in (slow, fast):
        assert (await producer.command("rib", "register", name="/srv"))["status_code"] == 200
    strategy = ASF + "/clone-after~p95/probing-interval~60000"
    set_ = await consumer.command("strategy-choice", "set", name="/srv", strategy=strategy)
    assert set_["status_code"] == 200
    consumer.send(make_interest(from_uri("/srv/0")))
    for producer in (slow, fast):  # the best (lowest face id) and the probe
        assert parse_interest(await producer.next_packet()).name == from_uri("/srv/0")
    fast.send(make_data(from_uri("/srv/0"), b"fast"))
    slow.send(make_data(from_uri("/srv/0"), b"slow"))
    assert _content(await consumer.next_packet()) == b"fast"
    for n in range(1, 8):  # to fast alone (no probe for a minute): 8 samples in all
        consumer.send(make_interest(from_uri(f"/srv/{n}")))
        assert parse_interest(await fast.next_packet()).name == from_uri(f"/srv/{n}")
        fast.send(make_data(from_uri(f"/srv/{n}"), b"fast"))
        assert _content(await consumer.next_packet()) == b"fast"
    (ns,) = (await asf_status(consumer, "/srv"))["namespaces"]  # type: ignore[misc]
    assert ns["clone_percentile"] == 95 and ns["clone_after_ms"] is None
    hops = {h["face_id"]: h for h in ns["nexthops"]}
    h_fast, h_slow = hops[fast.face_id], hops[slow.face_id]
    assert h_fast["samples"] == 8 and h_fast["clone_by"] == "p95"
    assert h_fast["clone_after_ms"] >= h_fast["srtt_ms"]  # the p95 of 8 samples: the largest
    assert h_slow["samples"] == 1 and h_slow["clone_by"] == "rto"  # too few: the RTO stands in
    assert h_slow["clone_after_ms"] == h_slow["rto_ms"]

    monkeypatch.setenv("COLUMNS", "300")  # one line per row
    _show_text("/srv", await asf_status(consumer, "/srv"))()
    text = capsys.readouterr().out
    assert "clones after the p95 of the hop's RTTs (its RTO under 8 samples)" in text
    assert "clone after ms" in text and "(p95)" in text and "(rto)" in text
