"""Consumers that validate (issue 35): a producer signs with a key its site certified and serves
its certificate; a consumer with the site's anchor and schema accepts its Data, fetching the
certificate once through the network, and refuses, counts and never returns Data signed by the
wrong key or for a name the schema does not give the signer.  Two forwarders in this process."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from apps.inproc import add_route, attach_endpoint, link
from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from icn.dataplane.endpoint import Endpoint
from icn.dataplane.handlers import Reply
from icn.dataplane.publish import SegmentedObject
from icn.dataplane.segments import data_content
from icn.dataplane.validating import cert_fetcher
from icn.errors import ValidationError
from icn.security import certs
from icn.security.certs import CertSigner
from icn.security.keys import Identity
from icn.security.trust import TrustSchema, Validator
from icn.wire.encode import make_data
from icn.wire.name import from_uri
from icn.wire.packet import InterestView

SCHEMA = """
#KEY: "KEY"/_
#CERT: "KEY"/_/_/_
#site: "org"/"site"/#KEY
#site: "org"/"site"/#CERT
#member: "org"/"site"/who/#KEY <= #site
#member: "org"/"site"/who/#CERT <= #site
#data: "org"/"site"/who/"data"/_ <= #member
#object: "org"/"site"/who/"object"/_/_ <= #member
"""
DAY = 86_400.0


class Net:
    def __init__(self, daemons: list[ForwarderDaemon]) -> None:
        self.daemons = daemons
        now = time.time()
        self.ca = Identity.generate()
        self.anchor = certs.self_signed(self.ca, from_uri("/org/site"), DAY, now - 60)
        self.alice = Identity.generate()
        self.cert = certs.issue(
            self.alice.public_bytes, from_uri("/org/site/alice"), self.ca,
            self.anchor.key_name, DAY, now - 60,
        )  # fmt: skip
        self.signer = CertSigner.of(self.alice, self.cert)

    def consumer(self) -> tuple[Endpoint, Validator]:
        ep = attach_endpoint(self.daemons[0])
        schema = TrustSchema.from_text(SCHEMA, "site.lvs")
        return ep, Validator(schema, [self.anchor], fetch=cert_fetcher(ep))


@pytest.fixture
async def net() -> AsyncIterator[Net]:
    daemons = []
    for _ in range(2):
        d = ForwarderDaemon(config_from_dict({"listen": {}}))
        await d.start()
        daemons.append(d)
    face, _ = link(daemons[0], daemons[1])
    add_route(daemons[0], "/org", face)
    net = Net(daemons)
    producer = attach_endpoint(daemons[1])
    mallory = Identity.generate()  # signs as alice's key, without it
    forged = CertSigner(mallory, net.cert.key_name)
    obj = SegmentedObject(
        from_uri("/org/site/alice/object/o1"), bytes(range(256)) * 100, segment_size=1000,
        signer=net.signer,
    )  # fmt: skip

    def serve(iv: InterestView, reply: Reply) -> None:
        name = iv.name
        if name.startswith(net.cert.key_name):
            reply(net.cert.wire)
        elif name == from_uri("/org/site/alice/data/ok"):
            reply(make_data(name, b"hello", signer=net.signer))
        elif name == from_uri("/org/site/alice/data/forged"):
            reply(make_data(name, b"pay mallory", signer=forged))
        elif name == from_uri("/org/site/alice/secret"):  # no rule lets alice sign this name
            reply(make_data(name, b"secret", signer=net.signer))
        elif name.startswith(obj.prefix):
            obj.handler(iv, reply)

    await producer.serve("/org/site/alice", serve)
    try:
        yield net
    finally:
        producer.close()
        for d in daemons:
            await d.stop()


async def test_valid_data_is_returned_and_the_certificate_fetched_once(net: Net) -> None:
    ep, validator = net.consumer()
    for _ in range(2):
        dv = await ep.express("/org/site/alice/data/ok", validator=validator)
        assert data_content(dv) == b"hello"
    assert validator.counters["trust.ok"] == 2 and validator.counters["trust.fetch"] == 1
    assert ep.counters["data_refused"] == 0


@pytest.mark.parametrize(
    ("name", "reason"),
    [("/org/site/alice/data/forged", "signature"), ("/org/site/alice/secret", "schema")],
)
async def test_refused_data_is_counted_and_never_returned(net: Net, name: str, reason: str) -> None:
    ep, validator = net.consumer()
    with pytest.raises(ValidationError):
        await ep.express(name, validator=validator)
    assert ep.counters["data_refused"] == 1
    assert validator.counters[f"trust.refused_{reason}"] == 1
    assert validator.counters["trust.ok"] == 0


async def test_a_segmented_object_is_validated_segment_by_segment(net: Net) -> None:
    ep, validator = net.consumer()
    got = await ep.fetch_segments("/org/site/alice/object/o1", validator=validator)
    assert got == bytes(range(256)) * 100
    assert validator.counters["trust.fetch"] == 1 and ep.counters["data_refused"] == 0
    assert validator.counters["trust.ok"] == 26  # every segment checked, the chain walked once
