"""Medians of repetitions, their range, and the median's variance (stats/median.py)."""

import math

import pytest

from pytest_llmperf.stats.median import median_and_range, median_of, median_variance


def test_median_and_range():
    assert median_and_range([400.0, 410.0, 420.0]) == (410.0, pytest.approx(20.0 / 410.0))
    assert median_and_range([5.0]) == (5.0, 0.0)
    assert median_and_range([-1.0, 1.0]) == (0.0, None)


def test_median_of_leaves_out_missing_values():
    assert median_of([3.0, None, 1.0, 2.0]) == 2.0
    assert median_of([None]) is None and median_of([]) is None


def test_the_median_of_three_or_more_varies_pi_over_two_times_the_mean():
    assert (median_variance(1), median_variance(2)) == (1.0, 0.5)  # the median is the mean
    assert median_variance(5) == pytest.approx(math.pi / 10)
