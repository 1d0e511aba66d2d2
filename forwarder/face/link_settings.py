"""A face's link-emulation settings as people write them (milliseconds, megabits/s).

One settings class for the ``shaper:`` block of the daemon's config and for the JSON a
``link/shape`` management command carries, so both are checked by the same rules
(:mod:`forwarder.schema`).  It lives beside the shaper, not in the daemon's config, so management
can parse a command without importing the daemon's configuration."""

from __future__ import annotations

from forwarder.face.shaper import ShaperConfig as FaceShaperConfig
from forwarder.schema import Settings, setting

MAX_SHAPER_DELAY_MS = 3_600_000.0  # an hour


class ShaperConfig(Settings):
    """Link emulation on a face's send path (also what ``link/shape`` commands carry).

    Every number is finite and bounded: a packet must leave within a timer's reach."""

    delay_ms: float = setting(default=0.0, ge=0, le=MAX_SHAPER_DELAY_MS)
    jitter_ms: float = setting(default=0.0, ge=0, le=MAX_SHAPER_DELAY_MS)
    loss: float = setting(default=0.0, ge=0, le=1)  # drop probability, 0..1
    rate_mbps: float | None = setting(default=None, gt=0)  # megabits/s; None: unlimited
    queue_packets: int = setting(default=1000, ge=1)
    seed: int | None = None

    @property
    def active(self) -> bool:
        return bool(self.delay_ms or self.jitter_ms or self.loss or self.rate_mbps)

    def face_shaper(self) -> FaceShaperConfig | None:
        """What ``Face.set_shaper`` takes (seconds, bits/s), or None when nothing is shaped."""
        if not self.active:
            return None
        return FaceShaperConfig(
            delay=self.delay_ms / 1000.0,
            jitter=self.jitter_ms / 1000.0,
            loss=self.loss,
            rate=self.rate_mbps * 1e6 if self.rate_mbps else None,
            max_pending=self.queue_packets,
            seed=self.seed,
        )
