"""Round-trip time estimation and the retransmission timeout, as RFC 6298 defines them.

No clock: a sample is a duration the caller measured.  Karn's rule (no sample from an Interest
sent more than once: its Data cannot be matched to one transmission) is the caller's to keep;
the window in :mod:`icn.dataplane.window` keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RttOptions:
    """RFC 6298's constants; the bounds are NDN's usual ones (ndn-cxx uses the same)."""

    initial_rto: float = 1.0  # seconds, before the first sample
    min_rto: float = 0.2
    max_rto: float = 60.0
    alpha: float = 1 / 8  # gain of the smoothed RTT
    beta: float = 1 / 4  # gain of the RTT variation
    k: float = 4.0  # variations added to the smoothed RTT
    backoff: float = 2.0  # RTO multiplier after a timeout

    def __post_init__(self) -> None:
        if not 0 < self.min_rto <= self.initial_rto <= self.max_rto:
            raise ValueError("RTO bounds need 0 < min_rto <= initial_rto <= max_rto")
        if self.backoff < 1:
            raise ValueError("the RTO back-off multiplier must be at least 1")


class RttEstimator:
    """Smoothed RTT, its variation, and the RTO they give (clamped to the options' bounds)."""

    __slots__ = ("options", "rto", "rttvar", "samples", "srtt")

    def __init__(self, options: RttOptions | None = None) -> None:
        self.options = options or RttOptions()
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.rto = self.options.initial_rto
        self.samples = 0

    def sample(self, rtt: float, gain: float | None = None) -> None:
        """Add one measured round trip (seconds), from an Interest sent once.  ``gain``: the
        weight of this sample in the smoothed RTT, instead of the options' alpha (a caller
        whose samples come far apart gives a late one more; see forwarder.fw.nexthop_stats)."""
        o = self.options
        rtt = max(0.0, rtt)
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            alpha = o.alpha if gain is None else gain
            # RFC 6298 2.3: the variation is updated with the old smoothed value
            self.rttvar = (1 - o.beta) * self.rttvar + o.beta * abs(self.srtt - rtt)
            self.srtt = (1 - alpha) * self.srtt + alpha * rtt
        self.samples += 1
        self.rto = self._clamp(self.srtt + o.k * self.rttvar)

    def back_off(self) -> None:
        """A retransmission timer expired: wait longer next time (RFC 6298 5.5), until a new
        sample sets the RTO from measurements again."""
        self.rto = self._clamp(self.rto * self.options.backoff)

    def _clamp(self, rto: float) -> float:
        return min(self.options.max_rto, max(self.options.min_rto, rto))
