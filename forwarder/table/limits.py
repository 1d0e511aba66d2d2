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
    # own so reflexive exchanges cannot crowd out ordinary Interests (the reflexive
    # forwarding draft's operational considerations).
    reflexive_max_entries: int = 10_000
    # One face may make at most this share of the PIT and of the reflexive table, and non-local
    # faces together all but local_reserve of each: one flooding peer cannot lock out the others,
    # local apps or management (face_shares.py).  NFD has no such bound; these are ours.
    face_share: float = 0.25
    local_reserve: float = 0.1
    # A PIT entry waits at most this long whatever InterestLifetime asks (NFD has no bound;
    # 60 s is 15 times the usual 4 s), so a flood of 600 s Interests cannot pin the table.
    interest_lifetime_max_ms: int = 60_000

    def __post_init__(self) -> None:
        # A bad value comes from a user's config: say which field and what would be accepted.
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "face_share":
                if isinstance(value, bool) or not isinstance(value, int | float):
                    value = -1
                if not 0 < value <= 1:
                    raise ConfigError(
                        f"tables.face_share = {getattr(self, f.name)!r}: must be a fraction "
                        "> 0 and <= 1 (1 lets one face fill a table)"
                    )
            elif f.name == "local_reserve":
                if isinstance(value, bool) or not isinstance(value, int | float):
                    value = -1
                if not 0 <= value < 1:
                    raise ConfigError(
                        f"tables.local_reserve = {getattr(self, f.name)!r}: must be a fraction "
                        ">= 0 and < 1 (0 keeps no room for local apps and management)"
                    )
            elif f.name == "dnl_lifetime":
                if not isinstance(value, int | float) or value < MIN_DNL_LIFETIME:
                    raise ConfigError(
                        f"tables.{f.name} = {value!r}: must be a number of seconds "
                        f">= {MIN_DNL_LIFETIME}"
                    )
            elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"tables.{f.name} = {value!r}: must be an integer >= 0")
        if self.interest_lifetime_max_ms < 1:
            raise ConfigError(
                f"tables.interest_lifetime_max_ms = {self.interest_lifetime_max_ms}: must be >= 1"
            )
        if self.strategy_choice_max_entries < 1:
            raise ConfigError(
                "tables.strategy_choice_max_entries = 0: must be >= 1 (the root prefix / always "
                "has a strategy)"
            )
