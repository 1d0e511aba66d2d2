"""The functions examples/stream_graph.yaml names (``sensors:to_celsius``...): found on the
import path, here because the example script's directory is on it."""

from __future__ import annotations

from typing import Any


def to_celsius(reading: dict[str, Any]) -> dict[str, Any]:
    """``{"sensor", "value"}`` in Fahrenheit -> ``{"sensor", "celsius"}``."""
    return {"sensor": reading["sensor"], "celsius": round((reading["value"] - 32.0) / 1.8, 2)}


def summary(window: dict[str, Any]) -> dict[str, Any]:
    """A window's mean as one record: the sensor, the window's start (ms) and the mean."""
    return {
        "sensor": window["key"],
        "from_ms": window["start"],
        "mean_celsius": round(window["value"], 2),
    }
