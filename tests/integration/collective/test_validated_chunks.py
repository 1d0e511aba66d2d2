"""Members that sign their chunks with a certificate (``signature="cert"``) and validate every
chunk they fetch (``validator=``, the project's one): an allreduce among certified members is
exact with every chunk validated and each signer's chain fetched once; a member signing with a
key the anchor never certified, or certified outside the chunks' namespace, has its chunks
refused and counted, and the run fails with a CollectiveError naming the refusal, never a wrong
sum; and a forged copy of a chunk in a content store is refused and asked past, the genuine
one summed.  Two workers on forwarders ``a`` and ``b``, the aggregator ``ps`` on ``b``."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from compute.collective import Aggregator, Collective, CollectiveError, Plan
from compute.collective.names import JobNames
from compute.collective.wire import Layout, chunk_signer, encode_chunk
from icn.dataplane.endpoint import Endpoint
from icn.dataplane.validating import cert_fetcher
from icn.security import certs
from icn.security.certs import Certificate, CertSigner
from icn.security.keys import Identity
from icn.security.trust import TrustSchema, Validator
from icn.wire.encode import make_data
from icn.wire.name import from_uri, to_uri
from icn.wire.packet import parse_data
from tests.chaos.harness import CpuLoad
from tests.integration.collective.net import Net
from tests.waiting import wait_until

DAY = 86_400.0
# the job's chunks (/ar/...) may be signed by the job's members (/org/ar/<who>), certified by
# the anchor /org; /org/other/<who> is certified too, but not for chunks
SCHEMA = """
#KEY: "KEY"/_
#CERT: "KEY"/_/_/_
#org: "org"/#KEY
#org: "org"/#CERT
#member: "org"/"ar"/who/#KEY <= #org
#member: "org"/"ar"/who/#CERT <= #org
#other: "org"/"other"/who/#KEY <= #org
#other: "org"/"other"/who/#CERT <= #org
#chunk: "ar"/_/_/_/_ <= #member
#chunk: "ar"/"sum"/_/_ <= #member
"""
WORKERS = {"w0": "a", "w1": "b"}
ROOT = "ps"


class Org:
    def __init__(self) -> None:
        self.now = time.time()
        self.ca = Identity.generate()
        self.anchor = certs.self_signed(self.ca, from_uri("/org"), DAY, self.now - 60)

    def person(self, name: str) -> tuple[Identity, Certificate]:
        key = Identity.generate()
        cert = certs.issue(
            key.public_bytes, from_uri(name), self.ca, self.anchor.key_name, DAY, self.now - 60
        )
        return key, cert

    def stranger(self, name: str) -> tuple[Identity, Certificate]:
        """A key under the members' namespace, certified by nobody but itself."""
        key = Identity.generate()
        return key, certs.self_signed(key, from_uri(name), DAY, self.now - 60)

    def validator(self, ep: Endpoint) -> Validator:
        schema = TrustSchema.from_text(SCHEMA, "ar.lvs")
        return Validator(schema, [self.anchor], fetch=cert_fetcher(ep))


@dataclass
class Run:
    net: Net
    org: Org
    plan: Plan
    fetched: Counter[str] = field(default_factory=Counter)  # certificate -> times served
    validators: dict[str, Validator] = field(default_factory=dict)
    aggregator: Aggregator | None = None
    workers: list[Collective] = field(default_factory=list)

    async def member(self, who: str, node: str, person: tuple[Identity, Certificate]) -> Endpoint:
        """An endpoint on ``node`` signing with ``person``'s certificate, which it serves."""
        ep = self.net.endpoint(node)
        key, cert = person
        ep.signer = CertSigner.of(key, cert)

        def answer(_interest: Any, reply: Any) -> None:
            self.fetched[who] += 1
            reply(cert.wire)

        await ep.serve(cert.key_name, answer)
        self.net.route(to_uri(cert.key_name), node)
        self.validators[who] = self.org.validator(ep)
        return ep

    async def start(self, people: dict[str, tuple[Identity, Certificate]], **kw: Any) -> None:
        ep = await self.member(ROOT, "b", people[ROOT])
        self.aggregator = Aggregator(
            self.plan, ROOT, ep, signature="cert", validator=self.validators[ROOT],
            member_timeout=kw.pop("member_timeout", 30.0),
        )  # fmt: skip
        await self.aggregator.start()
        for w, node in WORKERS.items():
            ep = await self.member(w, node, people[w])
            coll = Collective(
                self.plan, w, ep, signature="cert", validator=self.validators[w], **kw
            )
            await coll.start()
            self.workers.append(coll)


@pytest.fixture
async def run() -> AsyncIterator[Run]:
    net = await Net.start([("a", "b")])
    plan = Plan.flat("/ar", list(WORKERS), root=ROOT)
    for w, node in WORKERS.items():
        net.route(f"/ar/w/{w}", node)
    net.route("/ar/sum", "b")
    r = Run(net, Org(), plan)
    try:
        yield r
    finally:
        for coll in r.workers:
            await coll.close()
        if r.aggregator is not None:
            await r.aggregator.close()
        await net.stop()


