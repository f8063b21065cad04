"""Queueing beyond max_num_seqs, many concurrent streams, and clients that leave early."""

from __future__ import annotations

import asyncio
import time

import httpx

from pytest_llmperf.sim import SimConfig, simulated_server


async def _stream_all(url: str, n: int, max_tokens: int) -> list[int]:
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:

        async def one(i: int) -> int:
            body = {
                "model": "m",
                "prompt": f"load {i}",
                "max_tokens": max_tokens,
                "ignore_eos": True,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            async with client.stream("POST", "/v1/completions", json=body) as r:
                assert r.status_code == 200
                text = (await r.aread()).decode()
            assert text.endswith("data: [DONE]\n\n")
            return text.count('"text"')

        return await asyncio.gather(*(one(i) for i in range(n)))


def test_requests_beyond_max_num_seqs_queue_and_never_fail():
    config = SimConfig(model="m", max_num_seqs=2, speed=10)
    with simulated_server(config) as url:
        httpx.delete(f"{url}/sim/requests")
        chunks = asyncio.run(_stream_all(url, 6, 10))
        log = httpx.get(f"{url}/sim/requests").json()
        metrics = httpx.get(f"{url}/metrics").text
    assert len(chunks) == 6 and all(c >= 1 for c in chunks)
    firsts = sorted(e["chunk_times"][0] for e in log)
    lasts = sorted(e["chunk_times"][-1] for e in log)
    # Two slots: the 3rd and 4th requests start only after the first two finished.
    assert firsts[2] >= lasts[0] - 1e-6
    assert firsts[4] >= lasts[2] - 1e-6
    queued = [line for line in metrics.splitlines() if line.startswith("vllm:request_queue_time_seconds_sum")]
    assert float(queued[0].split()[-1]) > 0


def test_256_concurrent_streams():
    config = SimConfig(model="m", max_num_seqs=256, speed=5)
    with simulated_server(config) as url:
        t0 = time.monotonic()
        chunks = asyncio.run(_stream_all(url, 256, 16))
        elapsed = time.monotonic() - t0
        state = httpx.get(f"{url}/sim/state").json()
    assert len(chunks) == 256
    assert state["running"] == 0 and state["waiting"] == 0
    assert elapsed < 60


def test_client_leaving_mid_stream_frees_its_slot():
    config = SimConfig(model="m", max_num_seqs=1, speed=1)
    with simulated_server(config) as url:
        with httpx.stream(
            "POST",
            f"{url}/v1/completions",
            timeout=10,
            json={"model": "m", "prompt": "x", "max_tokens": 5000, "stream": True, "ignore_eos": True},
        ) as r:
            lines = r.iter_lines()
            next(lines)
        # The only slot must come free: the next request completes.
        deadline = time.monotonic() + 10
        while httpx.get(f"{url}/sim/state").json()["running"]:
            assert time.monotonic() < deadline, "aborted request still running"
            time.sleep(0.05)
        r = httpx.post(f"{url}/v1/completions", json={"model": "m", "prompt": "y", "max_tokens": 3}, timeout=10)
        assert r.json()["usage"]["completion_tokens"] == 3
        metrics = httpx.get(f"{url}/metrics").text
    assert 'vllm:request_success_total{engine="0",finished_reason="abort",model_name="m"} 1.0' in metrics
