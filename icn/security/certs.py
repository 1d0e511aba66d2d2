"""NDN v2 certificates: encode, parse, verify, and keep in files.

A certificate is a Data packet (https://docs.named-data.net/NDN-packet-spec/current/certificate.html)
named ``/<identity>/KEY/<key-id>/<issuer-id>/<version>``, with ContentType KEY, a FreshnessPeriod
of one hour, the subject's public key as SubjectPublicKeyInfo DER in Content, and a SignatureInfo
whose KeyLocator names the issuer's key (``/<issuer-identity>/KEY/<key-id>``) and whose
ValidityPeriod (NotBefore/NotAfter, ``YYYYMMDDThhmmss`` UTC) bounds its use.  That is what ndn-cxx
writes and python-ndn's ``parse_certificate`` reads.

We issue with Ed25519 (our identities, :class:`icn.security.keys.Identity`); we parse and verify
ECDSA P-256 and RSA certificates too, so python-ndn's and ndn-cxx's default keys can be checked.
The key-id is the first 8 bytes of the SHA-256 of the raw Ed25519 key (its fingerprint), the
version the issue time in milliseconds (a VersionNameComponent, type 54, as ndn-cxx).  Nothing
here reads the clock: the issue time comes in as ``now``.

File format: base64 of the wire, 64 characters a line, as ``ndnsec cert-dump`` writes and
``ndnsec cert-install`` reads; loading takes raw TLV too.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from icn.errors import ConfigError, DecodeError, EncodeError, ValidationError
from icn.security.keys import PUBLIC_KEY_LEN, Identity, fingerprint_of
from icn.wire import tlv_types as T
from icn.wire.encode import make_data
from icn.wire.name import component_ends, generic, to_uri, version
from icn.wire.packet import parse_data
from icn.wire.tlv import Buffer, encode_nni_tlv, encode_tlv, is_critical, read_nni, read_tl

VALIDITY_PERIOD = 253
NOT_BEFORE = 254
NOT_AFTER = 255
KEY_COMPONENT = generic("KEY")
SELF_ISSUER = b"self"
DEFAULT_ISSUER = b"NA"
KEY_ID_LEN = 8
CERT_FRESHNESS_MS = 3_600_000
_TIME_FORMAT = "%Y%m%dT%H%M%S"
# the naming-conventions rev1 marker form of a version (python-ndn before 0.3 wrote it)
_VERSION_MARKER = 0xFD
_SIGNATURE_TYPES = frozenset((T.SIG_ED25519, T.SIG_SHA256_WITH_ECDSA, T.SIG_SHA256_WITH_RSA))


def key_id_of(public_key: bytes) -> bytes:
    """8 bytes naming a key: the start of its fingerprint (SHA-256 of the raw Ed25519 key, or of
    the SubjectPublicKeyInfo DER for other keys)."""
    return hashlib.sha256(public_key).digest()[:KEY_ID_LEN]


def key_name_for(identity_name: bytes, public_key: bytes) -> bytes:
    """``/<identity>/KEY/<key-id>``: the name a certificate of ``public_key`` gives the key."""
    return identity_name + KEY_COMPONENT + generic(key_id_of(public_key))


def format_time(epoch: float) -> str:
    """``YYYYMMDDThhmmss`` in UTC, as the ValidityPeriod holds it."""
    return time.strftime(_TIME_FORMAT, time.gmtime(int(epoch)))


def parse_time(text: bytes) -> int:
    """Epoch seconds of a ``YYYYMMDDThhmmss`` UTC time; ValidationError if it is not one."""
    try:
        s = text.decode("ascii")
        if len(s) != 15:
            raise ValueError
        return calendar.timegm(time.strptime(s, _TIME_FORMAT))
    except (UnicodeDecodeError, ValueError):
        raise ValidationError(
            f"ValidityPeriod time {bytes(text)[:40]!r} is not YYYYMMDDThhmmss"
        ) from None


def _public_key_of(spki: bytes) -> tuple[str, bytes, object]:
    """(key type, public key bytes, cryptography key) of SubjectPublicKeyInfo DER."""
    try:
        key = serialization.load_der_public_key(spki)
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise ValidationError(f"certificate content is not a SubjectPublicKeyInfo: {exc}") from None
    if isinstance(key, Ed25519PublicKey):
        raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return "ed25519", raw, key
    if isinstance(key, ec.EllipticCurvePublicKey):
        if not isinstance(key.curve, ec.SECP256R1):
            raise ValidationError(f"ECDSA key on {key.curve.name}, only P-256 (secp256r1) is used")
        return "ecdsa-p256", spki, key
    if isinstance(key, rsa.RSAPublicKey):
        return "rsa", spki, key
    raise ValidationError(f"unsupported public key type {type(key).__name__}")


def spki_of(public_key: bytes) -> bytes:
    """SubjectPublicKeyInfo DER of a public key given raw (32-byte Ed25519) or as SPKI DER."""
    if len(public_key) == PUBLIC_KEY_LEN:
        try:
            key = Ed25519PublicKey.from_public_bytes(public_key)
        except ValueError:
            raise ValidationError("not an Ed25519 public key") from None
        return key.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    _public_key_of(public_key)  # raises if it is not a key we can use
    return bytes(public_key)


def verify_signature(
    key_type: str, key: object, sig_type: int, signed: Buffer, signature: bytes
) -> None:
    """Check ``signature`` over ``signed`` with a key of ``key_type``; ValidationError if not."""
    expected = {"ed25519": T.SIG_ED25519, "ecdsa-p256": T.SIG_SHA256_WITH_ECDSA}.get(
        key_type, T.SIG_SHA256_WITH_RSA
    )
    if sig_type != expected:
        raise ValidationError(
            f"signature type {sig_type} cannot be made by a {key_type} key (expected {expected})"
        )
    try:
        if isinstance(key, Ed25519PublicKey):
            key.verify(signature, bytes(signed))
        elif isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(signature, bytes(signed), ec.ECDSA(hashes.SHA256()))
        elif isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, bytes(signed), padding.PKCS1v15(), hashes.SHA256())
        else:  # pragma: no cover - _public_key_of returns only these
            raise ValidationError(f"no verifier for {type(key).__name__}")
    except InvalidSignature:
        raise ValidationError(f"{key_type} signature does not verify") from None


@dataclass(frozen=True, slots=True)
class SigInfo:
    """What a Data's SignatureInfo says: type, KeyLocator name, ValidityPeriod (if any)."""

    sig_type: int
    key_locator: bytes | None
    not_before: int | None = None
    not_after: int | None = None


