"""Goodput at SLOs from known records: vLLM's definition (vllm/benchmarks/serve.py,
calculate_metrics) at its edges, and the SLO text as `--goodput` takes it."""

import math

import pytest

from pytest_llmperf.metrics.goodput import (
    SLOError,
    canonical_slos,
    format_slos,
    good_requests,
    parse_slos,
    request_values,
)
from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.metrics.registry import METRICS, Direction, Scaling
from pytest_llmperf.metrics.summary import summarize


def rec(index, ttft, e2el, tokens=5, send=0.0, error=None, chunks=None):
    """A request sent at `send` whose first chunk came `ttft` s later and its last `e2el` s
    later (binary fractions, so the arithmetic is exact)."""
    times = chunks if chunks is not None else ([send + ttft, send + e2el] if e2el != ttft else [send + ttft])
    return RequestRecord(
        index=index,
        send_time=send,
        chunk_times=[] if error else times,
        end_time=send + e2el,
        prompt_tokens=10,
        completion_tokens=None if error else tokens,
        error=error,
    )


# -- the SLO text -----------------------------------------------------------------


def test_slos_read_as_vllm_writes_them_in_ms_and_spell_one_way():
    assert parse_slos("ttft:500 tpot:50 e2el:3000") == {"ttft": 500.0, "tpot": 50.0, "e2el": 3000.0}
    assert parse_slos("  e2el:3000.5,ttft:0 ") == {"ttft": 0.0, "e2el": 3000.5}
    assert format_slos({"e2el": 3000.0, "tpot": 12.5}) == "tpot:12.5 e2el:3000"
    assert canonical_slos("tpot:50.0   ttft:500") == "ttft:500 tpot:50"
    for none in (None, "", "  ", "none", "OFF"):
        assert canonical_slos(none) == ""


@pytest.mark.parametrize(
    "text, message",
    [
        ("ttfb:500", "unknown SLO 'ttfb' in 'ttfb:500'; did you mean ttft? the SLOs are ttft, tpot, e2el"),
        ("TPOT:50", "unknown SLO 'TPOT' in 'TPOT:50'; did you mean tpot?"),
        ("latency:5", "unknown SLO 'latency' in 'latency:5'; the SLOs are ttft, tpot, e2el"),
        ("ttft=500", "'ttft=500' is not a KEY:VALUE pair; write KEY:VALUE pairs in milliseconds"),
        ("ttft:", "'ttft:' is not a KEY:VALUE pair"),
        ("ttft:1:2", "'ttft:1:2' is not a KEY:VALUE pair"),
        ("ttft:500ms", "'ttft:500ms': '500ms' is not a number; give milliseconds as a plain number >= 0"),
        ("e2el:-1", "'e2el:-1': the SLO must be a finite number of milliseconds >= 0"),
        ("e2el:inf", "finite number of milliseconds"),
        ("e2el:nan", "finite number of milliseconds"),
        ("ttft:500 ttft:300", "ttft is given twice"),
        ("", "no SLOs given in ''; write KEY:VALUE pairs in milliseconds separated by spaces, e.g. 'ttft:500"),
    ],
)
def test_bad_slo_text_says_what_is_wrong_and_how_to_write_it(text, message):
    with pytest.raises(SLOError) as caught:
        parse_slos(text)
    assert message in str(caught.value)


def test_slos_that_are_not_text_are_refused():
    with pytest.raises(SLOError, match="SLOs must be text such as 'ttft:500 tpot:50 e2el:3000', got 500"):
        parse_slos(500)


# -- per request, as vLLM reads it ------------------------------------------------------


def test_a_request_is_good_at_exactly_its_slo_and_not_a_hair_over():
    # TTFT 0.5 s, E2EL 1.5 s, 5 tokens: TPOT (1.5 - 0.5) / 4 = 0.25 s, all exact in binary.
    at = rec(0, 0.5, 1.5)
    assert request_values(at) == {"ttft": 0.5, "tpot": 0.25, "e2el": 1.5}
    assert good_requests([at], parse_slos("ttft:500 tpot:250 e2el:1500")) == 1
    over = rec(1, 0.5 + 2**-20, 1.5)  # 0.95 µs past the TTFT SLO
    assert good_requests([over], parse_slos("ttft:500")) == 0
    assert good_requests([at], parse_slos("tpot:249.999")) == 0
    assert good_requests([at], parse_slos("e2el:1499.999")) == 0


