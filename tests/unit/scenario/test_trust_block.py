"""The schema a ``trust:`` block makes: each service's key signs under its own prefixes only."""

from __future__ import annotations

import pytest

from apps.scenario.loader import parse_scenario
from apps.scenario.trust import MAX_DEPTH, ProcessTrust, make_trust
from icn.errors import ValidationError
from icn.security.certs import CertSigner
from icn.security.trust import SignedPacket, TrustSchema, Validator
from icn.wire.encode import make_data
from icn.wire.name import from_uri

TEXT = """
name: t
nodes: {a: {}}
trust: {ca: /lab}
services:
  - {name: producer, node: a, entry: "apps.workloads:producer", announce: [/lab/data]}
  - {name: other, node: a, entry: "apps.workloads:producer", announce: [/lab/other]}
workloads:
  - {name: consumer, node: a, entry: "apps.workloads:consumer"}
"""


def _setup() -> tuple[Validator, dict[str, ProcessTrust]]:
    sc = parse_scenario(TEXT, check_entries=False)
    run = make_trust(sc)
    parts = {name: ProcessTrust.from_spec(run.material(name)) for name in run.identities}
    certs = {p.cert.key_name: p.cert.wire for p in parts.values()}

    async def fetch(name: bytes) -> bytes | None:
        return next((w for k, w in certs.items() if k.startswith(name) or name.startswith(k)), None)

    schema = TrustSchema.from_text(parts["consumer"].schema)
    return Validator(schema, [parts["consumer"].anchor], fetch=fetch), parts


def test_services_announce_their_identity_for_their_certificate() -> None:
    sc = parse_scenario(TEXT, check_entries=False)
    assert sc.services[0].announce == ["/lab/data", "/lab/producer"]
    assert sc.workloads[0].announce == []  # serves nothing, so needs no route


async def test_a_key_signs_under_its_own_prefixes_only() -> None:
    validator, parts = _setup()

    def data(name: str, who: str) -> SignedPacket:
        signer = CertSigner.of(parts[who].identity, parts[who].cert)
        return SignedPacket.of_data(make_data(from_uri(name), b"x", signer=signer))

    await validator.validate(data("/lab/data/1", "producer"))
    await validator.validate(data("/lab/data/1/seg/2", "producer"))
    for name, who in [
        ("/lab/data/1", "other"),  # another service's namespace
        ("/lab/data/1", "consumer"),  # a workload serves nothing
        ("/lab/data", "producer"),  # the prefix itself is no Data name
        ("/lab/data" + "/x" * (MAX_DEPTH + 1), "producer"),  # deeper than the rules go
    ]:
        with pytest.raises(ValidationError):
            await validator.validate(data(name, who))
    assert validator.counters["trust.refused_schema"] == 4


def test_a_ca_name_the_schema_cannot_quote_is_refused_naming_the_field() -> None:
    from apps.scenario.loader import ScenarioError

    with pytest.raises(ScenarioError, match=r"trust\.ca: .*double quote or a backslash"):
        parse_scenario('name: t\nnodes: {a: {}}\ntrust: {ca: "/a/b\\\\"}\n', check_entries=False)
