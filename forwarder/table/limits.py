"""Size and lifetime bounds of the forwarder's tables, in one place so one config section sets
them all.  Every table refuses or evicts (and counts) at these bounds instead of growing without
limit under a flood of distinct names."""

from __future__ import annotations

from dataclasses import dataclass, fields

from icn.errors import ConfigError

# NFD refuses a Dead Nonce List lifetime below 50 ms: shorter cannot detect even a local loop.
MIN_DNL_LIFETIME = 0.05


@dataclass(frozen=True, slots=True)
class TableLimits:
    """Bounds of the tables.  Defaults follow NFD where it has one (CS 65536 packets, DNL 6 s)."""

    fib_max_entries: int = 100_000
    pit_max_entries: int = 100_000
    cs_max_entries: int = 65_536
    cs_max_bytes: int = 256 * 1024 * 1024
    dnl_lifetime: float = 6.0  # seconds
    dnl_max_entries: int = 1 << 20
    strategy_choice_max_entries: int = 1_000
    # Reverse state of Trigger Interests (one per pending TI): a share of the PIT, bounded on its
    # own so reflexive exchanges cannot crowd out ordinary Interests (protocols.md §5.6).
    reflexive_max_entries: int = 10_000

    def __post_init__(self) -> None:
        # A bad value comes from a user's config: say which field and what would be accepted.
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "dnl_lifetime":
                if not isinstance(value, int | float) or value < MIN_DNL_LIFETIME:
                    raise ConfigError(
                        f"tables.{f.name} = {value!r}: must be a number of seconds "
                        f">= {MIN_DNL_LIFETIME}"
                    )
            elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"tables.{f.name} = {value!r}: must be an integer >= 0")
        if self.strategy_choice_max_entries < 1:
            raise ConfigError(
                "tables.strategy_choice_max_entries = 0: must be >= 1 (the root prefix / always "
                "has a strategy)"
            )
