"""Streams spread over worker processes (RunConfig.workers > 1)."""

import pytest

from pytest_llmperf.workload.runner import RunConfig, run_benchmark
from pytest_llmperf.workload.workers import split
from tests.unit.workload.stream_fakes import FakeStreamServer, interrupted_run, max_overlap, scripted_requests


def test_split_shares_requests_schedule_and_concurrency():
    reqs = scripted_requests("x", 7)
    shares = split(reqs, [0.1 * i for i in range(7)], concurrency=5, workers=2)
    assert [[r.index for r in s[0]] for s in shares] == [[0, 2, 4, 6], [1, 3, 5]]
    assert shares[1][1] == pytest.approx([0.1, 0.3, 0.5])
    assert [s[2] for s in shares] == [3, 2]


@pytest.mark.slow
def test_two_workers_run_every_request_within_the_concurrency():
    with FakeStreamServer() as srv:
        res = run_benchmark(
            srv.base_url,
            "m",
            scripted_requests("ok n=10 dt=0.005", 40),
            RunConfig(concurrency=6, workers=2, warmup_requests=1, progress=False),
        )
    assert res.stop_reason == "completed" and res.completed == 40 and res.attempted == 40
    assert [r.index for r in res.records] == list(range(40))
    assert all(r.completion_tokens == 10 and len(r.chunk_times) == 10 for r in res.records)
    assert max_overlap(res.records) == 6
    assert res.config["workers"] == 2 and res.metrics_before is not None
    first = min(r.send_time for r in res.records)
    assert res.duration >= max(r.end_time for r in res.records) - first


@pytest.mark.slow
def test_workers_respect_max_seconds():
    with FakeStreamServer() as srv:
        res = run_benchmark(
            srv.base_url,
            "m",
            scripted_requests("ok n=10 dt=0.01", 400),
            RunConfig(concurrency=4, workers=2, max_seconds=0.4, warmup_requests=0, progress=False),
        )
    assert res.stop_reason == "max_seconds" and 4 <= res.attempted < 400 and res.failed == 0


@pytest.mark.parametrize("workers", [0, 5, 1.5])
def test_bad_workers(workers):
    with pytest.raises(ValueError, match=r"RunConfig\.workers="):
        RunConfig(concurrency=4, workers=workers)


@pytest.mark.slow
def test_ctrl_c_with_workers_returns_a_partial_result():
    out = interrupted_run(workers=2)
    assert out["stop"] == "interrupted" and out["completed"] == 4 and out["attempted"] == 8
    assert out["errors"] == ["interrupted (Ctrl-C)"]


def test_sigterm_with_workers_cuts_their_streams_naming_it():
    out = interrupted_run(workers=2, sig="SIGTERM")
    assert out["stop"] == "interrupted" and out["completed"] == 4 and out["attempted"] == 8
    assert out["errors"] == ["interrupted (SIGTERM)"]
