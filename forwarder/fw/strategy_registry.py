"""The one place that maps strategy names to classes.

A strategy is named by its short name (``best-route``) or its NFD instance name
(``/localhost/nfd/strategy/best-route``, optionally with the version ``/v=5``), which is what
``nfdc strategy set`` and python-ndn send through management.
"""

from __future__ import annotations

from forwarder.fw.best_route import BestRouteStrategy
from forwarder.fw.multicast import MulticastStrategy
from forwarder.fw.strategy import STRATEGY_PREFIX, Strategy
from icn.errors import ConfigError

STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (BestRouteStrategy, MulticastStrategy)
}


def known_names() -> list[str]:
    """Canonical instance names of every known strategy."""
    return [cls.instance_name() for cls in STRATEGIES.values()]


def resolve(name: str) -> type[Strategy]:
    """The strategy class for a short or instance name; ConfigError naming the known ones."""
    short = name.strip()
    version: str | None = None
    if short.startswith(STRATEGY_PREFIX):
        parts = short[len(STRATEGY_PREFIX) :].rstrip("/").split("/")
        short = parts[0]
        if len(parts) == 2:
            version = parts[1]
        elif len(parts) > 2:
            short = ""  # parameters after the version are not supported: reject below
    cls = STRATEGIES.get(short)
    if cls is not None and version is not None and version != f"v={cls.version}":
        cls = None
    if cls is None:
        raise ConfigError(
            f"unknown strategy {name!r}: use one of "
            + ", ".join(f"{c.name} ({c.instance_name()})" for c in STRATEGIES.values())
        )
    return cls


def canonical_name(name: str) -> str:
    """The instance name reported for ``name``, e.g. ``/localhost/nfd/strategy/multicast/v=5``."""
    return resolve(name).instance_name()
