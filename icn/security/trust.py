"""The one validator: who may sign what, checked against a trust schema and a certificate chain.

Every layer that accepts a signed packet from someone it does not already share a secret with
calls :class:`Validator` (the forwarder's management for commands from non-local faces, consumers
for fetched Data, the named-function layer's authorization); none keeps its own rules.  The rules
are python-ndn's LightVerSec (LVS), compiled by python-ndn and checked by its ``Checker``, so a
schema means here what it means to a python-ndn application.

What :meth:`Validator.validate` checks, in this order, for a packet and then for each certificate
up the chain (a certificate is itself a signed packet, checked against its own signer):

1. **Signature type.**  Only public-key signatures (Ed25519, ECDSA P-256, RSA).  DigestSha256
   needs no key and HMAC a secret this validator does not hold: anyone could make the first,
   and the second proves nothing to a third party.  First, because it costs nothing.
2. **KeyLocator.**  A Name is required (which key signed).
3. **Schema.**  ``Checker.check(packet name, KeyLocator name)``: may that key sign that name?
   Before any signature is verified or certificate fetched, so a packet outside the policy
   costs a name match, and a stranger cannot make us fetch for him.
4. **Certificate.**  The one for the KeyLocator: among the trust anchors, then in a bounded LRU
   cache of certificates validated before, then ``fetch(name)`` (a Data wire, or None), parsed.
   A KeyLocator names a key (``/<id>/KEY/<key-id>``, as ndn-cxx signs) or a certificate (with
   issuer-id and version, as python-ndn's keychain signs); either finds the certificate.
5. **Signature.**  Verified with that certificate's key.
6. **Validity.**  The certificate's ValidityPeriod holds ``clock()``.
7. **Up the chain.**  A trust anchor ends it (an anchor matches by exact key name, and is the
   anchor's own public key); a cached certificate ends it too, its whole chain having been
   validated before (the cache keeps the chain's validity window and length, so expiry of an
   issuer and ``max_chain`` still apply).  Otherwise the certificate becomes the packet and the
   steps repeat.  A self-signed certificate that is not an anchor, or a loop, ends it with a
   refusal; so does a chain of more than ``max_chain`` certificates (the anchor counted).

Only certificates of a chain that reached an anchor are cached.  Refusals raise
:class:`~icn.errors.ValidationError` saying why, and count one of ``trust.refused_schema``,
``trust.refused_signature``, ``trust.refused_expired``, ``trust.refused_no_anchor``,
``trust.refused_chain_too_long``, ``trust.refused_cert_unavailable``, ``trust.refused_malformed``;
success counts ``trust.ok``.  ``trust.cache_hit`` / ``trust.cache_miss`` count lookups in the cache,
``trust.fetch`` the fetches.  :meth:`Validator.validate_cached` does the same without I/O and
raises :class:`~icn.errors.CertificateNotCached` (counted ``trust.not_cached``) where it would
have fetched.

Names in the schema: a Data is checked by its name; a v0.3 signed Interest by its name without
the ParametersSha256Digest; a v0.2 signed command (the signature in the name) by its name without
the four signature components (timestamp, nonce, SignatureInfo, SignatureValue), so one rule
covers both forms of a command; a certificate by its full name.

Example: commands under ``/localhop/nfd/rib`` signed by a key of an identity under ``/org/site``,
whose certificate the site's anchor signed::

    // a key as a KeyLocator names it, and a certificate of it
    #KEY: "KEY"/_
    #CERT: "KEY"/_/_/_
    // the site's anchor (its self-signed certificate is installed as the trust anchor)
    #site: "org"/"site"/#KEY
    #site: "org"/"site"/#CERT
    // a member's key and certificate, signed by the anchor
    #member: "org"/"site"/who/#KEY <= #site
    #member: "org"/"site"/who/#CERT <= #site
    // a command: /localhop/nfd/rib/<verb>/<ControlParameters>
    #command: "localhop"/"nfd"/"rib"/verb/params <= #member

(A rule written twice matches either name; the member's key rule carries the ``<= #site`` too so
that the anchor is the schema's only root, which python-ndn's ``lvs_validator`` requires.)
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Generator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from icn.errors import CertificateNotCached, ConfigError, DecodeError, ValidationError
from icn.security import certs
from icn.security.certs import KEY_COMPONENT, Certificate, format_time, read_signature_info
from icn.security.signed_interest import read_signed_interest
from icn.wire import tlv_types as T
from icn.wire.name import component_ends, components, to_uri
from icn.wire.packet import DataView, InterestView, parse_data, parse_interest
from icn.wire.tlv import Buffer, read_tl

_PUBLIC_KEY_TYPES = frozenset((T.SIG_ED25519, T.SIG_SHA256_WITH_ECDSA, T.SIG_SHA256_WITH_RSA))
_SIG_NAMES = {T.SIG_DIGEST_SHA256: "DigestSha256", T.SIG_HMAC_WITH_SHA256: "HMAC-SHA256"}
V02_SIGNATURE_COMPONENTS = 4

Fetch = Callable[[bytes], Awaitable[bytes | None]]
UserFn = Callable[[bytes, list[bytes]], bool]
_P = TypeVar("_P")


# ---- the schema ----------------------------------------------------------------------------


class TrustSchema:
    """A compiled LightVerSec schema: which key names may sign which packet names."""

    __slots__ = ("_checker", "source")

    def __init__(self, checker: object, source: str) -> None:
        self._checker = checker
        self.source = source

    @classmethod
    def from_text(
        cls, text: str, source: str = "<schema>", user_fns: dict[str, UserFn] | None = None
    ) -> TrustSchema:
        """Compile LVS ``text``; ConfigError naming ``source``, the line and the fix."""
        import lark
        from ndn.app_support.light_versec import (
            DEFAULT_USER_FNS,
            Checker,
            LvsModelError,
            SemanticError,
            compile_lvs,
        )

        try:
            model = compile_lvs(text)
            checker = Checker(model, {**DEFAULT_USER_FNS, **(user_fns or {})})
        except lark.UnexpectedInput as exc:
            raise ConfigError(_syntax_message(source, text, exc)) from None
        except (SemanticError, LvsModelError) as exc:
            raise ConfigError(_semantic_message(source, text, str(exc))) from None
        if not checker.validate_user_fns():
            missing = sorted(checker._model_fns - checker.user_fns.keys())
            raise ConfigError(
                f"{source}: the schema calls undefined function(s) {', '.join(missing)}; "
                "LightVerSec defines $eq and $eq_type"
            )
        return cls(checker, source)

    @classmethod
    def load(cls, path: str | Path, user_fns: dict[str, UserFn] | None = None) -> TrustSchema:
        """Compile the LVS file at ``path``; ConfigError naming the file, line and fix."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise ConfigError(f"cannot read trust schema {path}: {why}") from None
        return cls.from_text(text, str(path), user_fns)

    def check(self, pkt_name: bytes, key_name: bytes) -> bool:
        """May the key (or certificate) named ``key_name`` sign a packet named ``pkt_name``?"""
        if not pkt_name or not key_name:
            return False
        ok: bool = self._checker.check(components(pkt_name), components(key_name))  # type: ignore[attr-defined]
        return ok

    def rules_of(self, name: bytes) -> list[str]:
        """The schema's rules that match ``name`` (for messages and tools)."""
        if not name:
            return []
        found: list[str] = []
        for rules, _ in self._checker.match(components(name)):  # type: ignore[attr-defined]
            found += [r for r in rules if r not in found]
        return found


