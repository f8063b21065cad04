"""End to end against the simulated vLLM server: the client agrees with the server's
own ground truth (GET /sim/requests: per request, its chunk send times)."""

import statistics

import httpx
import pytest

from pytest_llmperf.metrics.registry import REASONING_METRICS, flatten
from pytest_llmperf.sim import SimConfig, simulated_server
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.runner import RunConfig, run_benchmark

MODEL = "Qwen/Qwen3.6-35B-A3B-FP8"


@pytest.mark.slow
@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_client_agrees_with_sim_ground_truth_at_concurrency_32(endpoint):
    cfg = SimConfig(
        model=MODEL, speculative_config={"method": "mtp", "num_speculative_tokens": 3}, speed=5, max_num_seqs=32
    )
    # Distinct prompt lengths, so that each record finds its server entry by prompt_tokens.
    reqs = [SampledRequest(i, "hello " * (i + 3), i + 3, 64) for i in range(64)]
    with simulated_server(cfg, mode="process") as url:
        res = run_benchmark(
            url,
            MODEL,
            reqs,
            RunConfig(concurrency=32, max_tokens=64, warmup_requests=0, endpoint=endpoint, progress=False),
        )
        truth = httpx.get(url + "/sim/requests", timeout=10).json()
    assert res.stop_reason == "completed" and res.completed == 64, [r.error for r in res.records if r.error]
    by_prompt_tokens = {e["prompt_tokens"]: e for e in truth}
    assert len(by_prompt_tokens) == 64
    ttft_err, tpot_err, multi = [], [], 0
    for r in res.records:
        e = by_prompt_tokens[r.prompt_tokens]
        # counts: exactly the server's (usage), though chunks carry several tokens under MTP
        assert r.completion_tokens == e["completion_tokens"] == sum(e["tokens_per_chunk"])
        # every chunk the server sent, and chat's role chunk before them (vLLM's bench times it)
        assert len(r.chunk_times) == len(e["chunk_times"]) + (endpoint == "chat")
        multi += max(e["tokens_per_chunk"]) > 1
        # The server cannot see when the request left the client: its TTFT is measured
        # from our send time to its first chunk (perf_counter is system-wide on Linux).
        server_ttft = e["chunk_times"][0] - r.send_time
        server_tpot = (e["chunk_times"][-1] - e["chunk_times"][0]) / (e["completion_tokens"] - 1)
        ttft_err.append(r.ttft / server_ttft - 1)
        tpot_err.append(r.tpot / server_tpot - 1)
    assert multi > 32  # speculation really put several tokens in a chunk
    assert abs(statistics.median(ttft_err)) <= 0.02, sorted(ttft_err)
    assert abs(statistics.median(tpot_err)) <= 0.02, sorted(tpot_err)
    # and nearly every request on its own (one late chunk on a busy machine may miss)
    assert sorted(map(abs, tpot_err))[int(0.9 * len(tpot_err))] <= 0.05, sorted(tpot_err)


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_eos_only_replies_succeed_and_every_final_chunk_is_timed(endpoint):
    # Half the prompts are answered with one EOS token (empty text, stop, usage 1); most
    # others stop at EOS before max_tokens 400, with a final empty-text chunk.
    cfg = SimConfig(model="m", speed=20, eos_only_rate=0.5)
    reqs = [SampledRequest(i, "hello " * (i + 3), i + 3, 400) for i in range(16)]
    with simulated_server(cfg, mode="thread") as url:
        res = run_benchmark(
            url,
            "m",
            reqs,
            RunConfig(concurrency=4, max_tokens=400, warmup_requests=0, endpoint=endpoint, progress=False),
        )
        truth = {e["prompt_tokens"]: e for e in httpx.get(url + "/sim/requests", timeout=10).json()}
    assert (res.completed, res.failed) == (16, 0), [r.error for r in res.records if r.error]
    kinds = set()
    for r in res.records:
        e = truth[r.prompt_tokens]
        assert r.completion_tokens == e["completion_tokens"] and r.finish_reason == e["finish_reason"]
        # every chunk the server sent is timed, the empty final one too (chat: and the role chunk)
        assert len(r.chunk_times) == len(e["chunk_times"]) + (endpoint == "chat")
        assert e["chunk_times"][-1] <= r.chunk_times[-1] <= r.end_time
        assert r.e2el == r.chunk_times[-1] - r.send_time
        if e["completion_tokens"] == 1:
            kinds.add("eos-only")
            assert r.output_text == "" and r.finish_reason == "stop" and r.tpot is None
            if endpoint == "completions":
                assert r.ttft == r.e2el and r.itls == []
        elif e["finish_reason"] == "stop":
            kinds.add("stop")
            assert r.tpot == pytest.approx((r.chunk_times[-1] - r.chunk_times[0]) / (r.completion_tokens - 1))
    assert kinds == {"eos-only", "stop"}
    s = res.summary()
    assert s.completed == 16 and s.total_output_tokens == sum(e["completion_tokens"] for e in truth.values())


