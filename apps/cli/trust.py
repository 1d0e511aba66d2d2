"""``icn key`` and ``icn cert``: Ed25519 identities, NDN v2 certificates and trust anchors.

A key file is an Ed25519 PKCS#8 PEM, 0600 (:class:`icn.security.keys.Identity`); a certificate
file is base64 of the certificate's wire, as ``ndnsec cert-dump`` writes
(:mod:`icn.security.certs`).  Durations take the units of :func:`icn.units.parse_duration`
(``us``, ``ms``, ``s``, ``m``, ``h``, ``d``).

``icn key`` has a verb for each thing it does (``generate``, ``show``, ``list``): showing a key
never makes one, so a mistyped path is an error, not a new identity.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from apps.cli.common import EXIT_FAILED, EXIT_USAGE, JsonOpt, emit, fail, print_fields, print_table
from apps.cli.options import PANEL_IDENTITIES, duration, duration_option
from icn.errors import ConfigError, ValidationError
from icn.security import certs
from icn.security.certs import Certificate
from icn.security.keys import Identity, load_public_key
from icn.security.trust import default_anchor_dir
from icn.units import format_duration
from icn.wire.name import from_uri, to_uri

TRUST_EXIT_HELP = (
    "Exit codes: 0 success; 1 refused (the file exists, an issuer mismatch); 2 bad argument."
)

key_app = typer.Typer(
    no_args_is_help=True, help="Ed25519 identities (keys) in files: generate, show, list."
)
cert_app = typer.Typer(
    no_args_is_help=True, help="NDN certificates: self-sign, issue, show, export, trust anchors."
)


def _load_identity(path: Path, option: str) -> Identity:
    try:
        return Identity.load(path)
    except ConfigError as exc:
        fail(f"{option}: {exc}", EXIT_USAGE)


def _load_cert(path: Path, option: str) -> Certificate:
    try:
        return certs.load(path)
    except ConfigError as exc:
        fail(
            f"{option}: {exc}; give a file written by `icn cert` or `ndnsec cert-dump`", EXIT_USAGE
        )


def _identity_name(uri: str) -> bytes:
    try:
        name = from_uri(uri)
    except ConfigError as exc:
        fail(f"--identity: {exc}", EXIT_USAGE)
    if not name:
        fail("--identity: give a name with at least one component, e.g. /org/ca", EXIT_USAGE)
    return name


def _write_cert(cert: Certificate, out: Path, force: bool) -> None:
    if out.exists() and not force:
        fail(f"--out: {out} exists; remove it or pass --force to replace it", EXIT_FAILED)
    try:
        certs.save(cert, out)
    except ConfigError as exc:
        fail(f"--out: {exc}", EXIT_USAGE)


def _now() -> float:
    return time.time()


# ---- icn key ---------------------------------------------------------------------------------


KeyFileArg = Annotated[
    Path | None,
    typer.Argument(
        help="key file (default: $ICN_IDENTITY, else $XDG_CONFIG_HOME/icn/id_ed25519)",
        show_default=False,
    ),
]


def _key_file(path: Path | None) -> Path:
    """FILE, else the file ``icn serve`` and ``icn call`` use: $ICN_IDENTITY or the default."""
    from compute.rmi.identity import default_key_path, identity_file

    return path or identity_file() or default_key_path()


@key_app.command("generate", epilog=TRUST_EXIT_HELP)
def key_generate(
    path: KeyFileArg = None,
    force: Annotated[bool, typer.Option(help="replace an existing file")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Make a new Ed25519 key in FILE (0600); refuses to overwrite one unless --force."""
    target = _key_file(path)
    if target.exists() and not force:
        fail(
            f"{target} exists; pass --force to replace it (its certificates stop matching)",
            EXIT_FAILED,
        )
    identity = Identity.generate()
    try:
        identity.save(target)
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    emit(as_json, _key_fields(identity, target), f"{identity.fingerprint}  {target}")


def _key_fields(identity: Identity, path: Path) -> dict[str, Any]:
    import base64

    return {
        "file": str(path),
        "fingerprint": identity.fingerprint,
        "public_key": base64.b64encode(identity.public_bytes).decode(),
        "key_name": to_uri(identity.key_name),
    }


@key_app.command("show", epilog=TRUST_EXIT_HELP)
def key_show(path: KeyFileArg = None, as_json: JsonOpt = False) -> None:
    """Print a key's fingerprint (what servers list in authorized keys) and its file.

    With --json its public key (base64) and key name too.  A missing file is an error: make
    one with `icn key generate`."""
    target = _key_file(path)
    if not target.exists():
        fail(f"no key file {target}; make one with `icn key generate {target}`", EXIT_USAGE)
    identity = _load_identity(target, "FILE")
    emit(as_json, _key_fields(identity, target), f"{identity.fingerprint}  {target}")


