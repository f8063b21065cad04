"""Goodput as `vllm bench serve --goodput` computes it: vLLM's own `calculate_metrics`
(the prepared vLLM CPU venv; no server) over records we made, against our summary of the
same records (issue 13). The records sit on every edge of the definition, exactly at
each SLO and just over it, one-token replies, replies without usage and failures,
among a few hundred seeded random ones whose values straddle the SLOs."""

from __future__ import annotations

import random

import pytest
from real_vllm_helpers import REPORT_LINES
from vllm_bench import vllm_metrics

from pytest_llmperf.metrics.goodput import parse_slos
from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.workload.result import RunResult

pytestmark = [pytest.mark.slow, pytest.mark.real_vllm]

SLOS = "ttft:500 tpot:250 e2el:1500"


def _record(index, send, ttft, e2el, tokens, error=None):
    chunks = [] if error else sorted({send + ttft, send + (ttft + e2el) / 2, send + e2el})
    return RequestRecord(
        index=index,
        send_time=send,
        chunk_times=chunks,
        end_time=send + e2el,
        prompt_tokens=20,
        completion_tokens=None if error else tokens,
        error=error,
    )


def _records() -> list[RequestRecord]:
    # Edges first, sent at 0 so their arithmetic is exact: at TTFT, TPOT and E2EL SLOs
    # together ((1.5 - 0.5) / 4 = 0.25 s), and just over each.
    edges = [
        (0.5, 1.5, 5, None),  # exactly at all three: good
        (0.5 + 2**-20, 1.5, 5, None),  # TTFT over
        (0.25, 1.25 + 2**-18, 5, None),  # TPOT just over 0.25 s
        (0.5, 1.5 + 2**-20, 1, None),  # E2EL over (one token: TPOT 0)
        (0.25, 1.25, 1, None),  # one token: TPOT 0, good
        (0.25, 1.25, None, None),  # no usage: vLLM (no tokenizer) counts 1 token
        (0.1, 0.2, 5, "HTTP 500"),  # failed: never good
    ]
    records = [_record(i, 0.0, *edge) for i, edge in enumerate(edges)]
    rng = random.Random(13)
    for i in range(len(edges), 300):
        ttft = rng.uniform(0.05, 1.0)
        e2el = ttft + rng.uniform(0.0, 1.5)
        tokens = rng.choice([1, 2, 3, 5, 8, 13])
        error = "HTTP 503" if rng.random() < 0.05 else None
        records.append(_record(i, rng.uniform(0.0, 30.0), ttft, e2el, tokens, error))
    return records


def test_goodput_equals_vllms_calculate_metrics_on_the_same_records(prepared_vllm, tmp_path):
    result = RunResult(
        config={"concurrency": 8, "slos": SLOS},
        records=_records(),
        duration=32.0,
        attempted=300,
        stop_reason="completed",
    )
    theirs = vllm_metrics(prepared_vllm, result, tmp_path, goodput=parse_slos(SLOS))
    ours = result.summary()
    REPORT_LINES.append(
        f"goodput at {SLOS} over {len(result.records)} records: vLLM {theirs['request_goodput']!r} req/s, "
        f"ours {ours.request_goodput!r} req/s (attainment {ours.slo_attainment:.3f}, {ours.completed} completed)"
    )
    assert ours.completed == theirs["completed"]
    # Not a tautology of the edges: some requests are good and some are not.
    assert 0 < ours.slo_attainment < 1
    assert ours.request_goodput == theirs["request_goodput"], (ours.request_goodput, theirs["request_goodput"])
    assert ours.request_throughput == pytest.approx(theirs["request_throughput"], rel=1e-12)
