"""summarize() on hand-made record sets, checked against values computed by hand."""

from __future__ import annotations

import math

import pytest

from pytest_llmperf.metrics.prometheus import SpecDecodeStats
from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.metrics.registry import REASONING_METRICS
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


def reasoning_rec(index, send, chunks, out, answer_at=None, reasoning_tokens=None, reasoning_chunks=0):
    r = rec(index, send, chunks, out=out, prompt=10)
    r.first_answer_time, r.reasoning_tokens, r.reasoning_chunks = answer_at, reasoning_tokens, reasoning_chunks
    return r


# A reasoning model's chat run (TTFT is the role chunk's, as vLLM times it):
# E: reasons 2 chunks, answers at 0.9: TTFT 0.1, TTFA 0.9; 6 of its 10 tokens reasoning
# F: reasons, answers at 1.5: TTFT 0.2 (from 1.0), TTFA 0.5; 4 of 8
# G: never leaves its reasoning (cut at max_tokens): no TTFA; 12 of 12
# H: failed: counts in nothing
REASONING = [
    reasoning_rec(0, 0.0, [0.1, 0.3, 0.9, 1.2], out=10, answer_at=0.9, reasoning_tokens=6, reasoning_chunks=2),
    reasoning_rec(1, 1.0, [1.2, 1.4, 1.5, 1.9], out=8, answer_at=1.5, reasoning_tokens=4, reasoning_chunks=1),
    reasoning_rec(2, 2.0, [2.3, 2.6, 3.0], out=12, reasoning_tokens=12, reasoning_chunks=2),
    reasoning_rec(3, 0.0, [0.3], out=None, answer_at=0.3, reasoning_tokens=3, reasoning_chunks=1),
]
REASONING[3].error = "HTTP 500"


def test_reasoning_run_has_ttfa_beside_vllms_ttft_and_the_token_split():
    s = summarize(REASONING, duration=4.0)
    assert s.ttft_ms_median == pytest.approx(200)  # vLLM's: first chunk of any kind (100, 200, 300)
    # TTFA over the requests that answered: 900 and 500 ms
    assert (s.ttfa_ms_mean, s.ttfa_ms_median) == (pytest.approx(700), pytest.approx(700))
    assert s.ttfa_ms_p90 == pytest.approx(860) and s.ttfa_ms_p99 == pytest.approx(896)
    assert s.answered == 2 and s.completed == 3
    assert (s.total_output_tokens, s.total_reasoning_tokens, s.total_answer_tokens) == (30, 22, 8)
    assert s.reasoning_share == pytest.approx(22 / 30)
    assert s.notes == []


def test_reasoning_figures_are_real_time_on_a_sped_up_clock():
    fast, real = summarize(REASONING, 4.0, clock_speed=10.0), summarize(REASONING, 4.0)
    assert fast.ttfa_ms_median == pytest.approx(real.ttfa_ms_median * 10)
    assert (fast.answered, fast.total_reasoning_tokens, fast.reasoning_share) == (2, 22, real.reasoning_share)


def test_no_reasoning_means_no_reasoning_figures():
    s = summarize(RECORDS, duration=4.0)
    d = s.to_dict()
    for name in REASONING_METRICS:
        assert d[name] is None, name  # so tables, reports and baselines leave them out
    # a server that counts reasoning tokens, none of them used: still no reasoning run
    plain = [reasoning_rec(0, 0.0, [0.1, 0.2], out=3, answer_at=0.2, reasoning_tokens=0)]
    assert summarize(plain, 1.0).ttfa_ms_median is None and summarize(plain, 1.0).answered is None


def test_reasoning_hidden_from_the_stream_still_counts_from_usage():
    # include_reasoning false: no reasoning chunk, but usage counted 5 reasoning tokens
    s = summarize([reasoning_rec(0, 0.0, [0.1, 0.9, 1.0], out=9, answer_at=0.9, reasoning_tokens=5)], 1.0)
    assert s.ttfa_ms_median == pytest.approx(900) and s.total_reasoning_tokens == 5 and s.total_answer_tokens == 4


def test_reasoning_without_usage_counts_gives_ttfa_and_says_why_no_split():
    records = [reasoning_rec(i, 0.0, [0.1, 0.5], out=4, answer_at=0.5, reasoning_chunks=1) for i in range(7)]
    s = summarize(records, 1.0)
    assert s.ttfa_ms_median == pytest.approx(500) and s.answered == 7
    assert s.total_reasoning_tokens is None and s.total_answer_tokens is None and s.reasoning_share is None
    (note,) = s.notes
    assert note.startswith("7 successful request(s) of a reasoning run reported no reasoning token count")
    assert "indices 0, 1, 2, 3, 4, ..." in note and "--reasoning-parser" in note
