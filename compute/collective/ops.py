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
}
OPS = tuple(_UFUNCS)


def check_op(op: str) -> str:
    if op not in _UFUNCS:
        raise ConfigError(f"op {op!r}: use one of {', '.join(OPS)}")
    return op


def fold(parts: Sequence[np.ndarray[Any, Any]], op: str) -> np.ndarray[Any, Any]:
    """((p0 op p1) op p2) ... into a new array (integers wrap as numpy's do)."""
    ufunc = _UFUNCS[check_op(op)]
    acc = np.array(parts[0], copy=True)
    for part in parts[1:]:
        ufunc(acc, part, out=acc)
    return acc


def finish(total: np.ndarray[Any, Any], op: str, workers: int) -> np.ndarray[Any, Any]:
    """What a worker makes of the reduction it received (the mean divides the sum)."""
    if op == "mean":
        return np.asarray(total / workers)
    return total
