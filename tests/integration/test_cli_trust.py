"""`icn key` and `icn cert`: make an anchor and a member, then a validator trusts what the
member signs; and each refusal names the file or option and the fix."""

from __future__ import annotations

import asyncio
import base64
import json
import stat
import subprocess
import time
from pathlib import Path

from icn.security import certs
from icn.security.certs import CertSigner
from icn.security.keys import Identity
from icn.security.trust import TrustSchema, Validator, load_anchors
from icn.wire.encode import make_data
from icn.wire.name import from_uri
from tests.integration.icn_runs import run_icn

SCHEMA = """
#KEY: "KEY"/_
#CERT: "KEY"/_/_/_
#ca: "org"/"ca"/#KEY
#ca: "org"/"ca"/#CERT
#member: "org"/"lab"/who/#KEY <= #ca
#member: "org"/"lab"/who/#CERT <= #ca
#data: "org"/"lab"/who/"data"/_ <= #member
"""


def icn(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    ran = run_icn(args, {"COLUMNS": "200", **(env or {})}, timeout=60)
    return subprocess.CompletedProcess(
        list(args), ran.returncode, ran.stdout.decode(), ran.stderr.decode()
    )


def test_anchor_member_and_a_validator_that_trusts_them(tmp_path: Path) -> None:
    ca_key, ca_cert = tmp_path / "ca.key", tmp_path / "ca.cert"
    alice_key, alice_cert = tmp_path / "alice.key", tmp_path / "alice.cert"
    ran = icn("key", "generate", str(ca_key))
    assert ran.returncode == 0, ran.stderr
    assert stat.S_IMODE(ca_key.stat().st_mode) == 0o600
    assert ran.stdout.split()[0] == Identity.load(ca_key).fingerprint
    assert icn("key", "generate", str(alice_key)).returncode == 0
    shown = json.loads(icn("key", "show", str(alice_key), "--json").stdout)
    alice = Identity.load(alice_key)
    assert shown["fingerprint"] == alice.fingerprint
    assert base64.b64decode(shown["public_key"]) == alice.public_bytes

    ran = icn("cert", "self-sign", "--key", str(ca_key), "--identity", "/org/ca", "--out",
              str(ca_cert))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("/org/ca/KEY/")
    ran = icn(
        "cert", "issue", "--key", str(alice_key), "--identity", "/org/lab/alice",
        "--issuer-key", str(ca_key), "--issuer-cert", str(ca_cert), "--validity", "720h",
        "--out", str(alice_cert),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    info = json.loads(icn("cert", "show", str(alice_cert), "--json").stdout)
    assert info["identity"] == "/org/lab/alice" and info["issuer_id"] == "NA"
    assert (
        info["issuer"] == json.loads(icn("cert", "show", str(ca_cert), "--json").stdout)["key_name"]
    )
    assert info["fingerprint"] == alice.fingerprint
    assert info["valid_now"] and not info["expired"] and not info["self_signed"]
    text = icn("cert", "show", str(alice_cert))
    assert text.returncode == 0 and "/org/lab/alice" in text.stdout
    exported = icn("cert", "export", str(alice_cert)).stdout
    assert base64.b64decode("".join(exported.split())) == certs.load(alice_cert).wire
    assert all(len(line) <= 64 for line in exported.splitlines())

    anchors = tmp_path / "anchors"
    ran = icn("cert", "install-anchor", str(ca_cert), "--dir", str(anchors))
    assert ran.returncode == 0, ran.stderr
    # the default directory follows XDG_CONFIG_HOME
    ran = icn("cert", "install-anchor", str(ca_cert), env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert ran.returncode == 0 and str(tmp_path / "icn" / "anchors") in ran.stdout

    member = certs.load(alice_cert)
    store = {member.key_name: member.wire}

    async def fetch(name: bytes) -> bytes | None:
        return store.get(name)

    v = Validator(TrustSchema.from_text(SCHEMA), load_anchors(anchors), fetch=fetch)
    wire = make_data(from_uri("/org/lab/alice/data/1"), b"x", signer=CertSigner.of(alice, member))
    assert asyncio.run(v.validate_data(wire)) == member


def test_refusals_name_the_option_and_the_fix(tmp_path: Path) -> None:
    ca_key, ca_cert, other_key = tmp_path / "ca.key", tmp_path / "ca.cert", tmp_path / "o.key"
    Identity.generate().save(ca_key)
    Identity.generate().save(other_key)
    ran = icn("key", "generate", str(ca_key))
    assert ran.returncode == 1 and "exists; pass --force" in ran.stderr
    assert icn("key", "generate", str(ca_key), "--force").returncode == 0

    ran = icn("cert", "self-sign", "--key", str(ca_key), "--identity", "/org/ca", "--validity",
              "365days", "--out", str(ca_cert))  # fmt: skip
    assert ran.returncode == 2 and "--validity" in ran.stderr and "unknown time unit" in ran.stderr
    ran = icn("cert", "self-sign", "--key", str(ca_key), "--identity", "/org/ca", "--validity",
              "1h", "--out", str(ca_cert))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    ran = icn("cert", "self-sign", "--key", str(ca_key), "--identity", "/org/ca", "--out",
              str(ca_cert))  # fmt: skip
    assert ran.returncode == 1 and "--out" in ran.stderr and "--force" in ran.stderr

    out = tmp_path / "m.cert"
    issue = ["cert", "issue", "--key", str(other_key), "--identity", "/org/lab/m",
             "--issuer-cert", str(ca_cert), "--out", str(out)]  # fmt: skip
    ran = icn(*issue, "--issuer-key", str(other_key))
    assert ran.returncode == 1 and "--issuer-key" in ran.stderr and "matching pair" in ran.stderr
    assert not out.exists()
    # 90d (the default) outlasts the issuer's hour: clipped to it, and said so
    ran = icn(*issue, "--issuer-key", str(ca_key))
    assert ran.returncode == 0 and "clipped" in ran.stderr, ran.stderr
    assert certs.load(out).not_after == certs.load(ca_cert).not_after
    assert certs.load(out).not_after <= time.time() + 3601
    # a public key (base64) is enough for the subject
    pub = base64.b64encode(Identity.load(other_key).public_bytes).decode()
    ran = icn(*issue[:2], "--key", pub, *issue[4:-1], str(tmp_path / "p.cert"), "--issuer-key",
              str(ca_key))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    ran = icn(*issue[:2], "--key", "nope", *issue[4:-1], str(tmp_path / "q.cert"), "--issuer-key",
              str(ca_key))  # fmt: skip
    assert ran.returncode == 2 and "--key" in ran.stderr

    junk = tmp_path / "junk.cert"
    junk.write_text("hello")
    ran = icn("cert", "show", str(junk))
    assert ran.returncode == 2 and "junk.cert" in ran.stderr and "ndnsec cert-dump" in ran.stderr
    ran = icn("cert", "show", str(tmp_path / "missing.cert"))
    assert ran.returncode == 2 and "cannot read certificate" in ran.stderr
