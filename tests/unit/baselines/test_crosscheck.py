"""A run's outputs against its baseline's, on known lines (baselines/crosscheck.py)."""

from pytest_llmperf.baselines.crosscheck import EOS_BOUND, LENGTH_BOUND, MIN_SHARED, compare_outputs
from pytest_llmperf.metrics.crosscheck import encode_outputs
from pytest_llmperf.metrics.uncertainty import encode_rows

HASH = "0123456789ab"


def rows(lengths):
    return [(i, 50, n, n, 10.0, 10.0 + n) for i, n in enumerate(lengths)]


def outputs(finishes, changed=()):
    return [(i, f, "fedcba987654" if i in changed else HASH) for i, f in enumerate(finishes)]


def entry(lengths, finishes=None):
    found = {"requests": encode_rows(rows(lengths))}
    if finishes is not None:
        found["outputs"] = encode_outputs(outputs(finishes))
    return found


def test_the_same_outputs_change_nothing():
    change = compare_outputs(entry([100] * 12, ["length"] * 12), rows([100] * 12), outputs(["length"] * 12))
    assert (change.shared, change.length_change, change.eos_change, change.changed, change.compared) == (
        12,
        0.0,
        0.0,
        0,
        12,
    )
    assert change.judged and not change.lengths_moved and not change.eos_moved


def test_half_the_replies_stopping_at_half_length_moves_lengths_and_eos_share():
    lengths = [100] * 6 + [50] * 6
    finishes = ["length"] * 6 + ["stop"] * 6
    change = compare_outputs(entry([100] * 12, ["length"] * 12), rows(lengths), outputs(finishes))
    assert change.length_change == -0.25 and change.eos_change == 0.5
    assert change.lengths_moved and change.eos_moved
    assert (change.baseline_stops, change.measured_stops, change.finish_compared) == (0, 6, 12)


def test_the_bounds_are_exclusive_and_only_the_shared_prompts_count():
    # 5 % fewer tokens exactly, and one more EOS in 12 (8 points): within both bounds
    assert LENGTH_BOUND == 0.05 and EOS_BOUND == 0.10
    lengths = [100] * 11 + [40]
    finishes = ["length"] * 11 + ["stop"]
    change = compare_outputs(
        entry([100] * 12, ["length"] * 12), rows(lengths) + [(99, 50, 1, 1, 1.0, 2.0)], outputs(finishes)
    )
    assert change.shared == 12 and change.length_change == -0.05
    assert not change.lengths_moved and not change.eos_moved


def test_too_few_shared_prompts_are_not_judged():
    n = MIN_SHARED - 1
    change = compare_outputs(entry([100] * n, ["length"] * n), rows([10] * n), outputs(["stop"] * n))
    assert not change.judged and not change.lengths_moved and not change.eos_moved


def test_changed_texts_are_counted_and_named():
    change = compare_outputs(
        entry([100] * 12, ["length"] * 12), rows([100] * 12), outputs(["length"] * 12, changed={3, 7})
    )
    assert (change.changed, change.compared, change.changed_indices) == (2, 12, (3, 7))
    assert not change.lengths_moved  # the canary is no reason to call the run invalid


def test_older_entries_compare_what_they_have():
    assert compare_outputs({}, rows([100] * 12), outputs(["length"] * 12)) is None  # no request lines
    change = compare_outputs(entry([100] * 12), rows([50] * 12), outputs(["stop"] * 12))  # no output lines
    assert change.lengths_moved and change.eos_change is None and change.changed is None
