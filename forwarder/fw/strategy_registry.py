"""The one place that maps strategy names to classes.

A strategy is named by its short name (``best-route``) or its NFD instance name
(``/localhost/nfd/strategy/best-route``, optionally with the version ``/v=5``), which is what
``nfdc strategy set`` and python-ndn send through management.  As in NFD, parameters are name
components ``key~value`` after the version (``/localhost/nfd/strategy/asf/v=5/clone-after~50``);
the class checks them (:meth:`Strategy.check_parameters`).
"""

from __future__ import annotations

from urllib.parse import unquote

from forwarder.fw.asf import AsfStrategy
from forwarder.fw.best_route import BestRouteStrategy
from forwarder.fw.multicast import MulticastStrategy
from forwarder.fw.multipath import MultipathStrategy
from forwarder.fw.strategy import STRATEGY_PREFIX, Strategy
from icn.errors import ConfigError

STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (BestRouteStrategy, MulticastStrategy, AsfStrategy, MultipathStrategy)
}


def known_names() -> list[str]:
    """Canonical instance names of every known strategy."""
    return [cls.instance_name() for cls in STRATEGIES.values()]


def _split(name: str) -> tuple[type[Strategy], list[str]]:
    """The class named by ``name`` (short name, instance name, with or without the right
    version) and the components after the version; ConfigError naming the known strategies."""
    short = name.strip()
    version: str | None = None
    rest: list[str] = []
    if short.startswith(STRATEGY_PREFIX):
        parts = short[len(STRATEGY_PREFIX) :].rstrip("/").split("/")
        short = parts[0]
        if len(parts) > 1:
            version, rest = parts[1], parts[2:]
    cls = STRATEGIES.get(short)
    if cls is not None and version is not None and version != f"v={cls.version}":
        if "~" in version:
            raise ConfigError(
                f"strategy {name!r}: parameters follow the version, e.g. "
                f"{cls.instance_name()}/{version}"
            )
        cls = None
    if cls is None:
        raise ConfigError(
            f"unknown strategy {name!r}: use one of "
            + ", ".join(f"{c.name} ({c.instance_name()})" for c in STRATEGIES.values())
        )
    return cls, rest


def lookup(name: str) -> type[Strategy]:
    """The class named by ``name``, its parameters left unchecked (management answers an
    unknown strategy with 404 and bad parameters with 409, as NFD does)."""
    return _split(name)[0]


def parse(name: str) -> tuple[type[Strategy], dict[str, str]]:
    """The class and its checked, canonical parameters; ConfigError for an unknown strategy, a
    component after the version that is not ``key~value``, or a parameter the class refuses."""
    cls, rest = _split(name)
    raw: dict[str, str] = {}
    for part in rest:
        key, sep, value = unquote(part).partition("~")
        if not sep or not key:
            raise ConfigError(
                f"strategy {name!r}: {part!r} is not a parameter; write key~value after the "
                f"version, e.g. {cls.instance_name()}/key~value"
            )
        if key in raw:
            raise ConfigError(f"strategy {name!r}: parameter {key} given twice; keep one")
        raw[key] = value
    return cls, cls.check_parameters(raw)


def resolve(name: str) -> type[Strategy]:
    """The strategy class for a short or instance name; ConfigError naming the known ones (or
    the bad parameter)."""
    return parse(name)[0]


def canonical_name(name: str) -> str:
    """The instance name reported for ``name``, e.g. ``/localhost/nfd/strategy/multicast/v=5``
    or ``/localhost/nfd/strategy/asf/v=5/clone-after~50``."""
    cls, params = parse(name)
    return cls.instance_name_with(params)
