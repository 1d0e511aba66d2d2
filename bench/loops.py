"""Which event loop a benchmark's process ran: seen, not guessed from whether uvloop imports.

A process of ours tells its own loop by the running loop's type (:func:`running`) and says it
in its ready line; a process we only start (the forwarder, ``icn fwd``, which runs
``apps.loop.run_loop``: uvloop whenever uvloop imports) is read from the extension modules it
has loaded (:func:`of_pid`).  :func:`summary` puts them in a benchmark's header.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

UVLOOP, ASYNCIO, UNKNOWN = "uvloop", "asyncio", "unknown"


def running() -> str:
    """``uvloop`` or ``asyncio``: the type of this thread's running loop."""
    loop = asyncio.get_running_loop()
    return UVLOOP if type(loop).__module__.split(".")[0] == "uvloop" else ASYNCIO


def of_pid(pid: int) -> str:
    """``uvloop`` when process ``pid`` has uvloop's loop extension loaded (a process that runs
    ``apps.loop.run_loop`` has it loaded exactly when it runs uvloop), ``asyncio`` when not,
    ``unknown`` when its memory map cannot be read (it ended, or not Linux)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return UNKNOWN
    # uvloop's event loop is its extension module uvloop/loop.cpython-*.so
    return UVLOOP if "/uvloop/loop." in maps else ASYNCIO


def from_ready(text: str, tag: str) -> str:
    """The loop a child named after ``tag`` in its ready line (``relay ready uvloop``,
    ``ready 4242 uvloop``); ``unknown`` when it named none.  ``text`` may hold more lines."""
    _, found, rest = text.partition(tag)
    words = rest.split("\n", 1)[0].split() if found else []
    return next((w for w in words if w in (UVLOOP, ASYNCIO)), UNKNOWN)


def summary(loops: dict[str, str]) -> str:
    """``uvloop (every process)`` when all agree, else each process's, in order:
    ``forwarder uvloop, relay asyncio``."""
    kinds = set(loops.values())
    if len(kinds) == 1 and len(loops) > 1:
        return f"{kinds.pop()} (every process)"
    return ", ".join(f"{who} {kind}" for who, kind in loops.items())