def _syntax_message(source: str, text: str, exc: Exception) -> str:
    line = getattr(exc, "line", -1)
    column = getattr(exc, "column", -1)
    where = f"{source}:{line}:{column}" if line and line > 0 else f"{source}: at the end"
    token = getattr(exc, "token", None)
    expected = getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ()
    what = f"unexpected {str(token)!r}" if token is not None else "syntax error"
    if getattr(exc, "char", None) is not None:
        what = f"unexpected character {exc.char!r}"  # type: ignore[attr-defined]
    hint = ""
    if expected:
        hint = f"; expected one of {', '.join(sorted(str(e) for e in expected)[:8])}"
    context = ""
    if line and line > 0:
        context = f"\n  {text.splitlines()[line - 1].strip()}"
    return (
        f'{where}: {what} in the trust schema{hint} (a rule is `#name: "comp"/pattern '
        f'& {{pattern: "value"}} <= #signer`){context}'
    )


def _semantic_message(source: str, text: str, message: str) -> str:
    idents = re.findall(r"#\w+", message)
    lineno = None
    for ident in idents:
        pattern = re.compile(rf"{re.escape(ident)}(?!\w)")
        hits = [i for i, ln in enumerate(text.splitlines(), 1) if pattern.search(ln)]
        # the use of an identifier, rather than its definition, is where the fix goes
        uses = [i for i in hits if not text.splitlines()[i - 1].lstrip().startswith(ident)]
        if hits:
            lineno = (uses or hits)[0]
            break
    where = f"{source}:{lineno}" if lineno is not None else source
    return (
        f"{where}: {message}; define every rule a rule refers to (`#name: ...`), and let no rule "
        "sign itself through a loop"
    )


