"""Chunk payloads in shared memory, for a job whose members all run on one host.

docs/design.md section 4 lets faces that stay on the host pass large payloads out of band.  With
``shared=True`` a worker copies its array once into a memory file it owns (``memfd``), and each
chunk's Data carries only a reference to its bytes there; an aggregator with ``shared=True``
folds the referenced bytes where they lie, into a memory file of its own, and publishes the sum
the same way; a worker copies the sum it is referred to straight into its result.  Names,
Interests, PIT aggregation, caching and every error path stay as they are: only the bulk bytes
leave the packets, so no socket, forwarder or framer copies them (measured: the copies through
the forwarder were most of an allreduce's CPU at 16 MiB and more).

A reader opens the owner's file as ``/proc/<pid>/fd/<fd>``, read-only: the kernel allows it
only to processes that may read the owner's memory anyway (the same user), and a reader cannot
change what it maps.  A 16-octet random token in the file, repeated in every reference, makes a
reference to a file that is not the one meant (a reused pid or fd, a forged reference) an error.

A region holds two copies of a layout's chunks, one per round parity, and a stamp per (parity,
chunk): the round whose bytes are there, -1 while they are written.  A reader checks the stamp
before and after it reads (or folds) a chunk, so a chunk overwritten under it is an error,
never a wrong sum.  In an allreduce no chunk is overwritten while still needed: a worker writes
round r's chunks into the parity of round r - 2 only after the sum of round r - 1 came back
whole, and that sum needed every reader of round r - 2's chunks to be done.  The references
travel through sockets, whose system calls order the writer's stores before the reader's loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from compute.collective.errors import CollectiveError
from compute.collective.wire import Layout
from icn.dataplane.memfile import (
    HEAD,
    MAX_MAPS,
    MemFile,
    MemFileError,
    NotReferred,
    PeerFile,
    PeerFiles,
)

MAGIC = b"ICNSHM1\0"
_COUNT_AT = HEAD  # chunks per parity, after the magic and the token
_HEAD = 64  # the stamps start here
_ALIGN = 64


def _round_up(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


@dataclass(frozen=True, slots=True)
class Ref:
    """Where a chunk's bytes are: ``length`` octets at ``offset`` in the file ``fd`` of process
    ``pid`` (whose token is ``token``), stamped ``round`` at stamp ``index``."""

    pid: int
    fd: int
    token: bytes
    offset: int
    length: int
    index: int
    round: int

    def encode(self) -> list[Any]:
        return [self.pid, self.fd, self.token, self.offset, self.length, self.index, self.round]

    @classmethod
    def decode(cls, value: Any) -> Ref:
        """A reference from a chunk header; ValueError when it is not one."""
        if not isinstance(value, list) or len(value) != 7:
            raise ValueError("a shared-memory reference is a list of 7 fields")
        pid, fd, token, offset, length, index, rnd = value
        ints = (pid, fd, offset, length, index, rnd)
        if not all(type(x) is int for x in ints) or not isinstance(token, bytes):
            raise ValueError("a shared-memory reference has a field of the wrong type")
        if min(pid, fd, offset, length, index, rnd) < 0 or len(token) != 16:
            raise ValueError("a shared-memory reference has a field out of range")
        return cls(pid, fd, token, offset, length, index, rnd)


class _Region:
    """One memory file of the owner: two parities of ``chunks`` chunks of ``chunk_bytes``."""

    def __init__(self, name: str, chunks: int, chunk_bytes: int) -> None:
        self.chunks, self.chunk_bytes = chunks, chunk_bytes
        self.data_at = _round_up(_HEAD + 2 * chunks * 8)
        self.slot_bytes = _round_up(chunks * chunk_bytes)
        self.file = MemFile(name, self.data_at + 2 * self.slot_bytes, MAGIC)
        self.fd, self.token, self.map = self.file.fd, self.file.token, self.file.map
        self.map[_COUNT_AT : _COUNT_AT + 8] = chunks.to_bytes(8, "little")
        self.stamps = np.frombuffer(self.map, dtype=np.int64, count=2 * chunks, offset=_HEAD)
        self.stamps[:] = -1
        self.bytes = np.frombuffer(self.map, dtype=np.uint8, offset=self.data_at)
        self.last_round = -1

    def fits(self, layout: Layout) -> bool:
        return layout.chunks <= self.chunks and layout.chunk_bytes <= self.chunk_bytes

    def _place(self, rnd: int, chunk: int) -> tuple[int, int]:
        parity = rnd % 2
        return parity * self.chunks + chunk, parity * self.slot_bytes + chunk * self.chunk_bytes

    def chunk_array(self, rnd: int, chunk: int, nbytes: int) -> np.ndarray[Any, Any]:
        """The (unstamped) place of round ``rnd``'s ``chunk``, to be written, then sealed."""
        index, at = self._place(rnd, chunk)
        self.stamps[index] = -1
        self.last_round = max(self.last_round, rnd)
        return self.bytes[at : at + nbytes]

    def seal(self, rnd: int, chunk: int, nbytes: int) -> Ref:
        index, at = self._place(rnd, chunk)
        self.stamps[index] = rnd
        return Ref(self.file.pid, self.fd, self.token, self.data_at + at, nbytes, index, rnd)

    def close(self) -> None:
        del self.stamps, self.bytes
        self.file.close()


