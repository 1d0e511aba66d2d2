"""Where the page draws each node when the scenario's graph file says: ``x``/``y`` or
``lon``/``lat`` of its nodes (:mod:`apps.scenario.topology_file` allows them and the run ignores
them).  Without them the page falls back on a seeded spring layout (:func:`model.layout`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from apps.scenario.graph_records import GraphFormatError

if TYPE_CHECKING:
    from apps.scenario.schema import Scenario


def file_positions(sc: Scenario, scenario_dir: Path | None) -> dict[str, list[float]] | None:
    """Positions in [0, 1] from the graph file ``sc.topology`` names (relative to
    ``scenario_dir``, as the loader reads it); None unless every node of the run has them."""
    from apps.scenario.topology_file import READERS

    if sc.topology is None or scenario_dir is None:
        return None
    path = scenario_dir / sc.topology
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        return None
    try:
        raw = reader(path.read_bytes())
    except (OSError, GraphFormatError):
        return None  # the loader read it moments ago; if it is gone now, draw a layout
    points: dict[str, tuple[float, float]] = {}
    for node in raw.nodes:
        xy = _point({k: a.value for k, a in node.attrs.items()})
        if xy is not None:
            points[node.name] = xy
    if not set(sc.nodes) <= set(points):
        return None
    return fit({n: points[n] for n in sc.nodes})


def _point(attrs: dict[str, object]) -> tuple[float, float] | None:
    """(x, y) with y up: ``lon``/``lat`` as a map has them; ``x``/``y`` as drawing tools write
    them, y growing down the page (the shipped research-net's north is at small y)."""
    for kx, ky, flip in (("lon", "lat", 1.0), ("x", "y", -1.0)):
        try:
            return float(attrs[kx]), flip * float(attrs[ky])  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError):
            continue
    return None


def fit(points: dict[str, tuple[float, float]]) -> dict[str, list[float]]:
    """Scale into [0, 1] keeping the aspect ratio (a map stays a map), centred."""
    xs = [p[0] for p in points.values()]
    ys = [p[1] for p in points.values()]
    x0, y0 = min(xs), min(ys)
    w, h = max(xs) - x0, max(ys) - y0
    span = max(w, h) or 1.0
    dx, dy = (span - w) / 2, (span - h) / 2
    return {
        n: [round((x - x0 + dx) / span, 6), round((y - y0 + dy) / span, 6)]
        for n, (x, y) in points.items()
    }