def arrays(n: int = 6000) -> dict[str, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(11)
    return {w: rng.standard_normal(n).astype(np.float32) for w in WORKERS}


async def test_certified_members_sum_exactly_with_every_chunk_validated(run: Run) -> None:
    people = {who: run.org.person(f"/org/ar/{who}") for who in (*WORKERS, ROOT)}
    await run.start(people, chunk_bytes=4096, window=4)
    data = arrays()  # 24000 bytes: 6 chunks
    for _ in range(2):
        results = await asyncio.gather(*(c.allreduce(data[c.worker]) for c in run.workers))
        expected = run.plan.reference(data, "sum").tobytes()
        assert all(r.tobytes() == expected for r in results)
    assert run.aggregator is not None
    agg = run.aggregator.counters
    assert agg["chunks_refused"] == 0 and agg["chunks_aggregated"] == 12
    assert agg["chunks_validated"] == 2 * 12  # both workers' chunks of both rounds
    for coll in run.workers:
        assert coll.counters["chunks_validated"] == 12 and coll.counters["chunks_refused"] == 0
        assert run.validators[coll.worker].counters["trust.refused_signature"] == 0
    # each signer's chain fetched once: the workers' by the aggregator, the aggregator's by
    # each worker's validator (the second may come from a forwarder's content store)
    assert run.fetched["w0"] == run.fetched["w1"] == 1 and 1 <= run.fetched[ROOT] <= 2
    assert run.validators[ROOT].counters["trust.fetch"] == 2
    assert all(run.validators[w].counters["trust.fetch"] == 1 for w in WORKERS)


@pytest.mark.parametrize("who", ["stranger", "outsider"])
async def test_a_member_the_schema_does_not_admit_is_refused_never_summed(
    run: Run, cpu: CpuLoad, who: str
) -> None:
    people = {w: run.org.person(f"/org/ar/{w}") for w in (*WORKERS, ROOT)}
    if who == "stranger":  # a key no anchor certified, in the members' namespace
        people["w1"] = run.org.stranger("/org/ar/w1")
    else:  # certified by the anchor, but outside the namespace that may sign chunks
        people["w1"] = run.org.person("/org/other/w1")
    await run.start(people, chunk_bytes=4096, window=4, deadline=cpu.budget(20))
    data = arrays(1000)  # one chunk
    started = time.monotonic()
    outcome = await asyncio.wait_for(
        asyncio.gather(*(c.allreduce(data[c.worker]) for c in run.workers), return_exceptions=True),
        cpu.budget(30),
    )
    assert time.monotonic() - started < cpu.budget(20)
    for got in outcome:  # nothing summed: every worker fails, naming the refusal
        assert isinstance(got, CollectiveError), got
        assert "refused 3 times" in str(got) and "/ar/w/w1/" in str(got)
    assert run.aggregator is not None
    agg = run.aggregator.counters
    await wait_until(lambda: agg["chunks_failed"] >= 1, cpu.budget(5))
    assert agg["chunks_refused"] >= 1 and agg["chunks_aggregated"] == 0
    refused = run.validators[ROOT].counters
    if who == "stranger":
        assert refused["trust.refused_no_anchor"] >= 1
    else:
        assert refused["trust.refused_schema"] >= 1
    # w0's chunk was fine
    assert agg["chunks_validated"] >= 1


async def test_cert_signature_without_a_certificate_names_the_fix(run: Run) -> None:
    ep = run.net.endpoint("a")
    with pytest.raises(CollectiveError, match=r"no certificate signer .* CertSigner.of"):
        Collective(run.plan, "w0", ep, signature="cert")
    with pytest.raises(CollectiveError, match="no certificate signer"):
        chunk_signer("cert", "/ar")


async def test_a_sum_signed_by_an_uncertified_aggregator_is_refused_by_the_workers(
    run: Run, cpu: CpuLoad
) -> None:
    people = {w: run.org.person(f"/org/ar/{w}") for w in WORKERS}
    people[ROOT] = run.org.stranger(f"/org/ar/{ROOT}")  # forges the sum
    await run.start(people, chunk_bytes=4096, window=4, deadline=cpu.budget(20))
    data = arrays()  # 6 chunks, fetched with a window by each worker
    outcome = await asyncio.wait_for(
        asyncio.gather(*(c.allreduce(data[c.worker]) for c in run.workers), return_exceptions=True),
        cpu.budget(30),
    )
    for got, coll in zip(outcome, run.workers, strict=True):
        assert isinstance(got, CollectiveError), got
        assert "refused 3 times" in str(got) and "/ar/sum/" in str(got)
        assert "not a trust anchor" in str(got)
        assert coll.counters["chunks_refused"] >= 3 and coll.counters["bytes_received"] == 0
        assert run.validators[coll.worker].counters["trust.refused_no_anchor"] >= 1
        # the forger's certificate was fetched once per worker, then its refusal held
        assert run.validators[coll.worker].counters["trust.fetch"] == 1
    await wait_until(lambda: run.fetched[ROOT] >= 1, cpu.budget(5))


async def test_a_forged_copy_in_a_cache_does_not_block_the_genuine_chunk(run: Run) -> None:
    people = {who: run.org.person(f"/org/ar/{who}") for who in (*WORKERS, ROOT)}
    await run.start(people, chunk_bytes=4096, window=4)
    data = arrays(1000)  # one chunk per worker
    # a forger certified outside the chunks' namespace left w1's chunk of round 0, all
    # 1000s, in the content store beside the aggregator
    key, cert = run.org.person("/org/other/mallory")
    forged = encode_chunk(
        Layout.of(data["w1"], 4096).header("sum", 1), np.full_like(data["w1"], 1e3).tobytes()
    )
    name = JobNames.piece(JobNames("/ar").worker_prefix("w1"), 0, 0)
    wire = make_data(name, forged, signer=CertSigner.of(key, cert))
    fw = run.net.daemons["b"].fw
    assert fw.cs.insert(parse_data(wire), fw.clock())
    results = await asyncio.gather(*(c.allreduce(data[c.worker]) for c in run.workers))
    expected = run.plan.reference(data, "sum").tobytes()
    assert all(r.tobytes() == expected for r in results)  # the genuine chunk was summed
    assert run.aggregator is not None
    agg = run.aggregator.counters
    assert agg["chunks_refused"] == 1 and agg["chunks_validated"] == 2
    assert run.validators[ROOT].counters["trust.refused_schema"] == 1
