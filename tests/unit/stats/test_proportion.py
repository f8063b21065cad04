"""A share pooled over runs and its Wilson interval (stats/proportion.py)."""

import pytest

from pytest_llmperf.stats.proportion import dispersion, pooled_share, wilson


def test_wilson_interval_matches_the_textbook_value():
    assert wilson(0.5, 100, 1.96) == pytest.approx((0.4038, 0.5962), abs=1e-4)


def test_wilson_interval_of_all_successes_stays_below_one():
    low, high = wilson(1.0, 500, 1.645)
    assert high == 1.0
    assert low == pytest.approx(1 / (1 + 1.645**2 / 500))  # 0.9946: 500 of 500 decides a 99 % share


def test_no_trials_say_nothing():
    assert wilson(0.0, 0, 1.645) == (0.0, 1.0)
    assert pooled_share([], [], 0.95).low == 0.0


def test_runs_that_agree_pool_as_one_binomial():
    assert dispersion([90, 90, 90], [100, 100, 100]) == 1.0
    pooled = pooled_share([90, 90, 90], [100, 100, 100], 0.95)
    assert pooled.share == pytest.approx(0.9)
    assert pooled.effective == 300
    assert (pooled.low, pooled.high) == pytest.approx(wilson(0.9, 300, 1.6449), abs=1e-4)


def test_runs_that_disagree_widen_the_interval():
    # 80 % and 100 %: far more apart than 100 requests a run scatter by chance.
    assert dispersion([80, 100], [100, 100]) > 5
    scattered = pooled_share([80, 100], [100, 100], 0.95)
    steady = pooled_share([90, 90], [100, 100], 0.95)
    assert scattered.share == steady.share
    assert scattered.effective < steady.effective
    assert scattered.high - scattered.low > steady.high - steady.low


def test_counts_must_make_sense():
    with pytest.raises(ValueError, match="run by run"):
        pooled_share([1], [1, 2], 0.95)
    with pytest.raises(ValueError, match="within 0 and its trials"):
        pooled_share([5], [4], 0.95)
