"""Co-location: an app endpoint wired to a forwarder running in the same process.

docs/design.md section 2: compute code reaches the network only through a face; when an app and a
forwarder share a process, that face is an in-memory link instead of a socket (no syscalls, no
framing), and this module is the wiring.
"""

from __future__ import annotations

from forwarder.daemon import ForwarderDaemon
from forwarder.face.face import Face
from forwarder.face.memory import memory_pair
from forwarder.mgmt.rib import ORIGIN_STATIC, ROUTE_CHILD_INHERIT, Route
from icn.dataplane.endpoint import Endpoint
from icn.errors import ConfigError
from icn.wire.name import from_uri


def attach_endpoint(daemon: ForwarderDaemon, *, label: str = "app") -> Endpoint:
    """A new local face on ``daemon`` and an :class:`Endpoint` on its other end.  Closing the
    endpoint closes the face (its routes go with it, as for an app that disconnects)."""
    forwarder_end, app_end = memory_pair(daemon.counters, name=label)
    daemon.faces.add(Face(forwarder_end))
    return Endpoint.over_port(app_end)


def link(a: ForwarderDaemon, b: ForwarderDaemon, *, label: str = "link") -> tuple[int, int]:
    """Connect two forwarders of this process with an in-memory link; returns the new face's
    id in ``a`` and in ``b``."""
    end_a, end_b = memory_pair(a.counters, name=label)
    end_b.counters = b.counters  # each end counts in its own forwarder
    return a.faces.add(Face(end_a)), b.faces.add(Face(end_b))


def add_route(daemon: ForwarderDaemon, prefix: str, face_id: int, cost: int = 0) -> None:
    """A static route, as the config's ``routes:`` section installs one."""
    entry = Route(face_id, ORIGIN_STATIC, cost, ROUTE_CHILD_INHERIT)
    if not daemon.rib.register(from_uri(prefix), entry):
        raise ConfigError(f"route {prefix}: the FIB is full")
