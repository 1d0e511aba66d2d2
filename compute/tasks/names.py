"""The names of the task platform (docs/design.md section 11, "Tasks and actors").

- ``/cfn/node/<id>``: an executor (an RMI server: ``run``, ``actor_new``, ``actor_call``),
  the one prefix a node announces; ``/cfn/node/<id>/load``: its load advertisement, a small
  fresh Data any caller may read.
- ``/cfn/driver/<id>``: a caller, serving the objects it put (never taken for an executor).
- ``/cfn/obj/<digest>``: a task's result.  The name says what the object is, not where it is:
  an Interest for it carries a forwarding hint toward a node holding it, and any content store
  on the way answers it.  A deterministic task's result is named by its lineage (the task and
  its arguments, a reference argument by its own result's name), so the same call made by any
  caller names the same object; other results get a fresh unguessable name.
"""

from __future__ import annotations

import hashlib
import re

from icn.errors import ConfigError
from icn.wire.name import from_uri, generic

ROOT = "/cfn"
NODE = f"{ROOT}/node/"
DRIVER = f"{ROOT}/driver/"
OBJ = f"{ROOT}/obj/"
_NODE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def check_node_id(node_id: str) -> str:
    """``node_id`` if it can name an executor; ConfigError naming the rule otherwise."""
    if not _NODE_ID.match(node_id):
        raise ConfigError(
            f"executor id {node_id!r}: use 1-63 letters, digits, '_', '.' or '-', starting "
            "with a letter or digit"
        )
    return node_id


def node_prefix(node_id: str) -> str:
    return NODE + node_id


def load_name(node_id: str) -> str:
    return NODE + node_id + "/load"


def driver_prefix(driver_id: str) -> str:
    return DRIVER + driver_id


def object_name(digest: str) -> str:
    return OBJ + digest


def lineage_digest(task: str, args_blob: bytes, ref_names: list[str]) -> str:
    """What names a deterministic task's result: the task, its packed arguments and the names
    of its reference arguments (their lineage, recursively, since those names are digests
    too)."""
    h = hashlib.sha256(task.encode())
    h.update(b"\0")
    h.update(args_blob)
    for name in ref_names:
        h.update(b"\0")
        h.update(name.encode())
    return h.hexdigest()[:48]


def node_of(prefix: str) -> str | None:
    """The executor id of a route ``/cfn/node/<id>``, or None for any other prefix."""
    if not prefix.startswith(NODE):
        return None
    rest = prefix[len(NODE) :]
    return rest if rest and "/" not in rest and _NODE_ID.match(rest) else None


_PLAIN = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]*$")


def wire_name(uri: str) -> bytes:
    """The name value of one of this platform's names (``/cfn/...``, its components plain
    ASCII: built directly, as python-ndn's URI parser cost an executor 6 % of an empty task),
    else of any name through the one URI parser."""
    if uri.startswith(ROOT + "/"):
        parts = uri[1:].split("/")
        if all(_PLAIN.match(p) for p in parts):
            return b"".join(generic(p) for p in parts)
    return from_uri(uri)
