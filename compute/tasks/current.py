"""Which runtime ``.remote(...)`` submits to: the one :func:`compute.tasks.init` or
:func:`compute.tasks.connect` made, else a new one with the defaults (:mod:`compute.tasks.api`
registers how to make it, so the declarations need not import the runtime)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from compute.tasks.runtime import Runtime

runtime: Runtime | None = None
make_default: Callable[[], Runtime] | None = None


def current_runtime() -> Runtime:
    if runtime is not None:
        return runtime
    if make_default is None:  # compute.tasks not imported whole: import it for its default
        import compute.tasks  # noqa: F401
    assert make_default is not None
    return make_default()