def read_signature_info(buf: Buffer, start: int, end: int) -> SigInfo:
    """A Data SignatureInfo value, certificate fields included; DecodeError when malformed."""
    sig_type: int | None = None
    locator: bytes | None = None
    validity: tuple[int, int] | None = None
    off = start
    while off < end:
        typ, vstart, vend = read_tl(buf, off, end)
        if sig_type is None and typ != T.SIGNATURE_TYPE:
            raise DecodeError("SignatureInfo must start with SignatureType")
        if typ == T.SIGNATURE_TYPE:
            if sig_type is not None:
                raise DecodeError("duplicate SignatureType")
            sig_type = read_nni(buf, vstart, vend)
        elif typ == T.KEY_LOCATOR:
            ltyp, lstart, lend = read_tl(buf, vstart, vend)
            if ltyp == T.NAME:
                component_ends(buf, lstart, lend)
                locator = bytes(buf[lstart:lend])
            elif ltyp != T.KEY_DIGEST:
                raise DecodeError(f"unexpected element {ltyp} in KeyLocator")
        elif typ == VALIDITY_PERIOD:
            validity = _read_validity(buf, vstart, vend)
        elif is_critical(typ):
            raise DecodeError(f"unexpected critical element {typ} in SignatureInfo")
        off = vend
    if sig_type is None:
        raise DecodeError("empty SignatureInfo")
    if validity is None:
        return SigInfo(sig_type, locator)
    return SigInfo(sig_type, locator, *validity)


