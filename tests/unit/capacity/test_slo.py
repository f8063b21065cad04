"""The SLOs of a capacity search and the verdict of one probe's runs (capacity/slo.py)."""

import math

import pytest

from pytest_llmperf.capacity.slo import Outcome, ProbeResult, SLOSet, judge
from pytest_llmperf.metrics.records import RequestRecord

SLOS = SLOSet.parse({"tpot_ms_p99": 80, "ttft_ms_p99": 2000})


def run(good: int, slow_ttft: int = 0, slow_tpot: int = 0, failed: int = 0, seconds: float | None = 60.0):
    """A run's requests in seconds: `good` within both SLOs, then some over one of them."""
    requests = (
        [{"ttft": 0.5, "tpot": 0.04, "e2el": 5.0}] * good
        + [{"ttft": 2.41, "tpot": 0.04, "e2el": 7.0}] * slow_ttft
        + [{"ttft": 0.5, "tpot": 0.09, "e2el": 9.0}] * slow_tpot
    )
    return ProbeResult(tuple(requests), failed, seconds)


def test_the_form_gives_goodput_limits_and_the_percentile_as_the_share():
    assert [s.name for s in SLOS.slos] == ["ttft_ms_p99", "tpot_ms_p99"]  # goodput's order
    assert SLOS.share == 0.99
    assert SLOS.limits_ms == {"ttft": 2000.0, "tpot": 80.0}
    assert SLOS.goodput_text == "ttft:2000 tpot:80"  # a workload's slos, so its runs report goodput
    assert SLOSet.parse({"e2el_ms_median": 3000}).share == 0.5
    assert SLOSet.parse({"e2el_ms_median": 3000}).slos[0].label == "p50 E2EL"


@pytest.mark.parametrize(
    "form, says",
    [
        ({}, "at least one SLO"),
        ("ttft:500", "a dict of metric name to milliseconds"),
        ({"ttft_p99": 2000}, "did you mean ttft_ms_p99"),
        ({"decode_tok_s": 100}, "not a per-request latency percentile"),
        ({"itl_ms_p99": 50}, "not a per-request latency percentile"),
        ({"ttft_ms_mean": 500}, "write ttft_ms_p99"),
        ({"ttft_ms_p99": -1}, "milliseconds, a number >= 0"),
        ({"ttft_ms_p99": "2000"}, "milliseconds, a number >= 0"),
        ({"ttft_ms_p99": True}, "milliseconds, a number >= 0"),
        ({"ttft_ms_p99": math.nan}, "milliseconds, a number >= 0"),
        ({"ttft_ms_p99": 2000, "tpot_ms_p90": 80}, "ask different shares of requests (p90, p99)"),
    ],
)
def test_a_wrong_form_says_the_fix(form, says):
    with pytest.raises(ValueError) as caught:
        SLOSet.parse(form)
    assert says in str(caught.value)
    assert "e.g." in str(caught.value)


def test_clearly_within_is_met():
    verdict = judge([run(1000)], SLOS, 0.95)
    assert verdict.outcome is Outcome.MET
    assert (verdict.requests, verdict.good, verdict.runs) == (1000, 1000, 1)
    assert all(r.held for r in verdict.readings)


def test_clearly_over_is_broken_and_names_the_slo_and_by_how_much():
    verdict = judge([run(900, slow_ttft=100)], SLOS, 0.95)
    assert verdict.outcome is Outcome.BROKEN
    assert [r.slo.name for r in verdict.broken] == ["ttft_ms_p99"]
    assert verdict.worst is verdict.broken[0]
    assert verdict.worst.value_ms == pytest.approx(2410.0)
    assert verdict.worst.describe() == "p99 TTFT 2,410 ms over 2,000 ms (+20.5 %)"
    assert verdict.readings[1].describe() == "p99 TPOT 40 ms within 80 ms"
    assert verdict.describe().startswith("broken: 90.0 % of 1,000 requests (1 run) met every SLO")