def _is_key_file(path: Path) -> bool:
    """A PEM private key, by its first line (other files in the directory are not keys)."""
    try:
        with path.open("rb") as f:
            return f.read(40).startswith(b"-----BEGIN PRIVATE KEY-----")
    except OSError:
        return False


@key_app.command("list", epilog=TRUST_EXIT_HELP)
def key_list(
    directory: Annotated[
        Path | None,
        typer.Argument(
            help="directory to look in (default: $XDG_CONFIG_HOME/icn, where the default key is)",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the key files in a directory with their fingerprints.

    A key file that cannot be used (readable by others, damaged) is listed with the reason."""
    from compute.rmi.identity import default_key_path

    where = directory or default_key_path().parent
    if not where.is_dir():
        fail(f"{where} is not a directory; give one with key files", EXIT_USAGE)
    rows: list[dict[str, Any]] = []
    for path in sorted(p for p in where.iterdir() if p.is_file() and _is_key_file(p)):
        try:
            rows.append(_key_fields(Identity.load(path), path))
        except ConfigError as exc:
            rows.append({"file": str(path), "fingerprint": None, "error": str(exc)})

    def table() -> None:
        if not rows:
            typer.echo(f"no key files in {where}; make one with `icn key generate`")
            return
        cells = [(r["fingerprint"] or f"unusable: {r['error']}", r["file"]) for r in rows]
        print_table(None, ["fingerprint", "file"], cells)

    emit(as_json, rows, table)


# ---- icn cert --------------------------------------------------------------------------------

VALIDITY_HELP = "how long the certificate holds, e.g. 365d, 12h"


@cert_app.command("self-sign", epilog=TRUST_EXIT_HELP)
def cert_self_sign(
    key: Annotated[Path, typer.Option(help="the key file (icn key generate)")],
    identity: Annotated[str, typer.Option(help="the identity name, e.g. /org/ca")],
    out: Annotated[Path, typer.Option(help="certificate file to write")],
    validity: Annotated[float, duration_option("--validity", help=VALIDITY_HELP)] = duration(
        "365d"
    ),
    force: Annotated[bool, typer.Option(help="replace an existing --out file")] = False,
) -> None:
    """A self-signed certificate (a trust anchor) for KEY under IDENTITY."""
    seconds = validity
    if seconds <= 0:
        fail("--validity: must be more than 0, e.g. 365d", EXIT_USAGE)
    ident = _load_identity(key, "--key")
    cert = certs.self_signed(ident, _identity_name(identity), seconds, _now())
    _write_cert(cert, out, force)
    typer.echo(f"{cert.uri()}  {out}")


def _subject_key(value: str) -> bytes:
    """The public key of --key: a key file (private PEM, as `icn key generate` writes), or a public
    key as base64 / hex, inline or in a file."""
    path = Path(value)
    if path.is_file():
        raw = path.read_bytes()
        if b"PRIVATE KEY" in raw:
            return _load_identity(path, "--key").public_bytes
        try:
            return load_public_key(raw)
        except ValidationError:
            fail(
                f"--key: {path} is neither a key file (icn key generate) nor a public key "
                "(base64 or 64 hex digits of an Ed25519 key)",
                EXIT_USAGE,
            )
    try:
        return load_public_key(value)
    except ValidationError as exc:
        fail(f"--key: no such file, and {exc}", EXIT_USAGE)


@cert_app.command("issue", epilog=TRUST_EXIT_HELP)
def cert_issue(
    key: Annotated[str, typer.Option(help="the subject's key file, or its public key")],
    identity: Annotated[str, typer.Option(help="the subject's identity, e.g. /org/lab/alice")],
    issuer_key: Annotated[Path, typer.Option(help="the issuer's key file")],
    issuer_cert: Annotated[Path, typer.Option(help="the issuer's certificate")],
    out: Annotated[Path, typer.Option(help="certificate file to write")],
    validity: Annotated[float, duration_option("--validity", help=VALIDITY_HELP)] = duration("90d"),
    issuer_id: Annotated[str, typer.Option(help="the issuer-id name component")] = "NA",
    force: Annotated[bool, typer.Option(help="replace an existing --out file")] = False,
) -> None:
    """A certificate for the subject's key under IDENTITY, signed by the issuer.

    Refused when the issuer key is not the one the issuer certificate certifies, or the
    issuer certificate is not valid now.  A validity that would outlast the issuer's
    certificate is clipped to its end (said on stderr): a validator refuses a chain past the
    end of any of its certificates anyway."""
    seconds = validity
    if seconds <= 0:
        fail("--validity: must be more than 0, e.g. 90d", EXIT_USAGE)
    subject = _subject_key(key)
    issuer = _load_identity(issuer_key, "--issuer-key")
    icert = _load_cert(issuer_cert, "--issuer-cert")
    if icert.public_key != issuer.public_bytes:
        fail(
            f"--issuer-key {issuer_key} ({issuer.fingerprint[:16]}) is not the key "
            f"--issuer-cert {issuer_cert} certifies ({icert.fingerprint[:16]}); give the "
            "matching pair",
            EXIT_FAILED,
        )
    now = _now()
    if not icert.valid_at(now):
        fail(
            f"--issuer-cert {issuer_cert} is not valid now (from "
            f"{certs.format_time(icert.not_before)} to {certs.format_time(icert.not_after)} "
            "UTC); renew it first",
            EXIT_FAILED,
        )
    not_after: float | None = None
    if now + seconds > icert.not_after:
        not_after = icert.not_after
        typer.echo(
            "note: --validity would outlast the issuer's certificate; clipped to its end, "
            f"{certs.format_time(not_after)} UTC ({format_duration(not_after - now)})",
            err=True,
        )
    cert = certs.issue(
        subject,
        _identity_name(identity),
        issuer,
        icert.key_name,
        seconds,
        now,
        issuer_id=issuer_id,
        not_after=not_after,
    )
    _write_cert(cert, out, force)
    typer.echo(f"{cert.uri()}  {out}")


def _cert_fields(cert: Certificate, now: float) -> dict[str, Any]:
    return {
        "name": cert.uri(),
        "identity": to_uri(cert.identity),
        "key_name": to_uri(cert.key_name),
        "issuer": to_uri(cert.signer_key_name) if cert.signer_key_name is not None else None,
        "issuer_id": cert.issuer_id.decode("utf-8", "replace"),
        "self_signed": cert.self_signed,
        "key_type": cert.key_type,
        "fingerprint": cert.fingerprint,
        "not_before": certs.format_time(cert.not_before),
        "not_after": certs.format_time(cert.not_after),
        "valid_now": cert.valid_at(now),
        "expired": now > cert.not_after,
    }


@cert_app.command("show", epilog=TRUST_EXIT_HELP)
def cert_show(
    path: Annotated[Path, typer.Argument(help="certificate file")],
    as_json: JsonOpt = False,
) -> None:
    """Name, identity, key, issuer, validity (and whether it has expired), fingerprint."""
    cert = _load_cert(path, "CERT")
    fields = _cert_fields(cert, _now())
    emit(as_json, fields, lambda: print_fields(None, list(fields.items())))


@cert_app.command("export", epilog=TRUST_EXIT_HELP)
def cert_export(path: Annotated[Path, typer.Argument(help="certificate file")]) -> None:
    """The certificate in base64, 64 characters a line (what ndnsec cert-install reads)."""
    cert = _load_cert(path, "CERT")
    typer.echo(certs.to_base64(cert.wire), nl=False)


@cert_app.command("install-anchor", epilog=TRUST_EXIT_HELP)
def cert_install_anchor(
    path: Annotated[Path, typer.Argument(help="certificate file to trust")],
    directory: Annotated[
        Path | None,
        typer.Option(
            "--dir",
            help="trust-anchor directory (default $XDG_CONFIG_HOME/icn/anchors or "
            "~/.config/icn/anchors)",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Copy a certificate into the trust-anchor directory validators load."""
    cert = _load_cert(path, "CERT")
    target_dir = directory or default_anchor_dir()
    stem = to_uri(cert.identity).strip("/").replace("/", "_") or "root"
    target = target_dir / f"{stem}-{cert.key_id.hex()}.cert"
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        certs.save(cert, target)  # base64, whatever form the file had
    except (OSError, ConfigError) as exc:
        fail(f"--dir: cannot write into {target_dir}: {exc}", EXIT_USAGE)
    if not cert.self_signed:
        typer.echo(
            f"note: {cert.uri()} is not self-signed; it is trusted as given, without its issuer",
            err=True,
        )
    typer.echo(f"{cert.uri()}  {target}")


def register(app: typer.Typer) -> None:
    app.add_typer(key_app, name="key", rich_help_panel=PANEL_IDENTITIES)
    app.add_typer(cert_app, name="cert", rich_help_panel=PANEL_IDENTITIES)
