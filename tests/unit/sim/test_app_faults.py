"""Each fault and regression knob does what it says, over real HTTP."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from pytest_llmperf.sim import SimConfig, simulated_server


def body(i: int = 0, max_tokens: int = 20, stream: bool = True) -> dict:
    return {
        "model": "m",
        "prompt": f"fault test prompt {i}",
        "max_tokens": max_tokens,
        "stream": stream,
        "ignore_eos": True,
        "stream_options": {"include_usage": True} if stream else None,
    }


def read_stream(url: str, i: int = 0, max_tokens: int = 20) -> tuple[list[str], list[float]]:
    """Raw `data:` payloads and their arrival times."""
    lines, times = [], []
    with httpx.stream("POST", f"{url}/v1/completions", json=body(i, max_tokens), timeout=30) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line.startswith("data: "):
                lines.append(line[6:])
                times.append(time.perf_counter())
    return lines, times


def test_crash_after_requests():
    with simulated_server(SimConfig(model="m", speed=50, crash_after_requests=2)) as url:
        for i in range(2):
            assert read_stream(url, i)[0][-1] == "[DONE]"
        assert httpx.get(f"{url}/health").status_code == 200
        r = httpx.post(f"{url}/v1/completions", json=body(3, stream=False))
        assert r.status_code == 500
        assert r.json()["error"]["type"] == "InternalServerError"
        assert httpx.get(f"{url}/health").status_code == 503


def test_crash_after_seconds_cuts_streams_in_flight():
    config = SimConfig(model="m", speed=1, crash_after_seconds=0.4)  # 20 ms steps: 500 tokens take ~10 s
    with simulated_server(config) as url:
        got: list[str] = []
        with pytest.raises(httpx.HTTPError):
            with httpx.stream("POST", f"{url}/v1/completions", json=body(0, 500), timeout=30) as r:
                for line in r.iter_lines():
                    got.append(line)
        assert "data: [DONE]" not in got and len(got) > 1
        assert httpx.get(f"{url}/health").status_code == 503
        assert httpx.post(f"{url}/v1/completions", json=body(1, stream=False)).status_code == 500


def test_error_rate_answers_a_fraction_with_500():
    with simulated_server(SimConfig(model="m", speed=50, error_rate=0.5, seed=4)) as url:
        codes = [httpx.post(f"{url}/v1/completions", json=body(i, 3, stream=False)).status_code for i in range(40)]
    assert set(codes) == {200, 500}
    assert 10 <= codes.count(500) <= 30


def test_error_rate_one_fails_everything_with_vllm_error_shape():
    with simulated_server(SimConfig(model="m", speed=50, error_rate=1.0)) as url:
        r = httpx.post(f"{url}/v1/completions", json=body(0, stream=False))
    assert r.status_code == 500
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}


def test_stall_mid_stream():
    config = SimConfig(model="m", speed=50, stall_seconds=0.6, stall_after_chunks=3)
    with simulated_server(config) as url:
        lines, times = read_stream(url, 0, 10)
    assert lines[-1] == "[DONE]"
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert gaps[2] >= 0.55  # between chunk 3 and chunk 4
    assert max(gaps[:2] + gaps[3:]) < 0.3


def test_a_stalled_streams_backlog_comes_merged_in_one_chunk():
    """What the engine made during the stall comes in the chunk after it, as vLLM's output
    collector merges it, not as a run of back-to-back chunks read as buffered bursts."""
    config = SimConfig(model="m", speed=50, stall_seconds=0.6, stall_after_chunks=3)
    with simulated_server(config) as url:
        lines, _ = read_stream(url, 0, 20)
    token_chunks = [json.loads(line) for line in lines[:-1] if json.loads(line)["choices"]]
    assert json.loads(lines[-2])["usage"]["completion_tokens"] == 20
    # three before the stall, the one written after it, then the backlog (the engine
    # finished the other 16 tokens during 0.6 s at x50) in one
    assert len(token_chunks) <= 5  # fewer if a busy loop merged steps before the stall too
    assert len(token_chunks[-1]["choices"][0]["text"].split()) >= 10


def test_malformed_chunk_once_then_the_stream_goes_on():
    with simulated_server(SimConfig(model="m", speed=50, malformed_chunk_after=2)) as url:
        lines, _ = read_stream(url, 0, 10)
    broken = []
    for i, line in enumerate(lines):
        if line == "[DONE]":
            continue
        try:
            json.loads(line)
        except json.JSONDecodeError:
            broken.append(i)
    assert broken == [2]
    assert lines[-1] == "[DONE]"
    usage = json.loads(lines[-2])["usage"]
    assert usage["completion_tokens"] == 10


def test_connection_reset_mid_stream():
    with simulated_server(SimConfig(model="m", speed=50, reset_after_chunks=3)) as url:
        got: list[str] = []
        with pytest.raises(httpx.HTTPError):  # RemoteProtocolError: body cut short
            with httpx.stream("POST", f"{url}/v1/completions", json=body(0, 20), timeout=30) as r:
                for line in r.iter_lines():
                    if line:
                        got.append(line)
        assert len(got) == 3
        assert httpx.get(f"{url}/health").status_code == 200  # the server itself lives on
        log = httpx.get(f"{url}/sim/requests").json()
    assert log[0]["error"] == "reset"


def test_fault_request_rate_hits_only_some_requests():
    config = SimConfig(model="m", speed=50, reset_after_chunks=1, fault_request_rate=0.5, seed=2)
    ok = cut = 0
    with simulated_server(config) as url:
        for i in range(16):
            try:
                lines, _ = read_stream(url, i, 5)
                ok += lines[-1] == "[DONE]"
            except httpx.HTTPError:
                cut += 1
    assert ok > 0 and cut > 0 and ok + cut == 16


def test_slow_start():
    with simulated_server(SimConfig(model="m", speed=50, slow_start_seconds=0.7)) as url:
        assert httpx.get(f"{url}/health").status_code == 503
        assert httpx.post(f"{url}/v1/completions", json=body(0, stream=False)).status_code == 503
        deadline = time.monotonic() + 5
        while httpx.get(f"{url}/health").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert httpx.post(f"{url}/v1/completions", json=body(0, stream=False)).status_code == 200


def test_step_time_scale_slows_the_served_stream():
    def tpot(scale: float) -> float:
        with simulated_server(SimConfig(model="m", speed=2, step_time_scale=scale)) as url:
            _, times = read_stream(url, 0, 30)
        return (times[-3] - times[0]) / 29  # token chunks only (usage, [DONE] last)

    fast, slow = tpot(1.0), tpot(2.0)
    assert slow > 1.5 * fast


def test_acceptance_scale_shows_in_the_served_counters():
    from prometheus_client.parser import text_string_to_metric_families

    def per_position(scale: float) -> list[float]:
        config = SimConfig(
            model="m",
            speed=50,
            acceptance_scale=scale,
            acceptance_spread=0.0,
            speculative_config={"method": "mtp", "num_speculative_tokens": 3},
        )
        with simulated_server(config) as url:
            for i in range(4):
                httpx.post(f"{url}/v1/completions", json=body(i, 300, stream=False), timeout=30)
            text = httpx.get(f"{url}/metrics").text
        values = {
            (s.name, s.labels.get("position")): s.value for f in text_string_to_metric_families(text) for s in f.samples
        }
        drafts = values[("vllm:spec_decode_num_drafts_total", None)]
        return [values[("vllm:spec_decode_num_accepted_tokens_per_pos_total", str(i))] / drafts for i in range(3)]

    full, half = per_position(1.0), per_position(0.5)
    for f, h, configured in zip(full, half, (0.8, 0.6, 0.45)):  # the generic profile's rates
        assert abs(f - configured) < 0.08
        assert abs(h - configured / 2) < 0.08
