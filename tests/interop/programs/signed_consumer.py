"""appv2 client of ``signed_producer.py``: signed Interests with ApplicationParameters.

1. a request signed with the PIB's default key (ECDSA) must be answered with the sum of the
   numbers and the SHA-256 of exactly the parameters sent;
2. a request signed with another ECDSA key under the same KeyLocator name must get no answer (the
   producer's validator drops it: InterestTimeout);
3. a correctly signed request whose parameters were changed after signing (same length, so the
   packet is still well-formed) must get no answer (ParametersSha256Digest mismatch);
4. another correctly signed request must be answered again (the producer is still serving).

Prints one line per step and ``result ok`` (exit 0), or ``result FAIL ...`` (exit 1).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import signal
import sys

from Cryptodome.PublicKey import ECC
from ndn.appv2 import NDNApp, pass_all
from ndn.encoding import InterestParam, Name, make_interest
from ndn.security import Sha256WithEcdsaSigner
from ndn.types import InterestNack, InterestTimeout
from ndn.utils import gen_nonce


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("prefix")
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--max-seconds", type=int, default=60)
    args = parser.parse_args()
    signal.alarm(args.max_seconds)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    app = NDNApp()
    keychain = NDNApp.default_keychain()
    key = keychain.default_identity().default_key()
    signer = keychain.get_signer({})
    failures: list[str] = []

    async def good_request(tag: str, numbers: list[int]) -> None:
        params = json.dumps({"numbers": numbers}).encode()
        for attempt in range(args.attempts):
            try:
                _, content, _ = await app.express(
                    f"{args.prefix}/{tag}",
                    pass_all,
                    app_param=params,
                    signer=signer,
                    lifetime=2000,
                    must_be_fresh=True,
                )
                break
            except (InterestNack, InterestTimeout) as exc:
                print(f"attempt {attempt} for {tag}: {exc!r}", flush=True)
                await asyncio.sleep(0.2)
        else:
            failures.append(f"{tag}: no answer")
            return
        body = json.loads(bytes(content or b""))
        want = {
            "sum": sum(numbers),
            "params_sha256": hashlib.sha256(params).hexdigest(),
            "key": Name.to_str(key.name),
        }
        if body != want:
            failures.append(f"{tag}: got {body}, want {want}")
        else:
            print(f"{tag}: answered sum={body['sum']}", flush=True)

    async def expect_silence(tag: str, wire: bytes, final_name: list) -> None:  # type: ignore[type-arg]
        param = InterestParam(lifetime=1000)
        try:
            await app.express_raw_interest(final_name, param, wire, pass_all)
            failures.append(f"{tag}: was answered, should have been dropped")
        except InterestTimeout:
            print(f"{tag}: not answered (as expected)", flush=True)
        except InterestNack as exc:
            failures.append(f"{tag}: Nack {exc.reason} instead of reaching the producer")

    async def run() -> None:
        try:
            await good_request("first", [17, 25])

            other_key = ECC.generate(curve="P-256").export_key(format="DER")
            forged = Sha256WithEcdsaSigner(key.default_cert().name, other_key)
            params = json.dumps({"numbers": [1, 2]}).encode()
            ip = InterestParam(nonce=gen_nonce(), lifetime=1000, must_be_fresh=True)
            wire, final_name = make_interest(
                f"{args.prefix}/forged", ip, params, signer=forged, need_final_name=True
            )
            await expect_silence("forged", bytes(wire), final_name)

            params = json.dumps({"numbers": [3, 4]}).encode()
            ip = InterestParam(nonce=gen_nonce(), lifetime=1000, must_be_fresh=True)
            wire, final_name = make_interest(
                f"{args.prefix}/tampered", ip, params, signer=signer, need_final_name=True
            )
            raw = bytes(wire)
            at = raw.index(params)
            tampered = raw[:at] + params.replace(b"3", b"9") + raw[at + len(params) :]
            await expect_silence("tampered", tampered, final_name)

            await good_request("second", [100, -58, 1])
        except Exception as exc:  # report, then exit non-zero
            failures.append(f"error: {exc!r}")
        finally:
            app.shutdown()

    app.run_forever(after_start=run())
    if failures:
        print("result FAIL " + "; ".join(failures), flush=True)
        sys.exit(1)
    print("result ok", flush=True)


if __name__ == "__main__":
    main()