# ---- signed packets ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SignedPacket:
    """What a validator needs of a signed packet: the name the schema checks, the signature's
    type, the KeyLocator Name (None if absent), the signed portion and the SignatureValue.

    The constructors read the layouts of the packet format; the plain constructor takes the
    pieces from a caller that has read them already."""

    name: bytes
    sig_type: int
    key_locator: bytes | None
    signed: Buffer
    signature: bytes
    kind: str = "packet"

    @classmethod
    def of_data(cls, data: bytes | DataView) -> SignedPacket:
        """A Data packet's signature; ValidationError if it is malformed or unsigned."""
        try:
            dv = data if isinstance(data, DataView) and data.sig_value_start >= 0 else None
            if dv is None:
                dv = parse_data(data.wire if isinstance(data, DataView) else bytes(data))
            if dv.sig_info_start < 0:
                raise ValidationError("Data is not signed (no SignatureInfo)")
            wire = dv.wire
            info = read_signature_info(wire, dv.sig_info_start, dv.sig_info_end)
            start = read_tl(wire, 0, len(wire))[1]
        except DecodeError as exc:
            raise ValidationError(f"malformed Data: {exc}") from None
        return cls(
            dv.name,
            info.sig_type,
            info.key_locator,
            memoryview(wire)[start : dv.sig_info_end],
            bytes(wire[dv.sig_value_start : dv.sig_value_end]),
            "Data",
        )

    @classmethod
    def of_interest(cls, interest: bytes | InterestView) -> SignedPacket:
        """A v0.3 signed Interest's signature (its ParametersSha256Digest checked); the schema
        sees the name without that digest.  ValidationError if it is not one."""
        try:
            iv = interest if isinstance(interest, InterestView) else parse_interest(interest)
            si = read_signed_interest(iv)
        except DecodeError as exc:
            raise ValidationError(f"malformed signed Interest: {exc}") from None
        return cls(
            si.name_part,
            si.fields.sig_type,
            bytes(si.fields.key_name) if si.fields.key_name is not None else None,
            si.name_part + bytes(si.block_part),
            si.value,
            "Interest",
        )

    @classmethod
    def of_command_v02(
        cls, signed: bytes, sig_type: int, key_locator: bytes | None, signature: bytes
    ) -> SignedPacket:
        """A v0.2 signed command (``.../<timestamp>/<nonce>/<SignatureInfo>/<SignatureValue>``)
        from its pieces: ``signed`` is the name's component TLVs before the SignatureValue
        component (the signed portion, as forwarder/mgmt/command_auth.py keeps it).  The schema
        sees the name without the timestamp, nonce and SignatureInfo."""
        try:
            ends = component_ends(signed)
        except DecodeError as exc:
            raise ValidationError(f"malformed command name: {exc}") from None
        if len(ends) < V02_SIGNATURE_COMPONENTS:
            raise ValidationError("a v0.2 signed command needs timestamp, nonce and SignatureInfo")
        name = signed[: ends[-4]] if len(ends) > 3 else b""
        return cls(name, sig_type, key_locator, signed, signature, "command")

    @classmethod
    def of_signed_name(cls, name: bytes) -> SignedPacket:
        """A v0.2 signed command from its whole Interest name (the signature in the name)."""
        try:
            ends = component_ends(name)
            if len(ends) < V02_SIGNATURE_COMPONENTS + 1:
                raise DecodeError("the name is too short for a v0.2 signed command")
            comps = [name[s:e] for s, e in zip([0, *ends[:-1]], ends, strict=True)]
            info = _single(_generic_value(comps[-2]), T.SIGNATURE_INFO)
            value = _single(_generic_value(comps[-1]), T.SIGNATURE_VALUE)
            sig = read_signature_info(info, 0, len(info))
        except DecodeError as exc:
            raise ValidationError(f"malformed v0.2 signed command: {exc}") from None
        return cls.of_command_v02(name[: ends[-2]], sig.sig_type, sig.key_locator, value)

    @classmethod
    def of_certificate(cls, cert: Certificate) -> SignedPacket:
        return cls(
            cert.name, cert.sig_type, cert.signer_key_name, cert.signed, cert.signature,
            "certificate",
        )  # fmt: skip


