"""Aggregate figures of one run from its raw request records, as `vllm bench serve`
defines them (token counts from `usage`, never from chunks; numpy's linear percentiles).

A figure that cannot be computed is None, never 0. Records on a sped-up clock
(`clock_speed`, the simulator) give figures in real time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

from pytest_llmperf.metrics.goodput import format_slos, good_requests, parse_slos
from pytest_llmperf.metrics.prometheus import SpecDecodeStats
from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.metrics.registry import to_real_time
from pytest_llmperf.metrics.steady import steady_tok_s

STATS = ("mean", "median", "p90", "p99")
PERCENTILES = {"median": 50, "p90": 90, "p99": 99}
NOT_METRICS = ("spec_status", "spec_note", "notes", "slos")


@dataclass
class Summary:
    completed: int
    failed: int
    duration_s: float
    total_prompt_tokens: int
    total_output_tokens: int
    request_throughput: float | None  # completed requests / s
    prefill_tok_s: float | None  # prompt tokens / s (the seeds' "prefill")
    decode_tok_s: float | None  # output tokens / s (the seeds' "decode")
    steady_decode_tok_s: float | None  # output tokens / s while at the run's concurrency
    total_tok_s: float | None  # (prompt + output) tokens / s
    per_stream_tok_s: float | None  # 1 / median TPOT
    ttft_ms_mean: float | None = None
    ttft_ms_median: float | None = None
    ttft_ms_p90: float | None = None
    ttft_ms_p99: float | None = None
    tpot_ms_mean: float | None = None
    tpot_ms_median: float | None = None
    tpot_ms_p90: float | None = None
    tpot_ms_p99: float | None = None
    itl_ms_mean: float | None = None
    itl_ms_median: float | None = None
    itl_ms_p90: float | None = None
    itl_ms_p99: float | None = None
    e2el_ms_mean: float | None = None
    e2el_ms_median: float | None = None
    e2el_ms_p90: float | None = None
    e2el_ms_p99: float | None = None
    ttfa_ms_mean: float | None = None
    ttfa_ms_median: float | None = None
    ttfa_ms_p90: float | None = None
    ttfa_ms_p99: float | None = None
    answered: int | None = None  # completed requests that got to answer text
    total_reasoning_tokens: int | None = None
    total_answer_tokens: int | None = None
    reasoning_share: float | None = None  # reasoning tokens / output tokens
    request_goodput: float | None = None  # requests meeting every SLO / s; None without SLOs
    slo_attainment: float | None = None  # share of completed requests meeting every SLO
    acceptance_rate: float | None = None
    acceptance_length: float | None = None
    acceptance_per_position: list[float] | None = None
    spec_status: str | None = None  # SpecDecodeStats.status; None when not asked
    spec_note: str | None = None  # why there are no acceptance figures (SpecDecodeStats.note)
    notes: list[str] = field(default_factory=list)  # about the records: missing usage, zero duration
    slos: str = ""  # the SLOs goodput was judged at ('ttft:500 tpot:50'); '' for none

    def to_dict(self) -> dict[str, Any]:
        """Metric name -> number, None or (acceptance_per_position) a list; NOT_METRICS stay out."""
        d = asdict(self)
        for key in NOT_METRICS:
            d.pop(key)
        return d


class _Stats(NamedTuple):
    """One latency's STATS, in ms; all None without values."""

    mean: float | None = None
    median: float | None = None
    p90: float | None = None
    p99: float | None = None


def _stats(values_s: list[float]) -> _Stats:
    if not values_s:
        return _Stats()
    arr = np.asarray(values_s, dtype=float) * 1000.0
    pct = {name: float(np.percentile(arr, q)) for name, q in PERCENTILES.items()}
    return _Stats(mean=float(np.mean(arr)), median=pct["median"], p90=pct["p90"], p99=pct["p99"])


def _check_duration(duration: float) -> float:
    if isinstance(duration, bool) or not isinstance(duration, (int, float)):
        raise TypeError(f"duration must be seconds as a number, got {duration!r}")
    if math.isnan(duration) or math.isinf(duration) or duration < 0:
        raise ValueError(f"duration must be a finite number of seconds >= 0, got {duration!r}")
    return float(duration)


def _steady(records: list[RequestRecord], concurrency: int | None) -> float | None:
    """The steady decode rate (metrics/steady.py). A failed request is in flight with no
    tokens; one cut at the time cap is left out (its tokens are uncounted)."""
    spans = []
    for r in records:
        if r.cut_at_cap:
            continue
        end = r.end_time if r.end_time is not None else (r.chunk_times[-1] if r.chunk_times else r.send_time)
        tokens = (r.completion_tokens or 0) if r.ok else 0
        spans.append((r.send_time, end, r.chunk_times, tokens))
    return steady_tok_s(spans, concurrency if concurrency is not None else _peak(spans))