def test_a_reply_of_one_token_meets_any_tpot_slo_as_in_vllm():
    one = rec(0, 0.5, 0.5, tokens=1)
    assert request_values(one)["tpot"] == 0.0
    assert good_requests([one], parse_slos("tpot:0")) == 1
    no_usage = RequestRecord(index=1, send_time=0.0, chunk_times=[0.25, 4.0], completion_tokens=None)
    assert request_values(no_usage)["tpot"] == 0.0  # vLLM without a tokenizer counts it as 1 token


def test_a_failed_request_is_never_good():
    failed = rec(0, 0.1, 0.2, error="HTTP 500")
    assert request_values(failed) is None
    assert good_requests([failed], parse_slos("e2el:100000")) == 0


def test_values_on_a_sped_up_clock_are_judged_in_real_time():
    fast = rec(0, 0.0625, 0.1875)  # at speed 8: TTFT 0.5 s, E2EL 1.5 s real
    assert good_requests([fast], parse_slos("ttft:500 e2el:1500"), clock_speed=8.0) == 1
    assert good_requests([fast], parse_slos("ttft:499"), clock_speed=8.0) == 0


# -- in the summary -------------------------------------------------------------------


def test_goodput_is_good_requests_over_the_duration_and_attainment_their_share_of_the_completed():
    records = [
        rec(0, 0.25, 1.0),  # TPOT 0.1875 s
        rec(1, 0.5, 2.0),  # exactly at the TTFT SLO; TPOT 0.375 s
        rec(2, 0.75, 2.0),  # TTFT over
        rec(3, 0.25, 3.5),  # E2EL over
        rec(4, 0.1, 0.2, error="HTTP 500"),  # failed: in neither count
    ]
    s = summarize(records, duration=4.0, slos="e2el:3000 ttft:500")
    assert s.slos == "ttft:500 e2el:3000"
    assert s.completed == 4 and s.failed == 1
    assert s.request_goodput == 2 / 4.0  # vLLM: good_completed / dur_s
    assert s.slo_attainment == 2 / 4
    assert s.request_throughput == 4 / 4.0
    tight = summarize(records, duration=4.0, slos="ttft:500 tpot:200")
    assert tight.request_goodput == 1 / 4.0 and tight.slo_attainment == 1 / 4
    none_good = summarize(records, duration=4.0, slos="ttft:0")
    assert none_good.request_goodput == 0.0 and none_good.slo_attainment == 0.0


def test_without_slos_there_is_no_goodput_figure():
    s = summarize([rec(0, 0.25, 1.0)], duration=1.0)
    assert s.slos == "" and s.request_goodput is None and s.slo_attainment is None
    assert "request_goodput" in s.to_dict() and "slos" not in s.to_dict()  # a metric, never the SLO text


def test_with_nothing_completed_goodput_and_attainment_are_undefined_not_zero():
    s = summarize([rec(0, 0.1, 0.2, error="HTTP 500")], duration=1.0, slos="ttft:500")
    assert s.completed == 0
    assert s.request_goodput is None and s.slo_attainment is None


def test_goodput_on_a_sped_up_clock_is_a_real_time_rate():
    # At speed 8, real TTFTs 0.25, 0.5 and 0.75 s over a run of 3 real seconds.
    records = [rec(0, 0.03125, 0.125), rec(1, 0.0625, 0.1875, send=0.0625), rec(2, 0.09375, 0.25, send=0.125)]
    s = summarize(records, duration=0.375, clock_speed=8.0, slos="ttft:500")
    assert s.duration_s == 3.0
    assert s.slo_attainment == 2 / 3
    assert s.request_goodput == 2 / 3.0


def test_bad_slos_given_to_the_summary_are_an_error_not_a_figure():
    with pytest.raises(SLOError, match="unknown SLO 'ttfb'"):
        summarize([rec(0, 0.25, 1.0)], duration=1.0, slos="ttfb:5")


def test_the_registry_knows_goodput_and_attainment():
    goodput, attainment = METRICS["request_goodput"], METRICS["slo_attainment"]
    assert (goodput.direction, goodput.unit, goodput.scaling) == (Direction.HIGHER, "req/s", Scaling.RATE)
    assert (attainment.direction, attainment.unit, attainment.scaling) == (Direction.HIGHER, "ratio", Scaling.NONE)
    assert goodput.tolerance is not None and goodput.tolerance.kind == "relative"
    assert attainment.tolerance is not None and math.isclose(attainment.tolerance.limit, 0.05)