def _read_validity(buf: Buffer, off: int, end: int) -> tuple[int, int]:
    times: dict[int, int] = {}
    while off < end:
        typ, vstart, vend = read_tl(buf, off, end)
        if typ in (NOT_BEFORE, NOT_AFTER) and typ not in times:
            try:
                times[typ] = parse_time(bytes(buf[vstart:vend]))
            except ValidationError as exc:
                raise DecodeError(str(exc)) from None
        elif is_critical(typ) or typ in times:
            raise DecodeError(f"unexpected element {typ} in ValidityPeriod")
        off = vend
    if NOT_BEFORE not in times or NOT_AFTER not in times:
        raise DecodeError("ValidityPeriod needs NotBefore and NotAfter")
    return times[NOT_BEFORE], times[NOT_AFTER]


@dataclass(frozen=True, slots=True)
class Certificate:
    """A parsed NDN v2 certificate.  Names are name values (component TLVs, no Name header).

    ``public_key`` is the raw 32 bytes of an Ed25519 key, or the SubjectPublicKeyInfo DER of an
    ECDSA P-256 or RSA key; ``spki`` is always the DER.  ``signed``/``signature``/``sig_type``
    are the certificate's own signature (by ``signer_key_name``), for a validator to check."""

    name: bytes
    identity: bytes
    key_name: bytes
    key_id: bytes
    issuer_id: bytes
    version: int
    key_type: str
    public_key: bytes
    spki: bytes
    not_before: int
    not_after: int
    signer_key_name: bytes | None
    sig_type: int
    signed: bytes
    signature: bytes
    wire: bytes

    def valid_at(self, now: float) -> bool:
        """True when ``now`` (epoch seconds) is inside the ValidityPeriod, both ends included."""
        return self.not_before <= now <= self.not_after

    @property
    def self_signed(self) -> bool:
        return self.signer_key_name == self.key_name

    @property
    def fingerprint(self) -> str:
        """Hex SHA-256 of the raw Ed25519 key (what :attr:`Identity.fingerprint` prints), or
        of the SubjectPublicKeyInfo DER for other keys."""
        return fingerprint_of(self.public_key)

    def verify(self, sig_type: int, signed: Buffer, signature: bytes) -> None:
        """Check a signature made by this certificate's key; ValidationError if it does not."""
        if sig_type not in _SIGNATURE_TYPES:
            raise ValidationError(f"signature type {sig_type} is not a public-key signature")
        _, _, key = _public_key_of(self.spki)
        verify_signature(self.key_type, key, sig_type, signed, signature)

    def uri(self) -> str:
        return to_uri(self.name)

    def __repr__(self) -> str:
        return f"Certificate({to_uri(self.name)})"


def _version_of(comp: bytes) -> int:
    typ, vstart, vend = read_tl(comp, 0, len(comp))
    if typ == T.COMP_VERSION:
        return read_nni(comp, vstart, vend)
    if typ == T.COMP_GENERIC and vend - vstart >= 2 and comp[vstart] == _VERSION_MARKER:
        return read_nni(comp, vstart + 1, vend)
    raise DecodeError("the last component must be a version (type 54)")


def parse(wire: Buffer) -> Certificate:
    """Read a certificate; ValidationError naming what is wrong for anything else."""
    wire = bytes(wire)
    try:
        return _parse(wire)
    except DecodeError as exc:
        raise ValidationError(f"malformed certificate: {exc}") from None


