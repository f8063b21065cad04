"""The plugin's measurements against a real vLLM: token counts, spec-decode acceptance
and error handling, at concurrency 1 and 4, base and ngram-speculative servers.

Each server runs once (base first); the runs happen in module fixtures and the tests
assert on their results, so a failed assertion does not cost another run.
"""

from __future__ import annotations

import time

import pytest
from real_vllm_helpers import (
    BASE,
    LOG_INTERVAL_S,
    MAX_MODEL_LEN,
    NGRAM,
    NUM_SPEC_TOKENS,
    report,
    serve,
    stream_token_ids,
    tokenize_count,
    wait_for_quiet_log,
)
from specdecode_log import parse_lines, totals

from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.runner import RunConfig, run_benchmark

pytestmark = [pytest.mark.slow, pytest.mark.real_vllm]

CONCURRENCIES = (1, 4)
NUM_PROMPTS = {1: 12, 4: 24}
MAX_TOKENS = 32
# Chat, not raw completions: on raw ShareGPT questions the instruct model often answers
# with end-of-sequence alone (a successful 1-token request, for vLLM's bench and ours,
# but one with no decode timing to check).


def _measure(server, requests, conc: int, *, sync_log: bool) -> dict:
    """One run, plus what needs the live server afterwards (tokenize, log window)."""
    log_start = wait_for_quiet_log(server) if sync_log else None
    result = run_benchmark(
        server.url,
        server.endpoint.model,
        requests,
        RunConfig(
            concurrency=conc,
            num_prompts=NUM_PROMPTS[conc],
            max_tokens=MAX_TOKENS,
            warmup_requests=0 if sync_log else 1,
            endpoint="chat",
            progress=False,
        ),
    )
    retokenized = [tokenize_count(server.url, server.endpoint.model, r.output_text) for r in result.records]
    window = None
    if sync_log:
        time.sleep(3 * LOG_INTERVAL_S)  # the interval holding the last step gets its line
        window = server.log_lines()[log_start:]
    # The same prompts again, one at a time, with vLLM returning the token ids it
    # streams: the ground truth for "tokens actually streamed" (greedy, so the same
    # text; only at concurrency 1, where batching cannot change the numerics).
    direct = (
        [
            stream_token_ids(server.url, server.endpoint.model, requests[r.index].prompt, MAX_TOKENS)
            for r in result.records
        ]
        if conc == 1
        else None
    )
    return {"result": result, "summary": result.summary(), "retokenized": retokenized, "direct": direct, "log": window}


@pytest.fixture(scope="module")
def base_runs(real_pool, real_target, sharegpt_requests):
    server = serve(real_pool, real_target, BASE)
    return {c: _measure(server, sharegpt_requests, c, sync_log=False) for c in CONCURRENCIES}


@pytest.fixture(scope="module")
def ngram_runs(real_pool, real_target, sharegpt_requests):
    server = serve(real_pool, real_target, NGRAM)
    # No warm-up in the measured window, so vLLM's log lines after the sync point
    # cover exactly the plugin's before/after /metrics window.
    return {c: _measure(server, sharegpt_requests, c, sync_log=True) for c in CONCURRENCIES}


def _figures(s) -> str:
    return (
        f"decode {s.decode_tok_s:.1f} tok/s, TTFT median {s.ttft_ms_median:.0f} ms, "
        f"TPOT median {s.tpot_ms_median:.1f} ms, completed {s.completed}, failed {s.failed}"
    )


def _check_usage_matches_streamed_tokens(run):
    """The plugin's token counts (usage) are the tokens vLLM streamed.

    Exact, at concurrency 1: each record against the same request streamed with
    vLLM's token ids (which include the end-of-sequence token it counts but does not
    print). For every record: re-tokenising the streamed text with /tokenize gives the
    same count, give or take the merges re-tokenisation makes at piece boundaries.
    """
    records = run["result"].records
    assert records
    if run["direct"] is not None:
        for rec, direct in zip(records, run["direct"]):
            assert direct["usage"]["completion_tokens"] == len(direct["token_ids"])
            assert rec.output_text == direct["text"], f"request {rec.index}: greedy output differs"
            assert rec.completion_tokens == len(direct["token_ids"]), (
                f"request {rec.index}: the plugin counted {rec.completion_tokens} tokens, vLLM streamed "
                f"{len(direct['token_ids'])} token ids"
            )
            assert rec.finish_reason == direct["finish_reason"]
    exact = 0
    for rec, retokenized in zip(records, run["retokenized"]):
        assert rec.completion_tokens is not None, f"no usage for request {rec.index}: {rec.error}"
        eos = 1 if rec.finish_reason == "stop" else 0
        assert abs(rec.completion_tokens - (retokenized + eos)) <= 2, (
            f"request {rec.index}: usage says {rec.completion_tokens} tokens, the streamed text "
            f"{rec.output_text!r} is {retokenized} (+{eos} EOS), finish_reason {rec.finish_reason}"
        )
        exact += rec.completion_tokens == retokenized + eos
        if rec.finish_reason == "length":
            assert rec.completion_tokens == MAX_TOKENS
    assert exact >= 0.75 * len(records), "re-tokenised text disagrees with usage too often"
    total = sum(r.completion_tokens for r in records if r.ok)
    assert run["summary"].total_output_tokens == total


# -- base server (runs first) ----------------------------------------------------------


