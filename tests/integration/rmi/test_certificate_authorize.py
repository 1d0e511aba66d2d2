"""Named functions authorized by certificate (issue 35): ``authorize="namespace:/org/lab"`` and
``authorize="rule:#member"`` admit a caller whose credential carries a certificate of its key that
the server's validator (the project's one) traces to an anchor; a stranger, a caller certified
outside the namespace, one with a forged or expired certificate, and one with none are refused
before any work (the function never runs, counted)."""

from __future__ import annotations

import sys
import time
from collections import Counter

import pytest

from apps.inproc import attach_endpoint
from compute.rmi import Client, RmiServer, Unauthorized, collect, function
from icn.errors import ConfigError
from icn.security import certs
from icn.security.certs import Certificate
from icn.security.keys import Identity
from icn.security.trust import TrustSchema, Validator
from icn.wire.name import from_uri
from tests.integration.rmi.conftest import Line

RAN: Counter[str] = Counter()
SCHEMA = """
#KEY: "KEY"/_
#CERT: "KEY"/_/_/_
#org: "org"/#KEY
#org: "org"/#CERT
#member: "org"/"lab"/who/#KEY <= #org
#member: "org"/"lab"/who/#CERT <= #org
#guest: "org"/"guests"/who/#KEY <= #org
#guest: "org"/"guests"/who/#CERT <= #org
"""
DAY = 86_400.0


@function(authorize="namespace:/org/lab")
def lab_only(x: int) -> int:
    RAN["lab_only"] += 1
    return x + 1


@function(authorize="rule:#member")
def members(x: int) -> int:
    RAN["members"] += 1
    return x * 2


class Org:
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

    def validator(self) -> Validator:
        return Validator(TrustSchema.from_text(SCHEMA, "org.lvs"), [self.anchor])


async def serve(line: Line, org: Org) -> RmiServer:
    functions = collect(sys.modules[__name__])
    server = RmiServer(
        attach_endpoint(line.daemons[-1]), "/svc", functions, validator=org.validator()
    )
    await server.start()
    line.server = server
    return server


async def test_a_lab_member_is_admitted_by_namespace_and_by_rule(line: Line) -> None:
    org = Org()
    server = await serve(line, org)
    key, cert = org.person("/org/lab/alice")
    client = line.client(identity=key, certificate=cert)
    assert await client.call("/svc/lab_only", 1) == 2
    assert await client.call("/svc/members", 3) == 6
    assert server.counters["caller_certificate_ok"] >= 1


@pytest.mark.parametrize("who", ["stranger", "guest", "forged", "expired", "no certificate"])
async def test_callers_the_policy_does_not_admit_are_refused_before_any_work(
    line: Line, who: str
) -> None:
    org = Org()
    server = await serve(line, org)
    RAN.clear()
    if who == "stranger":  # certified by an organisation of its own
        other = Org()
        key, cert = other.person("/org/lab/mallory")
    elif who == "guest":  # certified, outside the namespace and the rule
        key, cert = org.person("/org/guests/bob")
    elif who == "forged":  # the right names, signed by a key that is not the anchor's
        key, cert = org.person("/org/lab/eve", issuer=Identity.generate())
    elif who == "expired":
        key, cert = org.person("/org/lab/old", start=org.now - 7200, validity=60)
    else:
        key, cert = Identity.generate(), None
    client = line.client(identity=key, certificate=cert)
    for fn in ("lab_only", "members"):
        with pytest.raises(Unauthorized):
            await client.call(f"/svc/{fn}", 1)
    assert RAN == {}  # neither function ran
    assert server.counters["refused_unauthorized"] == 2
    assert server.counters["started"] == 0
    if cert is not None:
        assert server.counters["caller_certificate_refused"] == (0 if who == "guest" else 2)


async def test_a_server_with_certificate_policies_and_no_validator_is_refused(
    line: Line,
) -> None:
    with pytest.raises(ConfigError, match="validator"):
        RmiServer(attach_endpoint(line.daemons[-1]), "/svc", collect(sys.modules[__name__]))


def test_a_client_with_another_key_s_certificate_is_refused() -> None:
    org = Org()
    _, cert = org.person("/org/lab/alice")
    with pytest.raises(ConfigError, match="another key"):
        Client(None, identity=Identity.generate(), certificate=cert)  # type: ignore[arg-type]
