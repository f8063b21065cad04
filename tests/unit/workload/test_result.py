"""RunResult: summary from raw data, JSON round trip."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.workload.result import RunResult, describe_warmup, plural

CONFIG = {
    "dataset": "sharegpt.json",
    "seed": 0,
    "num_prompts": 4,
    "max_tokens": 8,
    "concurrency": 2,
    "max_seconds": 300.0,
}


def spec_page(drafts, tokens, accepted, pos, generation):
    lab = 'engine="0",model_name="m"'
    lines = [
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        f"vllm:spec_decode_num_drafts_total{{{lab}}} {drafts}",
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
        f"vllm:spec_decode_num_draft_tokens_total{{{lab}}} {tokens}",
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
        f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} {accepted}",
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
        *(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{i}"}} {v}' for i, v in enumerate(pos)),
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{lab}}} {generation}",
    ]
    return "\n".join(lines) + "\n"


def records(scale=1.0):
    """Two requests of 6 and 6 tokens; chunk times multiplied by `scale`."""
    t0 = 12345.678901234567  # perf_counter-like value: must survive JSON exactly
    return [
        RequestRecord(
            index=0,
            send_time=t0,
            chunk_times=[t0 + 0.1 * scale, t0 + 0.35 * scale, t0 + 0.6 * scale],
            end_time=t0 + 0.6 * scale,
            prompt_tokens=11,
            completion_tokens=6,
            finish_reason="length",
            status=200,
            output_text="a b c d e f",
            expected_prompt_len=11,
        ),
        RequestRecord(
            index=1,
            send_time=t0,
            chunk_times=[t0 + 0.2 * scale, t0 + 0.7 * scale],
            end_time=t0 + 0.7 * scale,
            prompt_tokens=9,
            completion_tokens=6,
            finish_reason="length",
            status=200,
            output_text="ü ∑ 😀",
            expected_prompt_len=9,
        ),
        RequestRecord(
            index=2,
            send_time=t0,
            chunk_times=[],
            end_time=t0 + 0.05,
            status=500,
            error="HTTP 500: boom",
            expected_prompt_len=30,
        ),
    ]


def make(duration=4.0, scale=1.0, config=CONFIG, before=None, after=None, recs=None):
    return RunResult(
        config=dict(config),
        records=recs if recs is not None else records(scale),
        duration=duration,
        attempted=3,
        stop_reason="max_seconds",
        metrics_before=before if before is not None else spec_page(100, 300, 150, [70, 50, 30], 1000),
        metrics_after=after if after is not None else spec_page(104, 312, 158, [4 + 70, 3 + 50, 1 + 30], 1012),
        started_at="2026-11-30T04:30:00Z",
        provenance={"vllm": "0.32.0"},
    )


def test_summary_combines_records_and_counter_deltas():
    s = make().summary()
    assert (s.completed, s.failed) == (2, 1)
    assert s.decode_tok_s == pytest.approx(12 / 4.0)
    assert s.prefill_tok_s == pytest.approx(20 / 4.0)
    # deltas: 4 drafts, 12 draft tokens, 8 accepted, per position 4 3 1
    assert s.acceptance_rate == pytest.approx(8 / 12)
    assert s.acceptance_length == pytest.approx(1 + 8 / 4)
    assert s.acceptance_per_position == pytest.approx([1.0, 0.75, 0.25])


def test_a_result_from_a_faster_clock_summarises_in_real_time_and_keeps_its_clock_in_json():
    real = make().summary().to_dict()
    # The same run on a clock 10 times faster: every time a tenth, the duration too.
    fast = replace(make(duration=0.4, scale=0.1), clock_speed=10.0)
    fast_summary = fast.summary().to_dict()
    for name in ("decode_tok_s", "request_throughput", "ttft_ms_median", "tpot_ms_mean", "duration_s"):
        assert fast_summary[name] == pytest.approx(real[name]), name
    assert fast_summary["acceptance_per_position"] == real["acceptance_per_position"]
    written = fast.to_dict()
    assert written["clock_speed"] == 10.0 and written["summary"] == fast_summary
    again = RunResult.from_dict(json.loads(fast.to_json()))
    assert again.clock_speed == 10.0 and again.summary().to_dict() == fast_summary
    with pytest.raises(ValueError, match="clock_speed 0 is not a positive number"):
        RunResult.from_dict({**written, "clock_speed": 0})


def test_stats_disabled_server_is_explained_not_zero():
    frozen = spec_page(0, 0, 0, [0, 0, 0], 1000)
    s = make(before=frozen, after=frozen).summary()
    assert s.spec_status == "stats_not_moving"
    assert s.acceptance_rate is None
    assert "12 tokens" in s.spec_note  # from the client's usage counts


def test_unreadable_metrics_page_does_not_lose_the_summary():
    s = make(after="this is { not prometheus").summary()
    assert s.spec_status == "unparseable" and s.decode_tok_s == pytest.approx(3.0)


def test_json_round_trip_keeps_raw_records_and_recomputes_the_same_summary():
    original = make()
    text = original.to_json()
    back = RunResult.from_json(text)
    assert back == original  # every raw field, floats bit-exact
    assert back.records[0].send_time == 12345.678901234567
    assert back.records[1].output_text == "ü ∑ 😀"
    assert back.summary() == original.summary()
    assert back.to_json() == text  # stable formatting


def test_json_has_sorted_keys_and_a_readable_summary():
    data = json.loads(make().to_json(), object_pairs_hook=lambda pairs: [k for k, _ in pairs])
    assert data == sorted(data)
    d = json.loads(make().to_json())
    assert d["format"] == "pytest-llmperf/run-result" and d["version"] == 1
    assert d["summary"]["decode_tok_s"] == pytest.approx(3.0)
    assert d["spec_decode"]["status"] == "ok" and d["notes"] == []
    assert len(d["records"]) == 3 and d["records"][2]["error"] == "HTTP 500: boom"


def test_summary_in_the_file_is_not_trusted_on_load():
    d = json.loads(make().to_json())
    d["summary"]["decode_tok_s"] = 1e9
    assert RunResult.from_dict(d).summary().decode_tok_s == pytest.approx(3.0)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(format="something-else"), "not a pytest-llmperf run result"),
        (lambda d: d.update(version=99), "version 99"),
        (lambda d: d.pop("records"), "missing \\['records'\\]"),
        (lambda d: d.update(stop_reason="bored"), "stop_reason 'bored'"),
        (lambda d: d.update(duration="long"), "duration 'long'"),
        (lambda d: d["records"][0].update(bogus=1), "malformed request record"),
    ],
)
def test_from_dict_rejects_bad_files_clearly(mutate, message):
    d = json.loads(make().to_json())
    mutate(d)
    with pytest.raises(ValueError, match=message):
        RunResult.from_dict(d)


def test_from_json_rejects_non_json():
    with pytest.raises(ValueError, match="not valid JSON"):
        RunResult.from_json("{nope")
    with pytest.raises(ValueError, match="JSON object"):
        RunResult.from_json("[1, 2]")


def test_nan_cannot_be_written_silently():
    with pytest.raises(ValueError, match="NaN"):
        make(recs=[replace(records()[0], send_time=float("nan"))]).to_json()


def test_warmup_words_take_the_singular_for_one_request():
    one = {"requests": 1, "completed": 1, "failed": 0, "duration_s": 2.0, "output_tok_s": 32.0}
    assert describe_warmup(one) == "1 request in 2.0 s, 32.0 output tok/s"
    assert describe_warmup({**one, "requests": 4}) == "4 requests in 2.0 s, 32.0 output tok/s"
    assert [plural(n, "request") for n in (0, 1, 2)] == ["0 requests", "1 request", "2 requests"]
