"""The runner against a scripted server: caps, warm-up, failures, pacing, Ctrl-C, bad input."""

import errno
import io
import json
import math
import re
import socket
import time
from datetime import datetime

import pytest

from pytest_llmperf.workload.progress import Progress
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.result import RunResult
from pytest_llmperf.workload.runner import (
    RunConfig,
    RunTuning,
    ServerUnreachable,
    TooManyOpenFiles,
    run_benchmark,
    warmup_prompts,
)
from pytest_llmperf.workload.schedule import arrival_offsets
from tests.unit.workload.stream_fakes import FakeStreamServer, interrupted_run, max_overlap, scripted_requests


@pytest.fixture
def server():
    with FakeStreamServer() as srv:
        yield srv


def test_completed_run_excludes_warmup_and_scrapes_metrics(server):
    t0 = time.perf_counter()
    res = run_benchmark(
        server.base_url,
        "m",
        scripted_requests("ok n=8 dt=0.002", 24),
        RunConfig(concurrency=4, warmup_requests=3, progress=False),
    )
    wall = time.perf_counter() - t0
    assert res.stop_reason == "completed" and not res.partial
    assert res.attempted == 24 and res.completed == 24 and res.failed == 0
    assert [r.index for r in res.records] == list(range(24))
    assert len(server.requests) == 27  # 3 warm-ups were sent, not recorded
    warmup_last_chunk = max(req["send_times"][-1] for req in server.requests[:3])
    assert min(r.send_time for r in res.records) > warmup_last_chunk  # warm-up done before measuring
    assert res.metrics_before == res.metrics_after == server.metrics
    assert 0 < res.duration < wall
    assert res.config["concurrency"] == 4 and res.config["warmup_requests"] == 3
    datetime.fromisoformat(res.started_at)
    assert max_overlap(res.records) == 4  # the concurrency is reached, never passed


def test_duration_spans_first_dispatch_to_last_completion(server):
    res = run_benchmark(
        server.base_url,
        "m",
        scripted_requests("ok n=5 dt=0.01", 6),
        RunConfig(concurrency=2, warmup_requests=0, progress=False),
    )
    first_send = min(r.send_time for r in res.records)
    last_end = max(r.end_time for r in res.records)
    assert res.duration == pytest.approx(last_end - first_send, abs=0.005)


def test_num_prompts_caps_the_run(server):
    res = run_benchmark(
        server.base_url,
        "m",
        scripted_requests("ok", 50),
        RunConfig(concurrency=3, num_prompts=7, warmup_requests=0, progress=False),
    )
    assert res.attempted == 7 and res.stop_reason == "completed"


def test_max_tokens_none_uses_expected_output_len(server):
    run_benchmark(
        server.base_url, "m", scripted_requests("ok", 2), RunConfig(max_tokens=None, warmup_requests=0, progress=False)
    )
    assert [r["max_tokens"] for r in server.requests] == [9, 9]


def test_max_seconds_stops_dispatch_and_says_so(server):
    res = run_benchmark(
        server.base_url,
        "m",
        scripted_requests("ok n=10 dt=0.01", 200),
        RunConfig(concurrency=2, max_seconds=0.5, warmup_requests=0, progress=False),
    )
    assert res.stop_reason == "max_seconds"
    assert 2 <= res.attempted < 200
    first = min(r.send_time for r in res.records)
    # nothing sent after the cap: a request dispatched before it may start sending a little
    # later on a loaded machine (0.76 s once under pytest -n 2), a runner ignoring it sends for 10 s
    assert max(r.send_time for r in res.records) - first < 0.5 + 0.5
    assert res.failed == 0  # in-flight ones finished


def test_in_flight_requests_are_cut_after_the_grace_period(server):
    t0 = time.perf_counter()
    res = run_benchmark(
        server.base_url,
        "m",
        scripted_requests("stall n=5", 10),
        RunConfig(concurrency=3, max_seconds=0.3, grace_seconds=0.3, warmup_requests=0, progress=False),
    )
    assert res.stop_reason == "max_seconds" and res.attempted == 3
    assert all(r.error == "cut: still running 0.3 s after the 0.3 s cap" and r.cut_at_cap for r in res.records)
    assert 0.55 < res.duration < 1.5 and time.perf_counter() - t0 < 3