def test_too_few_requests_to_tell_is_undecided_never_met():
    # 200 of 200 within: Wilson's lower bound is 0.987, not yet above 0.99.
    assert judge([run(200)], SLOS, 0.95).outcome is Outcome.UNDECIDED
    assert judge([run(200)] * 2, SLOS, 0.95).outcome is Outcome.MET  # pooled over two runs


def test_a_request_meets_the_slos_when_every_one_holds():
    verdict = judge([run(900, slow_ttft=50, slow_tpot=50)], SLOS, 0.95)
    assert verdict.good == 900
    assert [r.met_share for r in verdict.readings] == pytest.approx([0.95, 0.95])


def test_failed_requests_meet_no_slo():
    verdict = judge([run(500, failed=500)], SLOS, 0.95)
    assert (verdict.requests, verdict.good) == (1000, 500)
    assert verdict.outcome is Outcome.BROKEN


def test_a_run_without_requests_decides_nothing():
    verdict = judge([ProbeResult(())], SLOS, 0.95)
    assert verdict.outcome is Outcome.UNDECIDED
    assert verdict.readings[0].describe() == "p99 TTFT: no completed request (limit 2,000 ms)"


def test_records_read_as_goodput_reads_them():
    records = [
        RequestRecord(0, 10.0, chunk_times=[10.5, 10.6, 11.0], completion_tokens=3),
        RequestRecord(1, 10.0, chunk_times=[12.5, 12.6], completion_tokens=2),
        RequestRecord(2, 10.0, error="HTTP 500"),
    ]
    result = ProbeResult.from_records(records, clock_speed=2.0, seconds=3.0)
    assert result.failed == 1 and result.total == 3 and result.seconds == 3.0
    assert result.requests[0] == pytest.approx({"ttft": 1.0, "tpot": 0.5, "e2el": 2.0})  # real time: x2
    assert judge([result], SLOSet.parse({"ttft_ms_median": 2000}), 0.95).good == 1


def test_a_request_cut_at_the_time_cap_is_left_out_not_failed():
    records = [
        RequestRecord(0, 10.0, chunk_times=[10.5, 10.6], completion_tokens=2),
        RequestRecord(1, 10.0, chunk_times=[10.5], completion_tokens=1, error="cut at the time cap", cut_at_cap=True),
        RequestRecord(2, 10.0, error="cut at the time cap", cut_at_cap=True),
    ]
    result = ProbeResult.from_records(records)
    assert (len(result.requests), result.failed, result.total) == (1, 0, 1)


def test_the_opening_wave_is_left_out():
    burst = [RequestRecord(i, 10.0, chunk_times=[15.0, 15.1], completion_tokens=2) for i in range(2)]
    steady = [RequestRecord(2 + i, 15.1 + i, chunk_times=[15.3 + i, 15.4 + i], completion_tokens=2) for i in range(3)]
    result = ProbeResult.from_records(steady + burst, ramp=2)  # in any order: the first sent are the wave
    assert [v["ttft"] for v in result.requests] == pytest.approx([0.2, 0.2, 0.2])


def test_probe_results_must_make_sense():
    with pytest.raises(ValueError, match="failed must be a count"):
        ProbeResult((), failed=-1)
    with pytest.raises(ValueError, match="seconds must be"):
        ProbeResult((), seconds=math.inf)


def test_runs_that_disagree_are_not_pooled_as_one_binomial():
    # 86 % and 100 %: 93 % pooled, clear of 90 % were the 2,000 requests independent; the
    # fresh starts disagree far beyond that, so the two runs decide nothing yet.
    p90 = SLOSet.parse({"ttft_ms_p90": 2000})
    scattered = judge([run(860, slow_ttft=140), run(1000)], p90, 0.95)
    assert scattered.share.share == pytest.approx(0.93)
    assert scattered.outcome is Outcome.UNDECIDED
    assert judge([run(930, slow_ttft=70)] * 2, p90, 0.95).outcome is Outcome.MET
