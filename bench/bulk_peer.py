"""The two ends of ``bench/bulk.py``: one producer process, and one consumer process per fetch.

``produce`` serves the same object bytes two ways at once: as NDN segments under ``/bulk``
through the forwarder (``/bulk/<variant>/<run>``, a new object per name, so nothing is answered
from the forwarder's content store), and raw over the relay (a consumer's 8-byte request, then
that many bytes).  Variants: ``digest`` (DigestSha256 per segment, the default), ``ed25519`` (one
Ed25519 signature per segment), ``manifest`` (segments by digest, one Ed25519-signed manifest).

``consume`` fetches once, checks the bytes against the object, and prints one JSON line: wall
seconds and its own CPU seconds over the fetch (process start-up excluded), and the event loop
it ran on.  ``produce`` names its loop in its ready line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the bench package sits beside it
    sys.path.insert(0, str(ROOT))

from bench.loops import running  # noqa: E402
from icn.dataplane.endpoint import Endpoint  # noqa: E402
from icn.dataplane.publish import SegmentedObject  # noqa: E402
from icn.dataplane.segments import fetch_segments_buffer  # noqa: E402
from icn.errors import ValidationError  # noqa: E402
from icn.security.keys import Identity, verify_data  # noqa: E402
from icn.security.manifest import Manifest, manifest_name  # noqa: E402
from icn.wire.name import from_uri  # noqa: E402
from icn.wire.packet import DataView, InterestView  # noqa: E402
from icn.wire.signer import DIGEST_SHA256  # noqa: E402

VARIANTS = ("digest", "ed25519", "manifest")


def object_bytes(size: int) -> bytes:
    """The object every process agrees on (seeded, so the consumer can check what it got)."""
    rng = random.Random(1)
    step = 1 << 20  # randbytes takes at most 2**31 bits at once
    return b"".join(rng.randbytes(min(step, size - off)) for off in range(0, size, step))


# ---- producer ---------------------------------------------------------------------------------


class Producer:
    def __init__(self, content: bytes, segment_size: int, identity: Identity) -> None:
        self.content = content
        self.segment_size = segment_size
        self.identity = identity
        self.objects: dict[bytes, SegmentedObject] = {}
        self.prefix = from_uri("/bulk")

    def handler(self, iv: InterestView, reply: Callable[[bytes], None]) -> None:
        # /bulk/<variant>/<run>/...: the object is made on its first Interest
        ends = iv.name_ends
        if len(ends) < 3:
            return
        key = iv.name[: ends[2]]
        obj = self.objects.get(key)
        if obj is None:
            variant = iv.name[ends[0] : ends[1]][2:].decode()
            if variant not in VARIANTS:
                return
            self.objects.clear()  # one object at a time: a 256 MiB object is built once per run
            obj = self.objects[key] = SegmentedObject(
                key,
                self.content,
                segment_size=self.segment_size,
                signer=DIGEST_SHA256 if variant == "digest" else self.identity.signer(),
                manifest=variant == "manifest",
            )
        obj.handler(iv, reply)


class RawServer(asyncio.Protocol):
    """The producer's side of the relay: each 8-byte request is answered with that many bytes."""

    CHUNK = 1 << 20

    def __init__(self, content: bytes) -> None:
        self.view = memoryview(content)
        self.transport: asyncio.Transport | None = None
        self.req = b""
        self.todo: list[int] = []
        self.can_write = asyncio.Event()
        self.can_write.set()
        self.task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=4 << 20)
        self.transport.write(b"P")

    def data_received(self, data: bytes) -> None:
        self.req += data
        while len(self.req) >= 8:
            self.todo.append(int.from_bytes(self.req[:8], "big"))
            self.req = self.req[8:]
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._send())

    async def _send(self) -> None:
        while self.todo and self.transport is not None:
            size = self.todo.pop(0)
            for off in range(0, size, self.CHUNK):
                await self.can_write.wait()
                self.transport.write(self.view[off : min(size, off + self.CHUNK)])

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()