def _parse(wire: bytes) -> Certificate:
    dv = parse_data(wire)
    ends = dv.name_ends
    if len(ends) < 5:
        raise DecodeError(
            f"name {to_uri(dv.name)} is not /<identity>/KEY/<key-id>/<issuer-id>/<version>"
        )
    name = dv.name
    starts = [0, *ends[:-1]]
    comps = [name[s:e] for s, e in zip(starts, ends, strict=True)]
    if comps[-4] != KEY_COMPONENT:
        raise DecodeError(f"name {to_uri(name)} has no KEY component 4th from the end")
    if dv.content_type != T.CONTENT_KEY:
        raise DecodeError(f"ContentType is {dv.content_type}, not KEY (2)")
    if dv.content_start < 0 or dv.content_start == dv.content_end:
        raise DecodeError("no public key in Content")
    if dv.sig_info_start < 0:
        raise DecodeError("not signed")
    info = read_signature_info(wire, dv.sig_info_start, dv.sig_info_end)
    if info.not_before is None or info.not_after is None:
        raise DecodeError("SignatureInfo has no ValidityPeriod")
    spki = wire[dv.content_start : dv.content_end]
    try:
        key_type, public_key, _ = _public_key_of(spki)
    except ValidationError as exc:
        raise DecodeError(str(exc)) from None
    key_id_comp = comps[-3]
    _, kstart, kend = read_tl(key_id_comp, 0, len(key_id_comp))
    _, istart, iend = read_tl(comps[-2], 0, len(comps[-2]))
    data_start = read_tl(wire, 0, len(wire))[1]
    return Certificate(
        name=name,
        identity=name[: starts[-4]],
        key_name=name[: ends[-3]],
        key_id=key_id_comp[kstart:kend],
        issuer_id=comps[-2][istart:iend],
        version=_version_of(comps[-1]),
        key_type=key_type,
        public_key=public_key,
        spki=spki,
        not_before=info.not_before,
        not_after=info.not_after,
        signer_key_name=info.key_locator,
        sig_type=info.sig_type,
        signed=wire[data_start : dv.sig_info_end],
        signature=wire[dv.sig_value_start : dv.sig_value_end],
        wire=wire,
    )


class CertSigner:
    """Ed25519 signatures (SignatureType 5) whose KeyLocator names a certified key
    (``/<identity>/KEY/<key-id>``): the Signer protocol of :mod:`icn.wire.signer`, for Data and
    signed Interests a validator checks through the certificate chain.  (:class:`Ed25519Signer`
    names keys ``/icn/key/<fp16>`` instead, for authorized-keys files.)"""

    __slots__ = ("_identity", "_info", "key_name")

    def __init__(self, identity: Identity, key_name: bytes) -> None:
        self._identity = identity
        self.key_name = key_name
        self._info = encode_nni_tlv(T.SIGNATURE_TYPE, T.SIG_ED25519) + encode_tlv(
            T.KEY_LOCATOR, encode_tlv(T.NAME, key_name)
        )

    @classmethod
    def of(cls, identity: Identity, cert: Certificate) -> CertSigner:
        """A signer naming ``cert``'s key; ValidationError if ``identity`` holds another key."""
        if cert.public_key != identity.public_bytes:
            raise ValidationError(
                f"the key {identity.fingerprint[:16]} is not the one certified by {cert.uri()} "
                f"({cert.fingerprint[:16]})"
            )
        return cls(identity, cert.key_name)

    def signature_info(self) -> bytes:
        return self._info

    def sign(self, signed_portion: bytes) -> bytes:
        return self._identity.sign(signed_portion)


class _CertIssuer:
    """The Signer that signs a certificate: adds the ValidityPeriod to SignatureInfo."""

    def __init__(self, identity: Identity, key_name: bytes, not_before: int, not_after: int):
        validity = encode_tlv(NOT_BEFORE, format_time(not_before).encode()) + encode_tlv(
            NOT_AFTER, format_time(not_after).encode()
        )
        self._identity = identity
        self._info = CertSigner(identity, key_name).signature_info() + encode_tlv(
            VALIDITY_PERIOD, validity
        )

    def signature_info(self) -> bytes:
        return self._info

    def sign(self, signed_portion: bytes) -> bytes:
        return self._identity.sign(signed_portion)


