"""Event-time tumbling and sliding windows per key, fired by watermarks (sans-IO).

A record is ``(t, key, value)`` with ``t`` in milliseconds.  Windows are half-open
``[start, end)`` with starts aligned on multiples of the slide; a watermark ``W`` promises that
later records have ``t >= W``, and fires every window with ``end <= W``.  A record that comes
after its window fired is folded in and the window's updated result returned at once while
``end + allowed_lateness_ms > W``; after that the window is purged and such records are dropped
and counted.  Nothing here reads a clock or does I/O: the stream runtime calls ``add`` per
record and ``advance`` per watermark, and checkpoints with ``snapshot``/``restore``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass
from heapq import heapify, heappop, heappush
from typing import Any

import numpy as np

from compute.stream.aggregates import Aggregate

MIN_WATERMARK = -(2**63)  # before any watermark: no window has fired
FOLDED_KINDS = ("count", "sum", "mean", "min", "max")  # aggregates add_columns folds
SAFE_T = 2**62  # event times add_columns takes (start + size stays within int64)
MAX_WATERMARK = 2**63 - 1  # after flush(): the end of the stream (both fit msgpack's int64)
SNAPSHOT_VERSION = 1

# (t, key, value): an output's t is its window's end - 1, its value {key, start, end, ...}
Out = tuple[int, Any, dict[str, Any]]

_MISSING: Any = object()


def _check_int(name: str, value: object, what: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name}={value!r}: give {what} as an int")


@dataclass(frozen=True)
class WindowSpec:
    """Window length, slide (None: tumbling, the slide is the length) and allowed lateness."""

    size_ms: int
    slide_ms: int | None = None
    allowed_lateness_ms: int = 0

    def __post_init__(self) -> None:
        _check_int("size_ms", self.size_ms, "the window length in milliseconds")
        if self.size_ms <= 0:
            raise ValueError(f"size_ms={self.size_ms}: the window length must be positive")
        if self.slide_ms is not None:
            _check_int("slide_ms", self.slide_ms, "the slide in milliseconds (None: tumbling)")
            if not 0 < self.slide_ms <= self.size_ms:
                raise ValueError(
                    f"slide_ms={self.slide_ms}: the slide must be > 0 and <= size_ms"
                    f" ({self.size_ms}); leave it None for tumbling windows"
                )
        _check_int("allowed_lateness_ms", self.allowed_lateness_ms, "the lateness in ms")
        if self.allowed_lateness_ms < 0:
            raise ValueError(
                f"allowed_lateness_ms={self.allowed_lateness_ms}: must be >= 0"
                " (0: records behind the watermark are dropped)"
            )

    @property
    def slide(self) -> int:
        return self.size_ms if self.slide_ms is None else self.slide_ms

    @property
    def tumbling(self) -> bool:
        return self.slide == self.size_ms

    def starts_of(self, t: int) -> range:
        """Starts of the windows holding ``t``, increasing (floor division: negative t too)."""
        slide = self.slide
        last = t - t % slide
        count = (self.size_ms - (t - last) - 1) // slide + 1
        return range(last - (count - 1) * slide, last + 1, slide)

    def windows_of(self, t: int) -> list[tuple[int, int]]:
        """``[start, end)`` of every window holding ``t``, in increasing start order."""
        return [(start, start + self.size_ms) for start in self.starts_of(t)]


def encode_key(key: Hashable) -> Any:
    """A key as msgpack-able plain data: a tuple becomes a list (a key is never a list)."""
    if isinstance(key, tuple):
        return [encode_key(item) for item in key]
    return key


def decode_key(data: Any) -> Any:
    """The key ``encode_key`` encoded, after a msgpack round trip (lists back to tuples)."""
    if isinstance(data, list | tuple):
        return tuple(decode_key(item) for item in data)
    return data


def copy_plain(data: Any) -> Any:
    """A copy of lists and dicts (accumulators are updated in place), other values shared."""
    if isinstance(data, list):
        return [copy_plain(item) for item in data]
    if isinstance(data, dict):
        return {k: copy_plain(v) for k, v in data.items()}
    return data


def check_snapshot(snap: Any, kind: str, spec: WindowSpec) -> dict[str, Any]:
    """``snap`` as a dict, after checking it was taken by ``kind`` with the same ``spec``."""
    if not isinstance(snap, dict) or snap.get("kind") != kind:
        raise ValueError(f"not a {kind} snapshot: {str(snap)[:80]}")
    if snap.get("version") != SNAPSHOT_VERSION:
        raise ValueError(
            f"{kind} snapshot version {snap.get('version')!r}: this code reads version"
            f" {SNAPSHOT_VERSION} (restart the stream from its source)"
        )
    taken = (snap.get("size_ms"), snap.get("slide_ms"), snap.get("allowed_lateness_ms"))
    wanted = (spec.size_ms, spec.slide, spec.allowed_lateness_ms)
    if taken != wanted:
        raise ValueError(
            f"{kind} snapshot taken with (size_ms, slide_ms, allowed_lateness_ms) = {taken},"
            f" restored with {wanted}: restore with the WindowSpec the snapshot was taken with"
        )
    return snap


class WindowState:
    """Per-key accumulators of every open window; ``add`` per record, ``advance`` per watermark.

    At most ``max_open_windows`` (key, window) accumulators are held: a record that would open
    one more is dropped for that window and counted ``state_full``.  Counters: ``records``,
    ``fired`` (results at watermarks), ``late_fired`` (updated results for late records),
    ``late_dropped`` (per window a record missed), ``state_full``.
    """

    def __init__(
        self, spec: WindowSpec, aggregate: Aggregate, *, max_open_windows: int = 1_000_000
    ) -> None:
        _check_int("max_open_windows", max_open_windows, "the bound on (key, window) states")
        if max_open_windows < 1:
            raise ValueError(f"max_open_windows={max_open_windows}: must be >= 1")
        self.spec = spec
        self.aggregate = aggregate
        self.max_open_windows = max_open_windows
        self._size = spec.size_ms
        self._lateness = spec.allowed_lateness_ms
        self._tumbling = spec.tumbling
        self._create = aggregate.create
        self._add = aggregate.add
        self._result = aggregate.result
        self._wm = MIN_WATERMARK
        self._windows: dict[int, dict[Any, Any]] = {}  # start -> key -> acc, keys first-seen
        self._pending: list[int] = []  # heap of the starts of windows not fired yet
        self._fired: list[int] = []  # heap of the starts of fired windows kept for lateness
        self._open = 0  # (key, window) accumulators held
        self._records = 0  # an int, not a Counter item: add() is the hot path
        self._counters: Counter[str] = Counter()

    @property
    def watermark(self) -> int:
        return self._wm

    @property
    def counters(self) -> Counter[str]:
        self._counters["records"] = self._records
        return self._counters

    @property
    def open_windows(self) -> int:
        """(key, window) accumulators held, fired ones kept for lateness included."""
        return self._open

    def add(self, key: Hashable, t: int, value: Any) -> list[Out]:
        """Folds a record into its windows; returns updated results of fired windows only."""
        self._records += 1
        if self._tumbling:
            start = t - t % self._size
            if start + self._size > self._wm:
                accs = self._windows.get(start)
                if accs is not None:
                    acc = accs.get(key, _MISSING)
                    if acc is not _MISSING:
                        accs[key] = self._add(acc, value)
                        return []
                self._fold(start, key, value, False)
                return []
            late = self._late(start, key, value)
            return [] if late is None else [late]
        out: list[Out] = []
        for start in self.spec.starts_of(t):
            if start + self._size > self._wm:
                self._fold(start, key, value, False)
            else:
                late = self._late(start, key, value)
                if late is not None:
                    out.append(late)
        return out

    def add_columns(self, keys: Any, ts: np.ndarray, values: Any) -> bool:
        """Folds a batch at once: ``keys`` a column (list or array, None: every key None),
        ``ts`` int64 event times, ``values`` the aggregated numbers (an int64 or float64
        array; anything for ``count``).  The same accumulators, in the same order of keys and
        with the same bits, as ``add`` per record in row order: sums are folded left to right
        from the accumulator (``np.add.at`` adds in index order, unbuffered).  Returns False,
        having changed nothing, where it does not apply (the caller adds per record): sliding
        windows, late records, a reduce, non-numeric values, float zeros or NaN for min/max
        (which of equal values is kept), int sums that could leave int64, or state that
        would pass ``max_open_windows``."""
        n = len(ts)
        kind = getattr(self.aggregate, "kind", "")
        if not n:
            return True
        if not self._tumbling or kind not in FOLDED_KINDS:
            return False
        if kind != "count":
            if not isinstance(values, np.ndarray) or values.dtype.kind not in "if":
                return False
            if (
                kind in ("min", "max")
                and values.dtype.kind == "f"
                and ((values == 0).any() or np.isnan(values).any())
            ):
                return False
        if int(ts.min()) <= -SAFE_T or int(ts.max()) >= SAFE_T:
            return False
        size = self._size
        starts = ts - ts % size
        if int(starts.min()) + size <= self._wm:
            return False  # a late record: folded per record, with its updated result
        try:
            codes, uniq, row_keys = _factorize(keys, n)
        except TypeError:  # an unhashable key: add() names it
            return False
        first_start = int(starts[0])
        if (starts == first_start).all():
            gid, group_starts = codes, None
        else:
            starts_u, starts_code = np.unique(starts, return_inverse=True)
            gid = starts_code * len(uniq) + codes
            group_starts = starts_u.tolist()
        groups, first, inverse = np.unique(gid, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # groups by first row: keys first seen
        slots: list[tuple[int, Any, Any]] = []  # (start, key, acc or _MISSING), group order
        fresh = 0
        nkeys = len(uniq)
        for g, row in zip(groups.tolist(), first.tolist(), strict=True):
            start = first_start if group_starts is None else group_starts[g // nkeys]
            # the group's first row's key, not its code's: keys equal as dict keys (1, True,
            # 1.0) share a code, and each window keeps the one first seen in it, as add() does
            key = uniq[g % nkeys] if row_keys is None else row_keys[row]
            accs = self._windows.get(start)
            acc = _MISSING if accs is None else accs.get(key, _MISSING)
            fresh += acc is _MISSING
            slots.append((start, key, acc))
        if self._open + fresh > self.max_open_windows:
            return False
        folded = self._fold_groups(kind, slots, inverse, values)
        if folded is None:
            return False
        self._records += n
        for i in order.tolist():
            start, key, acc = slots[i]
            accs = self._windows.get(start)
            if accs is None:
                accs = self._windows[start] = {}
                heappush(self._pending, start)
            if acc is _MISSING:
                self._open += 1
            accs[key] = folded[i]
        return True

    def _fold_groups(
        self, kind: str, slots: list[tuple[int, Any, Any]], inverse: np.ndarray, values: Any
    ) -> list[Any] | None:
        """Each group's accumulator after its rows (None: not exactly representable here)."""
        g = len(slots)
        old = [self._create() if acc is _MISSING else acc for _, _, acc in slots]
        if kind == "count":
            counts = np.bincount(inverse, minlength=g).tolist()
            return [a + c for a, c in zip(old, counts, strict=True)]
        if kind in ("sum", "mean"):
            sums = [a[0] for a in old] if kind == "mean" else old
            folded = _fold_sums(sums, inverse, values)
            if folded is None:
                return None
            if kind == "sum":
                return folded
            counts = np.bincount(inverse, minlength=g).tolist()
            return [[s, a[1] + c] for s, a, c in zip(folded, old, counts, strict=True)]
        # min, max: each group's extreme, then compared with the accumulator as add() does
        is_min = kind == "min"
        if values.dtype.kind == "f":
            fill = np.inf if is_min else -np.inf
        else:
            info = np.iinfo(np.int64)
            fill = info.max if is_min else info.min
        ext = np.full(g, fill, dtype=values.dtype)
        (np.minimum if is_min else np.maximum).at(ext, inverse, values)
        out: list[Any] = []
        for acc, x in zip(old, ext.tolist(), strict=True):
            acc = list(acc)
            if not acc:
                acc.append(x)
            elif (x < acc[0]) if is_min else (x > acc[0]):
                acc[0] = x
            out.append(acc)
        return out

    def _fold(self, start: int, key: Hashable, value: Any, fired: bool) -> bool:
        """Folds into window ``start``'s accumulator of ``key``; False when state is full."""
        accs = self._windows.get(start)
        if accs is not None:
            acc = accs.get(key, _MISSING)
            if acc is not _MISSING:
                accs[key] = self._add(acc, value)
                return True
        if self._open >= self.max_open_windows:
            self._counters["state_full"] += 1
            return False
        acc = self._add(self._create(), value)  # a bad value raises before anything is held
        if accs is None:
            accs = self._windows[start] = {}
            heappush(self._fired if fired else self._pending, start)
        accs[key] = acc
        self._open += 1
        return True

    def _late(self, start: int, key: Hashable, value: Any) -> Out | None:
        end = start + self._size
        if end + self._lateness <= self._wm:
            self._counters["late_dropped"] += 1
            return None
        if not self._fold(start, key, value, True):
            return None
        self._counters["late_fired"] += 1
        acc = self._windows[start][key]
        return (end - 1, key, {"key": key, "start": start, "end": end, "value": self._result(acc)})

    def advance(self, watermark: int) -> list[Out]:
        """Fires windows with ``end <= watermark`` (by end, start, key first seen), then purges
        those past their lateness.  A watermark not above the current one is ignored."""
        if watermark <= self._wm:
            return []
        self._wm = watermark
        out = self._fire(watermark)
        size_and_lateness = self._size + self._lateness
        fired = self._fired
        while fired and fired[0] + size_and_lateness <= watermark:
            self._open -= len(self._windows.pop(heappop(fired)))
        return out

    def _fire(self, watermark: int) -> list[Out]:
        out: list[Out] = []
        size, pending, result = self._size, self._pending, self._result
        while pending and pending[0] + size <= watermark:
            start = heappop(pending)
            end = start + size
            for key, acc in self._windows[start].items():
                value = {"key": key, "start": start, "end": end, "value": result(acc)}
                out.append((end - 1, key, value))
            heappush(self._fired, start)
        self._counters["fired"] += len(out)
        return out

    def flush(self) -> list[Out]:
        """End of stream: fires every window still open and drops all state."""
        self._wm = MAX_WATERMARK
        out = self._fire(MAX_WATERMARK + self._size)
        self._windows.clear()
        self._fired.clear()
        self._open = 0
        return out

    def snapshot(self) -> dict[str, Any]:
        """The state as msgpack-able plain data (str map keys; keys encoded by ``encode_key``)."""
        return {
            "kind": "WindowState",
            "version": SNAPSHOT_VERSION,
            "size_ms": self.spec.size_ms,
            "slide_ms": self.spec.slide,
            "allowed_lateness_ms": self._lateness,
            "watermark": self._wm,
            "counters": dict(self.counters),
            "windows": [
                [start, [[encode_key(key), copy_plain(acc)] for key, acc in accs.items()]]
                for start, accs in sorted(self._windows.items())
            ],
        }

    @classmethod
    def restore(
        cls,
        spec: WindowSpec,
        aggregate: Aggregate,
        snap: Any,
        *,
        max_open_windows: int = 1_000_000,
    ) -> WindowState:
        """The state ``snapshot`` returned (after a msgpack round trip, lists by default)."""
        data = check_snapshot(snap, "WindowState", spec)
        state = cls(spec, aggregate, max_open_windows=max_open_windows)
        try:
            state._wm = int(data["watermark"])
            state._counters.update({str(k): int(v) for k, v in data["counters"].items()})
            state._records = state._counters["records"]
            for start, entries in data["windows"]:
                # list accumulators are updated in place: one unpacked as a tuple is listed
                state._windows[start] = {
                    decode_key(key): list(acc) if isinstance(acc, tuple) else acc
                    for key, acc in entries
                }
                state._open += len(entries)
                ended = start + spec.size_ms <= state._wm
                (state._fired if ended else state._pending).append(start)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"malformed WindowState snapshot ({exc!r})") from None
        heapify(state._pending)
        heapify(state._fired)
        return state


