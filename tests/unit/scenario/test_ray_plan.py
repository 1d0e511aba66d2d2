"""The ray backend's decisions without a cluster: placement (labels, custom resources, spread,
refusals that name what exists), the ``placement:`` section of a scenario, the files and command
lines shipped to an agent, and the errors when Ray is missing or no address is given."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from apps.scenario import ray_backend
from apps.scenario.loader import ScenarioError, parse_scenario
from apps.scenario.ray_agent import PYTHON
from apps.scenario.ray_backend import RayBackend, cluster_address, import_ray
from apps.scenario.ray_placement import RayNode, live_nodes, place
from apps.scenario.schema import Scenario
from icn.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]


def ray_node(i: int, labels: dict[str, str], resources: dict[str, float] | None = None) -> Any:
    """One entry of ``ray.nodes()`` as Ray gives it."""
    return {
        "NodeID": f"{i:02d}" * 28,
        "Alive": True,
        "NodeManagerAddress": f"10.9.0.{i + 1}",
        "Labels": {"ray.io/node-id": f"{i:02d}" * 28, **labels},
        "Resources": {"CPU": 1.0, "memory": 1e9, f"node:10.9.0.{i + 1}": 1.0, **(resources or {})},
    }


CLUSTER = [
    ray_node(0, {"zone": "core"}),
    ray_node(1, {"zone": "edge"}, {"gpu_box": 1.0}),
    ray_node(2, {"zone": "edge"}),
    {**ray_node(3, {"zone": "mars"}), "Alive": False},  # dead: its labels are not offered
]


def scenario(nodes: int, placement: dict[str, Any] | None = None) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "t",
            "nodes": {f"n{i}": {} for i in range(nodes)},
            "placement": placement or {},
        }
    )


def addresses(placed: dict[str, RayNode]) -> dict[str, str]:
    return {name: n.address for name, n in placed.items()}


def test_unplaced_nodes_spread_over_the_live_nodes() -> None:
    placed = place(scenario(5), live_nodes(CLUSTER))
    assert addresses(placed) == {
        "n0": "10.9.0.1",
        "n1": "10.9.0.2",
        "n2": "10.9.0.3",
        "n3": "10.9.0.1",
        "n4": "10.9.0.2",
    }


def test_labels_and_resources_choose_and_the_rest_fill_in_around_them() -> None:
    sc = scenario(
        4,
        {
            "n0": {"label": "zone=edge"},
            "n1": {"label": "zone=edge"},
            "n2": {"resource": "gpu_box"},
        },
    )
    placed = addresses(place(sc, live_nodes(CLUSTER)))
    # both edge nodes used before one takes a second; the gpu box is node 1; n3 goes to the
    # least loaded node, the core one
    assert placed == {"n0": "10.9.0.2", "n1": "10.9.0.3", "n2": "10.9.0.2", "n3": "10.9.0.1"}


def test_a_label_no_live_node_has_is_refused_naming_the_labels_that_exist() -> None:
    sc = scenario(2, {"n1": {"label": "zone=mars"}, "n0": {"resource": "tpu"}})
    with pytest.raises(ConfigError) as info:
        place(sc, live_nodes(CLUSTER))
    text = str(info.value)
    assert "placement.n1: no Ray node has the label zone=mars" in text
    assert "the labels are zone=core, zone=edge" in text
    assert "placement.n0: no Ray node has the custom resource tpu" in text
    assert "the custom resources are gpu_box" in text
    assert "node:10.9" not in text and "CPU" not in text


def test_a_node_id_label_pins_a_node() -> None:
    sc = scenario(1, {"n0": {"label": f"ray.io/node-id={'02' * 28}"}})
    assert addresses(place(sc, live_nodes(CLUSTER))) == {"n0": "10.9.0.3"}


def test_no_live_node() -> None:
    with pytest.raises(ConfigError, match="no live node"):
        place(scenario(1), live_nodes([CLUSTER[3]]))


PLACED = """\
name: t
backend: ray
nodes: {a: {}, b: {}}
placement:
  a: {label: zone=edge}
  b: {resource: gpu_box}
"""


def test_the_placement_section_parses() -> None:
    sc = parse_scenario(PLACED, check_entries=False)
    assert sc.backend == "ray"
    assert sc.placement["a"].label_pair == ("zone", "edge")
    assert sc.placement["b"].resource == "gpu_box"


@pytest.mark.parametrize(
    ("placement", "message"),
    [
        ("  c: {label: zone=edge}", "placement.c: no node named 'c'; the nodes are a, b"),
        ("  a: {label: zone}", "'zone': write a label as key=value, e.g. zone=edge"),
        ("  a: {label: zone=edge, resource: gpu}", "give one of label"),
        ("  a: {}", "give one of label"),
        ("  a: {lable: zone=edge}", "unknown field 'lable'"),
    ],
)
def test_bad_placements_are_refused_with_their_line(placement: str, message: str) -> None:
    text = "name: t\nnodes: {a: {}, b: {}}\nplacement:\n" + placement + "\n"
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "s.yaml", check_entries=False)
    found = [p.format("s.yaml") for p in info.value.problems]
    assert any(message in p and p.startswith("s.yaml:4:") for p in found), found


def test_files_and_command_lines_are_shipped_with_the_agents_paths(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "procs").mkdir(parents=True)
    spec = out / "procs" / "w.json"
    spec.write_text(json.dumps({"run_dir": str(out), "results": f"{out}/results/w.jsonl"}))
    backend = RayBackend(scenario(1), "0a1b2c", out, "10.9.0.1:6379")
    argv, files = backend._ship(
        [sys.executable, "-m", "apps.scenario.entry", str(spec), f"--out={out}/x"], "/r/run"
    )
    assert argv == [PYTHON, "-m", "apps.scenario.entry", "/r/run/procs/w.json", "--out=/r/run/x"]
    assert json.loads(files["procs/w.json"]) == {
        "run_dir": "/r/run",
        "results": "/r/run/results/w.jsonl",
    }
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("x")
    argv, files = backend._ship(["prog", str(outside)], "/r/run")
    assert argv == ["prog", str(outside)] and files == {}


def test_a_relative_output_folder_is_shipped_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "q" / "config").mkdir(parents=True)
    Path("runs/q/config/a.yaml").write_text("unix: /r/fwd.sock\nout: runs/q\n")
    backend = RayBackend(scenario(1), "0a1b2c", Path("runs/q"), "10.9.0.1:6379")
    argv, files = backend._ship(["icn", "--config", "runs/q/config/a.yaml"], "/r/run")
    assert argv == ["icn", "--config", "/r/run/config/a.yaml"]
    assert files == {"config/a.yaml": b"unix: /r/fwd.sock\nout: /r/run\n"}


def test_a_missing_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(ConfigError, match=r"pip install -e \.\[ray\]"):
        import_ray()


def test_no_address_names_the_option_and_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ray_backend.ADDRESS_ENV, raising=False)
    with pytest.raises(ConfigError, match=r"--ray-address HOST:PORT .* or RAY_ADDRESS"):
        cluster_address(None)
    monkeypatch.setenv(ray_backend.ADDRESS_ENV, "10.9.0.1:6379")
    assert cluster_address(None) == "10.9.0.1:6379"
    assert cluster_address("10.9.0.2:6379") == "10.9.0.2:6379"


def test_ray_is_imported_only_when_a_ray_run_starts() -> None:
    code = (
        "import sys, apps.scenario.runner, apps.scenario.ray_backend, apps.cli.scenario; "
        "print('ray' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.strip() == "False"
