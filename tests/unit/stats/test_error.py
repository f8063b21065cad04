"""The standard error of a change, its shrinking with more runs, and a ratio's error
(stats/error.py)."""

import math

import pytest

from pytest_llmperf.stats.error import Noise, change_error, noisier, ratio_error, variance_shrink, with_nightly
from pytest_llmperf.stats.median import median_variance
from pytest_llmperf.stats.spread import Spread


def test_change_error_one_repetition_each_side_without_pairs_is_unknown():
    assert change_error(None, [100.0], [99.0]) is None


def test_change_error_adds_repetition_spread_and_borrows_it_for_a_single_run():
    noise = change_error(None, [100.0, 102.0, 98.0], [95.0])
    sd = 2.0
    # the median of 3 runs varies pi/2 times as much as their mean; of 1 run, as that run
    assert noise.sigma == pytest.approx(math.sqrt(sd**2 * math.pi / 6 + sd**2 / 1))
    assert noise.dof == pytest.approx(2.0)  # both parts rest on the baseline's 3 repetitions


def test_change_error_pools_both_sides_spread_and_counts_it_alone_where_it_is_known():
    # every repetition sends the same prompts: their spread holds the request-level noise
    noise = change_error(1.0, [100.0, 102.0], [100.0, 104.0], paired_dof=9)
    pooled = (2.0 + 8.0) / 2  # variances 2 and 8, one degree of freedom each
    assert noise.sigma == pytest.approx(math.sqrt(pooled * (1 / 2 + 1 / 2)))  # over both medians of 2
    assert noise.dof == pytest.approx(2.0)


def test_change_error_is_the_request_level_error_where_no_spread_is_known():
    noise = change_error(1.5, [100.0], [99.0], paired_dof=9)  # one repetition a side, no pool
    assert (noise.sigma, noise.dof, noise.run_share) == (1.5, 9, None)
    assert change_error(-1.5, [], [], paired_dof=3) == change_error(1.5, paired_dof=3)


def test_change_error_says_which_share_of_its_variance_more_measured_runs_shrink():
    # two runs a side: the measured side's median holds half of the variance
    assert change_error(1.0, [100.0, 102.0], [100.0, 104.0], paired_dof=9).run_share == pytest.approx(0.5)
    # five baseline runs, one measured: 1 of pi/10 + 1
    noise = change_error(None, [100.0, 101.0, 99.0, 102.0, 98.0], [100.0])
    assert noise.run_share == pytest.approx(1 / (math.pi / 10 + 1))
    assert change_error(1.0, [], [], paired_dof=9).run_share is None  # no spread between runs known


def test_variance_shrink_keeps_what_the_measured_runs_cannot_take_off():
    # all of it the measured side's spread: 1 run -> 5 runs is the median's pi/10
    assert variance_shrink(1.0, 1, 5) == pytest.approx(math.pi / 10)
    # half of it the baseline's: only the other half falls
    assert variance_shrink(0.5, 1, 5) == pytest.approx(0.5 + 0.5 * math.pi / 10)
    assert variance_shrink(0.0, 1, 5) == 1.0
    assert variance_shrink(None, 1, 5) is None


def test_change_error_adds_the_pool_in_relative_terms_with_its_degrees_of_freedom():
    alone = change_error(None, [100.0, 102.0, 98.0], [95.0])
    pooled = change_error(None, [100.0, 102.0, 98.0], [95.0], pool=Spread(variance=0.0004, dof=16))
    # the other cells' 2 % spread is this cell's 2 units: the same variance on 18 dof, not 2
    assert pooled.sigma == pytest.approx(alone.sigma)
    assert pooled.dof == pytest.approx(18.0)
    # a single run on each side borrows the pool alone
    only = change_error(None, [100.0], [95.0], pool=Spread(variance=0.0001, dof=8))
    assert only.sigma == pytest.approx(math.sqrt(1.0 * 2))
    assert only.dof == pytest.approx(8.0)


def test_a_ratios_relative_error_is_its_parts_added_in_quadrature():
    # 3 % and 4 % relative errors: 5 % of the ratio
    assert ratio_error(2.0, (3.0, 100.0), (2.0, 50.0)) == pytest.approx(2.0 * 0.05)
    assert ratio_error(1.5, (0.0, 10.0), (0.0, 20.0)) == 0.0


def test_with_nightly_replaces_tonights_side_by_the_spread_between_sessions_when_larger():
    noise = Noise(sigma=2.0, dof=10, run_share=0.5)  # 2 units^2 each side
    wider = with_nightly(noise, Spread(variance=8.0, dof=9))
    assert wider.sigma == pytest.approx(math.sqrt(2.0 + 8.0))
    assert wider.run_share == 0.0  # more runs tonight do not shrink the nights' spread
    assert wider.dof == pytest.approx(100.0 / (4.0 / 10 + 64.0 / 9))  # Welch-Satterthwaite
    # a quieter history leaves the noise as it was
    assert with_nightly(noise, Spread(variance=1.5, dof=9)) is noise
    assert with_nightly(noise, None) is noise
    # no share known: half of it counts as tonight's
    assert with_nightly(Noise(sigma=2.0), Spread(variance=8.0, dof=4)).sigma == pytest.approx(math.sqrt(10.0))
    # no noise at all: the nights' spread alone
    assert with_nightly(None, Spread(variance=9.0, dof=4)) == Noise(3.0, 4, 0.0)


def test_a_night_whose_runs_spread_beyond_the_pool_is_judged_on_its_own_spread():
    pool = Spread(variance=0.0001, dof=30)  # the recording's 1 % between starts
    assert not noisier([100.0, 101.0], 1.0, 31)  # within the pool's 1 unit: borrowed as before
    assert noisier([100.0, 80.0], 1.0, 31)  # 20 apart: not 1 % starts
    assert not noisier([100.0, 80.0], 1.0, 1)  # nothing to borrow from
    quiet = change_error(None, [100.0, 101.0, 99.0], [95.0, 96.0], pool=pool)
    noisy = change_error(None, [100.0, 101.0, 99.0], [95.0, 75.0], pool=pool)
    assert quiet.dof == 33 and noisy.dof == 1
    assert noisy.sigma == pytest.approx(math.sqrt(200.0 * (median_variance(3) + median_variance(2))))
