"""The validator: schema, certificate chain, expiry, cache and counters, on a fake clock."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from icn.errors import CertificateNotCached, ConfigError, ValidationError
from icn.security import certs
from icn.security.certs import Certificate, CertSigner
from icn.security.hmac_signer import HmacSigner
from icn.security.keys import Identity
from icn.security.signed_interest import make_signed_interest
from icn.security.trust import SignedPacket, TrustSchema, Validator, load_anchors
from icn.wire import tlv_types as T
from icn.wire.encode import make_data
from icn.wire.name import from_uri, generic
from icn.wire.signer import DIGEST_SHA256
from icn.wire.tlv import encode_nni, encode_tlv

DAY = 86_400.0
T0 = 1_700_000_000.0

SCHEMA = """
// a key as a KeyLocator names it, and a certificate of it
#KEY: "KEY"/_
#CERT: "KEY"/_/_/_
#site: "org"/"site"/#KEY
#site: "org"/"site"/#CERT
#member: "org"/"site"/who/#KEY <= #site
#member: "org"/"site"/who/#CERT <= #site
#user: "org"/"site"/who/user/#KEY <= #member
#user: "org"/"site"/who/user/#CERT <= #member
#data: "org"/"site"/who/"data"/_ <= #member
#udata: "org"/"site"/who/user/"data"/_ <= #user
#command: "localhop"/"nfd"/"rib"/verb/params <= #member
"""


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class Pki:
    """A site anchor and the certificates it and its members issue, served by a fake fetch."""

    def __init__(self) -> None:
        self.ca = Identity.generate()
        self.anchor = certs.self_signed(self.ca, from_uri("/org/site"), 365 * DAY, T0)
        self.store: dict[bytes, bytes] = {}
        self.fetched: list[bytes] = []

    def member(
        self,
        uri: str,
        issuer: Identity | None = None,
        issuer_cert: Certificate | None = None,
        validity: float = 90 * DAY,
        publish: bool = True,
    ) -> tuple[Identity, Certificate]:
        ident = Identity.generate()
        issuer_cert = issuer_cert or self.anchor
        cert = certs.issue(
            ident.public_bytes,
            from_uri(uri),
            issuer or self.ca,
            issuer_cert.key_name,
            validity,
            T0,
        )
        if publish:
            self.store[cert.key_name] = cert.wire
        return ident, cert

    async def fetch(self, name: bytes) -> bytes | None:
        self.fetched.append(name)
        return self.store.get(name)


@pytest.fixture
def pki() -> Pki:
    return Pki()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def schema() -> TrustSchema:
    return TrustSchema.from_text(SCHEMA, "test.lvs")


def validator(pki: Pki, schema: TrustSchema, clock: Clock, **kw: object) -> Validator:
    return Validator(schema, [pki.anchor], fetch=pki.fetch, clock=clock, **kw)  # type: ignore[arg-type]


def data(name: str, ident: Identity, cert: Certificate, content: bytes = b"x") -> SignedPacket:
    wire = make_data(from_uri(name), content, signer=CertSigner(ident, cert.key_name))
    return SignedPacket.of_data(wire)


async def test_two_level_chain_accepted_and_cert_cached(
    pki: Pki, schema: TrustSchema, clock: Clock
) -> None:
    alice, cert = pki.member("/org/site/alice")
    v = validator(pki, schema, clock)
    assert await v.validate(data("/org/site/alice/data/1", alice, cert)) == cert
    assert pki.fetched == [cert.key_name]
    assert v.cached() == [cert]
    # the second time: from the cache, no fetch, and the sync path works too
    assert await v.validate(data("/org/site/alice/data/2", alice, cert)) == cert
    assert v.validate_cached(data("/org/site/alice/data/3", alice, cert)) == cert
    assert pki.fetched == [cert.key_name]
    assert v.counters["trust.ok"] == 3
    assert v.counters["trust.fetch"] == 1
    assert v.counters["trust.cache_miss"] == 1 and v.counters["trust.cache_hit"] == 2


async def test_three_level_chain_and_max_chain(pki: Pki, schema: TrustSchema, clock: Clock) -> None:
    alice, acert = pki.member("/org/site/alice")
    bob, bcert = pki.member("/org/site/alice/bob", alice, acert)
    pkt = data("/org/site/alice/bob/data/1", bob, bcert)
    assert await validator(pki, schema, clock, max_chain=3).validate(pkt) == bcert
    short = validator(pki, schema, clock, max_chain=2)
    with pytest.raises(ValidationError, match=r"longer than 2 \(max_chain\)"):
        await short.validate(pkt)
    assert short.counters["trust.refused_chain_too_long"] == 1
    assert short.cached() == []
    # alice's chain is short enough and gets cached; bob's, through the cache, is still too long
    assert await short.validate(data("/org/site/alice/data/1", alice, acert)) == acert
    with pytest.raises(ValidationError, match="max_chain"):
        await short.validate(pkt)
    assert short.counters["trust.refused_chain_too_long"] == 2


async def test_forged_chain_refused(pki: Pki, schema: TrustSchema, clock: Clock) -> None:
    # mallory signs a certificate for "alice" naming the real anchor's key as its issuer
    mallory_ca = Identity.generate()
    alice, forged = pki.member("/org/site/alice", issuer=mallory_ca)
    v = validator(pki, schema, clock)
    with pytest.raises(ValidationError, match="does not verify"):
        await v.validate(data("/org/site/alice/data/1", alice, forged))
    assert v.counters["trust.refused_signature"] == 1 and v.cached() == []
    # or mallory's own "/org/site" anchor, served for the asking: self-signed, not trusted
    fake_anchor = certs.self_signed(mallory_ca, from_uri("/org/site"), DAY, T0)
    pki.store[fake_anchor.key_name] = fake_anchor.wire
    eve, cert = pki.member("/org/site/eve", mallory_ca, fake_anchor)
    with pytest.raises(ValidationError, match="self-signed and not a trust anchor"):
        await v.validate(data("/org/site/eve/data/1", eve, cert))
    assert v.counters["trust.refused_no_anchor"] == 1


async def test_expired_leaf_refused_also_when_cached(
    pki: Pki, schema: TrustSchema, clock: Clock
) -> None:
    alice, cert = pki.member("/org/site/alice", validity=10 * DAY)
    v = validator(pki, schema, clock)
    await v.validate(data("/org/site/alice/data/1", alice, cert))
    clock.now = T0 + 10 * DAY + 1
    with pytest.raises(ValidationError, match="is expired"):
        await v.validate(data("/org/site/alice/data/2", alice, cert))
    with pytest.raises(ValidationError, match="is expired"):
        v.validate_cached(data("/org/site/alice/data/2", alice, cert))
    assert v.counters["trust.refused_expired"] == 2
    clock.now = T0 - 1
    with pytest.raises(ValidationError, match="not yet valid"):
        await v.validate(data("/org/site/alice/data/2", alice, cert))


async def test_expired_intermediate_refused_also_when_cached(
    pki: Pki, schema: TrustSchema, clock: Clock
) -> None:
    alice, acert = pki.member("/org/site/alice", validity=10 * DAY)
    bob, bcert = pki.member("/org/site/alice/bob", alice, acert, validity=30 * DAY)
    fresh = validator(pki, schema, clock)
    pkt = data("/org/site/alice/bob/data/1", bob, bcert)
    assert await fresh.validate(pkt) == bcert
    clock.now = T0 + 20 * DAY  # bob's certificate holds, alice's (his issuer's) does not
    assert bcert.valid_at(clock.now)
    with pytest.raises(ValidationError, match=r"an issuer of .* is not valid"):
        await fresh.validate(pkt)  # bob's cert is cached: the chain's window says no
    with pytest.raises(ValidationError, match=r"/org/site/alice/KEY/.* is expired"):
        await validator(pki, schema, clock).validate(pkt)  # walked up: alice's cert says no


async def test_valid_cert_outside_the_namespace_refused_by_schema(
    pki: Pki, schema: TrustSchema, clock: Clock
) -> None:
    eve, cert = pki.member("/org/other/eve")  # a real certificate from the real anchor
    alice, acert = pki.member("/org/site/alice")
    v = validator(pki, schema, clock)
    with pytest.raises(ValidationError, match="may not be signed by /org/other/eve/KEY"):
        await v.validate(data("/org/site/alice/data/1", eve, cert))
    # alice's key signing for bob's namespace
    with pytest.raises(ValidationError, match=r"under the trust schema test\.lvs"):
        await v.validate(data("/org/site/bob/data/1", alice, acert))
    # an identity under the schema's namespace, with a certificate of a name the schema does
    # not let the anchor sign, signing its own data
    mallet, mcert = pki.member("/org/site/mallet/x/y")
    with pytest.raises(ValidationError, match="trust schema"):
        await v.validate(data("/org/site/mallet/data/1", mallet, mcert))
    assert v.counters["trust.refused_schema"] == 3
    assert pki.fetched == []  # refused before fetching anything


async def test_data_signed_by_the_wrong_key_refused(
    pki: Pki, schema: TrustSchema, clock: Clock
) -> None:
    alice, cert = pki.member("/org/site/alice")
    mallory = Identity.generate()
    v = validator(pki, schema, clock)
    with pytest.raises(ValidationError, match="does not verify"):
        await v.validate(data("/org/site/alice/data/1", mallory, cert))
    good = make_data(from_uri("/org/site/alice/data/1"), b"ok", signer=CertSigner.of(alice, cert))
    with pytest.raises(ValidationError, match="does not verify"):
        await v.validate(SignedPacket.of_data(good.replace(b"ok", b"no")))
    assert v.counters["trust.refused_signature"] == 2
    assert await v.validate(SignedPacket.of_data(good)) == cert


async def test_digest_and_hmac_never_accepted(pki: Pki, schema: TrustSchema, clock: Clock) -> None:
    _, cert = pki.member("/org/site/alice")
    v = validator(pki, schema, clock)
    digest = make_data(from_uri("/org/site/alice/data/1"), b"x", signer=DIGEST_SHA256)
    with pytest.raises(ValidationError, match="DigestSha256 signature is never accepted"):
        await v.validate_data(digest)
    hmac = make_data(
        from_uri("/org/site/alice/data/1"), b"x", signer=HmacSigner(b"k" * 32, cert.key_name)
    )
    with pytest.raises(ValidationError, match="HMAC-SHA256 signature is never accepted"):
        await v.validate_data(hmac)
    assert v.counters["trust.refused_signature"] == 2 and pki.fetched == []


async def test_cache_is_bounded(pki: Pki, schema: TrustSchema, clock: Clock) -> None:
    v = validator(pki, schema, clock, cache_entries=2)
    for i in range(6):
        ident, cert = pki.member(f"/org/site/m{i}")
        assert await v.validate(data(f"/org/site/m{i}/data/1", ident, cert)) == cert
        assert len(v.cached()) <= 2
    assert [c.identity for c in v.cached()] == [from_uri("/org/site/m4"), from_uri("/org/site/m5")]
    none = validator(pki, schema, clock, cache_entries=0)
    assert await none.validate(data("/org/site/m5/data/2", ident, cert)) == cert
    assert none.cached() == []


async def test_validate_cached_does_no_io(pki: Pki, schema: TrustSchema, clock: Clock) -> None:
    alice, cert = pki.member("/org/site/alice")
    v = validator(pki, schema, clock)
    with pytest.raises(CertificateNotCached, match="/org/site/alice/KEY"):
        v.validate_cached(data("/org/site/alice/data/1", alice, cert))
    assert pki.fetched == [] and v.counters["trust.not_cached"] == 1
    await v.validate(data("/org/site/alice/data/1", alice, cert))
    assert v.validate_cached(data("/org/site/alice/data/2", alice, cert)) == cert


async def test_certificate_unavailable_or_bad(pki: Pki, schema: TrustSchema, clock: Clock) -> None:
    alice, cert = pki.member("/org/site/alice", publish=False)
    pkt = data("/org/site/alice/data/1", alice, cert)
    with pytest.raises(ValidationError, match="does not fetch"):
        await Validator(schema, [pki.anchor], clock=clock).validate(pkt)
    v = validator(pki, schema, clock)
    with pytest.raises(ValidationError, match=r"no certificate of .* answered"):
        await v.validate(pkt)
    _, other = pki.member("/org/site/bob")
    pki.store[cert.key_name] = other.wire
    with pytest.raises(ValidationError, match="the certificate of another key"):
        await v.validate(pkt)
    assert v.counters["trust.refused_cert_unavailable"] == 2
    pki.store[cert.key_name] = b"\x06\x03abc"
    with pytest.raises(ValidationError, match="malformed certificate"):
        await v.validate(pkt)
    assert v.counters["trust.refused_malformed"] == 1

    async def broken(name: bytes) -> bytes | None:
        raise TimeoutError("no answer in 4 s")

    with pytest.raises(ValidationError, match="failed: no answer in 4 s"):
        await Validator(schema, [pki.anchor], fetch=broken, clock=clock).validate(pkt)


async def test_locator_naming_a_certificate(pki: Pki, schema: TrustSchema, clock: Clock) -> None:
    # python-ndn's keychain puts the certificate's name in the KeyLocator
    alice, cert = pki.member("/org/site/alice")
    v = validator(pki, schema, clock)
    wire = make_data(from_uri("/org/site/alice/data/1"), b"x", signer=CertSigner(alice, cert.name))
    pki.store[cert.name] = cert.wire
    assert await v.validate_data(wire) == cert


async def test_commands_both_forms(pki: Pki, schema: TrustSchema, clock: Clock) -> None:
    alice, cert = pki.member("/org/site/alice")
    eve, ecert = pki.member("/org/lab/eve")
    v = validator(pki, schema, clock)
    params = generic(encode_tlv(0x68, encode_tlv(T.NAME, from_uri("/hijacked"))))
    name = from_uri("/localhop/nfd/rib/register") + params
    v03 = make_signed_interest(name, signer=CertSigner.of(alice, cert))
    assert await v.validate_interest(v03) == cert
    # the v0.2 form: the signature in the name
    signer = CertSigner.of(alice, cert)
    head = name + generic(encode_nni(1_700_000_000_000)) + generic(b"12345678")
    head += generic(encode_tlv(T.SIGNATURE_INFO, signer.signature_info()))
    full = head + generic(encode_tlv(T.SIGNATURE_VALUE, signer.sign(head)))
    assert await v.validate(SignedPacket.of_signed_name(full)) == cert
    sig_type = T.SIG_ED25519
    pieces = SignedPacket.of_command_v02(head, sig_type, cert.key_name, signer.sign(head))
    assert pieces.name == name and await v.validate(pieces) == cert
    with pytest.raises(ValidationError, match="does not verify"):
        await v.validate(SignedPacket.of_command_v02(head, sig_type, cert.key_name, b"\0" * 64))
    # eve's certificate is real but outside /org/site
    v03 = make_signed_interest(name, signer=CertSigner.of(eve, ecert))
    with pytest.raises(ValidationError, match="may not be signed"):
        await v.validate_interest(v03)
    with pytest.raises(ValidationError, match="malformed"):
        await v.validate_interest(make_signed_interest(name)[:-3])
    assert v.counters["trust.refused_malformed"] == 1


def test_anchor_must_be_properly_self_signed(pki: Pki, schema: TrustSchema) -> None:
    bad = certs.issue(
        pki.ca.public_bytes,
        from_uri("/org/site"),
        Identity.generate(),
        pki.anchor.key_name,
        DAY,
        T0,
        issuer_id="self",
    )
    assert bad.self_signed
    with pytest.raises(ConfigError, match="not properly self-signed"):
        Validator(schema, [bad])


def test_schema_errors_name_the_file_line_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "bad.lvs"
    path.write_text('#KEY: "KEY"/_\n#a: "x"/y <= #KEY\n#b: "x"/y/z <= #nope\n')
    with pytest.raises(ConfigError, match=r"bad\.lvs:3: Signed by a non-existing key #nope"):
        TrustSchema.load(path)
    path.write_text('#KEY: "KEY"/_\n#a "x"/y\n')
    with pytest.raises(ConfigError, match=r"bad\.lvs:2:\d+: unexpected .*a rule is"):
        TrustSchema.load(path)
    path.write_text('#a: "x"/y & {y: $nofn()}\n')
    with pytest.raises(ConfigError, match=r"undefined function\(s\) \$nofn"):
        TrustSchema.load(path)
    with pytest.raises(ConfigError, match="cannot read trust schema"):
        TrustSchema.load(tmp_path / "missing.lvs")


def test_load_anchors(tmp_path: Path, pki: Pki) -> None:
    certs.save(pki.anchor, tmp_path / "site.cert")
    (tmp_path / ".hidden").write_text("ignored")
    assert load_anchors(tmp_path) == [pki.anchor]
    (tmp_path / "bad.cert").write_text("nope")
    with pytest.raises(ConfigError, match=r"bad\.cert"):
        load_anchors(tmp_path)
    with pytest.raises(ConfigError, match="install-anchor"):
        load_anchors(tmp_path / "none")


def test_counters_shared_and_stable_names(pki: Pki, schema: TrustSchema, clock: Clock) -> None:
    shared: Counter[str] = Counter()
    v = Validator(schema, [pki.anchor], clock=clock, counters=shared)
    assert v.counters is shared
    with pytest.raises(ValidationError):
        v.validate_cached(SignedPacket(from_uri("/a"), T.SIG_ED25519, None, b"", b""))
    assert shared == Counter({"trust.refused_malformed": 1})