def _factorize(keys: Any, n: int) -> tuple[np.ndarray, list[Any], list[Any] | None]:
    """(code of each row's key, the keys by code, each row's key; None: all None) with dict
    equality, as the per-record path's dict lookups; TypeError for an unhashable key."""
    if keys is None:
        return np.zeros(n, dtype=np.int64), [None], None
    items = keys.tolist() if isinstance(keys, np.ndarray) else keys
    index = dict.fromkeys(items)  # first seen first; a dict's equality, as the per-record path
    for code, k in enumerate(index):
        index[k] = code
    codes = np.array(list(map(index.__getitem__, items)), dtype=np.int64).reshape(n)
    return codes, list(index), items


def _fold_sums(sums: list[Any], inverse: np.ndarray, values: np.ndarray) -> list[Any] | None:
    """Each group's sum folded left to right from ``sums`` over its rows of ``values``, with
    the types ``+`` gives (int + int an int; a float on either side a float); None when that
    cannot be done exactly in one numpy type."""
    types = set(map(type, sums))
    if not types <= {int, float}:
        return None
    if values.dtype.kind == "f" or types == {float}:
        # float + int is float + float(int) in Python too
        try:
            seed = np.array([float(s) for s in sums], dtype=np.float64)
        except OverflowError:
            return None
        # inf and nan quietly, as Python's float + (a warning is an error under -W error)
        with np.errstate(over="ignore", invalid="ignore"):
            np.add.at(seed, inverse, values.astype(np.float64, copy=False))
        return seed.tolist()  # type: ignore[no-any-return]
    if types != {int}:
        return None  # int values onto int and float sums: two types of result
    # ints: exact while nothing can leave int64
    low, high = int(values.min()), int(values.max())
    bound = max(abs(s) for s in sums) + len(values) * max(abs(low), abs(high))
    if bound >= 2**62:
        return None
    seed = np.array(sums, dtype=np.int64)
    np.add.at(seed, inverse, values)
    return seed.tolist()  # type: ignore[no-any-return]