def _generic_value(comp: bytes) -> bytes:
    typ, vstart, vend = read_tl(comp, 0, len(comp))
    if typ != T.COMP_GENERIC:
        raise DecodeError("signature components must be GenericNameComponents")
    return comp[vstart:vend]


def _single(buf: bytes, expect: int) -> bytes:
    typ, vstart, vend = read_tl(buf, 0, len(buf))
    if typ != expect or vend != len(buf):
        raise DecodeError(f"expected one TLV of type {expect}")
    return buf[vstart:vend]


def split_locator(locator: bytes) -> tuple[bytes, bytes | None]:
    """(key name, certificate name or None) of a KeyLocator naming a key or a certificate."""
    try:
        ends = component_ends(locator)
    except DecodeError:
        return locator, None
    starts = [0, *ends[:-1]]
    n = len(ends)
    if n >= 2 and locator[starts[-2] : ends[-2]] == KEY_COMPONENT:
        return locator, None
    if n >= 4 and locator[starts[-4] : ends[-4]] == KEY_COMPONENT:
        return locator[: ends[-3]], locator
    return locator, None


# ---- the validator -------------------------------------------------------------------------


class _Refused(Exception):
    def __init__(self, counter: str, message: str) -> None:
        super().__init__(message)
        self.counter = counter


@dataclass(frozen=True, slots=True)
class _Trusted:
    """A certificate whose chain reached an anchor, with the chain's validity and length."""

    cert: Certificate
    not_before: int
    not_after: int
    depth: int  # certificates from this one to the anchor, both counted


@dataclass(frozen=True, slots=True)
class _Need:
    key_name: bytes
    cert_name: bytes | None


