"""Identities by hand, as the security guide provisions them: ``icn key generate``, ``icn cert
self-sign`` for the organisation's anchor, ``icn cert issue`` for a member; ``icn serve
--trust-schema --anchor`` serves a function authorized by namespace; ``icn call --key --cert``
is admitted, the same key without its certificate and a stranger's certified key are refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from apps.procs import Child, ProcessGroup, icn_argv
from tests.chaos.harness import CpuLoad
from tests.integration.icn_runs import run_icn

SCHEMA = """
#KEY: "KEY"/_
#CERT: "KEY"/_/_/_
#org: "org"/#KEY
#org: "org"/#CERT
#member: "org"/who/person/#KEY <= #org
#member: "org"/who/person/#CERT <= #org
"""


def icn(*args: str) -> tuple[int, str, str]:
    ran = run_icn(list(args), {})
    return ran.returncode, ran.stdout.decode(), ran.stderr.decode()


def provision(d: Path, org: str, who: str) -> tuple[Path, Path, Path, Path]:
    """An organisation's anchor and one member: (anchor cert, member key, member cert)."""
    ca_key, anchor = d / f"{org}-ca.key", d / f"{org}-ca.cert"
    key, cert = d / f"{who}.key", d / f"{who}.cert"
    for path in (ca_key, key):
        assert icn("key", "generate", str(path))[0] == 0
    code, _, err = icn("cert", "self-sign", "--key", str(ca_key), "--identity", f"/{org}",
                       "--out", str(anchor))  # fmt: skip
    assert code == 0, err
    code, _, err = icn("cert", "issue", "--key", str(key), "--identity", f"/{org}/lab/{who}",
                       "--issuer-key", str(ca_key), "--issuer-cert", str(anchor),
                       "--out", str(cert))  # fmt: skip
    assert code == 0, err
    return anchor, key, cert, ca_key


@pytest.fixture
def served(tmp_path: Path, cpu: CpuLoad) -> Iterator[tuple[str, Path]]:
    (tmp_path / "org.lvs").write_text(SCHEMA)
    anchor, *_ = provision(tmp_path, "org", "alice")
    sock = tmp_path / "fwd.sock"
    (tmp_path / "logs").mkdir()
    with ProcessGroup(tmp_path / "logs") as group:
        fwd = group.start("fwd", icn_argv("fwd", "--unix", str(sock)))
        fwd.wait_for("forwarder ready", stream="stderr", timeout=cpu.budget(15))
        uri = f"unix://{sock}"
        argv = icn_argv("serve", "tests.integration.rmi.lab_funcs", "--prefix", "/lab",
                        "--trust-schema", str(tmp_path / "org.lvs"), "--anchor", str(anchor),
                        "--transport", uri)  # fmt: skip
        server: Child = group.start("server", argv)
        server.wait_for("rmi server ready", stream="stdout", timeout=cpu.budget(15))
        yield uri, tmp_path


def test_a_certified_member_calls_and_others_are_refused(served: tuple[str, Path]) -> None:
    uri, d = served
    key, cert = d / "alice.key", d / "alice.cert"
    code, out, err = icn("call", "/lab/greet", "alice", "--key", str(key), "--cert", str(cert),
                         "--transport", uri)  # fmt: skip
    assert code == 0 and out.strip() == "hello alice", err
    code, _, err = icn("call", "/lab/greet", "x", "--key", str(key), "--transport", uri)
    assert code == 1 and "Unauthorized" in err and "not authorized" in err, err
    # another organisation's member, named like ours: its chain reaches no anchor of ours
    _, mkey, mcert, _ = provision(d, "evil", "mallory")
    code, _, err = icn("call", "/lab/greet", "x", "--key", str(mkey), "--cert", str(mcert),
                       "--transport", uri)  # fmt: skip
    assert code == 1 and "Unauthorized" in err, err
    # a certificate of another key is refused before anything is sent
    code, _, err = icn("call", "/lab/greet", "x", "--key", str(mkey), "--cert", str(cert),
                       "--transport", uri)  # fmt: skip
    assert code == 2 and "--cert" in err and "give the key it certifies" in err, err


def test_serve_needs_both_halves_of_a_trust_policy(tmp_path: Path) -> None:
    code, _, err = icn("serve", "tests.integration.rmi.lab_funcs", "--transport", "unix:///nope")
    assert code == 2 and "validator" in err and "--trust-schema" in err, err
    (tmp_path / "s.lvs").write_text(SCHEMA)
    code, _, err = icn("serve", "tests.integration.rmi.lab_funcs", "--trust-schema",
                       str(tmp_path / "s.lvs"), "--transport", "unix:///nope")  # fmt: skip
    assert code == 2 and "--anchor CERT" in err, err
