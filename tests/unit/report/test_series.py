"""What the plots show, from a known result set: no drawing library needed."""

import pytest

from pytest_llmperf.report import series
from tests.unit.report.sample import sample_document


def test_decode_per_server_with_the_baseline_its_noise_and_the_published_figure():
    doc = sample_document()
    base, mtp = series.concurrency_series(doc, doc["runs"], "decode_tok_s")
    assert (base.server, base.speculative, mtp.server, mtp.speculative) == (
        "qwen3.6-27b-fp8",
        False,
        "qwen3.6-27b-fp8-mtp",
        True,
    )
    assert base.measured == [(1, 21.0), (8, 60.0)] and mtp.measured == [(1, 38.0), (8, 86.0)]
    ((c, value, noise),) = mtp.baseline
    assert (c, value) == (8, 99.0) and noise == pytest.approx(2.47, abs=0.01)  # 1.645 x 1.5 (one-sided 95 %)
    assert mtp.published == [(8, 97.96)]


def test_the_speedup_comes_from_its_verdict_else_from_the_two_runs():
    doc = sample_document()
    (points,) = series.speedups(doc, doc["runs"]).values()
    at1, at8 = points
    assert at1.measured == pytest.approx(38.0 / 21.0) and at1.noise is None and at1.baseline is None
    assert at8.measured == 1.43 and at8.noise == pytest.approx(0.0658, abs=1e-4) and at8.baseline == 1.6


def test_per_position_acceptance_against_the_baseline():
    (item,) = series.acceptance(sample_document())
    assert item.positions == 3
    assert item.measured == {1: [0.84, 0.65, 0.49], 8: [0.84, 0.65, 0.49]}
    assert item.baseline[8] == [0.85, 0.69, 0.53] and item.baseline[1] == [None, None, None]
    assert item.published[8] == [0.86, None, None]


def test_latencies_are_per_request_in_real_time():
    run = sample_document()["runs"][3]  # MTP @ 8: TPOT 75 ms real on a 10x clock
    ttfts, tpots = series.latencies(run)
    assert len(ttfts) == len(tpots) == 16
    assert all(200 <= t <= 600 for t in ttfts)  # 20-60 ms on the fast clock
    assert tpots == pytest.approx([75.0 * 62 / 63] * 16, rel=1e-6)  # 32 chunks of 2 tokens: 31 gaps of 2 TPOTs / 63


def test_the_timeline_counts_requests_in_flight_and_every_output_token():
    doc = sample_document()
    (run,) = series.timeline_runs(doc)  # the failing cell
    assert (run["server"]["name"], run["workload"]["concurrency"]) == ("qwen3.6-27b-fp8-mtp", 8)
    line = series.timeline(run)
    assert max(level for _, level in line.in_flight) == 8 and line.in_flight[-1][1] == 0
    assert sum(rate * line.bin_s for _, rate in line.tokens) == pytest.approx(16 * 64)
    passing = {**doc, "verdicts": []}
    assert [r["workload"]["concurrency"] for r in series.timeline_runs(passing)] == [8]