class Validator:
    """Validates signed packets against a :class:`TrustSchema` and trust anchors (see the
    module's docstring for what is checked, in what order, and why).

    ``fetch(name)`` returns the certificate Data for a KeyLocator name (express it as a
    CanBePrefix Interest) or None; without it only anchors and cached certificates are used.
    ``clock()`` gives the time in epoch seconds.  ``cache_entries`` bounds the certificates kept
    (LRU), ``max_chain`` the certificates of a chain, the anchor counted."""

    def __init__(
        self,
        schema: TrustSchema,
        anchors: Iterable[Certificate],
        *,
        fetch: Fetch | None = None,
        clock: Callable[[], float] = time.time,
        cache_entries: int = 256,
        max_chain: int = 5,
        counters: Counter[str] | None = None,
    ) -> None:
        if max_chain < 1:
            raise ConfigError(f"max_chain must be at least 1 (the anchor), got {max_chain}")
        if cache_entries < 0:
            raise ConfigError(f"cache_entries cannot be negative, got {cache_entries}")
        self.schema = schema
        self._fetch = fetch
        self._clock = clock
        self.cache_entries = cache_entries
        self.max_chain = max_chain
        self.counters: Counter[str] = counters if counters is not None else Counter()
        self._anchors: dict[bytes, Certificate] = {}
        for anchor in anchors:
            if anchor.self_signed:
                try:
                    anchor.verify(anchor.sig_type, anchor.signed, anchor.signature)
                except ValidationError as exc:
                    raise ConfigError(
                        f"trust anchor {anchor.uri()} is not properly self-signed: {exc}"
                    ) from None
            other = self._anchors.get(anchor.key_name)
            if other is not None and other.public_key != anchor.public_key:
                raise ConfigError(
                    f"two trust anchors name the key {to_uri(anchor.key_name)} with different "
                    "public keys; remove one"
                )
            self._anchors[anchor.key_name] = anchor
        self._cache: OrderedDict[bytes, _Trusted] = OrderedDict()

    @property
    def anchors(self) -> list[Certificate]:
        return list(self._anchors.values())

    def cached(self) -> list[Certificate]:
        """The certificates in the cache, least recently used first."""
        return [t.cert for t in self._cache.values()]

    # ---- entry points --------------------------------------------------------------------

    async def validate(self, pkt: SignedPacket) -> Certificate:
        """The certificate of the key that signed ``pkt``, once the whole chain up to a trust
        anchor checks out; else ValidationError saying why (and counted)."""
        walk = self._walk(pkt)
        try:
            need = next(walk)
            while True:
                need = walk.send(await self._fetch_cert(need))
        except StopIteration as done:
            self.counters["trust.ok"] += 1
            return done.value  # type: ignore[no-any-return]
        except _Refused as exc:
            self.counters[exc.counter] += 1
            raise ValidationError(str(exc)) from None
        finally:
            walk.close()

    def validate_cached(self, pkt: SignedPacket) -> Certificate:
        """:meth:`validate` without I/O: CertificateNotCached where it would fetch."""
        walk = self._walk(pkt)
        try:
            need = next(walk)
        except StopIteration as done:
            self.counters["trust.ok"] += 1
            return done.value  # type: ignore[no-any-return]
        except _Refused as exc:
            self.counters[exc.counter] += 1
            raise ValidationError(str(exc)) from None
        walk.close()
        self.counters["trust.not_cached"] += 1
        raise CertificateNotCached(
            f"the certificate of {to_uri(need.cert_name or need.key_name)} is not cached"
        )

    async def validate_data(self, data: bytes | DataView) -> Certificate:
        """:meth:`validate` of a Data packet; a malformed one is refused and counted."""
        return await self.validate(self._read(SignedPacket.of_data, data))

    async def validate_interest(self, interest: bytes | InterestView) -> Certificate:
        """:meth:`validate` of a v0.3 signed Interest; a malformed one is refused and counted."""
        return await self.validate(self._read(SignedPacket.of_interest, interest))

    def _read(self, read: Callable[[_P], SignedPacket], packet: _P) -> SignedPacket:
        try:
            return read(packet)
        except ValidationError:
            self.counters["trust.refused_malformed"] += 1
            raise

    # ---- the chain -----------------------------------------------------------------------

    def _walk(self, pkt: SignedPacket) -> Generator[_Need, Certificate, Certificate]:
        now = self._clock()
        chain: list[Certificate] = []  # certificates checked here, leaf first, not yet trusted
        leaf: Certificate | None = None
        seen: set[bytes] = set()
        current = pkt
        while True:
            what = f"{current.kind} {to_uri(current.name) if current.name else '/'}"
            if current.sig_type not in _PUBLIC_KEY_TYPES:
                kind = _SIG_NAMES.get(current.sig_type, f"type {current.sig_type}")
                raise _Refused(
                    "trust.refused_signature",
                    f"{what}: a {kind} signature is never accepted (it names no certified key)",
                )
            locator = current.key_locator
            if not locator:
                raise _Refused("trust.refused_malformed", f"{what}: no KeyLocator name")
            if not self.schema.check(current.name, locator):
                raise _Refused(
                    "trust.refused_schema",
                    f"{what} may not be signed by {to_uri(locator)} under the trust schema "
                    f"{self.schema.source}",
                )
            key_name, cert_name = split_locator(locator)
            trusted: _Trusted | None = None
            cert = self._anchors.get(key_name)
            is_anchor = cert is not None and (cert_name is None or cert.name == cert_name)
            if not is_anchor:
                trusted = self._cache.get(key_name)
                if trusted is not None and (cert_name is None or trusted.cert.name == cert_name):
                    self.counters["trust.cache_hit"] += 1
                    self._cache.move_to_end(key_name)
                    cert = trusted.cert
                else:
                    self.counters["trust.cache_miss"] += 1
                    trusted = None
                    cert = yield _Need(key_name, cert_name)
            assert cert is not None
            try:
                cert.verify(current.sig_type, current.signed, current.signature)
            except ValidationError as exc:
                raise _Refused(
                    "trust.refused_signature",
                    f"{what}: the signature by {to_uri(key_name)} does not verify ({exc})",
                ) from None
            if not cert.valid_at(now):
                raise _Refused("trust.refused_expired", _expired(cert, now))
            if leaf is None:
                leaf = cert
            if is_anchor:
                self._remember(chain, cert.not_before, cert.not_after, 1)
                return leaf
            if trusted is not None:
                if not trusted.not_before <= now <= trusted.not_after:
                    raise _Refused(
                        "trust.refused_expired",
                        f"an issuer of {cert.uri()} is not valid at {format_time(now)} (the "
                        f"chain holds from {format_time(trusted.not_before)} to "
                        f"{format_time(trusted.not_after)} UTC)",
                    )
                if len(chain) + trusted.depth > self.max_chain:
                    raise _Refused("trust.refused_chain_too_long", self._too_long(pkt))
                self._remember(chain, trusted.not_before, trusted.not_after, trusted.depth)
                return leaf
            if cert.self_signed or cert.key_name in seen:
                why = "self-signed" if cert.self_signed else "in a loop of certificates"
                raise _Refused(
                    "trust.refused_no_anchor",
                    f"{cert.uri()} is {why} and not a trust anchor: the chain of {what} ends "
                    "without reaching one",
                )
            seen.add(cert.key_name)
            chain.append(cert)
            if len(chain) + 1 > self.max_chain:
                raise _Refused("trust.refused_chain_too_long", self._too_long(pkt))
            current = SignedPacket.of_certificate(cert)

    def _too_long(self, pkt: SignedPacket) -> str:
        return (
            f"{pkt.kind} {to_uri(pkt.name)}: the certificate chain is longer than "
            f"{self.max_chain} (max_chain) before reaching a trust anchor"
        )

    def _remember(
        self, chain: list[Certificate], not_before: int, not_after: int, depth: int
    ) -> None:
        """Cache the certificates of a chain that reached an anchor, top down."""
        if not self.cache_entries:
            return
        for cert in reversed(chain):
            not_before = max(not_before, cert.not_before)
            not_after = min(not_after, cert.not_after)
            depth += 1
            self._cache[cert.key_name] = _Trusted(cert, not_before, not_after, depth)
            self._cache.move_to_end(cert.key_name)
        while len(self._cache) > self.cache_entries:
            self._cache.popitem(last=False)

    async def _fetch_cert(self, need: _Need) -> Certificate:
        key = to_uri(need.key_name)
        if self._fetch is None:
            raise _Refused(
                "trust.refused_cert_unavailable",
                f"no certificate for {key}: not a trust anchor, not cached, and this validator "
                "does not fetch",
            )
        self.counters["trust.fetch"] += 1
        try:
            wire = await self._fetch(need.cert_name or need.key_name)
        except Exception as exc:  # the fetcher's failure is a refusal, never a crash
            raise _Refused(
                "trust.refused_cert_unavailable", f"fetching the certificate of {key} failed: {exc}"
            ) from None
        if wire is None:
            raise _Refused("trust.refused_cert_unavailable", f"no certificate of {key} answered")
        try:
            cert = certs.parse(wire)
        except ValidationError as exc:
            raise _Refused(
                "trust.refused_malformed", f"the certificate fetched for {key}: {exc}"
            ) from None
        if cert.key_name != need.key_name or (need.cert_name and cert.name != need.cert_name):
            raise _Refused(
                "trust.refused_cert_unavailable",
                f"the Data fetched for {key} is {cert.uri()}, the certificate of another key",
            )
        return cert


