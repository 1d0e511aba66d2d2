"""Exact equality of plain data for the stream property tests: ``==`` takes 1 for True, 1.0
for 1 and -0.0 for 0.0, and never finds a NaN equal; here types and float bits must agree
(dict keys too, in any order).

A NaN equals any NaN: which NaN's sign a sum of two NaNs keeps is up to the compiled code,
and differs within CPython itself: in 3.11 ``-nan + nan`` gives 7ff8... the first few times a
function runs and fff8... once the interpreter has specialized its add for floats.
"""

from __future__ import annotations

import math
import struct
from typing import Any

_DOUBLE = struct.Struct("<d")


def _bits(x: float) -> str:
    return _DOUBLE.pack(x)[::-1].hex()


def differences(a: Any, b: Any, at: str = "") -> list[str]:
    """Where ``a`` and ``b`` differ (empty: the same), each a path and the two sides."""
    where = at or "."
    if type(a) is not type(b):
        return [f"{where}: {type(a).__name__} {a!r:.200} vs {type(b).__name__} {b!r:.200}"]
    if isinstance(a, float):
        if _bits(a) == _bits(b) or (math.isnan(a) and math.isnan(b)):
            return []
        return [f"{where}: {a!r} vs {b!r} (bits {_bits(a)} vs {_bits(b)})"]
    if isinstance(a, list | tuple):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items vs {len(b)}: {a!r:.200} vs {b!r:.200}"]
        items = enumerate(zip(a, b, strict=True))
        return [d for i, (x, y) in items for d in differences(x, y, f"{at}[{i}]")]
    if isinstance(a, dict):
        # the same keys, of the same types; their order is not compared: columns put a
        # record's fields back in the first record's order (compute/stream/columns.py)
        b_keys = {k: k for k in b}
        if len(a) != len(b) or any(k not in b_keys or differences(k, b_keys[k]) for k in a):
            return [f"{where}: keys {list(a)!r:.200} vs {list(b)!r:.200}"]
        return [d for k, x in a.items() for d in differences(x, b[k], f"{at}[{k!r}]")]
    return [] if a == b else [f"{where}: {a!r:.200} vs {b!r:.200}"]


def assert_same(a: Any, b: Any, what: str) -> None:
    found = differences(a, b)
    assert not found, f"{what}: " + "; ".join(found[:5])
