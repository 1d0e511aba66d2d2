"""Tasks and actors on named functions: compute-first networking (docs/design.md section 11).

Declare (in a module the executors import: ``icn tasks executor --id n1 --module mymod``)::

    from compute.tasks import task, actor

    @task(deterministic=True)
    def count(text: str) -> dict[str, int]: ...

    @actor
    class Counter:
        def __init__(self): self.n = 0
        def add(self, k): self.n += k; return self.n

Use::

    import compute.tasks as tasks
    ref = count.remote("a b a")          # a reference: the name of the result
    total = merge.remote(ref)            # passed on by name, not fetched here
    print(tasks.get(total))
    c = Counter.remote(); c.add.remote(2)

A reference is the name of its result (``/cfn/obj/<digest>``); a deterministic task's name is
its lineage's digest, so every caller of the same call names the same object and the network
answers repeated calls.  Placement follows the executors' load and where the inputs are; a lost
executor's calls run again elsewhere from their lineage; an actor restarts from its last state.
"""

from compute.tasks.api import (
    cancel,
    connect,
    current_runtime,
    get,
    get_async,
    init,
    put,
    shutdown,
    wait,
)
from compute.tasks.declare import ActorClass, RemoteFunction, actor, task
from compute.tasks.errors import GetTimeout, NoExecutors, TaskError, TaskLost
from compute.tasks.refs import ActorHandle, TaskRef
from compute.tasks.runtime import Runtime

__all__ = [
    "ActorClass",
    "ActorHandle",
    "GetTimeout",
    "NoExecutors",
    "RemoteFunction",
    "Runtime",
    "TaskError",
    "TaskLost",
    "TaskRef",
    "actor",
    "cancel",
    "connect",
    "current_runtime",
    "get",
    "get_async",
    "init",
    "put",
    "shutdown",
    "task",
    "wait",
]