@pytest.mark.parametrize("conc", CONCURRENCIES)
def test_base_usage_tokens_equal_streamed_tokens(base_runs, conc, request):
    run = base_runs[conc]
    _check_usage_matches_streamed_tokens(run)
    s = run["summary"]
    assert s.failed == 0, [r.error for r in run["result"].records if not r.ok]
    assert s.completed == NUM_PROMPTS[conc]
    assert s.decode_tok_s > 0 and s.ttft_ms_median > 0 and s.tpot_ms_median > 0
    assert s.spec_status == "not_speculative" and s.acceptance_rate is None
    # Without speculation every chunk is one token (EOS too: its chunk has empty text),
    # after chat's role-only first chunk, which vLLM's bench also times.
    for rec in run["result"].records:
        if rec.ok:
            assert len(rec.chunk_times) == rec.completion_tokens + 1
    report(request, f"base conc {conc}: {_figures(s)}")


def test_base_concurrency_4_outpaces_concurrency_1(base_runs):
    assert base_runs[4]["summary"].decode_tok_s > 1.3 * base_runs[1]["summary"].decode_tok_s


def test_prompt_over_max_model_len_is_a_failed_request_with_vllms_message(real_pool, real_target):
    server = serve(real_pool, real_target, BASE)
    long_prompt = "hello " * (MAX_MODEL_LEN + 100)
    requests = [
        SampledRequest(0, "The capital of France is", 6, 8),
        SampledRequest(1, long_prompt, MAX_MODEL_LEN + 100, 8),
        SampledRequest(2, "One, two, three,", 6, 8),
    ]
    result = run_benchmark(
        server.url,
        server.endpoint.model,
        requests,
        RunConfig(concurrency=1, max_tokens=8, warmup_requests=0, progress=False),
    )
    assert (result.completed, result.failed, result.attempted) == (2, 1, 3)
    bad = result.records[1]
    assert bad.status == 400
    assert f"maximum context length is {MAX_MODEL_LEN} tokens" in bad.error
    assert result.summary().failed == 1


# -- ngram speculative server ------------------------------------------------------------


@pytest.mark.parametrize("conc", CONCURRENCIES)
def test_ngram_usage_tokens_equal_streamed_tokens(ngram_runs, conc):
    run = ngram_runs[conc]
    _check_usage_matches_streamed_tokens(run)
    # Speculation puts several tokens in one chunk: counting chunks would undercount.
    records = [r for r in run["result"].records if r.ok]
    assert sum(len(r.chunk_times) for r in records) < sum(r.completion_tokens for r in records)
    if run["direct"] is not None:
        assert any(len(d["token_ids"]) > 0 for d in run["direct"])


@pytest.mark.parametrize("conc", CONCURRENCIES)
def test_ngram_acceptance_equals_vllms_own_log_lines(ngram_runs, conc, request):
    run = ngram_runs[conc]
    result, s = run["result"], run["summary"]
    assert s.spec_status == "ok", s.notes
    spec = result.spec_decode()
    log = totals(parse_lines(run["log"]))

    # The raw counters over the plugin's window, to the last token, against the log.
    assert spec.accepted == log.accepted
    assert spec.draft_tokens == log.drafted
    assert log.drafts_min <= spec.drafts <= log.drafts_max
    per_pos_counts = [round(p * spec.drafts) for p in s.acceptance_per_position]
    assert tuple(per_pos_counts) == log.accepted_per_pos

    # The plugin's figures, recomputed from the log's integers.
    assert s.acceptance_rate == pytest.approx(log.accepted / log.drafted, abs=1e-12)
    assert s.acceptance_length == pytest.approx(1 + log.accepted / spec.drafts, abs=1e-12)
    assert 1 + log.accepted / log.drafts_max - 1e-12 <= s.acceptance_length <= 1 + log.accepted / log.drafts_min + 1e-12
    assert s.acceptance_per_position == pytest.approx([c / spec.drafts for c in log.accepted_per_pos], abs=1e-12)
    assert len(s.acceptance_per_position) == NUM_SPEC_TOKENS

    last = [line.split("SpecDecoding metrics: ", 1)[1] for line in run["log"] if "SpecDecoding metrics" in line]
    report(
        request,
        f"ngram conc {conc}: {_figures(s)}; acceptance rate {s.acceptance_rate:.3f}, "
        f"length {s.acceptance_length:.2f}, per position "
        f"{', '.join(f'{p:.3f}' for p in s.acceptance_per_position)} "
        f"(drafts {spec.drafts:g}, draft tokens {spec.draft_tokens:g}, accepted {spec.accepted:g}); "
        f"vLLM log: {log.windows} lines, accepted {log.accepted}, drafted {log.drafted}, "
        f"per-position counts {list(log.accepted_per_pos)}; last line: {last[-1]}",
    )


def test_ngram_window_excludes_earlier_traffic(ngram_runs):
    # The second run's window starts after the first: its counters are deltas, not totals.
    first, second = ngram_runs[1]["result"].spec_decode(), ngram_runs[4]["result"].spec_decode()
    from pytest_llmperf.metrics.prometheus import parse_snapshot

    total_after = parse_snapshot(ngram_runs[4]["result"].metrics_after)
    assert second.accepted < total_after.get("vllm:spec_decode_num_accepted_tokens_total")
    assert first.accepted + second.accepted <= total_after.get("vllm:spec_decode_num_accepted_tokens_total")
