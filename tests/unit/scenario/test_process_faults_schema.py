"""Schema and reference checks of the process-level features: faults on services and
workloads, co-located services, and metric expectations."""

from __future__ import annotations

import pytest

from apps.scenario.loader import ScenarioError, parse_scenario
from apps.scenario.schema import FaultSpec, Scenario

BASE = """\
name: t
nodes:
  a: {}
  b: {}
links:
  - {between: [a, b]}
services:
  - {name: agg-b, node: b, entry: 'apps.workloads:producer'}
  - {name: co-b, node: b, entry: 'apps.workloads:producer', colocate: true}
workloads:
  - {name: w, node: a, entry: 'apps.workloads:consumer'}
"""


def problems(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "s.yaml", check_entries=False)
    return [p.format("s.yaml") for p in info.value.problems]


def parse(text: str) -> Scenario:
    return parse_scenario(text, "s.yaml", check_entries=False)


def test_colocate_defaults_to_false() -> None:
    sc = parse(BASE)
    assert [s.colocate for s in sc.services] == [False, True]
    (msg,) = problems(BASE.replace("colocate: true", "colocate: maybe"))
    assert msg.startswith("s.yaml:9:61: services[1].colocate:")


def test_kill_and_restart_name_a_node_a_service_or_a_workload() -> None:
    sc = parse(
        BASE
        + "faults:\n  - {at: 1s, kill: agg-b}\n  - {at: 2s, restart: agg-b}\n"
        + "  - {at: 3s, kill: w}\n  - {at: 4s, kill: b}\n"
    )
    kinds = [sc.kind_of(str(f.target)) for f in sc.faults]
    assert kinds == ["service", "service", "workload", "node"]
    assert [f.describe(k) for f, k in zip(sc.faults, kinds, strict=True)] == [
        "kill service agg-b",
        "restart service agg-b",
        "kill workload w",
        "kill b",
    ]


def test_an_unknown_target_lists_every_kind_of_name() -> None:
    (msg,) = problems(BASE + "faults:\n  - {at: 1s, kill: agg-c}\n")
    assert msg == (
        "s.yaml:13:14: faults[0].kill: no node, service or workload named 'agg-c'; the nodes are "
        "a, b, the services are agg-b, co-b, the workloads are w"
    )


def test_a_colocated_service_cannot_be_killed_alone() -> None:
    (kill,) = problems(BASE + "faults:\n  - {at: 1s, kill: co-b}\n")
    assert kill == (
        "s.yaml:13:14: faults[0].kill: co-b is co-located with node b: kill the node, or set "
        "colocate: false"
    )
    (restart,) = problems(BASE + "faults:\n  - {at: 1s, restart: co-b}\n")
    assert "restart the node, or set colocate: false" in restart


def test_a_process_may_not_share_a_node_name() -> None:
    (msg,) = problems(BASE.replace("name: agg-b,", "name: b,"))
    assert msg == (
        "s.yaml:8:6: services[0].name: 'b' is also a node's name, so a fault's kill: b would "
        "be ambiguous; rename the service"
    )
    (msg,) = problems(BASE.replace("name: w,", "name: a,"))
    assert "rename the workload" in msg and msg.startswith("s.yaml:11:6: workloads[0].name:")


def test_metric_expectations() -> None:
    sc = parse(
        BASE + "report:\n  expect:\n    - {metric: bytes_resent, max: 0}\n"
        "    - {metric: served, process: agg-b, min: 1, max: 10}\n"
    )
    first, second = sc.report.expect
    assert first.workload is None and first.subject == "metric bytes_resent"
    assert second.subject == "metric served of agg-b"


@pytest.mark.parametrize(
    ("item", "expect"),
    [
        ("{metric: m}", "metric m: give min, max, max_share or min_share"),
        ("{metric: m, min_throughput: 5}", "min_throughput: a workload criterion"),
        ("{workload: w, min: 5}", "min: only a metric expectation takes this"),
        ("{workload: w, metric: m, min: 1}", "workload, metric: an expectation is about"),
        ("{min: 1}", "needs 'workload' (with min_success_ratio"),
        ("{metric: m, min: 5, max: 1}", "min 5 is above max 1"),
        ("{metric: m, process: nobody, min: 1}", "no service or workload named 'nobody'"),
        ("{metric: '', min: 1}", "report.expect[0].metric"),
    ],
)
def test_bad_expectations_name_the_field(item: str, expect: str) -> None:
    (msg,) = problems(BASE + f"report:\n  expect:\n    - {item}\n")
    assert msg.startswith("s.yaml:14:") and ": report.expect[0]" in msg and expect in msg, msg


def test_fault_describe_without_kind_is_unchanged() -> None:
    assert FaultSpec.model_validate({"at": 1, "kill": "b"}).describe() == "kill b"
    assert FaultSpec.model_validate({"at": 1, "cut": "a-b"}).describe("node") == "cut a-b"
