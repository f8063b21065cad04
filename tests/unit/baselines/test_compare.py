import math

import pytest

from pytest_llmperf.baselines.compare import compare, compare_metrics
from pytest_llmperf.metrics.registry import Direction, Tolerance

REL5 = Tolerance("relative", 0.05)
REL10 = Tolerance("relative", 0.10)
ABS003 = Tolerance("absolute", 0.03)


def status(baseline, measured, tol, direction):
    return compare("m", baseline, measured, tol, direction).status


# --- relative, higher is better (decode tok/s -5%) --------------------------------


@pytest.mark.parametrize(
    "measured, expected",
    [
        (100.0, "pass"),
        (95.0, "pass"),  # exactly at the limit passes
        (94.9999, "regressed"),  # a hair past fails
        (90.0, "regressed"),
        (105.0, "pass"),  # exactly at the improvement limit: still a plain pass
        (105.0001, "improved"),
    ],
)
def test_relative_higher_is_better_boundaries(measured, expected):
    assert status(100.0, measured, REL5, Direction.HIGHER) == expected


def test_boundary_survives_float_noise_on_real_numbers():
    # 407.9 * 0.95 is not exactly representable; it must still count as exactly -5%.
    assert status(407.9, 407.9 * 0.95, REL5, "higher") == "pass"
    assert status(407.9, 407.9 * 0.95 - 0.001, REL5, "higher") == "regressed"


# --- relative, lower is better (TTFT +10%) -----------------------------------------


@pytest.mark.parametrize(
    "measured, expected",
    [
        (624.0 * 1.10, "pass"),
        (624.0 * 1.10 + 0.01, "regressed"),
        (624.0 * 0.90, "pass"),
        (624.0 * 0.90 - 0.01, "improved"),
        (600.0, "pass"),
    ],
)
def test_relative_lower_is_better_boundaries(measured, expected):
    assert status(624.0, measured, REL10, Direction.LOWER) == expected


# --- absolute (acceptance rate -0.03) -----------------------------------------------


@pytest.mark.parametrize(
    "measured, expected",
    [
        (0.64, "pass"),  # 0.67 - 0.03, float noise included
        (0.6399, "regressed"),
        (0.70, "pass"),
        (0.7001, "improved"),
    ],
)
def test_absolute_boundaries(measured, expected):
    assert status(0.67, measured, ABS003, Direction.HIGHER) == expected


def test_absolute_lower_is_better():
    tol = Tolerance("absolute", 5.0)
    assert status(100.0, 105.0, tol, "lower") == "pass"
    assert status(100.0, 105.01, tol, "lower") == "regressed"
    assert status(100.0, 94.99, tol, "lower") == "improved"


def test_verdict_fields_carry_the_numbers():
    v = compare("decode_tok_s", 407.9, 380.2, REL5, "higher")
    assert v.status == "regressed" and not v.ok
    assert v.baseline == 407.9 and v.measured == 380.2
    assert v.change.absolute == pytest.approx(-27.7)
    assert v.change.relative == pytest.approx(-27.7 / 407.9)
    assert v.allowed == "-5%"
    assert "decode_tok_s" in v.hint


def test_improved_passes_with_update_hint():
    v = compare("decode_tok_s", 286.0, 407.9, REL5, "higher", update_command="pytest t.py::x --update-baselines")
    assert v.status == "improved" and v.ok
    assert "pytest t.py::x --update-baselines" in v.hint


def test_missing_baseline_fails_with_the_command():
    v = compare("decode_tok_s", None, 400.0, REL5, "higher", update_command="pytest t.py::x[32] --update-baselines")
    assert v.status == "missing-baseline" and not v.ok
    assert "pytest t.py::x[32] --update-baselines" in v.hint
    assert v.change is None


@pytest.mark.parametrize("measured", [None, math.nan])
def test_no_data_fails_with_the_reason(measured):
    v = compare(
        "acceptance_rate",
        0.67,
        measured,
        ABS003,
        "higher",
        no_data_reason="spec-decode counters did not move (--disable-log-stats?)",
    )
    assert v.status == "no-data" and not v.ok
    assert "--disable-log-stats" in v.hint


def test_no_data_wins_over_missing_baseline():
    # Recording would not help: the run itself has nothing to record.
    assert status(None, None, REL5, "higher") == "no-data"


def test_zero_baseline_relative():
    assert status(0.0, 0.0, REL5, "higher") == "pass"
    assert status(0.0, -1.0, REL5, "higher") == "regressed"
    assert status(0.0, 1.0, REL5, "higher") == "improved"
    assert compare("m", 0.0, 1.0, REL5, "higher").change.relative is None


def test_infinite_measured_is_an_error():
    with pytest.raises(ValueError, match="finite"):
        compare("m", 1.0, math.inf, REL5, "higher")


# --- several metrics at once ------------------------------------------------------


def test_compare_metrics_uses_defaults_overrides_and_reports_missing_ones():
    baseline = {
        "decode_tok_s": {"value": 400.0, "direction": "higher"},
        "acceptance_rate": {"value": 0.67, "direction": "higher"},
    }
    measured = {"decode_tok_s": 385.0, "acceptance_rate": 0.66}
    verdicts = compare_metrics(
        ["decode_tok_s", "acceptance_rate", "mtp_speedup", "ttft_ms_median"],
        baseline,
        measured,
        overrides=[{"decode_tok_s": "3%"}],
    )
    by = {v.metric: v for v in verdicts}
    assert by["decode_tok_s"].status == "regressed"  # -3.75% vs a 3% override
    assert by["decode_tok_s"].allowed == "-3%"
    assert by["acceptance_rate"].status == "pass"
    assert by["mtp_speedup"].status == "no-data"  # not in the summary at all
    assert "no metric named 'mtp_speedup'" in by["mtp_speedup"].hint
    assert [v.metric for v in verdicts] == ["decode_tok_s", "acceptance_rate", "mtp_speedup", "ttft_ms_median"]


def test_compare_metrics_without_baseline_entry_is_missing():
    verdicts = compare_metrics(["decode_tok_s"], None, {"decode_tok_s": 1.0})
    assert verdicts[0].status == "missing-baseline"


def test_compare_metrics_unknown_metric_is_an_error_even_with_a_tolerance():
    with pytest.raises(ValueError, match="unknown metric 'joules'"):
        compare_metrics(["joules"], None, {"joules": 1.0}, overrides=[{"joules": "10%"}])
    v = compare_metrics(
        ["ttft_ms_p99"], {"ttft_ms_p99": {"value": 10.0}}, {"ttft_ms_p99": 12.0}, overrides=[{"ttft_ms_p99": "10%"}]
    )[0]
    assert v.status == "regressed" and v.direction is Direction.LOWER
