"""The names of a collective job (docs/design.md section 7).

``/<job>/w/<worker>/<round>/<chunk>``      a worker's contribution (chunk of its array)
``/<job>/sum/<round>/<chunk>``             the reduction of every worker's chunk
``/<job>/agg/<node>/<round>/<chunk>``      an aggregator's partial (its subtree's reduction)
``/<job>/ring/<worker>/<round>/<step>/<chunk>``  ring mode: what a worker passes at each step

Round, step and chunk are decimal generic components, so names read well in logs and tools
(``/ar/sum/3/17``) and every worker computes the same name for the same piece of data.
"""

from __future__ import annotations

from icn.errors import ConfigError
from icn.wire.name import components_after, from_uri, generic, to_uri

WORKER, SUM, AGG, RING = "w", "sum", "agg", "ring"


def _number(component: bytes) -> int | None:
    """The value of a decimal generic component, or None (garbage from the network)."""
    if len(component) < 3 or component[0] != 8 or component[1] != len(component) - 2:
        return None
    text = component[2:]
    if not text.isdigit() or len(text) > 12:
        return None
    return int(text)


class JobNames:
    """Name builder and parser for one job prefix (``/ar`` or ``/training/run7``)."""

    def __init__(self, job: str) -> None:
        try:
            self.prefix = from_uri(job)
        except ConfigError as exc:
            raise ConfigError(f"job {job!r}: not an NDN name ({exc})") from None
        if not self.prefix:
            raise ConfigError("job: needs at least one name component, e.g. /ar")
        self.job = to_uri(self.prefix)

    def _under(self, *parts: str) -> bytes:
        return self.prefix + b"".join(generic(p) for p in parts)

    def worker_prefix(self, worker: str) -> bytes:
        return self._under(WORKER, worker)

    def sum_prefix(self) -> bytes:
        return self._under(SUM)

    def agg_prefix(self, node: str) -> bytes:
        return self._under(AGG, node)

    def ring_prefix(self, worker: str) -> bytes:
        return self._under(RING, worker)

    @staticmethod
    def piece(prefix: bytes, *numbers: int) -> bytes:
        """``prefix`` followed by decimal components (round, [step,] chunk)."""
        return prefix + b"".join(generic(str(n)) for n in numbers)

    @staticmethod
    def numbers_after(prefix: bytes, name: bytes, count: int) -> tuple[int, ...] | None:
        """The ``count`` decimal components that follow ``prefix`` in ``name`` (nothing else may
        follow), or None when the name has another shape."""
        parts = components_after(prefix, name)
        if parts is None or len(parts) != count:
            return None
        out: list[int] = []
        for part in parts:
            value = _number(part)
            if value is None:
                return None
            out.append(value)
        return tuple(out)


def check_member_name(kind: str, value: str) -> str:
    """Worker ids and node names become one name component: keep them plain."""
    if not value or not all(c.isalnum() or c in "-_." for c in value):
        raise ConfigError(
            f"{kind} {value!r}: use letters, digits, '-', '_' or '.' (it becomes a name component)"
        )
    return value