def test_failures_are_counted_and_the_run_goes_on(server):
    reqs = [SampledRequest(i, "http500" if i % 3 == 0 else "ok n=3", 5, 3) for i in range(12)]
    res = run_benchmark(server.base_url, "m", reqs, RunConfig(concurrency=4, warmup_requests=0, progress=False))
    assert res.attempted == 12 and res.failed == 4 and res.completed == 8
    assert {r.error for r in res.records if not r.ok} == {"HTTP 500: scripted failure 500"}
    assert res.stop_reason == "completed"


def test_server_without_metrics_gives_none():
    with FakeStreamServer(metrics=None) as srv:
        res = run_benchmark(srv.base_url, "m", scripted_requests("ok", 2), RunConfig(warmup_requests=0, progress=False))
    assert res.metrics_before is None and res.metrics_after is None and res.completed == 2


def test_chat_endpoint(server):
    res = run_benchmark(
        server.base_url,
        "m",
        scripted_requests("ok n=4", 3),
        RunConfig(endpoint="chat", warmup_requests=0, progress=False),
    )
    # role chunk + 4 content chunks + the empty finish_reason chunk, as vLLM's bench counts
    assert res.completed == 3 and all(len(r.chunk_times) == 6 for r in res.records)
    assert "messages" in server.requests[0]


def test_unreachable_server_raises_within_the_connect_timeout():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    with pytest.raises(ServerUnreachable, match=f"http://127.0.0.1:{port}") as info:
        run_benchmark(f"http://127.0.0.1:{port}", "m", scripted_requests("ok", 1), RunConfig(connect_timeout=1.0))
    assert isinstance(info.value, ConnectionError)
    assert time.perf_counter() - t0 < 1.5


def test_request_rate_paces_dispatch(server):
    cfg = RunConfig(concurrency=50, request_rate=40.0, seed=3, warmup_requests=0, progress=False)
    res = run_benchmark(server.base_url, "m", scripted_requests("ok", 12), cfg)
    sends = [r.send_time - res.records[0].send_time for r in res.records]
    planned = arrival_offsets(12, 40.0, 1.0, seed=3)
    assert all(abs(s - p) < 0.03 for s, p in zip(sends, planned)), (sends, planned)


def test_arrival_offsets_statistics():
    gaps = [b - a for a, b in zip(*(lambda o: (o, o[1:]))(arrival_offsets(20001, 10.0, 1.0, seed=1)))]
    assert sum(gaps) / len(gaps) == pytest.approx(0.1, rel=0.03)
    bursty = [b - a for a, b in zip(*(lambda o: (o, o[1:]))(arrival_offsets(20001, 10.0, 0.25, seed=1)))]
    mean = sum(bursty) / len(bursty)
    cv2 = sum((g - mean) ** 2 for g in bursty) / len(bursty) / mean**2
    assert cv2 == pytest.approx(4.0, rel=0.15)  # gamma shape k: CV^2 = 1/k
    assert arrival_offsets(5, 10.0, seed=7) == arrival_offsets(5, 10.0, seed=7)
    assert arrival_offsets(3, math.inf) == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "field, value",
    [
        ("concurrency", 0),
        ("concurrency", 2.5),
        ("num_prompts", 0),
        ("max_seconds", -1),
        ("max_tokens", 0),
        ("warmup_requests", -1),
        ("endpoint", "embeddings"),
        ("request_rate", 0),
        ("burstiness", 0),
        ("connect_timeout", 0),
        ("read_timeout", math.inf),
        ("grace_seconds", -1),
    ],
)
def test_bad_config_names_the_field(field, value):
    with pytest.raises(ValueError, match=rf"RunConfig\.{field}="):
        RunConfig(**{field: value})


