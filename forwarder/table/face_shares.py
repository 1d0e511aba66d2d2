"""Per-face shares of a bounded table, so that one peer cannot take everyone's room.

A table capped at ``max_entries`` (the PIT, the reflexive table) refuses a new entry when it is
full.  That alone lets a single flooding peer fill the table and lock every other face out for
its Interests' whole lifetime, the forwarder's own management included.  So each entry is charged
to the face that made it, and a new entry is also refused when

- that face already holds ``face_share`` of the table, or
- it comes from a non-local face and non-local faces together already hold all but
  ``local_reserve`` of the table: that room is kept for local apps and management commands,
  which reach the management face through the same PIT.

A refused Interest is Nacked (Congestion) by the pipeline.  This class only decides and counts
under "<table>.refused_full", "<table>.refused_face_share" and "<table>.refused_reserve".
"""

from __future__ import annotations

from collections import Counter


class FaceShares:
    """Admission and per-face accounting of one table's entries (no entries of its own)."""

    __slots__ = (
        "_by_face",
        "_counters",
        "_keys",
        "_nonlocal",
        "max_entries",
        "max_nonlocal",
        "max_per_face",
    )

    def __init__(
        self,
        table: str,
        max_entries: int,
        face_share: float = 1.0,
        local_reserve: float = 0.0,
        counters: Counter[str] | None = None,
    ) -> None:
        if max_entries < 0:
            raise ValueError("max_entries must be >= 0")
        if not 0.0 < face_share <= 1.0:
            raise ValueError("face_share must be in (0, 1]")
        if not 0.0 <= local_reserve < 1.0:
            raise ValueError("local_reserve must be in [0, 1)")
        self.max_entries = max_entries
        # At least one entry each, or a small table would refuse everyone.
        self.max_per_face = max(1, int(max_entries * face_share)) if max_entries else 0
        self.max_nonlocal = max_entries - int(max_entries * local_reserve)
        self._counters: Counter[str] = Counter() if counters is None else counters
        self._keys = tuple(f"{table}.refused_{why}" for why in ("full", "face_share", "reserve"))
        self._by_face: dict[int, int] = {}
        self._nonlocal = 0

    def admit(self, size: int, face_id: int, is_local: bool) -> bool:
        """May ``face_id`` add an entry to a table holding ``size``?  Counts a refusal."""
        if size >= self.max_entries:
            key = self._keys[0]
        elif self._by_face.get(face_id, 0) >= self.max_per_face:
            key = self._keys[1]
        elif not is_local and self._nonlocal >= self.max_nonlocal:
            key = self._keys[2]
        else:
            return True
        self._counters[key] += 1
        return False

    def charge(self, face_id: int, is_local: bool) -> None:
        """An entry made by ``face_id`` was added."""
        by_face = self._by_face
        by_face[face_id] = by_face.get(face_id, 0) + 1
        if not is_local:
            self._nonlocal += 1

    def release(self, face_id: int, is_local: bool) -> None:
        """An entry made by ``face_id`` left the table."""
        by_face = self._by_face
        n = by_face[face_id] - 1
        if n:
            by_face[face_id] = n
        else:
            del by_face[face_id]  # faces come and go: keep no key for a face with nothing
        if not is_local:
            self._nonlocal -= 1

    def held_by(self, face_id: int) -> int:
        """How many entries ``face_id`` made that are still in the table."""
        return self._by_face.get(face_id, 0)

    @property
    def held_by_nonlocal(self) -> int:
        return self._nonlocal
