"""The reductions, applied in a fixed order so every run and every worker gets the same bits.

Addition of floats is not associative: an aggregator folds its children left to right in the
plan's order, and :func:`fold` is the one place that does it (the reference in tests uses it
too), so "equal to numpy's reduction in the same order" holds by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from icn.errors import ConfigError

# mean is a sum on the wire; each worker divides the one sum it receives by the worker count
_UFUNCS: dict[str, np.ufunc] = {
    "sum": np.add,
    "mean": np.add,
    "max": np.maximum,
    "min": np.minimum,
    "prod": np.multiply,
}
OPS = tuple(_UFUNCS)
"""The reduction operations' names: sum, mean, max, min, prod."""


def check_op(op: str) -> str:
    if op not in _UFUNCS:
        raise ConfigError(f"op {op!r}: use one of {', '.join(OPS)}")
    return op


def fold(
    parts: Sequence[np.ndarray[Any, Any]], op: str, out: np.ndarray[Any, Any] | None = None
) -> np.ndarray[Any, Any]:
    """((p0 op p1) op p2) ... into ``out`` (an array of the parts' dtype and length, e.g. a
    buffer reused for every chunk), or a new array (integers wrap as numpy's do)."""
    ufunc = _UFUNCS[check_op(op)]
    if out is None:
        acc = np.array(parts[0], copy=True)  # an array, also for 0-d parts (not a scalar)
        rest = parts[1:]
    elif len(parts) == 1:
        out[...] = parts[0]
        return out
    else:
        # p0 op p1 straight into out (p0 is read once, not copied there first)
        acc = ufunc(parts[0], parts[1], out=out)
        rest = parts[2:]
    for part in rest:
        ufunc(acc, part, out=acc)
    return acc


def finish(
    total: np.ndarray[Any, Any], op: str, workers: int, in_place: bool = False
) -> np.ndarray[Any, Any]:
    """What a worker makes of the reduction it received (the mean divides the sum; with
    ``in_place``, into ``total``: a float array the caller gave for the result)."""
    if op == "mean":
        if in_place:
            divided: np.ndarray[Any, Any] = np.divide(total, workers, out=total)
            return divided
        return np.asarray(total / workers)
    return total
