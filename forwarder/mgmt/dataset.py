"""Status dataset publication: versioned, segmented Data, as NFD publishes them.

A dataset Interest names the dataset (``/localhost/nfd/faces/list``, possibly followed by the
params-sha256 component pynfdc adds) with CanBePrefix.  The answer is generated afresh:
``<Interest name>/v=<ms>/seg=<i>``, the content cut into 8000-byte segments, each with a 1 s
FreshnessPeriod and the last segment's number as FinalBlockId.  Segment 0 answers the Interest;
all segments wait in a small store from which the follow-up Interests (exact names) are served,
since regenerating would yield a different version.  Records may straddle segment boundaries:
a client reassembles before parsing.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from icn.wire import tlv_types as T
from icn.wire.encode import make_data
from icn.wire.name import segment, version

SEGMENT_SIZE = 8000  # NFD: 8800 minus room for name and signature
DATASET_FRESHNESS_MS = 1000


class DatasetStore:
    """Generated dataset segments by full name: bounded (oldest out) and short-lived."""

    def __init__(
        self,
        capacity: int = 256,
        lifetime: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity = capacity
        self.lifetime = lifetime
        self.clock = clock
        self._store: OrderedDict[bytes, tuple[bytes, float]] = OrderedDict()

    def publish(self, name: bytes, content: bytes, version_ms: int | None = None) -> bytes:
        """Segment ``content`` under ``name``; keep every segment; return segment 0's Data."""
        if version_ms is None:
            version_ms = int(time.time() * 1000)
        base = name + version(version_ms)
        chunks = [content[i : i + SEGMENT_SIZE] for i in range(0, len(content), SEGMENT_SIZE)]
        if not chunks:
            chunks = [b""]
        final = segment(len(chunks) - 1)
        expiry = self.clock() + self.lifetime
        first = b""
        for i, chunk in enumerate(chunks):
            seg_name = base + segment(i)
            wire = make_data(seg_name, chunk, freshness=DATASET_FRESHNESS_MS, final_block_id=final)
            if i == 0:
                first = wire
            self._put(seg_name, wire, expiry)
        return first

    def _put(self, name: bytes, wire: bytes, expiry: float) -> None:
        store = self._store
        store[name] = (wire, expiry)
        store.move_to_end(name)
        while len(store) > self.capacity:
            store.popitem(last=False)

    def lookup(self, name: bytes, can_be_prefix: bool = False) -> bytes | None:
        """The stored segment named ``name`` (or, with CanBePrefix, the first under it)."""
        now = self.clock()
        hit = self._store.get(name)
        if hit is None and can_be_prefix:
            for full, entry in self._store.items():
                if full.startswith(name):
                    hit = entry
                    break
        if hit is None or hit[1] <= now:
            return None
        return hit[0]

    def __len__(self) -> int:
        return len(self._store)


def is_versioned(name: bytes, ends: list[int], after: int) -> bool:
    """Whether a component past index ``after`` is a version or segment: a follow-up Interest
    for segments already published, never one that asks for a new generation."""
    start = ends[after] if after < len(ends) else len(name)
    for end in ends[after + 1 :]:
        if name[start] in (T.COMP_VERSION, T.COMP_SEGMENT):
            return True
        start = end
    return False