def test_bad_arguments():
    with pytest.raises(ValueError, match="requests is empty"):
        run_benchmark("http://127.0.0.1:1", "m", [], RunConfig())
    with pytest.raises(ValueError, match="base_url must look like"):
        run_benchmark("127.0.0.1:1", "m", scripted_requests("ok", 1), RunConfig())


def test_api_key_is_redacted_in_the_result_config():
    assert RunConfig(api_key="sekret").as_dict()["api_key"] == "***"
    json.dumps(RunConfig().as_dict())  # JSON-safe, inf included


def test_progress_line_counts():
    out = io.StringIO()
    p = Progress(10, stream=out, quiet_for=0)
    p.add(True, 100)
    p.add(False, None)
    p.tick()
    p.close()
    lines = out.getvalue().splitlines()
    assert lines and lines[0].startswith("llmperf: 2/10 done, 1 failed, ")
    quiet = io.StringIO()
    Progress(10, stream=quiet, quiet_for=60).tick()
    assert quiet.getvalue() == ""


def test_ctrl_c_returns_a_partial_result(tmp_path):
    out = interrupted_run(workers=1)
    assert out["stop"] == "interrupted"
    assert out["completed"] == 4 and out["attempted"] == 8
    assert out["errors"] == ["interrupted (Ctrl-C)"]


def test_sigterm_while_it_acts_as_ctrl_c_returns_a_partial_result():
    out = interrupted_run(workers=1, sig="SIGTERM")
    assert out["stop"] == "interrupted" and out["completed"] == 4 and out["attempted"] == 8
    assert out["errors"] == ["interrupted (SIGTERM)"]


def test_decoding_at_once_past_the_memory_cap_gives_the_same_records(server):
    cfg = RunConfig(concurrency=3, warmup_requests=0, progress=False)
    deferred = run_benchmark(server.base_url, "m", scripted_requests("ok n=6 k=2", 6), cfg)
    at_once = run_benchmark(
        server.base_url, "m", scripted_requests("ok n=6 k=2", 6), cfg, tuning=RunTuning(defer_decode_bytes=0)
    )
    for a, b in zip(deferred.records, at_once.records):
        assert (
            (a.ok, a.completion_tokens, len(a.chunk_times), a.output_text)
            == (b.ok, b.completion_tokens, len(b.chunk_times), b.output_text)
            == (True, 6, 3, a.output_text)
        )


def test_progress_counts_failures_and_tokens_during_the_run(server, capsys):
    reqs = [SampledRequest(i, "http500" if i == 0 else "ok n=10 dt=0.01", 5, 9) for i in range(6)]
    often = RunTuning(progress_quiet_seconds=0.0, progress_interval=0.05)
    config = RunConfig(concurrency=2, warmup_requests=0, progress=True, label="m @ concurrency 2")
    run_benchmark(server.base_url, "m", reqs, config, tuning=often)
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("llmperf: m @ concurrency 2: 6/6 done, 1 failed, ")  # the run it counts


def test_the_last_progress_line_agrees_with_the_result_on_failures_and_real_time_rate(server, capsys):
    """A body that turns out broken (HTTP 200, bad JSON) looks fine while the run goes; the
    last line counts the decoded records, as the result does, at the result's rate."""
    reqs = [SampledRequest(i, "badjson n=10 dt=0.01" if i < 2 else "ok n=10 dt=0.01", 5, 9) for i in range(6)]
    often = RunTuning(progress_quiet_seconds=0.0, progress_interval=0.05)
    config = RunConfig(concurrency=2, warmup_requests=0, progress=True)
    result = run_benchmark(server.base_url, "m", reqs, config, tuning=often, clock_speed=10.0)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert result.failed == 2 and result.clock_speed == 10.0
    assert last.startswith("llmperf: 6/6 done, 2 failed, ") and last.endswith("(x10 clock, tok/s in real time)")
    rate = float(re.search(r"failed, ([\d,]+) output tok/s", last)[1].replace(",", ""))
    assert abs(rate - result.summary().decode_tok_s) <= 0.5


