"""Memory files shared on a host (icn/dataplane/memfile.py): a peer maps only a memfd of the
right kind whose size its owner sealed, so no owner can shrink it under a peer's mapping."""

from __future__ import annotations

import mmap
import os

import pytest

from icn.dataplane.memfile import HEAD, MemFile, MemFileError, NotReferred, PeerFiles

MAGIC = b"ICNTEST\0"


def test_a_peer_maps_the_owners_file_and_sees_its_writes() -> None:
    owner = MemFile("icn-test", 8192, MAGIC)
    files = PeerFiles(MAGIC, writable=True)
    try:
        peer = files.get(owner.pid, owner.fd, owner.token)
        owner.map[HEAD : HEAD + 4] = b"ping"
        assert peer.map[HEAD : HEAD + 4] == b"ping"
        peer.map[100:104] = b"pong"
        assert owner.map[100:104] == b"pong"
        assert files.get(owner.pid, owner.fd, owner.token) is peer  # kept mapped
        with pytest.raises(NotReferred):
            files.get(owner.pid, owner.fd, bytes(16))
    finally:
        files.close()
        owner.close()


def test_the_owner_cannot_resize_a_file_once_made() -> None:
    owner = MemFile("icn-test", 8192, MAGIC)
    try:
        with pytest.raises(OSError):
            os.ftruncate(owner.fd, 4096)  # would make a peer's reads past 4096 fault
        with pytest.raises(OSError):
            os.ftruncate(owner.fd, 16384)
    finally:
        owner.close()


def test_a_memfd_whose_size_is_not_sealed_is_refused() -> None:
    fd = os.memfd_create("icn-test", os.MFD_CLOEXEC)
    files = PeerFiles(MAGIC)
    try:
        os.ftruncate(fd, 8192)
        with mmap.mmap(fd, 8192) as m:
            m[: len(MAGIC)] = MAGIC
            m[len(MAGIC) : HEAD] = bytes(16)
        with pytest.raises(MemFileError, match="not sealed"):
            files.get(os.getpid(), fd, bytes(16))
    finally:
        files.close()
        os.close(fd)


def test_a_file_of_another_kind_is_refused() -> None:
    owner = MemFile("icn-test", 8192, b"ICNOTHR\0")
    files = PeerFiles(MAGIC)
    try:
        with pytest.raises(MemFileError, match="not a memory file of this kind"):
            files.get(owner.pid, owner.fd, owner.token)
    finally:
        files.close()
        owner.close()
