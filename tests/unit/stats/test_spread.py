"""The spread between starts, pooled over cells (stats/spread.py)."""

import statistics

import pytest

from pytest_llmperf.stats.spread import (
    MIN_NIGHTS,
    NIGHTS_WINDOW,
    Spread,
    nightly_spread,
    pooled_spread,
    spread_pools,
)


def test_pooled_spread_is_the_relative_variance_over_cells_with_two_or_more_runs():
    spread = pooled_spread([[100.0, 102.0, 98.0], [9.8, 10.2], [5.0], [None, 7.0]])
    # var(x / median): (0.02^2 * 2) / 2 = 4e-4 on 2 dof; (0.04^2 / 2) = 8e-4 on 1 dof
    assert spread == Spread(pytest.approx((2 * 4e-4 + 1 * 8e-4) / 3), 3)
    assert pooled_spread([[5.0], [None, 7.0], []]) is None


def test_spread_pools_pool_each_metric_over_the_cells_that_have_it():
    cells = [{"a": [100.0, 102.0, 98.0], "b": [1.0, 1.1]}, {"a": [9.8, 10.2]}, {"b": [5.0]}]
    pools = spread_pools(cells, ["a", "b", "c"])
    assert pools["a"] == pooled_spread([[100.0, 102.0, 98.0], [9.8, 10.2]])
    assert pools["b"] == pooled_spread([[1.0, 1.1]])
    assert "c" not in pools  # no cell has it


def test_nightly_spread_is_the_variance_of_the_last_sessions_values():
    assert nightly_spread([100.0, 102.0, 98.0, 101.0][: MIN_NIGHTS - 1]) is None
    assert nightly_spread([100.0, 102.0, 98.0, 101.0, 99.0]) == Spread(pytest.approx(2.5), 4)
    # only the last NIGHTS_WINDOW count: an old level is forgotten
    values = [50.0] * 30 + [100.0, 102.0] * (NIGHTS_WINDOW // 2)
    spread = nightly_spread(values)
    assert spread.dof == NIGHTS_WINDOW - 1 and spread.variance == pytest.approx(NIGHTS_WINDOW / (NIGHTS_WINDOW - 1))


def test_a_session_far_from_the_others_is_an_event_not_the_cells_nightly_noise():
    # 19 sessions within +/-1 % and one start that came up 8 % slow
    steady = [100.0 + (k % 5 - 2) * 0.5 for k in range(NIGHTS_WINDOW - 1)]
    spread = nightly_spread([*steady, 92.0])
    assert spread == nightly_spread(steady)  # the slow start left out: the spread of the 19 others
    assert spread is not None and spread.dof == NIGHTS_WINDOW - 2
    # never below MIN_NIGHTS values: five sessions, two of them far off, are all kept
    few = [1.0, 1.0, 1.1, 50.0, 60.0]
    assert nightly_spread(few) == Spread(pytest.approx(statistics.variance(few)), 4)
