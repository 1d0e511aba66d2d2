"""``/localhop/nfd/rib`` commands from a non-local face under a trust policy (the config's
``localhop_security``), as an attacker and a rightful router would send them: a daemon with no
sockets, peers on memory faces made non-local.  The signer's certificate is fetched from the
commanding face (the peer answers it), validated by the project's one validator against the
schema and the anchor; every refusal is a 403 that registers nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from ndn.app_support.nfd_mgmt import ControlParameters, ControlParametersValue, parse_response

from forwarder.config import config_from_dict
from forwarder.daemon import ForwarderDaemon
from forwarder.face.face import Face
from forwarder.face.memory import memory_pair
from icn.dataplane.segments import data_content
from icn.errors import ConfigError
from icn.security import certs
from icn.security.certs import Certificate, CertSigner
from icn.security.keys import Identity
from icn.security.signed_interest import make_signed_interest
from icn.wire import tlv_types as T
from icn.wire.name import from_uri, generic
from icn.wire.packet import parse_data, parse_interest

SCHEMA = """
#KEY: "KEY"/_
#CERT: "KEY"/_/_/_
#site: "org"/"site"/#KEY
#site: "org"/"site"/#CERT
#router: "org"/"site"/"router"/who/#KEY <= #site
#router: "org"/"site"/"router"/who/#CERT <= #site
#command: "localhop"/"nfd"/"rib"/verb/params <= #router
"""
DAY = 86_400.0


class Peer:
    """A host on the next link: a non-local face that sends commands and serves its
    certificates when the forwarder asks for them."""

    def __init__(self, daemon: ForwarderDaemon, *served: Certificate) -> None:
        fwd_end, self.end = memory_pair(daemon.counters)
        face = Face(fwd_end)
        self.face_id = daemon.faces.add(face)
        face.set_scope(False)
        self.served = {c.key_name: c.wire for c in served}
        self.asked: list[bytes] = []
        self.answers: asyncio.Queue[bytes] = asyncio.Queue()
        self.end.bind(self._receive, lambda: None)

    def _receive(self, wire: bytes) -> None:
        if wire[0] == T.INTEREST:
            name = parse_interest(wire).name
            self.asked.append(name)
            for key_name, cert in self.served.items():
                if cert and parse_data(cert).name.startswith(name) and name.startswith(key_name):
                    self.end.send(cert)
        else:
            self.answers.put_nowait(wire)

    async def register(self, prefix: str, signer: CertSigner) -> dict[str, object]:
        cp = ControlParameters()
        cp.cp = ControlParametersValue()
        cp.cp.name = prefix
        name = from_uri("/localhop/nfd/rib/register") + generic(bytes(cp.encode()))
        self.end.send(make_signed_interest(name, signer=signer, lifetime=2000))
        wire = await asyncio.wait_for(self.answers.get(), 5)
        return parse_response(data_content(parse_data(wire)))  # type: ignore[no-any-return]


class Site:
    def __init__(self, now: float) -> None:
        self.now = now
        self.ca = Identity.generate()
        self.anchor = certs.self_signed(self.ca, from_uri("/org/site"), 365 * DAY, now - DAY)

    def member(self, name: str, *, issuer: Identity | None = None, validity: float = DAY,
               start: float | None = None) -> tuple[CertSigner, Certificate]:  # fmt: skip
        key = Identity.generate()
        cert = certs.issue(
            key.public_bytes,
            from_uri(name),
            issuer or self.ca,
            self.anchor.key_name,
            validity,
            self.now - 60 if start is None else start,
        )
        return CertSigner.of(key, cert), cert


@pytest.fixture
async def site_daemon(tmp_path: Path) -> AsyncIterator[tuple[ForwarderDaemon, Site]]:
    import time

    site = Site(time.time())
    (tmp_path / "anchor.cert").write_text(certs.to_base64(site.anchor.wire))
    (tmp_path / "schema.lvs").write_text(SCHEMA)
    config = {
        "listen": {},
        "localhop_security": {
            "trust_schema": str(tmp_path / "schema.lvs"),
            "anchors": [str(tmp_path / "anchor.cert")],
            "fetch_timeout_ms": 500,
        },
    }
    d = ForwarderDaemon(config_from_dict(config))
    await d.start()
    try:
        yield d, site
    finally:
        await d.stop()


def routes(daemon: ForwarderDaemon, prefix: str) -> list[object]:
    return list(daemon.rib.routes(from_uri(prefix)))


async def test_a_router_the_site_certified_registers_and_its_certificate_is_fetched_once(
    site_daemon: tuple[ForwarderDaemon, Site],
) -> None:
    daemon, site = site_daemon
    signer, cert = site.member("/org/site/router/r1")
    peer = Peer(daemon, cert)
    resp = await peer.register("/org/site/data", signer)
    assert resp["status_code"] == 200, resp
    assert routes(daemon, "/org/site/data") and peer.asked == [cert.key_name]
    # the next command: the certificate is cached, nothing fetched
    assert (await peer.register("/org/site/more", signer))["status_code"] == 200
    assert len(peer.asked) == 1 and daemon.counters["trust.ok"] == 2


@pytest.mark.parametrize(
    "case",
    ["outside the namespace", "forged chain", "expired", "no certificate", "self-signed"],
)
async def test_an_untrusted_signer_is_refused_and_registers_nothing(
    site_daemon: tuple[ForwarderDaemon, Site], case: str
) -> None:
    daemon, site = site_daemon
    if case == "outside the namespace":  # a valid certificate, for a name no rule lets command
        signer, cert = site.member("/org/site/guest/g1")
        served = [cert]
        counter = "trust.refused_schema"
    elif case == "forged chain":  # same names, signed by a key that is not the anchor's
        signer, cert = site.member("/org/site/router/evil", issuer=Identity.generate())
        served = [cert]
        counter = "trust.refused_signature"
    elif case == "expired":
        signer, cert = site.member("/org/site/router/old", validity=60, start=site.now - 7200)
        served = [cert]
        counter = "trust.refused_expired"
    elif case == "no certificate":  # nobody answers the fetch
        signer, cert = site.member("/org/site/router/silent")
        served = []
        counter = "trust.refused_cert_unavailable"
    else:  # a stranger's own anchor, named like a router
        key = Identity.generate()
        cert = certs.self_signed(key, from_uri("/org/site/router/me"), DAY, site.now - 60)
        signer, served = CertSigner.of(key, cert), [cert]
        counter = "trust.refused_no_anchor"
    peer = Peer(daemon, *served)
    resp = await peer.register("/org/site/data", signer)
    assert resp["status_code"] == 403 and "not trusted" in str(resp["status_text"]), resp
    assert not routes(daemon, "/org/site/data")
    assert daemon.counters["mgmt.refused_localhop_untrusted"] == 1
    assert daemon.counters[counter] == 1, dict(daemon.counters)


async def test_a_replayed_trusted_command_is_refused(
    site_daemon: tuple[ForwarderDaemon, Site],
) -> None:
    daemon, site = site_daemon
    signer, cert = site.member("/org/site/router/r2")
    peer = Peer(daemon, cert)
    cp = ControlParameters()
    cp.cp = ControlParametersValue()
    cp.cp.name = "/org/site/replayed"
    name = from_uri("/localhop/nfd/rib/register") + generic(bytes(cp.encode()))
    command = make_signed_interest(name, signer=signer, lifetime=2000)
    peer.end.send(command)
    first = parse_response(data_content(parse_data(await asyncio.wait_for(peer.answers.get(), 5))))
    assert first["status_code"] == 200
    daemon.rib.unregister(from_uri("/org/site/replayed"), peer.face_id, 0)
    # the same bytes with another Interest nonce: the same signature, refused
    again = bytearray(command)
    at = bytes(command).index(b"\x0a\x04") + 2
    again[at : at + 4] = b"\x01\x02\x03\x04"
    peer.end.send(bytes(again))
    second = parse_response(data_content(parse_data(await asyncio.wait_for(peer.answers.get(), 5))))
    assert second["status_code"] == 403, second
    assert not routes(daemon, "/org/site/replayed")


def test_a_bad_schema_or_anchor_file_is_named_at_start(tmp_path: Path) -> None:
    (tmp_path / "schema.lvs").write_text('#site: "org"/\n#broken <= \n')
    (tmp_path / "anchor.cert").write_text("not a certificate\n")
    config = config_from_dict(
        {
            "listen": {},
            "localhop_security": {
                "trust_schema": str(tmp_path / "schema.lvs"),
                "anchors": [str(tmp_path / "anchor.cert")],
            },
        }
    )
    with pytest.raises(ConfigError, match=r"schema\.lvs"):
        asyncio.run(ForwarderDaemon(config).start())