def test_warmup_uses_prompts_beyond_the_measured_ones(server):
    reqs = [SampledRequest(i, f"ok n=2 id={i}", 5, 2) for i in range(6)]
    res = run_benchmark(server.base_url, "m", reqs, RunConfig(num_prompts=4, warmup_requests=3, progress=False))
    sent = [r["prompt"] for r in server.requests]
    assert sent[:3] == ["ok n=2 id=4", "ok n=2 id=5", "ok n=2 id=4"]  # spare ones, cycled: never a measured one
    assert sorted(sent[3:]) == [f"ok n=2 id={i}" for i in range(4)]
    assert [r.index for r in res.records] == [0, 1, 2, 3]
    # its own figures are kept (not its records): 3 requests of 2 tokens each
    assert res.warmup is not None
    assert {k: res.warmup[k] for k in ("requests", "completed", "failed", "output_tokens")} == {
        "requests": 3,
        "completed": 3,
        "failed": 0,
        "output_tokens": 6,
    }
    figures = res.warmup_figures()
    assert figures is not None and figures["duration_s"] > 0
    assert figures["output_tok_s"] == pytest.approx(6 / figures["duration_s"])


def test_warmup_prompts_reuse_the_measured_ones_only_when_there_are_no_others():
    reqs = [SampledRequest(i, f"p{i}", 5, 2) for i in range(3)]
    assert [r.index for r in warmup_prompts(reqs, 3, 4)] == [0, 1, 2, 0]
    assert [r.index for r in warmup_prompts(reqs, 2, 3)] == [2, 2, 2]
    assert warmup_prompts(reqs, 2, 0) == [] and warmup_prompts([], 0, 2) == []


def test_no_warmup_has_no_figures(server):
    res = run_benchmark(
        server.base_url, "m", scripted_requests("ok n=2", 2), RunConfig(warmup_requests=0, progress=False)
    )
    assert res.warmup is None and res.warmup_figures() is None
    assert res.to_dict()["warmup_figures"] is None


def test_more_prompts_asked_than_given_is_an_error():
    with pytest.raises(ValueError, match=r"num_prompts=5 but only 2 requests"):
        run_benchmark("http://127.0.0.1:1", "m", scripted_requests("ok", 2), RunConfig(num_prompts=5))


def test_measured_requests_find_their_connections_open(server):
    res = run_benchmark(
        server.base_url,
        "m",
        scripted_requests("ok n=3", 12),
        RunConfig(concurrency=5, warmup_requests=1, progress=False),
    )
    assert res.completed == 12
    first_measured = server.requests[1]["received"]  # after the one warm-up
    last_measured = server.requests[-1]["received"]
    late = [t for t in server.connect_times if first_measured < t < last_measured]
    assert late == []  # all 5 stream connections were open before measuring


def test_async_entry_point_and_the_sync_one_inside_a_loop(server):
    import asyncio

    from pytest_llmperf.workload.runner import run_benchmark_async

    async def main():
        with pytest.raises(RuntimeError, match="await run_benchmark_async"):
            run_benchmark(server.base_url, "m", scripted_requests("ok", 1), RunConfig(progress=False))
        return await run_benchmark_async(
            server.base_url, "m", scripted_requests("ok n=4", 3), RunConfig(warmup_requests=0, progress=False)
        )

    res = asyncio.run(main())
    assert res.completed == 3 and res.stop_reason == "completed"

    async def unreachable():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        await run_benchmark_async(
            f"http://127.0.0.1:{port}", "m", scripted_requests("ok", 1), RunConfig(connect_timeout=1)
        )

    with pytest.raises(ServerUnreachable):
        asyncio.run(unreachable())


def test_the_measured_window_probes_the_clients_event_loop(server):
    res = run_benchmark(
        server.base_url,
        "m",
        scripted_requests("ok n=40 dt=0.005", 4),
        RunConfig(concurrency=2, warmup_requests=0, progress=False),
    )
    assert res.client_lag is not None and res.client_lag["probes"] >= 1
    assert 0 <= res.client_lag["mean_s"] <= res.client_lag["max_s"] < 1
    share = res.client_lag_share()
    assert share is not None and share >= 0
    assert RunResult.from_dict(res.to_dict()).client_lag == res.client_lag


