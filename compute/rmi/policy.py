"""Who may call a function: policies over the caller's verified public key, and over its
certificate when a trust policy vouched for it.

A caller proves its key by signing its credential (a Data pulled by the server's first
Reflexive Interest); the policy then decides, before the arguments are even fetched, so an
unauthorized call costs the server one small exchange and no work.  A caller may put its NDN
certificate in the credential: a server with a validator (the project's one,
:mod:`icn.security.trust`) checks its chain up to an anchor, and only then does the
:class:`Caller` carry it, with the schema's rules its name matches: ``namespace:/org/lab`` and
``rule:#member`` policies look at those.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from icn.errors import ConfigError
from icn.security.certs import Certificate
from icn.security.keys import AuthorizedKeys, fingerprint_of
from icn.wire.name import from_uri


@dataclass(frozen=True, slots=True)
class Caller:
    """The verified identity of a call: its Ed25519 public key and that key's fingerprint, and
    the certificate of that key when the server's validator accepted its chain (with the names
    of the trust schema's rules the certificate's name matches)."""

    public_key: bytes
    certificate: Certificate | None = None
    rules: frozenset[str] = frozenset()

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the caller's public key, hex: what ``allow_keys`` lists."""
        return fingerprint_of(self.public_key)


Policy = Callable[[Caller], bool]


class CertificatePolicy:
    """A policy over the caller's validated certificate: a server using one needs a validator
    (``RmiServer(..., validator=)``), and a caller without a certificate it accepted is refused."""

    def __init__(self, check: Callable[[Certificate, frozenset[str]], bool], spec: str) -> None:
        self._check = check
        self.spec = spec

    def __call__(self, caller: Caller) -> bool:
        cert = caller.certificate
        return cert is not None and self._check(cert, caller.rules)

    def __repr__(self) -> str:
        return f"CertificatePolicy({self.spec!r})"


def in_namespace(prefix: str) -> CertificatePolicy:
    """Callers whose certificate names an identity under ``prefix`` (``/org/lab``)."""
    try:
        value = from_uri(prefix)
    except ConfigError as exc:
        raise ConfigError(f"authorize='namespace:{prefix}': {exc}") from None

    def check(cert: Certificate, rules: frozenset[str]) -> bool:
        # (whole component TLVs: a byte prefix of the identity is a prefix of its components)
        return cert.identity.startswith(value)

    return CertificatePolicy(check, f"namespace:{prefix}")


def by_rule(rule: str) -> CertificatePolicy:
    """Callers whose certificate's name matches the trust schema's rule ``rule`` (``#member``)."""
    if not rule.startswith("#") or len(rule) < 2:
        raise ConfigError(f"authorize='rule:{rule}': name a rule of the schema, e.g. rule:#member")
    return CertificatePolicy(lambda cert, rules: rule in rules, f"rule:{rule}")


PolicySpec = str | Policy | Iterable[str]

# A fingerprint prefix shorter than this could match keys an attacker can grind for.
MIN_FINGERPRINT_CHARS = 16


def anyone(caller: Caller) -> bool:
    """Every caller whose credential verifies (its key signed it)."""
    return True


def nobody(caller: Caller) -> bool:
    """The policy that refuses every caller (a function served but closed)."""
    return False


def allow_keys(fingerprints: Iterable[str]) -> Policy:
    """Callers whose key's SHA-256 fingerprint (hex, or a prefix of at least 16 hex digits) is
    in ``fingerprints``: an authorized-keys list."""
    allowed = []
    for fp in fingerprints:
        fp = fp.strip().lower()
        if len(fp) < MIN_FINGERPRINT_CHARS or any(c not in "0123456789abcdef" for c in fp):
            raise ConfigError(
                f"authorized key {fp!r}: write the key's SHA-256 fingerprint in hex "
                f"(at least {MIN_FINGERPRINT_CHARS} digits; `icn key show` prints it)"
            )
        allowed.append(fp)
    prefixes = tuple(allowed)

    def policy(caller: Caller) -> bool:
        return caller.fingerprint.startswith(prefixes)

    return policy


def from_file(path: str | Path) -> Policy:
    """Callers listed in an authorized-keys file (:class:`icn.security.keys.AuthorizedKeys` format:
    fingerprints or public keys, one per line, ``#`` comments)."""
    keys = AuthorizedKeys.load(path)

    def policy(caller: Caller) -> bool:
        return keys.allows(caller.public_key)

    return policy


def resolve_policy(spec: PolicySpec) -> Policy:
    """``"anyone"``, ``"nobody"``, ``"file:PATH"``, ``"namespace:/PREFIX"``, ``"rule:#NAME"``,
    a list of fingerprints, or a callable."""
    if isinstance(spec, str):
        if spec == "anyone":
            return anyone
        if spec == "nobody":
            return nobody
        if spec.startswith("file:"):
            return from_file(spec[5:])
        if spec.startswith("namespace:"):
            return in_namespace(spec[len("namespace:") :])
        if spec.startswith("rule:"):
            return by_rule(spec[len("rule:") :])
        raise ConfigError(
            f"authorize={spec!r}: use 'anyone', 'nobody', 'file:PATH', 'namespace:/PREFIX' or "
            "'rule:#NAME' (certificates), a list of key fingerprints, or a function taking a Caller"
        )
    if callable(spec):
        return spec
    return allow_keys(spec)