def _expired(cert: Certificate, now: float) -> str:
    state = "expired" if now > cert.not_after else "not yet valid"
    return (
        f"certificate {cert.uri()} is {state}: valid from {format_time(cert.not_before)} to "
        f"{format_time(cert.not_after)} UTC, now is {format_time(now)}"
    )


# ---- trust anchors on disk -----------------------------------------------------------------


def default_anchor_dir() -> Path:
    """``$XDG_CONFIG_HOME/icn/anchors``, or ``~/.config/icn/anchors``."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "icn" / "anchors"


def load_anchors(directory: str | Path) -> list[Certificate]:
    """Every certificate file in ``directory`` (hidden files skipped), in name order;
    ConfigError naming the directory or the bad file."""
    directory = Path(directory)
    try:
        entries = sorted(p for p in directory.iterdir() if not p.name.startswith("."))
    except OSError as exc:
        raise ConfigError(
            f"cannot read trust-anchor directory {directory}: {exc.strerror or exc}; install an "
            "anchor with `icn cert install-anchor CERT --dir DIR`"
        ) from None
    return [certs.load(p) for p in entries if p.is_file()]


def anchors_from(paths: Iterable[str | Path]) -> list[Certificate]:
    """Trust anchors from certificate files and directories of them (each path either), as the
    forwarder's ``localhop_security.anchors`` and ``icn serve --anchor`` name them; ConfigError
    naming the path that is neither."""
    found: list[Certificate] = []
    for path in paths:
        p = Path(path)
        if p.is_dir():
            found += load_anchors(p)
        elif p.is_file():
            found.append(certs.load(p))
        else:
            raise ConfigError(
                f"trust anchor {p}: no such file or directory (make one with icn cert self-sign)"
            )
    if not found:
        raise ConfigError("no trust anchor found in " + ", ".join(str(p) for p in paths))
    return found
