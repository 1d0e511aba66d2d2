"""Does passing large payloads out of band (a memfd sent with SCM_RIGHTS) beat socket copies?

Three processes, as in bench/bulk.py: a producer, a relay (the forwarder's place) and a consumer,
joined by Unix stream sockets.  ``--count`` payloads of ``--payload`` bytes go through, each
ending as bytes in the consumer (what our codec needs):
  socket: the producer writes the payload; the relay reads it into a buffer and writes it on;
          the consumer reads it into a buffer and makes its bytes (4 kernel copies, 1 user copy);
  memfd:  the producer writes the payload into a new memfd and sends the descriptor; the relay
          passes the descriptor on (no payload copy); the consumer maps it and makes its bytes
          (1 copy into the memfd's fresh pages, 1 out of them, plus create/map/unmap per payload).
Prints MB/s and the CPU seconds of all three processes per GiB for each, and the memfd/socket
ratio last.  Run: .venv/bin/python bench/memfd_probe.py [--payload 1048576] [--count 512]
"""

from __future__ import annotations

import argparse
import array
import mmap
import os
import resource
import socket
import statistics
import time
from multiprocessing import Process, Queue

GIB = 1 << 30
HDR = 8


def recv_exact(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if not n:
            raise ConnectionError("peer closed")
        got += n


def send_fd(sock: socket.socket, fd: int, size: int) -> None:
    sock.sendmsg(
        [size.to_bytes(HDR, "big")],
        [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))],
    )


def recv_fd(sock: socket.socket) -> tuple[int, int]:
    fds = array.array("i")
    msg, anc, _, _ = sock.recvmsg(HDR, socket.CMSG_LEN(fds.itemsize))
    for level, typ, data in anc:
        if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
            fds.frombytes(data[: fds.itemsize])
    if len(msg) != HDR or not fds:
        raise ConnectionError("no descriptor")
    return fds[0], int.from_bytes(msg, "big")


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def producer(mode: str, sock: socket.socket, payload: bytes, count: int, out: Queue) -> None:  # type: ignore[type-arg]
    c0 = cpu()
    for _ in range(count):
        if mode == "socket":
            sock.sendall(len(payload).to_bytes(HDR, "big"))
            sock.sendall(payload)
        else:
            fd = os.memfd_create("payload", os.MFD_CLOEXEC)
            os.write(fd, payload)
            send_fd(sock, fd, len(payload))
            os.close(fd)
    sock.recv(1)  # the consumer's end-of-run octet
    out.put(("producer", cpu() - c0))


def relay(mode: str, up: socket.socket, down: socket.socket, count: int, out: Queue) -> None:  # type: ignore[type-arg]
    c0 = cpu()
    buf = bytearray(HDR)
    big = bytearray(0)
    for _ in range(count):
        if mode == "socket":
            recv_exact(up, memoryview(buf))
            size = int.from_bytes(buf, "big")
            if len(big) < size:
                big = bytearray(size)
            view = memoryview(big)[:size]
            recv_exact(up, view)
            down.sendall(buf)
            down.sendall(view)
        else:
            fd, size = recv_fd(up)
            send_fd(down, fd, size)
            os.close(fd)
    up.sendall(down.recv(1))
    out.put(("relay", cpu() - c0))


def consumer(mode: str, sock: socket.socket, count: int, out: Queue) -> None:  # type: ignore[type-arg]
    c0 = cpu()
    t0 = time.perf_counter()
    hdr = bytearray(HDR)
    big = bytearray(0)
    total = 0
    for _ in range(count):
        if mode == "socket":
            recv_exact(sock, memoryview(hdr))
            size = int.from_bytes(hdr, "big")
            if len(big) < size:
                big = bytearray(size)
            view = memoryview(big)[:size]
            recv_exact(sock, view)
            data = bytes(view)
        else:
            fd, size = recv_fd(sock)
            with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mm:
                data = bytes(mm)
            os.close(fd)
        total += len(data)
    wall = time.perf_counter() - t0
    sock.sendall(b"x")
    out.put(("consumer", cpu() - c0, wall, total))


def run(mode: str, payload: bytes, count: int) -> tuple[float, float]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    c, d = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    out: Queue = Queue()  # type: ignore[type-arg]
    procs = [
        Process(target=producer, args=(mode, a, payload, count, out)),
        Process(target=relay, args=(mode, b, c, count, out)),
        Process(target=consumer, args=(mode, d, count, out)),
    ]
    for p in procs:
        p.start()
    try:
        results = [out.get(timeout=300) for _ in procs]
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
        for s in (a, b, c, d):
            s.close()
    cons = next(r for r in results if r[0] == "consumer")
    total_cpu = sum(r[1] for r in results)
    return cons[3] / cons[2] / 1e6, total_cpu * GIB / cons[3]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--payload", type=int, default=1 << 20)
    ap.add_argument("--count", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    payload = os.urandom(args.payload)
    rates: dict[str, list[float]] = {"socket": [], "memfd": []}
    cpus: dict[str, list[float]] = {"socket": [], "memfd": []}
    run("socket", payload, 8)  # warm up
    run("memfd", payload, 8)
    for _ in range(args.repeat):
        for mode in ("socket", "memfd"):
            rate, c = run(mode, payload, args.count)
            rates[mode].append(rate)
            cpus[mode].append(c)
    print(f"{args.count} payloads of {args.payload} B, producer -> relay -> consumer, Unix sockets")
    for mode in ("socket", "memfd"):
        print(
            f"{mode:<7} {statistics.median(rates[mode]):8,.0f} MB/s (median of {args.repeat}: "
            + ", ".join(f"{x:,.0f}" for x in rates[mode])
            + f")  CPU {statistics.median(cpus[mode]):.2f} s/GiB"
        )
    ratio = statistics.median(rates["memfd"]) / statistics.median(rates["socket"])
    print(f"memfd/socket ratio: {ratio:.2f}")


if __name__ == "__main__":
    main()
