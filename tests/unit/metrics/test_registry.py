from dataclasses import fields, replace
from pathlib import Path

import pytest

from pytest_llmperf.metrics.registry import (
    METRICS,
    REASONING_METRICS,
    REGISTRY,
    Direction,
    Metric,
    Needs,
    Registry,
    Scaling,
    Tolerance,
    UnknownMetric,
    check_names,
    flatten,
    format_value,
    markdown_table,
    metric,
    to_real_time,
    using,
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


def test_a_run_gates_by_default_the_gated_rows_whose_needs_it_plans_in_group_order():
    assert REGISTRY.gated(speculative=False, slos=False) == ("steady_decode_tok_s",)
    assert REGISTRY.gated(speculative=True, slos=True) == (
        "steady_decode_tok_s",
        "acceptance_rate",
        "acceptance_length",
        "request_goodput",
        "slo_attainment",
    )
    assert REGISTRY.gated(speculative=False, slos=True)[1:] == ("request_goodput", "slo_attainment")


def test_the_tables_columns_and_key_figures_are_rows_roles():
    assert [(m.column, m.name) for m in REGISTRY.columns()][:3] == [
        ("decode tok/s", "decode_tok_s"),
        ("steady tok/s", "steady_decode_tok_s"),
        ("prefill tok/s", "prefill_tok_s"),
    ]
    assert set(REGISTRY.key_figures()) == {
        "decode_tok_s",
        "prefill_tok_s",
        "ttft_ms_median",
        "tpot_ms_median",
        "ttfa_ms_median",
        "acceptance_rate",
        "acceptance_length",
        "request_goodput",
        "slo_attainment",
        "capacity",
    }
    assert [m.name for m in REGISTRY.columns() if m.needs and m.needs[0] is Needs.SLOS] == [
        "request_goodput",
        "slo_attainment",
    ]


def test_each_figure_that_needs_something_says_so_with_its_own_reason():
    assert metric("acceptance_pos3").needs == (Needs.SPEC_DECODE,)
    assert metric("ttfa_ms_p90").needs == (Needs.REASONING, Needs.ANSWER)
    assert metric("mtp_speedup").needs == (Needs.BASE_RUN,) and not metric("mtp_speedup").gated
    assert "--llmperf-slos" in Needs.SLOS.reason and "--reasoning-parser" in Needs.REASONING.reason
    assert REASONING_METRICS == REGISTRY.needing(Needs.REASONING)


def test_a_copy_with_rows_adds_replaces_derives_and_knows_a_new_family():
    wider = Metric("tokens_per_request", Direction.HIGHER, "tokens", Scaling.NONE, 1, "output tokens / completed")
    derived = replace(wider, derive=lambda f: f["total_output_tokens"] / f["completed"])
    family = Metric("kv_hit_pos<i>", Direction.HIGHER, "ratio", Scaling.NONE, 3, "cache hits at position i")
    strict = replace(metric("decode_tok_s"), tolerance=Tolerance("relative", 0.01))
    copy = REGISTRY.with_rows(derived, family, strict)
    assert copy.flatten({"completed": 4, "total_output_tokens": 400})["tokens_per_request"] == 100.0
    assert copy.metric("kv_hit_pos2") is family and copy.metric("decode_tok_s") is strict
    assert [m.name for m in copy.rows].index("decode_tok_s") == 0  # replaced in place
    assert REGISTRY.metric("decode_tok_s").tolerance == Tolerance("relative", 0.05)
    with using(copy):
        assert format_value("tokens_per_request", 99.96) == "100.0"
    with pytest.raises(UnknownMetric):
        format_value("tokens_per_request", 99.96)
    with pytest.raises(ValueError, match="each name once"):
        Registry([wider, wider])


def test_the_documented_gated_column_says_which_runs_gate_it():
    rows = {line.split("|")[1].strip(): line.split("|")[5].strip() for line in markdown_table().splitlines()[2:]}
    assert rows["`steady_decode_tok_s`"] == "every run"
    assert rows["`acceptance_rate`"] == "speculative servers"
    assert rows["`slo_attainment`"] == "runs with SLOs"
    assert rows["`decode_tok_s`"] == ""
