"""Ed25519 identities: a key in a file, a Signer for the encoders, Data verification, and the list
of keys a node accepts.

A node's identity is one Ed25519 key kept in an unencrypted PKCS#8 PEM file with 0600
permissions (openssl reads it too).  Its Data carries SignatureType 5 and a KeyLocator naming the
key ``/icn/key/<first 16 hex digits of the fingerprint>``, so a verifier can pick the public key
by name before checking the signature.  The fingerprint is the SHA-256 of the 32 raw public key
bytes, in hex; that is what an authorized-keys file lists.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
import stat
import string
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from icn.errors import ConfigError, DecodeError, ValidationError
from icn.security.hmac_signer import HmacSigner
from icn.wire import tlv_types as T
from icn.wire.name import component_ends, from_uri, generic, to_uri
from icn.wire.packet import DataView, parse_data
from icn.wire.tlv import encode_nni_tlv, encode_tlv, read_nni, read_tl

KEY_NAME_PREFIX = from_uri("/icn/key")
SHORT_FINGERPRINT_LEN = 16
PUBLIC_KEY_LEN = 32
SIGNATURE_LEN = 64


def fingerprint_of(public_key: bytes) -> str:
    """Hex SHA-256 of the 32 raw public key bytes."""
    return hashlib.sha256(public_key).hexdigest()


def key_name_of(public_key: bytes) -> bytes:
    """The key name (a name value) that Ed25519 Data signed by ``public_key`` carries."""
    return KEY_NAME_PREFIX + generic(fingerprint_of(public_key)[:SHORT_FINGERPRINT_LEN])


def load_public_key(value: bytes | str) -> bytes:
    """32 raw public key bytes from raw bytes, hex (64 digits) or base64 (str or ASCII bytes).

    Raises ValidationError if ``value`` is none of these.
    """
    if isinstance(value, bytes) and len(value) == PUBLIC_KEY_LEN:
        return value
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    text = text.strip()
    raw: bytes | None = None
    try:
        if len(text) == 2 * PUBLIC_KEY_LEN:
            raw = bytes.fromhex(text)
        else:
            raw = base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        raw = None
    if raw is None or len(raw) != PUBLIC_KEY_LEN:
        raise ValidationError(
            f"not an Ed25519 public key: {text[:80]!r} (expected 32 bytes as 64 hex digits "
            "or base64)"
        )
    return raw


class Identity:
    """An Ed25519 private key and the names derived from it."""

    __slots__ = ("_key", "fingerprint", "key_name", "public_bytes")

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self._key = private_key
        self.public_bytes = private_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.fingerprint = fingerprint_of(self.public_bytes)
        self.key_name = key_name_of(self.public_bytes)

    @classmethod
    def generate(cls) -> Identity:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_private_bytes(cls, raw: bytes) -> Identity:
        """The identity of a raw 32-byte Ed25519 private key (:meth:`private_bytes`)."""
        try:
            return cls(Ed25519PrivateKey.from_private_bytes(raw))
        except ValueError as exc:
            raise ConfigError(f"not a raw Ed25519 private key: {exc}") from None

    def private_bytes(self) -> bytes:
        """The raw private key (32 bytes): for a launcher handing a process its key inline."""
        return self._key.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )

    @classmethod
    def load(cls, path: str | Path) -> Identity:
        """Read a key file written by :meth:`save`.  ConfigError if it is missing, unreadable,
        not an unencrypted Ed25519 PKCS#8 PEM key, or readable by others than its owner."""
        path = Path(path)
        try:
            with path.open("rb") as f:
                mode = os.fstat(f.fileno()).st_mode
                pem = f.read()
        except OSError as exc:
            raise ConfigError(f"cannot read identity file {path}: {exc.strerror or exc}") from None
        # as ssh does: a key others could read is a key that may have leaked
        if stat.S_IMODE(mode) & 0o077:
            raise ConfigError(
                f"identity file {path} has permissions {stat.S_IMODE(mode):04o}; "
                f"it must be private to its owner: chmod 600 {path}"
            )
        try:
            key = serialization.load_pem_private_key(pem, password=None)
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"identity file {path} is not an unencrypted PEM private key ({exc}); "
                "remove it to have a new identity created"
            ) from None
        if not isinstance(key, Ed25519PrivateKey):
            raise ConfigError(
                f"identity file {path} is not an Ed25519 key (found {type(key).__name__})"
            )
        return cls(key)

    def save(self, path: str | Path) -> None:
        """Write the key to ``path`` (mode 0600, replacing any file there); a missing parent
        directory is created with mode 0700."""
        path = Path(path)
        tmp = self._write_temp(path)
        try:
            os.replace(tmp, path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise ConfigError(f"cannot write identity file {path}: {exc.strerror or exc}") from None

    @classmethod
    def load_or_create(cls, path: str | Path) -> Identity:
        """The identity in ``path``, created first if there is none.  Two processes racing to
        create it end up with the same identity: the file appears whole, once."""
        path = Path(path)
        if path.exists():
            return cls.load(path)
        ident = cls.generate()
        tmp = ident._write_temp(path)
        try:
            os.link(tmp, path)  # unlike rename, fails if another process got there first
        except FileExistsError:
            return cls.load(path)
        except OSError as exc:
            raise ConfigError(f"cannot write identity file {path}: {exc.strerror or exc}") from None
        finally:
            tmp.unlink()
        return ident

    def _write_temp(self, path: Path) -> Path:
        """The PEM in a new 0600 file next to ``path``, complete on disk."""
        pem = self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise ConfigError(f"cannot write identity file {path}: {exc.strerror or exc}") from None
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(pem)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return tmp

    @property
    def short_fingerprint(self) -> str:
        return self.fingerprint[:SHORT_FINGERPRINT_LEN]

    def sign(self, data: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``data``."""
        return self._key.sign(data)

    def signer(self) -> Ed25519Signer:
        """A Signer for :func:`icn.wire.encode.make_data`, DataTemplate and signed Interests."""
        return Ed25519Signer(self)

    def __repr__(self) -> str:
        return f"Identity({to_uri(self.key_name)})"


class Ed25519Signer:
    """SignatureType 5 with a KeyLocator naming the identity's key (the Signer protocol)."""

    __slots__ = ("_identity", "_info")

    def __init__(self, identity: Identity) -> None:
        self._identity = identity
        self._info = encode_nni_tlv(T.SIGNATURE_TYPE, T.SIG_ED25519) + encode_tlv(
            T.KEY_LOCATOR, encode_tlv(T.NAME, identity.key_name)
        )

    def signature_info(self) -> bytes:
        return self._info

    def sign(self, signed_portion: bytes) -> bytes:
        return self._identity.sign(signed_portion)


class SignatureInfo(NamedTuple):
    """What a Data packet says about its signature: the type, and the KeyLocator's key name
    (None when there is no KeyLocator or it holds a KeyDigest)."""

    sig_type: int
    key_name: bytes | None


class _Located(NamedTuple):
    info: SignatureInfo
    signed_end: int  # the signed portion is wire[value_start:signed_end]
    value_start: int
    sig_value: bytes


def _locate(data: bytes | DataView) -> _Located:
    if isinstance(data, DataView) and data.sig_value_start >= 0:
        # parsed already (the endpoint parses every Data it receives): where the parse found
        # the signature, without reading the packet again
        wire = data.wire
        try:
            info = _read_signature_info(wire, data.sig_info_start, data.sig_info_end)
        except DecodeError as exc:
            raise ValidationError(f"malformed Data: {exc}") from None
        return _Located(
            info,
            data.sig_info_end,
            read_tl(wire, 0, len(wire))[1],
            wire[data.sig_value_start : data.sig_value_end],
        )
    wire = data.wire if isinstance(data, DataView) else data
    try:
        parse_data(wire)  # element order, lengths and the critical-type rule
        _, start, end = read_tl(wire, 0, len(wire))
        off = start
        info_range: tuple[int, int] | None = None
        while off < end:
            typ, vstart, vend = read_tl(wire, off, end)
            if typ == T.SIGNATURE_INFO:
                info_range = (vstart, vend)
            elif typ == T.SIGNATURE_VALUE and info_range is not None:
                info = _read_signature_info(wire, *info_range)
                return _Located(info, info_range[1], start, wire[vstart:vend])
            off = vend
    except DecodeError as exc:
        raise ValidationError(f"malformed Data: {exc}") from None
    raise ValidationError("Data is not signed (no SignatureInfo)")


def _read_signature_info(wire: bytes, off: int, end: int) -> SignatureInfo:
    sig_type: int | None = None
    key_name = None
    while off < end:
        typ, vstart, vend = read_tl(wire, off, end)
        if typ == T.SIGNATURE_TYPE:
            sig_type = read_nni(wire, vstart, vend)
        elif typ == T.KEY_LOCATOR:
            ltyp, lstart, lend = read_tl(wire, vstart, vend)
            if ltyp == T.NAME:
                component_ends(wire, lstart, lend)
                key_name = wire[lstart:lend]
        off = vend
    if sig_type is None:
        raise DecodeError("SignatureInfo without SignatureType")
    return SignatureInfo(sig_type, key_name)


def signature_info_of(wire: bytes) -> SignatureInfo:
    """The signature type and key name of a Data packet; ValidationError if it is malformed."""
    return _locate(wire).info


def verify_data(data: bytes | DataView, public_key: bytes) -> None:
    """Check that ``data`` (a Data packet's wire, or the packet parsed) is Ed25519-signed by
    ``public_key`` (32 raw bytes).

    Raises ValidationError if the packet is malformed, not signed with Ed25519, or the
    signature does not verify.  The KeyLocator is not compared with the key: choose the key
    by :func:`signature_info_of` first.
    """
    loc = _locate(data)
    wire = data.wire if isinstance(data, DataView) else data
    if loc.info.sig_type != T.SIG_ED25519:
        raise ValidationError(
            f"Data signature type is {loc.info.sig_type}, not Ed25519 ({T.SIG_ED25519})"
        )
    if len(loc.sig_value) != SIGNATURE_LEN:
        raise ValidationError(f"Ed25519 signature of {len(loc.sig_value)} bytes, not 64")
    try:
        key = Ed25519PublicKey.from_public_bytes(public_key)
        key.verify(loc.sig_value, memoryview(wire)[loc.value_start : loc.signed_end])
    except ValueError:
        raise ValidationError(f"not an Ed25519 public key: {len(public_key)} bytes") from None
    except InvalidSignature:
        raise ValidationError("Ed25519 signature does not verify") from None


def verify_hmac_data(
    data: bytes | DataView, signer: HmacSigner, *, other_types: bool = False
) -> bool:
    """Check that ``data`` (a Data packet's wire, or the packet parsed) is HMAC-SHA256-signed
    under ``signer``'s secret and names that secret (its KeyLocator); ValidationError if not.
    With ``other_types``, a packet with another SignatureType is returned False (unchecked)
    for the caller to judge."""
    loc = _locate(data)
    wire = data.wire if isinstance(data, DataView) else data
    if other_types and loc.info.sig_type != T.SIG_HMAC_WITH_SHA256:
        return False
    if loc.info.sig_type != T.SIG_HMAC_WITH_SHA256 or loc.info.key_name != signer.key_name:
        raise ValidationError("Data is not signed by this session's HMAC key")
    if not signer.verify_parts(loc.sig_value, memoryview(wire)[loc.value_start : loc.signed_end]):
        raise ValidationError("HMAC signature does not verify")
    return True


class AuthorizedKeys:
    """The keys a node accepts: fingerprints, and full public keys that Data can be checked
    against by key name.

    File format: one entry per line, ``#`` starts a comment.  An entry is a fingerprint (64 hex
    digits, as :attr:`Identity.fingerprint` prints it) or a public key, base64 of the 32 raw
    bytes or ``ed25519:`` followed by 64 hex digits (the prefix tells it from a fingerprint).
    """

    def __init__(self, fingerprints: Iterable[str] = (), public_keys: Iterable[bytes] = ()) -> None:
        self._keys = {key_name_of(k): k for k in public_keys}
        listed = {f.lower() for f in fingerprints}
        self.fingerprints = frozenset(listed | {fingerprint_of(k) for k in self._keys.values()})

    @classmethod
    def load(cls, path: str | Path) -> AuthorizedKeys:
        """Read an authorized-keys file; ConfigError naming the file and line on a bad entry."""
        path = Path(path)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise ConfigError(f"cannot read authorized keys {path}: {why}") from None
        fingerprints: set[str] = set()
        keys: list[bytes] = []
        for lineno, line in enumerate(lines, 1):
            entry = line.split("#", 1)[0].strip()
            if not entry:
                continue
            try:
                if entry.startswith("ed25519:"):
                    keys.append(load_public_key(entry.removeprefix("ed25519:")))
                elif len(entry) == 64 and all(c in string.hexdigits for c in entry):
                    fingerprints.add(entry)
                else:
                    keys.append(load_public_key(entry))
            except ValidationError as exc:
                raise ConfigError(
                    f"{path}:{lineno}: {exc}; an entry is a 64-hex-digit fingerprint, a base64 "
                    "public key or ed25519:<64 hex digits>"
                ) from None
        return cls(fingerprints, keys)

    def __contains__(self, fingerprint: object) -> bool:
        return isinstance(fingerprint, str) and fingerprint.lower() in self.fingerprints

    def __len__(self) -> int:
        return len(self.fingerprints)

    def allows(self, public_key: bytes) -> bool:
        return fingerprint_of(public_key) in self.fingerprints

    def public_key(self, key_name: bytes) -> bytes | None:
        """The listed public key whose key name is ``key_name`` (fingerprints alone give none)."""
        return self._keys.get(key_name)

    def verify_data(self, wire: bytes) -> bytes:
        """Verify Data against the listed key its KeyLocator names; return that public key.

        ValidationError if no listed public key has that name or :func:`verify_data` fails.
        """
        key_name = signature_info_of(wire).key_name
        key = self._keys.get(key_name) if key_name is not None else None
        if key is None:
            who = to_uri(key_name) if key_name is not None else "no key name"
            raise ValidationError(f"Data signed by {who}, which is not an authorized key")
        verify_data(wire, key)
        return key
