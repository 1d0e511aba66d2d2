"""Declaring tasks and actors: names executors import them by, resources checked, lineage
names deterministic, and the errors a user meets named with the fix."""

from __future__ import annotations

import pytest

from compute.tasks import actor, task
from compute.tasks.declare import qualified_name, resolve
from compute.tasks.names import check_node_id, lineage_digest, node_of
from icn.errors import ConfigError


@task(deterministic=True, num_cpus=2)
def double(x: int) -> int:
    return 2 * x


def plain(x: int) -> int:
    return x


aliased = task(plain)


@actor
class Box:
    def __init__(self) -> None:
        self.v = 0


MOD = __name__


def test_tasks_are_named_by_module_and_qualname_and_still_run_locally() -> None:
    assert double.spec.name == f"{MOD}:double" and double.spec.num_cpus == 2
    assert double(4) == 8
    assert double.options(num_cpus=0.5).spec.num_cpus == 0.5
    assert Box.spec.name == f"{MOD}:Box" and Box().v == 0


def test_an_executor_resolves_only_the_modules_it_was_given() -> None:
    assert resolve(f"{MOD}:double", frozenset({MOD})) is double
    assert resolve(f"{MOD}:plain", frozenset({MOD})) is aliased  # task(fn) under another name
    assert resolve(f"{MOD}:Box", frozenset({MOD})) is Box
    with pytest.raises(KeyError, match=r"not served here.*--module tests.unit"):
        resolve(f"{MOD}:double", frozenset({"other"}))
    with pytest.raises(KeyError, match="not marked @task"):
        resolve(f"{MOD}:MOD", frozenset({MOD}))
    with pytest.raises(KeyError, match="has no nothing"):
        resolve(f"{MOD}:nothing", frozenset({MOD}))


def test_resources_and_places_a_task_cannot_live_are_refused() -> None:
    with pytest.raises(ConfigError, match="num_cpus must be >= 0"):
        task(num_cpus=-1)(plain)
    with pytest.raises(ConfigError, match="memory must be >= 0"):
        double.options(memory=-5)

    def local() -> None: ...

    with pytest.raises(ConfigError, match="top level"):
        qualified_name(local)
    with pytest.raises(ConfigError, match="is an @actor"):
        task(Box.cls)


def test_lineage_names_the_same_call_the_same_and_any_change_otherwise() -> None:
    a = lineage_digest("m:f", b"\x92\x91\x01\x80", [])
    assert a == lineage_digest("m:f", b"\x92\x91\x01\x80", [])
    assert a != lineage_digest("m:g", b"\x92\x91\x01\x80", [])
    assert a != lineage_digest("m:f", b"\x92\x91\x02\x80", [])
    assert lineage_digest("m:f", b"", ["/cfn/obj/x"]) != lineage_digest("m:f", b"", ["/cfn/obj/y"])


def test_executor_ids() -> None:
    assert check_node_id("n-1.a_b") == "n-1.a_b"
    for bad in ("", "-x", "a/b", "x" * 64):
        with pytest.raises(ConfigError, match="executor id"):
            check_node_id(bad)
    assert node_of("/cfn/node/n1") == "n1"
    assert node_of("/cfn/node/n1/extra") is None and node_of("/svc") is None
