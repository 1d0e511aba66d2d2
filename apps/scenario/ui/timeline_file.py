"""``timeline.json`` in a run's output directory: written after each run, read by ``icn scenario
view``.  Reading checks the shape the page relies on, so that a foreign or damaged file is an
error naming what is wrong, not a page that breaks in the browser."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from apps.scenario.ui.model import TIMELINE_FILE, TIMELINE_VERSION
from icn.errors import ConfigError

AGAIN = "run the scenario again (icn scenario run writes it)"


def write_timeline(data: dict[str, Any], out_dir: Path) -> Path:
    path = out_dir / TIMELINE_FILE
    path.write_text(json.dumps(data))
    return path


def read_timeline(run_dir: Path) -> dict[str, Any]:
    """The checked content of ``run_dir/timeline.json``; ConfigError says what is wrong."""
    path = run_dir / TIMELINE_FILE
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: not a directory; give the output directory of a run")
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(
            f"{path}: {exc.strerror}; give the output directory of a run "
            "(icn scenario run writes timeline.json there)"
        ) from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path} is not JSON ({exc}); was it cut short? {AGAIN}") from None
    problem = check_timeline(data)
    if problem:
        raise ConfigError(f"{path}: {problem}; {AGAIN}")
    result: dict[str, Any] = data
    return result


def check_timeline(data: Any) -> str | None:
    """What in ``data`` is not a timeline the page can replay, or None."""
    if not isinstance(data, dict):
        return "not a timeline (a JSON object with version, topology and frames)"
    if data.get("version") != TIMELINE_VERSION:
        return f"version {data.get('version')!r}: this icn replays version {TIMELINE_VERSION}"
    topo = data.get("topology")
    if not isinstance(topo, dict):
        return "topology: missing or not an object"
    for key in ("nodes", "links"):
        if not isinstance(topo.get(key), list):
            return f"topology.{key}: missing or not a list"
    for i, node in enumerate(topo["nodes"]):
        if not (isinstance(node, dict) and isinstance(node.get("name"), str)):
            return f"topology.nodes[{i}]: not a node with a name"
        pos = node.get("pos")
        if not (isinstance(pos, list) and len(pos) == 2):
            return f"topology.nodes[{i}].pos: not [x, y]"
    names = {n["name"] for n in topo["nodes"]}
    for i, link in enumerate(topo["links"]):
        if not isinstance(link, dict) or not {link.get("a"), link.get("b")} <= names:
            return f"topology.links[{i}]: its ends a and b are not nodes of the topology"
    frames = data.get("frames")
    if not isinstance(frames, list):
        return "frames: missing or not a list"
    for i, f in enumerate(frames):
        if not (isinstance(f, dict) and isinstance(f.get("t"), int | float)):
            return f"frames[{i}]: not a frame with a time t"
    if not isinstance(data.get("workloads", {}), dict):
        return "workloads: not an object"
    return None