async def produce(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    content = object_bytes(args.size)
    identity = Identity.generate()
    Path(args.key_file).write_bytes(identity.public_bytes)
    producer = Producer(content, args.segment, identity)
    ep = await Endpoint.connect(f"unix://{args.fwd}")
    await ep.serve(producer.prefix, producer.handler)
    await loop.create_unix_connection(lambda: RawServer(content), args.relay)
    print(f"producer ready {running()}", flush=True)  # and its loop
    await ep.wait_closed()


# ---- consumers --------------------------------------------------------------------------------


async def consume_ours(args: argparse.Namespace) -> bytes | bytearray:
    name = from_uri(args.name)
    variant = args.name.split("/")[2]
    key = Path(args.key_file).read_bytes()
    async with await Endpoint.connect(f"unix://{args.fwd}") as ep:
        if variant == "manifest":

            def check_signed(dv: DataView) -> None:
                verify_data(dv.wire, key)

            raw = await ep.fetch_segments(
                manifest_name(name), window=args.window, verify=check_signed
            )
            manifest = Manifest.decode(raw)
            if manifest.object_size != args.size:
                raise ValidationError("manifest names another size")

            def check(dv: DataView) -> None:
                manifest.check(name, dv)

            return await fetch_segments_buffer(
                ep, name, window=args.window, max_size=args.size, verify=check
            )
        verify = None
        if variant == "ed25519":

            def verify(dv: DataView) -> None:
                verify_data(dv.wire, key)

        return await fetch_segments_buffer(
            ep, name, window=args.window, max_size=args.size, verify=verify
        )


class RawClient(asyncio.BufferedProtocol):
    """Receives the object straight into one preallocated buffer: the best a raw app can do."""

    def __init__(self, size: int, done: asyncio.Future[None]) -> None:
        self.buf = bytearray(size)
        self.view = memoryview(self.buf)
        self.got = 0
        self.done = done

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        cast(asyncio.Transport, transport).write(b"C" + len(self.buf).to_bytes(8, "big"))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view[self.got :]

    def buffer_updated(self, nbytes: int) -> None:
        self.got += nbytes
        if self.got == len(self.buf) and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError("relay closed the connection"))


async def consume_raw(args: argparse.Namespace) -> bytes | bytearray:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    transport, proto = await loop.create_unix_connection(
        lambda: RawClient(args.size, done), args.relay
    )
    try:
        await done
    finally:
        transport.close()
    return proto.buf  # the object in one buffer, as fetch_segments returns it


def consume_pyndn(args: argparse.Namespace) -> tuple[bytes | bytearray, float, float, str]:
    """python-ndn's own segment fetcher (v1 NDNApp, one Interest at a time), through our
    forwarder; its default validator checks each segment's DigestSha256."""
    import os

    from ndn.app import NDNApp
    from ndn.app_support.segment_fetcher import segment_fetcher
    from ndn.security import KeychainDigest

    os.environ["NDN_CLIENT_TRANSPORT"] = f"unix://{args.fwd}"
    app = NDNApp(keychain=KeychainDigest())
    out: list[bytes] = []
    times: list[float] = []
    loop: list[str] = []  # the loop python-ndn's run_forever runs on

    async def run() -> None:
        loop.append(running())
        try:
            times.extend((time.perf_counter(), time.process_time()))
            async for part in segment_fetcher(app, args.name, must_be_fresh=False):
                out.append(bytes(part))
            times.extend((time.perf_counter(), time.process_time()))
        finally:
            app.shutdown()

    app.run_forever(after_start=run())
    return b"".join(out), times[2] - times[0], times[3] - times[1], loop[0]


def consume(args: argparse.Namespace) -> None:
    if args.mode == "pyndn":
        got, wall, cpu, loop = consume_pyndn(args)
    else:
        fetch = {"ours": consume_ours, "raw": consume_raw}[args.mode]

        async def timed() -> tuple[bytes | bytearray, float, float, str]:
            t0, c0 = time.perf_counter(), time.process_time()
            got = await asyncio.wait_for(fetch(args), args.timeout)
            return got, time.perf_counter() - t0, time.process_time() - c0, running()

        try:
            import uvloop

            got, wall, cpu, loop = uvloop.run(timed())
        except ImportError:
            got, wall, cpu, loop = asyncio.run(timed())
    ok = got == object_bytes(args.size)
    result = {"seconds": wall, "cpu": cpu, "bytes": len(got), "ok": ok, "loop": loop}
    print(json.dumps(result), flush=True)
    sys.exit(0 if ok else 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="role", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--fwd", required=True)
    p.add_argument("--relay", required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--segment", type=int, required=True)
    p.add_argument("--key-file", required=True)
    c = sub.add_parser("consume")
    c.add_argument("--mode", choices=("ours", "raw", "pyndn"), required=True)
    c.add_argument("--fwd", default="")
    c.add_argument("--relay", default="")
    c.add_argument("--name", default="")
    c.add_argument("--size", type=int, required=True)
    c.add_argument("--window", type=int, default=8)
    c.add_argument("--key-file", default="")
    c.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    if args.role == "consume":
        consume(args)
        return
    try:
        import uvloop

        uvloop.run(produce(args))
    except ImportError:
        asyncio.run(produce(args))


if __name__ == "__main__":
    main()
