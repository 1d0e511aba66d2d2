"""A scenario's ``trust:`` block: a certificate authority made for the run, an identity and a
certificate for each service and workload, the CA's certificate as every process's trust anchor,
and a trust schema (LightVerSec) that says which identity may sign which Data.

The launcher makes everything before the first process starts and hands each process its own
part inline in its spec (so the local, netns and Ray backends ship it alike, with the spec file
private to its owner).  In the process, :mod:`apps.scenario.entry` signs what the process
produces with its certificate, serves that certificate under its identity (``<ca>/<name>``,
which the loader adds to a service's ``announce`` so routes reach it), and gives the entry a
validator (``ctx.validator()``) that fetches a producer's certificate through the network once.

The schema, for a CA ``/quickstart`` and a service ``producer`` announcing ``/quickstart/data``::

    #KEY: "KEY"/_
    #CERT: "KEY"/_/_/_
    #ca: "quickstart"/#KEY
    #ca: "quickstart"/#CERT
    #id_producer_0: "quickstart"/"producer"/#KEY <= #ca
    #id_producer_0: "quickstart"/"producer"/#CERT <= #ca
    #data_producer_0: "quickstart"/"data"/_ <= #id_producer_0
    #data_producer_0: "quickstart"/"data"/_/_ <= #id_producer_0
    ...

A LightVerSec pattern has a fixed number of components, so a service's Data rule is written
once per depth below its prefix, up to ``MAX_DEPTH`` components: a Data deeper than that, or
under a prefix nobody announced, or signed by another service's key, is refused.
"""

from __future__ import annotations

import base64
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from icn.security import certs
from icn.security.keys import Identity
from icn.wire.name import component_ends, components, from_uri, to_uri

if TYPE_CHECKING:
    from apps.scenario.schema import Scenario

MAX_DEPTH = 10  # components a signed Data name may have below its service's prefix
VALIDITY = 7 * 86400.0  # a run's certificates: a week, from a minute before the run


def ca_name(sc: Scenario) -> str:
    """The CA's identity: the block's ``ca``, else ``/<scenario name>``."""
    assert sc.trust is not None
    return sc.trust.ca or f"/{sc.name}"


def identity_name(sc: Scenario, process: str) -> str:
    """The identity of the service or workload ``process``: ``<ca>/<process>``."""
    return ca_name(sc).rstrip("/") + "/" + process


def _literal(name: bytes) -> str:
    """A name value as LightVerSec's string components, ``"a"/"b"``."""
    out = []
    for comp in components(name):
        text = to_uri(comp)[1:]  # (percent-encoded where it must be)
        if '"' in text or "\\" in text:
            raise ValueError(f"a component LightVerSec cannot quote: {text!r}")
        out.append(f'"{text}"')
    return "/".join(out)


def schema_text(sc: Scenario) -> str:
    """The run's trust schema (module docstring)."""
    ca = _literal(from_uri(ca_name(sc)))
    lines = [
        "// made by the launcher for this run: see apps/scenario/trust.py",
        '#KEY: "KEY"/_',
        '#CERT: "KEY"/_/_/_',
        f"#ca: {ca}/#KEY",
        f"#ca: {ca}/#CERT",
    ]
    for i, proc in enumerate([*sc.services, *sc.workloads]):
        ident = _literal(from_uri(identity_name(sc, proc.name)))
        # (a rule's name is an identifier: a process's name may hold '-'; the number keeps
        # flow-gw and flow_gw apart)
        tag = f"{re.sub(r'[^A-Za-z0-9_]', '_', proc.name)}_{i}"
        rule = f"#id_{tag}"
        lines += [f"{rule}: {ident}/#KEY <= #ca", f"{rule}: {ident}/#CERT <= #ca"]
        for prefix in proc.announce:
            if prefix == identity_name(sc, proc.name):
                continue  # its certificate, covered above
            base = _literal(from_uri(prefix))
            for depth in range(1, MAX_DEPTH + 1):
                tail = "/".join(["_"] * depth)
                lines.append(f"#data_{tag}: {base}/{tail} <= {rule}")
    return "\n".join(lines) + "\n"


@dataclass
class RunTrust:
    """What the launcher made for one run."""

    anchor: certs.Certificate
    schema: str
    identities: dict[str, tuple[Identity, certs.Certificate]] = field(default_factory=dict)
    validate: bool = True

    def material(self, process: str) -> dict[str, Any]:
        """``process``'s part, for its spec: its key and certificate, the anchor, the schema."""
        key, cert = self.identities[process]
        return {
            "key": base64.b64encode(key.private_bytes()).decode(),
            "cert": certs.to_base64(cert.wire),
            "anchor": certs.to_base64(self.anchor.wire),
            "schema": self.schema,
            "validate": self.validate,
        }


def make_trust(sc: Scenario, now: float | None = None) -> RunTrust:
    """A CA, its self-signed anchor, and an identity and certificate per process."""
    assert sc.trust is not None
    start = (time.time() if now is None else now) - 60.0  # clocks of other hosts a bit behind
    ca_key = Identity.generate()
    ca = from_uri(ca_name(sc))
    component_ends(ca)
    anchor = certs.self_signed(ca_key, ca, VALIDITY, start)
    run = RunTrust(anchor, schema_text(sc), validate=sc.trust.validating)
    for proc in [*sc.services, *sc.workloads]:
        key = Identity.generate()
        cert = certs.issue(
            key.public_bytes,
            from_uri(identity_name(sc, proc.name)),
            ca_key,
            anchor.key_name,
            VALIDITY,
            start,
        )
        run.identities[proc.name] = (key, cert)
    return run


@dataclass
class ProcessTrust:
    """A process's part, read back from its spec (:meth:`RunTrust.material`)."""

    identity: Identity
    cert: certs.Certificate
    anchor: certs.Certificate
    schema: str
    validate: bool

    @classmethod
    def from_spec(cls, material: dict[str, Any]) -> ProcessTrust:
        return cls(
            Identity.from_private_bytes(base64.b64decode(material["key"])),
            certs.from_file_bytes(str(material["cert"]).encode(), "the spec's certificate"),
            certs.from_file_bytes(str(material["anchor"]).encode(), "the spec's anchor"),
            str(material["schema"]),
            bool(material.get("validate", True)),
        )