class SharedArena:
    """The memory files one publisher (a worker or an aggregator) writes its chunks into.

    A layout that does not fit the current file gets a new one; the old file stays open for
    ``keep_rounds`` more rounds (late readers of its chunks), then is closed."""

    def __init__(self, name: str, keep_rounds: int = 4) -> None:
        self.name = name
        self.keep_rounds = keep_rounds
        self._region: _Region | None = None
        self._old: list[_Region] = []

    def _for(self, rnd: int, layout: Layout) -> _Region:
        region = self._region
        if region is None or not region.fits(layout):
            if region is not None:
                self._old.append(region)
            region = self._region = _Region(self.name, layout.chunks, layout.chunk_bytes)
        gone = [r for r in self._old if r.last_round < rnd - self.keep_rounds]
        for old in gone:
            self._old.remove(old)
            old.close()
        return region

    def write(self, rnd: int, layout: Layout, chunk: int, payload: memoryview) -> Ref:
        """Copy ``payload`` into round ``rnd``'s place of ``chunk``; its reference."""
        region = self._for(rnd, layout)
        region.chunk_array(rnd, chunk, len(payload))[:] = np.frombuffer(payload, dtype=np.uint8)
        return region.seal(rnd, chunk, len(payload))

    def place(self, rnd: int, layout: Layout, chunk: int, nbytes: int) -> np.ndarray[Any, Any]:
        """The bytes to fold round ``rnd``'s ``chunk`` into; :meth:`seal` it once written."""
        return self._for(rnd, layout).chunk_array(rnd, chunk, nbytes)

    def seal(self, rnd: int, chunk: int, nbytes: int) -> Ref:
        assert self._region is not None
        return self._region.seal(rnd, chunk, nbytes)

    def close(self) -> None:
        for region in [*self._old, *([self._region] if self._region else [])]:
            region.close()
        self._old.clear()
        self._region = None


class _Mapped:
    """A peer's chunk region, mapped read-only, with views of its stamps and bytes."""

    def __init__(self, peer: PeerFile) -> None:
        self.token = peer.token
        chunks = int.from_bytes(peer.map[_COUNT_AT : _COUNT_AT + 8], "little")
        if _HEAD + 2 * chunks * 8 > len(peer.map):
            raise MemFileError("not a chunk region")
        self.stamps = np.frombuffer(peer.map, dtype=np.int64, count=2 * chunks, offset=_HEAD)
        self.bytes = np.frombuffer(peer.map, dtype=np.uint8)


class SharedMaps:
    """A reader's mappings of its peers' memory files (at most ``MAX_MAPS``, least recently
    used closed first)."""

    def __init__(self, limit: int = MAX_MAPS) -> None:
        self._files = PeerFiles(MAGIC, limit=limit)

    def _mapped(self, ref: Ref, source: str) -> _Mapped:
        try:
            peer = self._files.get(ref.pid, ref.fd, ref.token)
            mapped = peer.layout
            if not isinstance(mapped, _Mapped):
                mapped = peer.layout = _Mapped(peer)
        except NotReferred:
            raise CollectiveError(
                f"{source}: its chunk refers to a memory file that is not its"
            ) from None
        except MemFileError as exc:
            raise CollectiveError(
                f"{source}: its chunk is in shared memory this process cannot open ({exc}); "
                "shared=True needs every member of the job on one host, run by one user: pass "
                "shared=False otherwise"
            ) from None
        return mapped

    def view(self, ref: Ref, source: str) -> memoryview:
        """The chunk's bytes, in place (read-only); :meth:`check` after reading them."""
        mapped = self._mapped(ref, source)
        if ref.index >= len(mapped.stamps) or ref.offset + ref.length > len(mapped.bytes):
            raise CollectiveError(f"{source}: its chunk's reference is out of its memory file")
        self.check(ref, source)
        return mapped.bytes[ref.offset : ref.offset + ref.length].data

    def check(self, ref: Ref, source: str) -> None:
        """CollectiveError unless the chunk's place still holds its round."""
        peer = self._files.known(ref.pid, ref.fd, ref.token)
        mapped = None if peer is None else peer.layout
        if not isinstance(mapped, _Mapped):
            raise CollectiveError(f"{source}: its chunk's memory file was closed while read")
        if int(mapped.stamps[ref.index]) != ref.round:
            raise CollectiveError(
                f"{source}: round {ref.round}'s chunk was overwritten before it was read "
                "(its owner moved on: asked for too late)"
            )

    def close(self) -> None:
        self._files.close()
