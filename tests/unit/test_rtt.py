"""RFC 6298 RTT estimation and RTO, with durations given (no clock)."""

from __future__ import annotations

import pytest

from icn.rtt import RttEstimator, RttOptions


def test_before_any_sample_the_rto_is_the_initial_one() -> None:
    est = RttEstimator(RttOptions(initial_rto=1.5))
    assert est.srtt is None and est.rto == 1.5


def test_first_sample_sets_srtt_and_half_of_it_as_variation() -> None:
    est = RttEstimator()
    est.sample(0.1)
    assert est.srtt == pytest.approx(0.1) and est.rttvar == pytest.approx(0.05)
    # srtt + 4 * rttvar = 0.3, above the 0.2 floor
    assert est.rto == pytest.approx(0.3)


def test_later_samples_update_the_variation_with_the_old_mean() -> None:
    est = RttEstimator()
    est.sample(0.1)
    est.sample(0.5)
    # rttvar = 0.75 * 0.05 + 0.25 * |0.1 - 0.5|; srtt = 0.875 * 0.1 + 0.125 * 0.5
    assert est.rttvar == pytest.approx(0.1375)
    assert est.srtt == pytest.approx(0.15)
    assert est.rto == pytest.approx(0.15 + 4 * 0.1375)
    assert est.samples == 2


def test_rto_is_clamped_to_its_bounds() -> None:
    est = RttEstimator(RttOptions(min_rto=0.2, max_rto=2.0))
    est.sample(0.001)
    assert est.rto == 0.2
    est = RttEstimator(RttOptions(min_rto=0.2, max_rto=2.0))
    est.sample(5.0)
    assert est.rto == 2.0


def test_back_off_multiplies_up_to_the_cap_and_a_sample_resets_it() -> None:
    est = RttEstimator(RttOptions(initial_rto=1.0, max_rto=3.0, backoff=2.0))
    est.back_off()
    assert est.rto == 2.0
    est.back_off()
    assert est.rto == 3.0
    est.sample(0.1)
    assert est.rto == pytest.approx(0.3)


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError):
        RttOptions(min_rto=2.0, initial_rto=1.0)
    with pytest.raises(ValueError):
        RttOptions(backoff=0.5)
