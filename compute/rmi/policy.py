"""Who may call a function: policies over the caller's verified public key.

A caller proves its key by signing its credential (a Data pulled by the server's first
Reflexive Interest); the policy then decides, before the arguments are even fetched, so an
unauthorized call costs the server one small exchange and no work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from icn.errors import ConfigError
from icn.security.keys import AuthorizedKeys, fingerprint_of


@dataclass(frozen=True, slots=True)
class Caller:
    """The verified identity of a call: its Ed25519 public key and that key's fingerprint."""

    public_key: bytes

    @property
    def fingerprint(self) -> str:
        return fingerprint_of(self.public_key)


Policy = Callable[[Caller], bool]
PolicySpec = str | Policy | Iterable[str]

# A fingerprint prefix shorter than this could match keys an attacker can grind for.
MIN_FINGERPRINT_CHARS = 16


def anyone(caller: Caller) -> bool:
    """Every caller whose credential verifies (its key signed it)."""
    return True


def nobody(caller: Caller) -> bool:
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
    """``"anyone"``, ``"nobody"``, ``"file:PATH"``, a list of fingerprints, or a callable."""
    if isinstance(spec, str):
        if spec == "anyone":
            return anyone
        if spec == "nobody":
            return nobody
        if spec.startswith("file:"):
            return from_file(spec[5:])
        raise ConfigError(
            f"authorize={spec!r}: use 'anyone', 'nobody', 'file:PATH', a list of key "
            "fingerprints, or a function taking a Caller"
        )
    if callable(spec):
        return spec
    return allow_keys(spec)
