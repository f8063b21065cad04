"""MeasuredRun's assertions check what they are given before anything is judged."""

import pytest

from pytest_llmperf import ServerSpec
from pytest_llmperf.measuring.measured import MeasuredRun
from pytest_llmperf.metrics.registry import UnknownMetric
from pytest_llmperf.workload.workload import resolve_workload

SPEC = ServerSpec(name="m", model="org/m")


def bound_run(judged):
    run = MeasuredRun(
        server=SPEC,
        workload=resolve_workload({"num_prompts": 4}, 1),
        results=[],
        samples={"decode_tok_s": [100.0], "steady_decode_tok_s": [100.0], "ttft_ms_median": [50.0]},
        provenance={},
        judge=lambda run, collect, tolerances, base: judged.append((collect(), dict(tolerances))),
    )
    return run


def test_assertion_tolerances_reach_the_judge_when_they_name_gated_metrics():
    judged = []
    bound_run(judged).assert_no_regression("decode_tok_s", "ttft_ms_median", tolerances={"ttft_ms_median": "+20%"})
    assert judged == [({"decode_tok_s": [100.0], "ttft_ms_median": [50.0]}, {"ttft_ms_median": "+20%"})]


@pytest.mark.parametrize(
    "tolerances, error, message",
    [
        ({"decode_toks": "3%"}, UnknownMetric, "assert_no_regression: unknown metric 'decode_toks'; did you mean"),
        ({"decode_tok_s": "+3%"}, ValueError, "tolerance for decode_tok_s: '+3%' has the wrong sign"),
        ({"decode_tok_s": "fast"}, ValueError, "tolerance for decode_tok_s: invalid tolerance 'fast'"),
        (
            {"ttft_ms_median": "10%"},
            ValueError,
            "tolerances for ttft_ms_median, which this assertion does not gate (it gates decode_tok_s)",
        ),
    ],
)
def test_assertion_tolerances_naming_nothing_gated_or_badly_written_are_refused_before_judging(
    tolerances, error, message
):
    judged = []
    with pytest.raises(error) as exc:
        bound_run(judged).assert_no_regression("decode_tok_s", tolerances=tolerances)
    assert message in str(exc.value)
    assert judged == []


def test_a_speedup_tolerance_is_checked_against_mtp_speedup_before_judging():
    judged = []
    run, base = bound_run(judged), bound_run(judged)
    with pytest.raises(ValueError, match="assert_speedup_over: tolerance: '\\+5%' has the wrong sign"):
        run.assert_speedup_over(base, tolerance="+5%")
    assert judged == []
    run.assert_speedup_over(base, tolerance="-5%")
    assert judged == [({"mtp_speedup": [1.0]}, {"mtp_speedup": "-5%"})]
