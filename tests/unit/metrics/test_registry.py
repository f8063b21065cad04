from dataclasses import fields
from pathlib import Path

import pytest

from pytest_llmperf.metrics.registry import (
    METRICS,
    REASONING_METRICS,
    Direction,
    Scaling,
    Tolerance,
    UnknownMetric,
    check_names,
    flatten,
    format_value,
    markdown_table,
    metric,
    to_real_time,
)
from pytest_llmperf.metrics.summary import NOT_METRICS, Summary


def test_sped_up_clock_is_scaled_back_and_ratios_are_untouched():
    fast = {
        "duration_s": 10.0,
        "decode_tok_s": 4000.0,
        "total_tok_s": 5000.0,
        "request_throughput": 2.0,
        "ttft_ms_median": 62.4,
        "tpot_ms_p99": 7.0,
        "acceptance_rate": 0.67,
        "completed": 118,
        "acceptance_length": 3.0,
        "total_output_tokens": 30000,
        "spec_status": "ok",
        "ttft_ms_mean": None,
    }
    real = to_real_time(fast, 10.0)
    assert real["duration_s"] == 100.0 and real["decode_tok_s"] == 400.0 and real["total_tok_s"] == 500.0
    assert real["request_throughput"] == 0.2 and real["ttft_ms_median"] == 624.0 and real["tpot_ms_p99"] == 70.0
    for unchanged in (
        "acceptance_rate",
        "completed",
        "acceptance_length",
        "total_output_tokens",
        "spec_status",
        "ttft_ms_mean",
    ):
        assert real[unchanged] == fast[unchanged]
    assert to_real_time(fast, 1.0) == fast


def test_every_figure_the_summary_produces_is_in_the_registry():
    produced = [f.name for f in fields(Summary) if f.name not in NOT_METRICS and f.name != "acceptance_per_position"]
    check_names(produced)
    assert metric("acceptance_pos1") is metric("acceptance_pos7") is METRICS["acceptance_pos<i>"]


def test_flatten_names_positions_and_drops_what_is_not_a_metric():
    summary = {"decode_tok_s": 400.0, "acceptance_per_position": [0.8, 0.6], "spec_status": "ok", "notes": ["x"]}
    assert flatten(summary) == {"decode_tok_s": 400.0, "acceptance_pos1": 0.8, "acceptance_pos2": 0.6}


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [("decode_toks", "decode_tok_s"), ("ttft_median", "ttft_ms_median"), ("acceptance_pos0", "acceptance_pos1")],
)
def test_an_unknown_name_is_an_error_naming_the_nearest(name, suggestion):
    with pytest.raises(UnknownMetric, match=f"unknown metric '{name}'; did you mean .*{suggestion}"):
        metric(name)


def test_a_name_far_from_any_lists_them_all():
    with pytest.raises(UnknownMetric, match="known metrics: .*decode_tok_s"):
        check_names(["decode_tok_s", "gpu_joules"])


def test_the_family_placeholder_is_not_a_metric_name():
    with pytest.raises(UnknownMetric):
        metric("acceptance_pos<i>")


def test_directions_defaults_and_scaling_of_the_headline_metrics():
    assert metric("decode_tok_s").direction is Direction.HIGHER and metric("decode_tok_s").scaling is Scaling.RATE
    assert metric("tpot_ms_p99").direction is Direction.LOWER and metric("tpot_ms_p99").tolerance is None
    assert metric("ttft_ms_median").tolerance == Tolerance("relative", 0.10)
    assert metric("acceptance_rate").tolerance == Tolerance("absolute", 0.02)
    assert metric("per_stream_tok_s").direction is Direction.HIGHER  # a rate, though it ends in "_s"
    assert metric("duration_s").scaling is Scaling.DURATION and metric("failed").direction is Direction.LOWER


def test_values_are_shown_with_the_metrics_decimals():
    assert format_value("decode_tok_s", 407.91234) == "407.9"
    assert format_value("acceptance_rate", 0.6712) == "0.671"
    assert format_value("completed", 118.0) == "118"
    assert format_value("acceptance_pos2", 0.41234) == "0.412"


def test_the_documented_metric_table_is_the_registry():
    page = (Path(__file__).parents[3] / "docs" / "reference" / "metrics.md").read_text()
    assert markdown_table() in page, "regenerate docs/reference/metrics.md: python scripts/gen_reference.py"


def test_a_reasoning_models_figures_scale_and_judge_as_their_kind():
    assert set(REASONING_METRICS) <= {f.name for f in fields(Summary)}
    for stat in ("mean", "median", "p90", "p99"):
        ttfa = metric(f"ttfa_ms_{stat}")
        assert (ttfa.direction, ttfa.unit, ttfa.scaling) == (Direction.LOWER, "ms", Scaling.DURATION)
    assert metric("ttfa_ms_median").tolerance == Tolerance("relative", 0.10)  # as TTFT's median
    for name in ("answered", "total_reasoning_tokens", "total_answer_tokens", "reasoning_share"):
        assert metric(name).scaling is Scaling.NONE and metric(name).tolerance is None, name
    assert to_real_time({"ttfa_ms_median": 70.0, "reasoning_share": 0.9}, 10.0) == {
        "ttfa_ms_median": 700.0,
        "reasoning_share": 0.9,
    }