def _faulty_run(concurrency=4, n=8, **faults):
    cfg = SimConfig(model="m", speed=50, **faults)
    reqs = [SampledRequest(i, f"prompt number {i}", 4, 16) for i in range(n)]
    with simulated_server(cfg, mode="thread") as url:
        return run_benchmark(
            url,
            "m",
            reqs,
            RunConfig(concurrency=concurrency, max_tokens=16, warmup_requests=0, read_timeout=1.0, progress=False),
        )


@pytest.mark.parametrize(
    "faults, reason",
    [
        ({"malformed_chunk_after": 2}, "malformed SSE data (not JSON): "),
        ({"reset_after_chunks": 2}, "connection closed by server mid-response"),
        ({"stall_seconds": 30.0, "stall_after_chunks": 2}, "read timeout after 1 s without data"),
        ({"error_rate": 1.0}, "HTTP 500: Internal server error (injected"),
    ],
)
def test_sim_faults_are_failed_requests_and_the_run_goes_on(faults, reason):
    res = _faulty_run(**faults)
    assert res.attempted == 8 and res.stop_reason == "completed"
    assert res.failed == 8, [r.error for r in res.records]
    assert all(r.error.startswith(reason) for r in res.records), {r.error for r in res.records}


def test_engine_crash_mid_run_fails_the_rest_but_returns():
    res = _faulty_run(n=16, crash_after_requests=6)
    assert res.attempted == 16 and 0 < res.failed < 16
    assert any("EngineCore encountered an issue" in (r.error or "") for r in res.records)


def _chat_run(config: SimConfig, n: int = 16, max_tokens: int = 300):
    reqs = [SampledRequest(i, f"question {i} about " + "things " * i, i + 3, max_tokens) for i in range(n)]
    with simulated_server(config, mode="thread") as url:
        res = run_benchmark(
            url,
            "m",
            reqs,
            RunConfig(concurrency=4, max_tokens=max_tokens, warmup_requests=0, endpoint="chat", progress=False),
        )
        truth = {e["id"]: e for e in httpx.get(url + "/sim/requests", timeout=10).json()}
    assert (res.completed, res.failed) == (n, 0), [r.error for r in res.records if r.error]
    return res, truth


def test_reasoning_chat_run_times_the_first_answer_after_vllms_ttft_and_splits_the_tokens():
    res, truth = _chat_run(SimConfig(model="m", speed=20, reasoning_parser="qwen3", reasoning_share=0.5))
    by_tokens = {(e["prompt_tokens"], e["completion_tokens"]): e for e in truth.values()}
    kinds = set()
    for r in res.records:
        e = by_tokens[(r.prompt_tokens, r.completion_tokens)]
        assert r.reasoning_tokens == e["reasoning_tokens"]  # usage's count, never the chunks'
        assert r.ttft is not None and r.ttft == r.chunk_times[0] - r.send_time  # vLLM's: the role chunk
        if r.reasoning_tokens >= r.completion_tokens:  # cut at max_tokens while reasoning
            kinds.add("never answered")
            assert r.first_answer_time is None and r.ttfa is None
        else:
            kinds.add("answered")
            assert r.ttft <= r.ttfa <= r.e2el  # equal only if one read held them all (a loaded host)
            # the answer began after the reasoning chunks (one token each without speculation)
            # (chunks read together share a time: compared by position, not looked up)
            assert r.chunk_times[1 + r.reasoning_chunks] == r.first_answer_time
    assert kinds == {"answered", "never answered"}
    s = res.summary()
    answered = [r for r in res.records if r.ttfa is not None]
    assert s.answered == len(answered)
    assert s.ttfa_ms_median > s.ttft_ms_median
    assert s.total_reasoning_tokens == sum(e["reasoning_tokens"] for e in truth.values())
    assert s.total_answer_tokens == s.total_output_tokens - s.total_reasoning_tokens > 0
    assert s.reasoning_share == pytest.approx(s.total_reasoning_tokens / s.total_output_tokens)


