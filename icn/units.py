"""Quantities with units as users write them (scenario and graph files, CLI options): ``10ms``,
``1.5s``, ``5%``, ``10Mbit``.

Each parser takes a str (or a bare number in the base unit) and returns a float in the base unit
(seconds, a probability in [0, 1], bits per second), or raises ValueError with the forms it
accepts, so pydantic reports the field, the value and the fix.
"""

from __future__ import annotations

import re

_NUMBER = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
_QUANTITY = re.compile(rf"^\s*({_NUMBER})\s*([A-Za-z%/]*)\s*$")

_TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_RATE_UNITS = {
    "bit": 1.0,
    "bps": 1.0,
    "kbit": 1e3,
    "kbps": 1e3,
    "mbit": 1e6,
    "mbps": 1e6,
    "gbit": 1e9,
    "gbps": 1e9,
}


def _split(value: object, what: str, examples: str) -> tuple[float, str]:
    if isinstance(value, bool):
        raise ValueError(f"expected {what}, e.g. {examples}; got {value!r}")
    if isinstance(value, int | float):
        return float(value), ""
    if not isinstance(value, str):
        raise ValueError(f"expected {what}, e.g. {examples}; got {value!r}")
    m = _QUANTITY.match(value)
    if m is None:
        raise ValueError(f"{value!r} is not {what}; write it like {examples}")
    return float(m.group(1)), m.group(3).lower()


def parse_duration(value: object) -> float:
    """Seconds from ``250ms``, ``1.5s``, ``2m``, ``100us``, ``90d`` or a bare number of seconds."""
    examples = "250ms, 1.5s, 2m (a bare number means seconds)"
    number, unit = _split(value, "a duration", examples)
    if unit and unit not in _TIME_UNITS:
        known = ", ".join(_TIME_UNITS)
        raise ValueError(f"{value!r}: unknown time unit {unit!r}; use one of {known}")
    seconds = number * _TIME_UNITS.get(unit, 1.0)
    if seconds < 0:
        raise ValueError(f"{value!r}: a duration cannot be negative")
    return seconds


def parse_probability(value: object) -> float:
    """A probability from ``5%`` or ``0.05``."""
    examples = "5% or 0.05"
    number, unit = _split(value, "a loss rate", examples)
    if unit == "%":
        number /= 100.0
    elif unit:
        raise ValueError(f"{value!r}: write a percentage like 5% or a fraction like 0.05")
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{value!r} is outside 0%..100%")
    return number


def parse_rate(value: object) -> float:
    """Bits per second from ``10Mbit``, ``1Gbps``, ``500kbit`` or a bare number of bits/s."""
    examples = "500kbit, 10Mbit, 1Gbps (a bare number means bits/s)"
    number, unit = _split(value, "a link rate", examples)
    unit = unit[:-2] if unit.endswith("/s") else unit
    if unit and unit not in _RATE_UNITS:
        raise ValueError(f"{value!r}: unknown rate unit {unit!r}; write it like {examples}")
    bps = number * _RATE_UNITS.get(unit, 1.0)
    if bps <= 0:
        raise ValueError(f"{value!r}: a link rate must be > 0")
    return bps


def format_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    return f"{seconds:g}s"
