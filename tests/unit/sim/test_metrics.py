"""/metrics against a real vLLM page, and counters against what was actually streamed."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pytest_llmperf.sim import SimConfig, simulated_server

REF = Path(__file__).resolve().parents[2] / "fixtures" / "reference" / "vllm-0.32-cpu-ngram-metrics.txt"
MTP = {"method": "mtp", "num_speculative_tokens": 3}
# The families DESIGN.md and the issue name; each must exist in the real page too.
REQUIRED = {
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:request_success",
    "vllm:time_to_first_token_seconds",
    "vllm:spec_decode_num_drafts",
    "vllm:spec_decode_num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens",
    "vllm:spec_decode_num_accepted_tokens_per_pos",
}


def families(text: str) -> dict[str, tuple[str, set[frozenset]]]:
    """family name -> (type, set of label-name sets over its samples)."""
    out = {}
    for fam in text_string_to_metric_families(text):
        labels = {frozenset(k for k in s.labels if k not in ("le", "quantile")) for s in fam.samples}
        out[fam.name] = (fam.type, labels)
    return out


def samples(text: str) -> dict[tuple, float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(page: dict, name: str, **labels) -> float:
    return sum(v for (n, lab), v in page.items() if n == name and all(dict(lab).get(k) == x for k, x in labels.items()))


@pytest.fixture(scope="module")
def mtp_server():
    with simulated_server(SimConfig(model="m", max_num_seqs=4, speculative_config=MTP, speed=50, seed=3)) as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            yield client


def test_vllm_families_are_a_consistent_subset_of_real_vllm(mtp_server):
    ours = families(mtp_server.get("/metrics").text)
    real = families(REF.read_text())
    vllm_ours = {name for name in ours if name.startswith("vllm:")}
    assert REQUIRED <= vllm_ours
    for name in vllm_ours:
        assert name in real, f"{name} is not a vLLM 0.32 metric"
        assert ours[name][0] == real[name][0], f"{name}: type {ours[name][0]} != vLLM's {real[name][0]}"
        assert ours[name][1] <= real[name][1] or ours[name][1] == real[name][1], name


def test_spec_counters_expose_total_and_created(mtp_server):
    text = mtp_server.get("/metrics").text
    for name in ("drafts", "draft_tokens", "accepted_tokens"):
        assert f'vllm:spec_decode_num_{name}_total{{engine="0",model_name="m"}}' in text
        assert f"vllm:spec_decode_num_{name}_created{{" in text
    for pos in range(3):
        assert (
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="{pos}"}}' in text
        )


def _stream_one(url: str, i: int) -> tuple[int, int, int, str]:
    body = {
        "model": "m",
        "prompt": f"prompt number {i}: tell me about item {i}",
        "max_tokens": 30 + i,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    chunks, usage, reason = 0, None, None
    with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=60) as r:
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if event["choices"]:
                chunks += 1
                reason = event["choices"][0]["finish_reason"] or reason
            else:
                usage = event["usage"]
    return usage["completion_tokens"], usage["prompt_tokens"], chunks, reason


def test_counters_match_what_was_streamed(mtp_server):
    url = str(mtp_server.base_url).rstrip("/")
    before = samples(mtp_server.get("/metrics").text)
    mtp_server.delete("/sim/requests")
    with ThreadPoolExecutor(10) as pool:  # more than max_num_seqs: some queue
        results = list(pool.map(lambda i: _stream_one(url, i), range(10)))
    after = samples(mtp_server.get("/metrics").text)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("vllm:generation_tokens_total") == sum(r[0] for r in results)
    assert delta("vllm:prompt_tokens_total") == sum(r[1] for r in results)
    finished = sum(delta("vllm:request_success_total", finished_reason=k) for k in ("stop", "length"))
    assert finished == 10
    assert delta("vllm:request_success_total", finished_reason="stop") == sum(r[3] == "stop" for r in results)
    drafts = delta("vllm:spec_decode_num_drafts_total")
    draft_tokens = delta("vllm:spec_decode_num_draft_tokens_total")
    accepted = delta("vllm:spec_decode_num_accepted_tokens_total")
    per_pos = [delta("vllm:spec_decode_num_accepted_tokens_per_pos_total", position=str(i)) for i in range(3)]
    assert draft_tokens == 3 * drafts > 0
    assert 0 < accepted <= draft_tokens
    assert sum(per_pos) == accepted
    assert per_pos[0] >= per_pos[1] >= per_pos[2]
    # Every decode step after the first token drafts once per request; tokens emitted
    # are 1 + accepted per draft, capped by max_tokens at the end.
    generated = delta("vllm:generation_tokens_total")
    assert generated <= 10 + drafts + accepted
    assert delta("vllm:time_to_first_token_seconds_count") == 10
    assert value(after, "vllm:num_requests_running") == 0 and value(after, "vllm:num_requests_waiting") == 0

    log = mtp_server.get("/sim/requests").json()
    assert len(log) == 10
    by_tokens = sorted((e["completion_tokens"], len(e["chunk_times"])) for e in log)
    assert by_tokens == sorted((r[0], r[2]) for r in results)
    for e in log:
        assert sum(e["tokens_per_chunk"]) == e["completion_tokens"]
        assert e["receive_time"] < e["chunk_times"][0]
        assert e["chunk_times"] == sorted(e["chunk_times"])
        assert e["finish_reason"] in ("stop", "length")
    assert mtp_server.delete("/sim/requests").status_code == 200
    assert mtp_server.get("/sim/requests").json() == []


def test_disable_log_stats_keeps_counters_still():
    config = SimConfig(model="m", speculative_config=MTP, speed=50, disable_log_stats=True)
    with simulated_server(config) as url:
        for i in range(3):
            r = httpx.post(f"{url}/v1/completions", json={"model": "m", "prompt": f"p{i}", "max_tokens": 20})
            assert r.json()["usage"]["completion_tokens"] == 20
        page = samples(httpx.get(f"{url}/metrics").text)
    assert ("vllm:spec_decode_num_drafts_total", (("engine", "0"), ("model_name", "m"))) in page
    assert value(page, "vllm:spec_decode_num_drafts_total") == 0
    assert value(page, "vllm:spec_decode_num_accepted_tokens_per_pos_total") == 0
    assert value(page, "vllm:generation_tokens_total") == 0


def test_base_server_has_no_spec_counters():
    with simulated_server(SimConfig(model="m", speed=50)) as url:
        httpx.post(f"{url}/v1/completions", json={"model": "m", "prompt": "p", "max_tokens": 5})
        text = httpx.get(f"{url}/metrics").text
    assert "vllm:spec_decode" not in text
    assert value(samples(text), "vllm:generation_tokens_total") == 5


def test_the_engine_lag_counters_move_with_the_steps_and_read_back_as_a_share(mtp_server):
    from pytest_llmperf.metrics.prometheus import engine_lag_delta

    url = str(mtp_server.base_url).rstrip("/")
    before = mtp_server.get("/metrics").text
    _stream_one(url, 0)
    after = mtp_server.get("/metrics").text
    step = value(samples(after), "llmperf_sim:engine_step_seconds_total")
    assert step > value(samples(before), "llmperf_sim:engine_step_seconds_total")
    lag = engine_lag_delta(before, after)
    assert lag is not None and 0 <= lag < 10  # a share of the step time, whatever the host's load