def test_without_reasoning_the_reasoning_figures_are_absent():
    res, truth = _chat_run(SimConfig(model="m", speed=20))
    assert all(r.reasoning_chunks == 0 and r.reasoning_tokens is None for r in res.records)
    d = res.summary().to_dict()
    assert all(d[name] is None for name in REASONING_METRICS)
    assert "ttfa_ms_median" not in flatten({k: v for k, v in d.items() if v is not None})


def _accounted_run(endpoint="completions", speculative=False, **knobs):
    spec = {"method": "mtp", "num_speculative_tokens": 3} if speculative else None
    cfg = SimConfig(model="m", speed=50, speculative_config=spec, **knobs)
    reqs = [SampledRequest(i, f"prompt number {i} " * 3, 12, 32) for i in range(12)]
    with simulated_server(cfg, mode="thread") as url:
        return run_benchmark(
            url,
            "m",
            reqs,
            RunConfig(
                concurrency=4, num_prompts=8, max_tokens=32, warmup_requests=4, endpoint=endpoint, progress=False
            ),
        )


@pytest.mark.parametrize(("endpoint", "speculative"), [("completions", False), ("chat", True)])
def test_usage_the_generation_counter_and_the_token_events_agree_exactly_after_a_warm_up(endpoint, speculative):
    # The warm-up's 4 requests finished before the window's first /metrics page: the
    # counter's delta holds the 8 measured requests' tokens, no more.
    res = _accounted_run(endpoint, speculative)
    account = res.token_account()
    assert res.completed == 8 and account is not None
    assert account.counter == account.usage == sum(r.completion_tokens for r in res.records)
    assert account.events_over == 0 and account.unreported == 0
    if speculative:  # several tokens a chunk: fewer events than tokens, never more
        assert account.events < account.usage
    else:
        assert account.events == account.usage
    assert not account.counter_off and not account.usage_short
    assert res.to_dict()["token_account"]["usage"] == account.usage


def test_a_lying_usage_or_counter_is_seen_in_the_account():
    high = _accounted_run(usage_offset=3).token_account()  # usage 3 tokens high a request
    assert high.usage == high.counter + 8 * 3 and high.counter_off and not high.usage_short
    low = _accounted_run(usage_offset=-2).token_account()  # 2 low: fewer tokens than events
    assert low.events_over == 8 * 2 and low.usage_short and low.counter_off
    counter = _accounted_run(counter_scale=1.25).token_account()
    assert counter.counter == pytest.approx(1.25 * counter.usage) and counter.counter_off
    assert not counter.usage_short


@pytest.mark.parametrize(
    "faults",
    [{"malformed_chunk_after": 2}, {"reset_after_chunks": 2}, {"stall_seconds": 30.0, "stall_after_chunks": 2}],
)
def test_requests_without_usage_leave_the_account_within_its_range(faults):
    # Half the streams fault: their tokens are in the counter, not in any usage; the counter
    # lies between usage plus their token events and usage plus their max_tokens.
    res = _faulty_run(n=16, fault_request_rate=0.5, **faults)
    account = res.token_account()
    assert 0 < res.failed < 16 and account is not None and account.unreported == res.failed
    assert account.counter_low <= account.counter <= account.counter_high
    assert not account.counter_off and not account.usage_short
