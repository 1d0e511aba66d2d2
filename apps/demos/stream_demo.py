"""Functions the example graphs name (``apps.demos.stream_demo:to_celsius``...): sensor readings in
Fahrenheit become Celsius, window means above a threshold become alerts."""

from __future__ import annotations

from typing import Any

ALERT_ABOVE = 30.0  # degrees Celsius


def to_celsius(reading: dict[str, Any]) -> dict[str, Any]:
    """``{"sensor", "value"}`` in Fahrenheit -> ``{"sensor", "celsius"}``."""
    return {"sensor": reading["sensor"], "celsius": (reading["value"] - 32.0) * 5.0 / 9.0}


def scale(reading: dict[str, Any]) -> dict[str, Any]:
    """The benchmark's map: one arithmetic operation on one field."""
    return {"sensor": reading["sensor"], "value": reading["value"] * 1.8 + 32.0}


def is_alert(window: dict[str, Any]) -> bool:
    """A window mean above ALERT_ABOVE."""
    return bool(window["value"] > ALERT_ABOVE)


def to_alert(window: dict[str, Any]) -> dict[str, Any]:
    return {
        "sensor": window["key"],
        "mean_celsius": round(window["value"], 3),
        "window_start_ms": window["start"],
        "window_end_ms": window["end"],
    }


NUMBERED_KEYS = 8


def numbered(i: int) -> dict[str, Any]:
    """Generator record ``i`` that carries its own number: ``{"sensor": "s<i % 8>", "ids":
    [i]}``; a window reducing ``ids`` with :func:`concat` lists every record it holds, so a
    checker can tell a lost or repeated record (``apps.stream_entries:window_check``)."""
    return {"sensor": f"s{i % NUMBERED_KEYS}", "ids": [i]}


def concat(acc: list[int], ids: list[int]) -> list[int]:
    """A window reduce: the record numbers of the window, in arrival order."""
    return [*acc, *ids]


def scale_columns(batch: Any) -> dict[str, Any]:
    """:func:`scale` of a whole batch (a vectorized map's ``fn``): the same arithmetic on the
    ``value`` column, so each result has the same bits as the per-record form."""
    return {"sensor": batch["sensor"], "value": batch["value"] * 1.8 + 32.0}
