"""Stream operators that validate the batches they read (compute/stream/validation.py): a
generator on node p publishes, signing with its endpoint's signer; a file sink on node c reads
both of its partitions with the project's one validator (an LVS schema: the batches of operator
``op`` may be signed only by ``/org/ops/<op>``, certified by the org's anchor).

An honest producer's batches are all handed over, in order, its certificate fetched once over
the network; a stranger's, a forger's, an expired one's, one certified for another operator
and an unsigned one are never handed over, counted refused with the reason in the validator's
counters; without a validator the same batches pass (the check is opt-in).  A forged copy of
a batch is refused and the real one asked for past the content stores that kept the forgery."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from apps.inproc import attach_endpoint
from compute.stream.flow import FlowRun
from compute.stream.graph import Graph, parse_graph
from icn.dataplane.endpoint import Endpoint
from icn.dataplane.handlers import Reply
from icn.dataplane.validating import cert_fetcher
from icn.security import certs
from icn.security.certs import Certificate, CertSigner
from icn.security.keys import Identity
from icn.security.trust import TrustSchema, Validator
from icn.wire.name import from_uri
from icn.wire.packet import InterestView
from icn.wire.signer import Signer
from tests.chaos.harness import CpuLoad
from tests.integration.collective.net import Net
from tests.integration.stream.funcs import reading
from tests.waiting import wait_until

SCHEMA = """
#KEY: "KEY"/_
#CERT: "KEY"/_/_/_
#org: "org"/#KEY
#org: "org"/#CERT
#op: "org"/"ops"/op/#KEY <= #org
#op: "org"/"ops"/op/#CERT <= #org
#batch: "org"/"flow"/op/part/seq <= #op
"""
DAY = 86_400.0
COUNT = 400  # records over the generator's two partitions, 10 per batch: 40 batches


class Org:
    """A certificate authority (the anchor readers trust) and the identities it certifies."""

    def __init__(self) -> None:
        self.now = time.time()
        self.ca = Identity.generate()
        self.anchor = certs.self_signed(self.ca, from_uri("/org"), DAY, self.now - 60)

    def person(
        self, name: str, *, issuer: Identity | None = None, start: float | None = None,
        validity: float = DAY,
    ) -> tuple[Identity, Certificate]:  # fmt: skip
        key = Identity.generate()
        cert = certs.issue(
            key.public_bytes, from_uri(name), issuer or self.ca, self.anchor.key_name,
            validity, self.now - 60 if start is None else start,
        )  # fmt: skip
        return key, cert

    def validator(self, ep: Endpoint) -> Validator:
        schema = TrustSchema.from_text(SCHEMA, "org.lvs")
        return Validator(schema, [self.anchor], fetch=cert_fetcher(ep))


def flow_graph(workdir: Path) -> Graph:
    return parse_graph(
        {
            "flow": "/org/flow",
            "operators": [
                {
                    "name": "gen",
                    "type": "generator",
                    "count": COUNT,
                    "node": "p",
                    "partitions": 2,
                    "batch": 10,
                    "fn": "tests.integration.stream.funcs:reading",
                },
                {
                    "name": "out",
                    "type": "file_sink",
                    "input": "gen",
                    "node": "c",
                    "partitions": 1,
                    "path": str(workdir / "out.jsonl"),
                },
            ],
        }
    )


class Flow:
    """The generator on p (each instance's endpoint signing with ``signer``; ``served``
    certificates answered by name from p), the sink on c (``validator`` given a fetching
    endpoint on c), over a p - c link."""

    def __init__(self, net: Net, graph: Graph) -> None:
        self.net = net
        self.graph = graph
        self.served: Counter[bytes] = Counter()  # certificate name -> Interests answered
        self.runs: list[FlowRun] = []

    async def serve(self, cert: Certificate) -> None:
        def answer(iv: InterestView, reply: Reply) -> None:
            self.served[cert.name] += 1
            reply(cert.wire)

        await self.net.endpoint("p").serve(cert.key_name, answer)

    async def start(self, signer: Signer | None, validator: Validator | None) -> FlowRun:
        net = self.net

        async def producer() -> Endpoint:
            ep = attach_endpoint(net.daemons["p"])
            if signer is not None:
                ep.signer = signer
            return ep

        async def reader() -> Endpoint:
            return attach_endpoint(net.daemons["c"])

        gen = FlowRun(self.graph, producer, self.graph.instances("p"))
        self.runs.append(gen)
        await gen.start()
        sink = FlowRun(self.graph, reader, self.graph.instances("c"), validator=validator)
        self.runs.append(sink)
        await sink.start()
        return sink

    async def stop(self) -> None:
        for run in self.runs:
            await run.stop()


async def with_flow(workdir: Path, body: Callable[[Flow], Any]) -> None:
    net = await Net.start([("p", "c")])
    net.route("/org", "p")  # the batches and the certificates, from c
    flow = Flow(net, flow_graph(workdir))
    try:
        await body(flow)
    finally:
        await flow.stop()
        await net.stop()


def written(workdir: Path) -> list[dict[str, Any]]:
    path = workdir / "out.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["value"] for line in path.read_text().splitlines()]


async def test_an_honest_producer_s_batches_all_pass_in_order_the_chain_fetched_once(
    workdir: Path, cpu: CpuLoad
) -> None:
    org = Org()
    key, cert = org.person("/org/ops/gen")
    got: dict[str, Any] = {}

    async def body(flow: Flow) -> None:
        await flow.serve(cert)
        validator = org.validator(flow.net.endpoint("c"))
        sink = await flow.start(CertSigner.of(key, cert), validator)
        assert await sink.wait(timeout=cpu.budget(30))
        got.update(
            validator=validator, sink=sink.instances[0].counters, gen=flow.runs[0].totals(),
            served=flow.served,
        )  # fmt: skip

    await with_flow(workdir, body)
    records = written(workdir)
    # one batch from each partition per step: each partition's records in generation order
    assert len(records) == COUNT
    for p in range(2):
        assert [r for r in records if r["i"] % 2 == p] == [reading(i) for i in range(p, COUNT, 2)]
    sink, validator = got["sink"], got["validator"]
    assert sink["batches_in"] == got["gen"]["batches"]  # none lost, none twice
    assert sink["batches_refused"] == 0
    # the first batches came before the chain: asked again, never counted bad
    assert sink["batches_awaiting_certificate"] >= 1 and sink["drop_bad_batch"] == 0
    # both inputs met the missing chain; one fetch, one answer over the network
    assert validator.counters["trust.fetch"] == 1 and got["served"] == {cert.name: 1}
    # every batch handed over was signed by the producer's certified key (CertSigner)
    assert validator.cached() == [cert]
    assert validator.counters["trust.ok"] >= sink["batches_in"] + 1  # + the chain's walk
    assert not [k for k in validator.counters if k.startswith("trust.refused")]


BAD = ["stranger", "forged", "expired", "other operator", "unsigned"]


def bad_producer(who: str, org: Org) -> tuple[Signer | None, list[Certificate], str]:
    """The producer's signer, the certificates it serves, and the refusal's counter."""
    if who == "stranger":  # certified by an authority of its own (also named /org)
        other = Org()
        key, cert = other.person("/org/ops/gen")
        return CertSigner.of(key, cert), [cert, other.anchor], "trust.refused_no_anchor"
    if who == "forged":  # the anchor named as issuer, signed by some other key
        key, cert = org.person("/org/ops/gen", issuer=Identity.generate())
        return CertSigner.of(key, cert), [cert], "trust.refused_signature"
    if who == "expired":
        key, cert = org.person("/org/ops/gen", start=org.now - 7200, validity=60)
        return CertSigner.of(key, cert), [cert], "trust.refused_expired"
    if who == "other operator":  # certified, but not for the operator whose batches it signs
        key, cert = org.person("/org/ops/other")
        return CertSigner.of(key, cert), [cert], "trust.refused_schema"
    return None, [], "trust.refused_signature"  # the endpoint's default: DigestSha256


@pytest.mark.parametrize("who", BAD)
async def test_batches_the_schema_and_anchor_do_not_admit_are_never_handed_over(
    workdir: Path, cpu: CpuLoad, who: str
) -> None:
    org = Org()
    signer, served, reason = bad_producer(who, org)
    got: dict[str, Any] = {}

    async def body(flow: Flow) -> None:
        for cert in served:
            await flow.serve(cert)
        validator = org.validator(flow.net.endpoint("c"))
        sink = await flow.start(signer, validator)
        counters = sink.instances[0].counters
        # several refusals: re-asked copies are refused too, none slips through later
        await wait_until(
            lambda: counters["batches_refused"] >= 4 and validator.counters[reason] >= 1,
            cpu.budget(15),
        )
        got.update(sink=Counter(counters), validator=validator)

    await with_flow(workdir, body)
    sink, validator = got["sink"], got["validator"]
    assert written(workdir) == []
    assert sink["batches_in"] == 0 and sink["records_in"] == 0
    assert validator.counters["trust.ok"] == 0 and validator.cached() == []
    refusals = {k for k in validator.counters if k.startswith("trust.refused")}
    assert refusals == {reason}, validator.counters
    if who in ("other operator", "unsigned"):
        # refused on its name and KeyLocator alone: a stranger cannot make us fetch
        assert validator.counters["trust.fetch"] == 0
        assert sink["batches_awaiting_certificate"] == 0
    else:
        # the chain was fetched for the first batches, not for every batch asked again
        assert 1 <= validator.counters["trust.fetch"] <= 2 * len(served)


async def test_without_a_validator_batches_are_taken_as_they_come(
    workdir: Path, cpu: CpuLoad
) -> None:
    # the stranger of the test above: nothing checks, so every record arrives
    org = Org()
    signer, _, _ = bad_producer("stranger", org)
    got: Counter[str] = Counter()

    async def body(flow: Flow) -> None:
        sink = await flow.start(signer, None)
        assert await sink.wait(timeout=cpu.budget(30))
        got.update(sink.instances[0].counters)

    await with_flow(workdir, body)
    assert len(written(workdir)) == COUNT
    assert got["batches_refused"] == 0 and got["batches_awaiting_certificate"] == 0


@pytest.mark.parametrize("chain", ["cached", "fetched for the forged copy"])
async def test_a_forged_copy_is_refused_and_the_real_batch_asked_for_past_caches(
    cpu: CpuLoad, chain: str
) -> None:
    from compute.stream.batch import encode_batches
    from compute.stream.inlet import Inlet
    from compute.stream.names import FlowNames
    from icn.wire.encode import make_data

    org = Org()
    key, cert = org.person("/org/ops/gen")
    forger = CertSigner(Identity.generate(), cert.key_name)  # claims gen's key, without it
    stream = FlowNames("/org/flow").stream("gen", 0)
    good = encode_batches([[1, None, "real"]], 5, True, limit=8000, previous_watermark=0)[0]
    fake = encode_batches([[1, None, "fake"]], 5, True, limit=8000, previous_watermark=0)[0]
    asked: Counter[str] = Counter()
    net = await Net.start([("p", "c")])
    try:
        net.route("/org", "p")
        producer = net.endpoint("p")
        producer.signer = CertSigner.of(key, cert)

        def answer(iv: InterestView, reply: Reply) -> None:
            asked["batch"] += 1  # the forged copy first: the content stores on the way keep it
            if asked["batch"] == 1:
                reply(make_data(iv.name, fake, signer=forger))
            else:
                reply(producer.make_data(iv.name, good))

        await producer.serve(stream, answer)
        await producer.serve(cert.key_name, lambda iv, reply: reply(cert.wire))
        validator = org.validator(net.endpoint("c"))
        if chain == "cached":
            await validator.validate_data(producer.make_data(stream + b"\x08\x01x", b""))
        counters: Counter[str] = Counter()
        inlet = Inlet(
            net.endpoint("c"), stream, "r.0", counters=counters, max_window=1,
            validator=validator,
        )  # fmt: skip
        inlet.start()
        try:
            async with asyncio.timeout(cpu.budget(10)):
                batch = await inlet.get()
        finally:
            await inlet.close()
    finally:
        await net.stop()
    assert batch.records == [[1, None, "real"]] and batch.end
    # the forged copy was refused; asked again past the caches that held it, the producer
    # answered with the real one
    assert counters["batches_refused"] >= 1 and asked["batch"] >= 2
    assert validator.counters["trust.refused_signature"] >= 1
    assert counters["batches_in"] == 1
    if chain == "cached":  # refused on arrival, no fetch: the next ask brings the real one
        assert counters["batches_refused"] == 1 and asked["batch"] == 2
        assert validator.counters["trust.fetch"] == 1  # (the one before the inlet started)
    else:  # the forged copy's chain walk fetched; after a short pause, the real one's again
        assert validator.counters["trust.fetch"] == 2
