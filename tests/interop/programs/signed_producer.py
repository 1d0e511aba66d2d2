"""appv2 producer of a signed request/response service at PREFIX.

A request is an Interest whose ApplicationParameters are JSON ``{"numbers": [...]}``, signed with
the PIB's default key (the key of the default identity in $HOME/.ndn).  The producer accepts it
only if python-ndn's ParametersSha256Digest check passes (done by appv2 before any validator) and
its own validator verifies the ECDSA signature with that key's public key and sees a KeyLocator
under that key name.  The reply Content is JSON ``{"sum": ..., "params_sha256": <hex of the
parameters' SHA-256>, "key": <key name>}``.

Prints ``ready PREFIX KEYNAME`` once registered, ``answered NAME`` per accepted request and
``rejected NAME: why`` per request its validator refuses.  Runs until SIGTERM or --max-seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import signal

from Cryptodome.Hash import SHA256
from Cryptodome.PublicKey import ECC
from Cryptodome.Signature import DSS
from ndn.appv2 import NDNApp, PktContext, ReplyFunc
from ndn.encoding import BinaryStr, FormalName, Name, SignaturePtrs, SignatureType
from ndn.security import DigestSha256Signer
from ndn.types import ValidResult


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("prefix")
    parser.add_argument("--max-seconds", type=int, default=120)
    args = parser.parse_args()
    signal.alarm(args.max_seconds)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    keychain = NDNApp.default_keychain()
    key = keychain.default_identity().default_key()
    key_name = Name.to_str(key.name)
    public_key = ECC.import_key(bytes(key.key_bits))
    app = NDNApp()

    async def validate(name: FormalName, sig: SignaturePtrs, _ctx: PktContext) -> ValidResult:
        why = ""
        info = sig.signature_info
        if info is None or info.signature_type != SignatureType.SHA256_WITH_ECDSA:
            why = f"signature type {info.signature_type if info else None}, want ECDSA"
        elif info.key_locator is None or not info.key_locator.name:
            why = "no KeyLocator name"
        elif not Name.is_prefix(key.name, info.key_locator.name):
            why = f"KeyLocator {Name.to_str(info.key_locator.name)} is not under {key_name}"
        else:
            digest = SHA256.new()
            for part in sig.signature_covered_part:
                digest.update(part)
            try:
                DSS.new(public_key, "fips-186-3", "der").verify(
                    digest, bytes(sig.signature_value_buf)
                )
            except ValueError:
                why = "bad ECDSA signature"
        if why:
            print(f"rejected {Name.to_str(name)}: {why}", flush=True)
            return ValidResult.FAIL
        return ValidResult.PASS

    @app.route(args.prefix, validator=validate)
    def on_request(
        name: FormalName, app_param: BinaryStr | None, reply: ReplyFunc, _ctx: PktContext
    ) -> None:
        params = bytes(app_param or b"")
        try:
            numbers = json.loads(params)["numbers"]
            body = {
                "sum": sum(int(n) for n in numbers),
                "params_sha256": hashlib.sha256(params).hexdigest(),
                "key": key_name,
            }
        except (ValueError, KeyError, TypeError) as exc:
            body = {"error": repr(exc)}
        reply(app.make_data(name, json.dumps(body).encode(), DigestSha256Signer()))
        print(f"answered {Name.to_str(name)}", flush=True)

    async def after_start() -> None:
        print(f"ready {args.prefix} {key_name}", flush=True)

    app.run_forever(after_start=after_start())


if __name__ == "__main__":
    main()
