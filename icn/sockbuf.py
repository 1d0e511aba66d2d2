"""Kernel socket buffers: the one way this project asks for a larger one.

Linux caps ``SO_SNDBUF``/``SO_RCVBUF`` at ``net.core.wmem_max``/``rmem_max`` (208 KiB on many
systems); a process with CAP_NET_ADMIN (a forwarder usually runs as root) may pass the cap with
the ``*FORCE`` options, anyone else gets what the cap allows.  The kernel reports twice the bytes
it accounts: a request of N granted whole reads back as 2N.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Any

SO_SNDBUFFORCE = getattr(socket, "SO_SNDBUFFORCE", 32)  # Linux's option numbers
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)

# A Unix stream socket's send buffer bounds the bytes in flight to the peer (the peer's receive
# queue is charged to it).  Linux's default (net.core.wmem_default, 208 KiB) is a fifth of one
# 1 MiB segment: moving each segment takes five wake-ups of the reader, and the writer, the
# forwarder and the reader take turns instead of overlapping.  4 MiB holds a few segments
# (bench/bulk.py, three runs each: 493-497 -> 564-621 MB/s through one forwarder).
UNIX_SEND_BUFFER = 4 << 20


def grow_buffer(sock: Any, size: int, *, send: bool) -> int:
    """Ask for a send (``send=True``) or receive queue of ``size`` bytes on ``sock``; returns
    what the kernel reports afterwards.  OSError if the socket refuses both options."""
    force, plain = (
        (SO_SNDBUFFORCE, socket.SO_SNDBUF) if send else (SO_RCVBUFFORCE, socket.SO_RCVBUF)
    )
    try:
        sock.setsockopt(socket.SOL_SOCKET, force, size)
    except OSError:  # no CAP_NET_ADMIN: what net.core.[wr]mem_max allows
        sock.setsockopt(socket.SOL_SOCKET, plain, size)
    return int(sock.getsockopt(socket.SOL_SOCKET, plain))


def grow_unix_send_buffer(sock: Any) -> None:
    """:data:`UNIX_SEND_BUFFER` for a Unix stream socket (any other socket is left alone: TCP
    tunes its own buffers, and a fixed size would turn that off)."""
    if sock is None or getattr(sock, "family", None) != socket.AF_UNIX:
        return
    # not fatal: the default buffer works, only slower for large packets
    with contextlib.suppress(OSError):
        grow_buffer(sock, UNIX_SEND_BUFFER, send=True)
