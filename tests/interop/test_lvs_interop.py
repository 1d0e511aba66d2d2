"""LightVerSec interop: python-ndn, unmodified, validates Data we signed with a certificate we
issued, under a schema, and refuses Data signed outside it; our validator gives the same verdicts.

python-ndn's side is its LVS compiler and ``Checker`` (the name rules), its ``parse_data`` and
``parse_certificate`` (the packets) and its ``verify_ed25519`` (the signatures), walked up the
chain as its ``lvs_validator`` does (``checker.check(name, KeyLocator)``, then the signer's
certificate, then that certificate in turn, until the anchor).  ``lvs_validator`` itself cannot
take an Ed25519 chain in python-ndn 0.5.2: its ``CascadeChecker._verify_sig`` knows RSA, ECDSA
and HMAC only, so it refuses an Ed25519 trust anchor as "not properly self-signed" (the last
test pins that, so we notice when python-ndn adds it).  No forwarder: packets go over as bytes.
"""

from __future__ import annotations

from typing import Any

import pytest
from Cryptodome.PublicKey import ECC
from ndn.app_support.light_versec import DEFAULT_USER_FNS, Checker, compile_lvs, lvs_validator
from ndn.app_support.security_v2 import parse_certificate
from ndn.encoding import parse_data
from ndn.security import verify_ed25519

from icn.errors import ValidationError
from icn.security import certs
from icn.security.certs import Certificate, CertSigner
from icn.security.keys import Identity
from icn.security.trust import TrustSchema, Validator
from icn.wire.encode import make_data
from icn.wire.name import from_uri

NOW = 1_700_000_000.0
DAY = 86_400.0

SCHEMA = """
#KEY: "KEY"/_
#CERT: "KEY"/_/_/_
#ca: "org"/"ca"/#KEY
#ca: "org"/"ca"/#CERT
#member: "org"/"lab"/who/#KEY <= #ca
#member: "org"/"lab"/who/#CERT <= #ca
#data: "org"/"lab"/who/"data"/_ <= #member
"""


class Site:
    def __init__(self) -> None:
        self.ca = Identity.generate()
        self.anchor = certs.self_signed(self.ca, from_uri("/org/ca"), 365 * DAY, NOW)
        self.store: dict[bytes, bytes] = {}  # certificates by key name, as a producer serves them

    def member(self, uri: str) -> tuple[Identity, Certificate]:
        ident = Identity.generate()
        cert = certs.issue(
            ident.public_bytes, from_uri(uri), self.ca, self.anchor.key_name, 90 * DAY, NOW
        )
        self.store[cert.key_name] = cert.wire
        return ident, cert

    async def fetch(self, name: bytes) -> bytes | None:
        return self.store.get(name)


def python_ndn_accepts(wire: bytes, site: Site, max_chain: int = 5) -> bool:
    """python-ndn's verdict on ``wire``, by its own parts (see the module's doc)."""
    checker = Checker(compile_lvs(SCHEMA), DEFAULT_USER_FNS)
    assert checker.validate_user_fns()
    anchor = parse_certificate(site.anchor.wire)
    anchor_key = b"".join(bytes(c) for c in anchor.name[:-2])
    name: Any
    name, _, _, sig = parse_data(wire)
    for _ in range(max_chain):
        locator = sig.signature_info.key_locator.name
        if not checker.check(name, locator):
            return False
        located = b"".join(bytes(c) for c in locator)  # the name's value, as we key names
        if located == anchor_key:
            key_bits = anchor.content
        else:
            cert_wire = site.store.get(located)  # what a CanBePrefix Interest would fetch
            if cert_wire is None:
                return False
            key_bits = parse_certificate(cert_wire).content
        if not verify_ed25519(ECC.import_key(bytes(key_bits)), sig):
            return False
        if located == anchor_key:
            return True
        name, _, _, sig = parse_data(cert_wire)
    return False


async def ours_accept(wire: bytes, site: Site) -> bool:
    v = Validator(TrustSchema.from_text(SCHEMA), [site.anchor], fetch=site.fetch, clock=lambda: NOW)
    try:
        await v.validate_data(wire)
    except ValidationError:
        return False
    return True


async def test_python_ndn_accepts_data_signed_under_the_schema() -> None:
    site = Site()
    alice, cert = site.member("/org/lab/alice")
    wire = make_data(
        from_uri("/org/lab/alice/data/1"), b"result", signer=CertSigner.of(alice, cert)
    )
    assert python_ndn_accepts(wire, site)
    assert await ours_accept(wire, site)
    # tampered content: both refuse
    bad = wire.replace(b"result", b"resulT")
    assert not python_ndn_accepts(bad, site)
    assert not await ours_accept(bad, site)


async def test_python_ndn_refuses_data_signed_outside_the_schema() -> None:
    site = Site()
    alice, acert = site.member("/org/lab/alice")
    eve, ecert = site.member("/org/elsewhere/eve")  # a real certificate, outside /org/lab
    cases = [
        # alice's key signing bob's data
        make_data(from_uri("/org/lab/bob/data/1"), b"x", signer=CertSigner.of(alice, acert)),
        # eve's key signing alice's data, and eve's own
        make_data(from_uri("/org/lab/alice/data/1"), b"x", signer=CertSigner.of(eve, ecert)),
        make_data(from_uri("/org/elsewhere/eve/data/1"), b"x", signer=CertSigner.of(eve, ecert)),
        # a name the schema has no rule for
        make_data(from_uri("/org/lab/alice/other/1"), b"x", signer=CertSigner.of(alice, acert)),
    ]
    for wire in cases:
        assert not python_ndn_accepts(wire, site)
        assert not await ours_accept(wire, site)


def test_python_ndn_lvs_validator_cannot_take_an_ed25519_anchor() -> None:
    """python-ndn 0.5.2's lvs_validator: our anchor passes its root-of-trust check (the schema's
    only root matches the anchor's certificate name), then its CascadeChecker, which has no
    Ed25519, refuses the anchor's self-signature.  When this fails, python-ndn learned Ed25519:
    switch the tests above to lvs_validator itself."""
    site = Site()
    checker = Checker(compile_lvs(SCHEMA), DEFAULT_USER_FNS)
    assert checker.root_of_trust() == {"#ca"}
    with pytest.raises(ValueError, match="Trust anchor is not properly self-signed"):
        lvs_validator(checker, None, site.anchor.wire)  # type: ignore[arg-type]