def _peak(spans: list[tuple[float, float, list[float], int]]) -> int:
    events = sorted([(a, 1) for a, *_ in spans] + [(b, -1) for _, b, *_ in spans])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def _reasoning(summary: Summary, ok: list[RequestRecord], output_tokens: int, notes: list[str]) -> None:
    """The reasoning figures of a run whose replies carried reasoning, into `summary`."""
    ttfa = _stats([r.ttfa for r in ok if r.ttfa is not None])
    summary.ttfa_ms_mean, summary.ttfa_ms_median, summary.ttfa_ms_p90, summary.ttfa_ms_p99 = ttfa
    summary.answered = sum(r.first_answer_time is not None for r in ok)
    unreported = [r.index for r in ok if r.reasoning_tokens is None]
    if unreported:
        shown = ", ".join(map(str, unreported[:5])) + (", ..." if len(unreported) > 5 else "")
        notes.append(
            f"{len(unreported)} successful request(s) of a reasoning run reported no reasoning token count "
            f"(usage.completion_tokens_details.reasoning_tokens; indices {shown}): the reasoning/answer token "
            "split is not computed (vLLM reports it when served with --reasoning-parser)"
        )
        return
    reasoning = sum(r.reasoning_tokens or 0 for r in ok)
    summary.total_reasoning_tokens = reasoning
    summary.total_answer_tokens = output_tokens - reasoning
    summary.reasoning_share = reasoning / output_tokens if output_tokens else None


def _latencies(ok: list[RequestRecord]) -> dict[str, Any]:
    """Summary's ttft/tpot/itl/e2el_ms_{mean,median,p90,p99} of the successful requests."""
    values = {
        "ttft": [r.ttft for r in ok if r.ttft is not None],
        "tpot": [r.tpot for r in ok if r.tpot is not None],
        "itl": [gap for r in ok for gap in r.itls],
        "e2el": [r.e2el for r in ok if r.e2el is not None],
    }
    return {f"{name}_ms_{stat}": v for name, got in values.items() for stat, v in _stats(got)._asdict().items()}


def summarize(
    records: Iterable[RequestRecord],
    duration: float,
    spec: SpecDecodeStats | None = None,
    clock_speed: float = 1.0,
    concurrency: int | None = None,
    slos: str = "",
) -> Summary:
    """`concurrency`: for the steady window (None: the most requests in flight together).
    `slos`: SLO text for goodput (metrics/goodput.py); '' for none."""
    records = list(records)
    duration = _check_duration(duration)
    objectives = parse_slos(slos) if slos else {}
    for r in records:
        if not isinstance(r, RequestRecord):
            raise TypeError(f"summarize expects RequestRecord objects, got {type(r).__name__}")

    ok = [r for r in records if r.ok]
    notes: list[str] = []
    no_usage = [r.index for r in ok if r.completion_tokens is None or r.prompt_tokens is None]
    if no_usage:
        shown = ", ".join(map(str, no_usage[:5])) + (", ..." if len(no_usage) > 5 else "")
        notes.append(
            f"{len(no_usage)} successful request(s) reported no usage (indices {shown}): "
            "their tokens are missing from the token counts and throughput"
        )
    prompt_tokens = sum(r.prompt_tokens or 0 for r in ok)
    output_tokens = sum(r.completion_tokens or 0 for r in ok)

    def rate(x: float) -> float | None:
        return x / duration if duration > 0 and ok else None

    if ok and duration == 0:
        notes.append("duration is 0 s: throughput figures are undefined")
    latencies = _latencies(ok)
    median_tpot_ms = latencies["tpot_ms_median"]
    summary = Summary(
        completed=len(ok),
        failed=len(records) - len(ok),
        duration_s=duration,
        total_prompt_tokens=prompt_tokens,
        total_output_tokens=output_tokens,
        request_throughput=rate(len(ok)),
        prefill_tok_s=rate(prompt_tokens),
        decode_tok_s=rate(output_tokens),
        steady_decode_tok_s=_steady(records, concurrency) if ok else None,
        total_tok_s=rate(prompt_tokens + output_tokens),
        per_stream_tok_s=1000.0 / median_tpot_ms if median_tpot_ms else None,
        notes=notes,
        **latencies,
    )
    if any(r.reasoned for r in ok):
        _reasoning(summary, ok, output_tokens, notes)
    if objectives:
        good = good_requests(ok, objectives, clock_speed)
        summary.slos = format_slos(objectives)
        summary.request_goodput = rate(good)
        summary.slo_attainment = good / len(ok) if ok else None
    if spec is not None:
        summary.spec_status = spec.status
        summary.acceptance_rate = spec.acceptance_rate
        summary.acceptance_length = spec.acceptance_length
        summary.acceptance_per_position = list(spec.per_position) if spec.per_position else None
        summary.spec_note = spec.note
    if clock_speed != 1.0:
        figures = {k: v for k, v in summary.to_dict().items() if k != "acceptance_per_position"}
        summary = replace(summary, **to_real_time(figures, clock_speed))
    return summary
