"""A child process that dies with its parent, however the parent dies.

Its own module, apart from :mod:`apps.scenario.backend`, because a Ray node agent
(:mod:`apps.scenario.ray_agent`) starts its children this way too, and each agent is a fresh Ray
worker process on every run: it should not import the scenario schema and the forwarder to get
one function.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import signal

PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGKILL when the launcher dies, however it dies."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
