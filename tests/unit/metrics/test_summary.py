"""summarize() on hand-made record sets, checked against values computed by hand."""

from __future__ import annotations

import math

import pytest

from pytest_llmperf.metrics.prometheus import SpecDecodeStats
from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.metrics.summary import Summary, summarize


def rec(index, send, chunks, out, prompt, error=None):
    return RequestRecord(
        index=index,
        send_time=send,
        chunk_times=chunks,
        end_time=chunks[-1] if chunks else send,
        prompt_tokens=prompt,
        completion_tokens=out,
        status=200 if error is None else 500,
        error=error,
    )


# A: 4 chunks carrying 7 tokens (multi-token chunks, as under MTP/ngram)
#    ttft 0.5, e2el 1.1, tpot (1.1-0.5)/6 = 0.1, itls 0.1 0.2 0.3
# B: 2 chunks carrying 4 tokens: ttft 0.2, e2el 0.8, tpot 0.6/3 = 0.2, itl 0.6
# C: 1 token: ttft 0.4, e2el 0.4, no tpot, no itl
# D: failed after one chunk: ignored by every latency figure and every token count
RECORDS = [
    rec(0, 0.0, [0.5, 0.6, 0.8, 1.1], out=7, prompt=10),
    rec(1, 1.0, [1.2, 1.8], out=4, prompt=20),
    rec(2, 2.0, [2.4], out=1, prompt=5),
    rec(3, 0.0, [0.3], out=None, prompt=None, error="HTTP 500"),
]


def test_counts_and_throughput_from_usage():
    s = summarize(RECORDS, duration=4.0)
    assert (s.completed, s.failed) == (3, 1)
    assert s.duration_s == 4.0
    assert (s.total_prompt_tokens, s.total_output_tokens) == (35, 12)
    assert s.request_throughput == pytest.approx(3 / 4)
    assert s.prefill_tok_s == pytest.approx(35 / 4)
    assert s.decode_tok_s == pytest.approx(12 / 4)  # usage tokens, not 7 chunks
    assert s.total_tok_s == pytest.approx(47 / 4)


def test_latency_percentiles_linear_like_numpy_default():
    s = summarize(RECORDS, duration=4.0)
    # TTFT ms sorted 200 400 500: p90 at rank 1.8 -> 400 + 0.8*100
    assert s.ttft_ms_mean == pytest.approx(1100 / 3)
    assert s.ttft_ms_median == pytest.approx(400)
    assert s.ttft_ms_p90 == pytest.approx(480)
    assert s.ttft_ms_p99 == pytest.approx(498)
    # E2EL ms sorted 400 800 1100
    assert s.e2el_ms_mean == pytest.approx(2300 / 3)
    assert s.e2el_ms_median == pytest.approx(800)
    assert s.e2el_ms_p90 == pytest.approx(1040)
    assert s.e2el_ms_p99 == pytest.approx(1094)


def test_tpot_and_itl_differ_under_multi_token_chunks():
    s = summarize(RECORDS, duration=4.0)
    # TPOT ms 100, 200 (C has one token: excluded)
    assert s.tpot_ms_mean == pytest.approx(150)
    assert s.tpot_ms_median == pytest.approx(150)
    assert s.tpot_ms_p90 == pytest.approx(190)
    assert s.tpot_ms_p99 == pytest.approx(199)
    # ITL pooled over all chunk gaps: 100 200 300 600
    assert s.itl_ms_mean == pytest.approx(300)
    assert s.itl_ms_median == pytest.approx(250)
    assert s.itl_ms_p90 == pytest.approx(510)
    assert s.itl_ms_p99 == pytest.approx(591)
    # per-stream decode speed = 1 / median TPOT
    assert s.per_stream_tok_s == pytest.approx(1000 / 150)


def test_empty_run_is_well_defined():
    s = summarize([], duration=0.0)
    assert (s.completed, s.failed, s.total_output_tokens) == (0, 0, 0)
    for name in (
        "request_throughput",
        "decode_tok_s",
        "prefill_tok_s",
        "per_stream_tok_s",
        "ttft_ms_mean",
        "tpot_ms_p99",
        "itl_ms_median",
        "e2el_ms_p90",
    ):
        assert getattr(s, name) is None, name


def test_all_failed_run_has_no_figures():
    failed = [rec(i, 0.0, [], out=None, prompt=None, error="connection refused") for i in range(3)]
    s = summarize(failed, duration=2.0)
    assert (s.completed, s.failed) == (0, 3)
    assert s.decode_tok_s is None and s.ttft_ms_median is None and s.request_throughput is None


def test_zero_duration_with_completions_is_none_with_a_note():
    s = summarize(RECORDS[:1], duration=0)
    assert s.decode_tok_s is None and s.completed == 1
    assert any("duration is 0" in n for n in s.notes)


def test_missing_usage_is_reported_not_guessed_from_chunks():
    r = rec(5, 0.0, [0.1, 0.2, 0.3], out=None, prompt=None)
    s = summarize([r], duration=1.0)
    assert s.total_output_tokens == 0 and s.tpot_ms_mean is None
    assert s.itl_ms_mean == pytest.approx(100)
    assert any("reported no usage" in n and "5" in n for n in s.notes)


def test_spec_stats_are_carried_and_their_note_kept():
    spec = SpecDecodeStats("ok", None, 500, 1500, 1005, 0.67, 3.01, [0.84, 0.66, 0.51])
    s = summarize(RECORDS, 4.0, spec)
    assert (s.acceptance_rate, s.acceptance_length) == (0.67, 3.01)
    assert s.acceptance_per_position == [0.84, 0.66, 0.51]
    assert s.spec_status == "ok"

    frozen = SpecDecodeStats("stats_not_moving", "counters did not move")
    s = summarize(RECORDS, 4.0, frozen)
    assert s.acceptance_rate is None and s.acceptance_per_position is None
    assert s.spec_status == "stats_not_moving" and s.spec_note == "counters did not move"


def test_to_dict_is_flat_with_baseline_keys():
    spec = SpecDecodeStats("ok", None, 2, 6, 3, 0.5, 2.5, [1.0, 0.5, 0.0])
    d = summarize(RECORDS, 4.0, spec).to_dict()
    assert d["acceptance_per_position"] == [1.0, 0.5, 0.0] and d["acceptance_rate"] == 0.5
    for key in (
        "completed",
        "failed",
        "duration_s",
        "request_throughput",
        "prefill_tok_s",
        "decode_tok_s",
        "per_stream_tok_s",
        "acceptance_rate",
        "acceptance_length",
        "acceptance_per_position",
    ):
        assert key in d
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "p90", "p99"):
            assert f"{metric}_ms_{stat}" in d
    # numbers, None, or the per-position list of numbers: nothing a baseline cannot hold
    for key, value in d.items():
        if key == "acceptance_per_position":
            assert value is None or all(isinstance(x, float) for x in value)
        else:
            assert value is None or isinstance(value, (int, float)), key
    assert "notes" not in d and "spec_status" not in d


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_bad_duration_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="duration"):
        summarize(RECORDS, bad)


def test_bad_types_are_clear_errors():
    with pytest.raises(TypeError, match="duration"):
        summarize(RECORDS, "4")
    with pytest.raises(TypeError, match="RequestRecord"):
        summarize([{"index": 0}], 1.0)
    assert isinstance(summarize(iter(RECORDS), 4.0), Summary)