def _out_of_files(*args, **kwargs):
    raise OSError(errno.EMFILE, "Too many open files")


def test_running_out_of_file_descriptors_opening_connections_is_one_line_naming_the_fix(server, monkeypatch):
    from pytest_llmperf.workload.http1 import ConnectionPool

    monkeypatch.setattr(ConnectionPool, "acquire", _out_of_files)
    reqs = scripted_requests("ok n=2", 4)
    with pytest.raises(TooManyOpenFiles) as err:
        run_benchmark(server.base_url, "m", reqs, RunConfig(concurrency=300, warmup_requests=0, progress=False))
    message = str(err.value)
    assert message.startswith("too many open files at concurrency 300 (each stream holds a socket): RLIMIT_NOFILE")
    assert "ulimit -n" in message and "\n" not in message
    assert err.value.__cause__ is None and err.value.__suppress_context__  # no OSError traceback under it


def test_running_out_mid_run_stops_it_instead_of_recording_failures(server, monkeypatch):
    from pytest_llmperf.workload.http1 import ConnectionPool

    acquire = ConnectionPool.acquire
    opened = []

    async def some_then_none(self, fresh=False):
        opened.append(fresh)
        if len(opened) > 3:  # the pool was filled; then a fresh socket is refused
            raise OSError(errno.EMFILE, "Too many open files")
        return await acquire(self, fresh=True)

    monkeypatch.setattr(ConnectionPool, "acquire", some_then_none)
    monkeypatch.setattr(ConnectionPool, "fill", lambda self, n: _noop())
    reqs = scripted_requests("ok n=50 dt=0.01", 40)
    started = time.monotonic()
    with pytest.raises(TooManyOpenFiles, match="at concurrency 8"):
        run_benchmark(server.base_url, "m", reqs, RunConfig(concurrency=8, warmup_requests=0, progress=False))
    assert time.monotonic() - started < 5  # the streams in flight were cut, not waited for
    assert len(opened) < 40  # nothing more was sent once it ran out


async def _noop():
    return None


def test_running_out_in_the_metrics_scrape_reads_the_same(server, monkeypatch):
    from pytest_llmperf.workload import runner

    async def scrape(base_url, **kwargs):
        _out_of_files()

    monkeypatch.setattr(runner, "fetch_metrics_page", scrape)
    with pytest.raises(TooManyOpenFiles, match=r"at concurrency 2 .*`ulimit -n \d+`"):
        run_benchmark(server.base_url, "m", scripted_requests("ok n=2", 2), RunConfig(concurrency=2, progress=False))


def test_the_servers_running_gauge_is_sampled_through_the_window(server):
    server.metrics = 'vllm:num_requests_running{engine="0"} 2.0\nvllm:num_requests_waiting{engine="0"} 1.0\n'
    reqs = scripted_requests("ok n=70 dt=0.01", 2)  # each stream ~0.7 s: at least one poll at 0.5 s
    res = run_benchmark(server.base_url, "m", reqs, RunConfig(concurrency=2, warmup_requests=0, progress=False))
    assert res.running, "no sample"
    seconds, in_flight, running, waiting = res.running[0]
    assert seconds >= 0.5 and (in_flight, running, waiting) == (2, 2.0, 1.0)
    reached = res.concurrency_reached()
    assert reached is not None and (reached.peak, reached.target, reached.shortfall()) == (2.0, 2, None)
    assert RunResult.from_json(res.to_json()).running == res.running


def test_a_server_without_the_running_gauge_is_not_sampled(server):
    res = run_benchmark(
        server.base_url, "m", scripted_requests("ok n=70 dt=0.01", 2), RunConfig(concurrency=2, progress=False)
    )
    assert res.running is None and res.concurrency_reached() is None
