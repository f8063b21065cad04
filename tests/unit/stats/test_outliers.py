"""What is set aside (stats/outliers.py): events among a cell's values, disturbed runs."""

from pytest_llmperf.stats.outliers import EVENT, NOISY, noise_bound, without_events


def test_an_event_is_a_value_beyond_event_robust_standard_deviations_of_the_median():
    values = [10.0, 11.0, 9.0, 10.0, 12.0, 8.0, 10.0]  # median 10, MAD 1: robust sd 1.4826
    edge = 10.0 + EVENT * 1.4826
    assert without_events([*values, edge - 0.01], 5) == [*values, edge - 0.01]
    assert without_events([*values, edge + 0.01], 5) == values
    # values all equal but one keep them all (no spread to measure by)
    assert without_events([5.0] * 6 + [6.0], 5) == [5.0] * 6 + [6.0]
    # never fewer than `least` left
    few = [1.0, 1.0, 1.1, 50.0, 60.0]
    assert without_events(few, 5) == few
    assert without_events(few, 3) == [1.0, 1.0, 1.1]


def test_a_disturbed_run_is_one_whose_noise_is_over_noisy_times_the_median_noise():
    noises = [2.5] * 17 + [74.0]  # a quiet series and one loaded night
    assert noise_bound(noises) == NOISY * 2.5 < 74.0
    # the same noises as values: their MAD is 0, so the Hampel identifier sets nothing aside
    assert without_events(noises, 5) == noises