def _issuer_component(issuer_id: bytes | str) -> bytes:
    value = issuer_id.encode() if isinstance(issuer_id, str) else issuer_id
    if not value:
        raise EncodeError("the issuer-id component cannot be empty")
    return generic(value)


def issue(
    subject_public_key: bytes,
    identity_name: bytes,
    issuer: Identity,
    issuer_key_name: bytes,
    validity: float,
    now: float,
    *,
    issuer_id: bytes | str = DEFAULT_ISSUER,
    not_after: float | None = None,
) -> Certificate:
    """A certificate for ``subject_public_key`` (raw Ed25519 bytes, or SPKI DER) under
    ``identity_name`` (a name value), signed by ``issuer`` whose key is ``issuer_key_name``.

    Valid from ``now`` for ``validity`` seconds (or until ``not_after`` if given), version
    ``now`` in milliseconds: the same arguments give the same bytes.  The key-id comes from the
    subject key (:func:`key_id_of`)."""
    if validity <= 0 and not_after is None:
        raise EncodeError(f"validity must be positive, got {validity} s")
    component_ends(identity_name)
    spki = spki_of(subject_public_key)
    _, public_key, _ = _public_key_of(spki)
    start = int(now)
    end = int(not_after) if not_after is not None else int(now + validity)
    if end < start:
        raise EncodeError("the certificate would end before it starts")
    name = (
        key_name_for(identity_name, public_key)
        + _issuer_component(issuer_id)
        + version(int(now * 1000))
    )
    wire = make_data(
        name,
        spki,
        freshness=CERT_FRESHNESS_MS,
        content_type=T.CONTENT_KEY,
        signer=_CertIssuer(issuer, issuer_key_name, start, end),
    )
    return parse(wire)


def self_signed(
    identity: Identity, identity_name: bytes, validity: float, now: float
) -> Certificate:
    """The self-signed certificate (issuer-id ``self``) of ``identity``'s key: a trust anchor."""
    return issue(
        identity.public_bytes,
        identity_name,
        identity,
        key_name_for(identity_name, identity.public_bytes),
        validity,
        now,
        issuer_id=SELF_ISSUER,
    )


# ---- files ---------------------------------------------------------------------------------


def to_base64(wire: bytes) -> str:
    """Base64 of the wire, 64 characters a line, as ndnsec writes."""
    text = base64.b64encode(wire).decode("ascii")
    return "".join(text[i : i + 64] + "\n" for i in range(0, len(text), 64))


def from_file_bytes(raw: bytes, source: str = "certificate") -> Certificate:
    """A certificate from a file's bytes: base64 (ndnsec's format) or raw TLV."""
    if raw[:1] == bytes((T.DATA,)):
        return parse(raw)
    try:
        wire = base64.b64decode(b"".join(raw.split()), validate=True)
    except (binascii.Error, ValueError):
        raise ValidationError(
            f"{source} is neither base64 (as `icn cert export` and ndnsec write) nor a TLV "
            "Data packet"
        ) from None
    return parse(wire)


def load(path: str | Path) -> Certificate:
    """Read a certificate file; ConfigError naming the file and what is wrong."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read certificate {path}: {exc.strerror or exc}") from None
    try:
        return from_file_bytes(raw, str(path))
    except ValidationError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def save(cert: Certificate, path: str | Path) -> None:
    """Write ``cert`` to ``path`` in base64 (mode 0644: a certificate is public)."""
    path = Path(path)
    try:
        path.write_text(to_base64(cert.wire), encoding="ascii")
    except OSError as exc:
        raise ConfigError(f"cannot write certificate {path}: {exc.strerror or exc}") from None
