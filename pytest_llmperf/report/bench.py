"""One run's figures laid out as `vllm bench serve` prints them (`llmperf bench`, `show`).

vLLM's `Serving Benchmark Result` block with its labels where the figure is the same one
(vllm/benchmarks/serve.py), plus the seeds' own lines around it (completed/attempted and
why the run stopped, prefill throughput, notes, errors). Peak throughput is not computed.
"""

from __future__ import annotations

from pytest_llmperf.metrics.prometheus import NOT_SPECULATIVE
from pytest_llmperf.metrics.summary import Summary
from pytest_llmperf.report.crosscheck import token_mismatch
from pytest_llmperf.workload.result import RunResult, describe_warmup

WIDTH = 50  # vLLM's block width
LABEL = 40  # vLLM's label column

# (summary key, vLLM's name, vLLM's section header), in vLLM's order.
LATENCIES = (
    ("ttft", "TTFT", "Time to First Token"),
    ("tpot", "TPOT", "Time per Output Token (excl. 1st token)"),
    ("itl", "ITL", "Inter-token Latency"),
    ("e2el", "E2EL", "End-to-end Latency"),
)


def _line(label: str, value: float | int | str | None, spec: str = ".2f") -> str:
    shown = "n/a" if value is None else value if isinstance(value, str) else f"{value:{spec}}"
    return f"{label:<{LABEL}} {shown}"


def _section(title: str) -> str:
    return f"{title:-^{WIDTH}}"


def _stop_text(result: RunResult, s: Summary) -> str:
    cap = result.config.get("max_seconds")
    if result.stop_reason == "max_seconds":
        return f"(hit the {cap:g} s cap)" if isinstance(cap, (int, float)) else "(hit the time cap)"
    if result.stop_reason == "interrupted":
        return "(interrupted: partial result)"
    return f"in {s.duration_s:.0f} s (no time cap hit)"


def _speculative(result: RunResult, s: Summary) -> list[str]:
    if s.spec_status == NOT_SPECULATIVE:
        return []  # as vLLM: no section for a server that does not speculate
    lines = [_section("Speculative Decoding")]
    if s.acceptance_rate is None:
        return [*lines, _line("Acceptance rate (%):", "n/a (see the note below)")]
    spec = result.spec_decode()
    lines += [
        _line("Acceptance rate (%):", s.acceptance_rate * 100),
        _line("Acceptance length:", s.acceptance_length),
        _line("Drafts:", spec.drafts, ".0f"),
        _line("Draft tokens:", spec.draft_tokens, ".0f"),
        _line("Accepted tokens:", spec.accepted, ".0f"),
    ]
    if s.acceptance_per_position:
        lines.append("Per-position acceptance (%):")
        lines += [_line(f"  Position {i}:", rate * 100) for i, rate in enumerate(s.acceptance_per_position)]
    return lines


def _reasoning(s: Summary) -> list[str]:
    """A reasoning model's lines (not vLLM's: its TTFT above counts reasoning tokens too);
    none for a run whose replies carried no reasoning."""
    if s.answered is None:
        return []
    lines = [_section("Time to First Answer Token")]
    lines += [
        _line(f"{word} TTFA (ms):", getattr(s, f"ttfa_ms_{stat}"))
        for stat, word in (("mean", "Mean"), ("median", "Median"), ("p90", "P90"), ("p99", "P99"))
    ]
    lines += [
        _line("Requests that answered:", f"{s.answered}/{s.completed}"),
        _line("Reasoning tokens:", s.total_reasoning_tokens, "d"),
        _line("Answer tokens:", s.total_answer_tokens, "d"),
        _line("Reasoning share (%):", None if s.reasoning_share is None else s.reasoning_share * 100),
    ]
    return lines


def _goodput(s: Summary) -> list[str]:
    """vLLM's goodput line where SLOs were given (`--goodput`), with the SLOs and the
    share of completed requests that met them after it."""
    if not s.slos:
        return []
    attainment = None if s.slo_attainment is None else s.slo_attainment * 100
    return [
        _line("Request goodput (req/s):", s.request_goodput),
        _line("SLO attainment (%):", attainment),
        _line("Goodput SLOs (ms):", s.slos),
    ]


def serving_result(result: RunResult) -> str:
    """The block, with the seeds' completed line before it and notes and errors after."""
    s = result.summary()
    total = result.config.get("num_prompts") or result.attempted
    rate = result.config.get("request_rate")
    lines = [
        f"Completed {s.completed}/{total}, {s.failed} errors {_stop_text(result, s)}",
        f"{' Serving Benchmark Result ':=^{WIDTH}}",
        _line("Successful requests:", s.completed, "d"),
        _line("Failed requests:", s.failed, "d"),
        _line("Maximum request concurrency:", result.config.get("concurrency"), "d"),
        *([_line("Request rate configured (RPS):", rate)] if isinstance(rate, (int, float)) else []),
        _line("Benchmark duration (s):", s.duration_s),
        _line("Total input tokens:", s.total_prompt_tokens, "d"),
        _line("Total generated tokens:", s.total_output_tokens, "d"),
        _line("Request throughput (req/s):", s.request_throughput),
        *_goodput(s),
        _line("Output token throughput (tok/s):", s.decode_tok_s),
        _line("Steady output throughput (tok/s):", s.steady_decode_tok_s),
        _line("Input token throughput (tok/s):", s.prefill_tok_s),
        _line("Total token throughput (tok/s):", s.total_tok_s),
    ]
    for key, name, header in LATENCIES:
        lines.append(_section(header))
        for stat, word in (("mean", "Mean"), ("median", "Median"), ("p90", "P90"), ("p99", "P99")):
            lines.append(_line(f"{word} {name} (ms):", getattr(s, f"{key}_ms_{stat}")))
        if key == "tpot" and s.per_stream_tok_s:
            lines.append(_line("Per-stream tok/s (1 / median TPOT):", s.per_stream_tok_s))
    lines += [*_reasoning(s), *_speculative(result, s), "=" * WIDTH]
    warmed = result.warmup_figures()
    if warmed:
        lines.append(f"Warm-up (not measured): {describe_warmup(warmed)}")
    reached = result.concurrency_reached()
    if reached is not None:
        lines.append(
            f"Running on the server: peak {reached.peak:g}, mean {reached.mean:.1f} of concurrency "
            f"{reached.concurrency} ({reached.samples} samples)"
        )
        short = reached.shortfall()
        if short:
            lines.append(f"Warning: {short}")
    account = result.token_account()
    if account is not None and account.counter is not None:
        lines.append(
            f"Output tokens: usage {account.usage:,}, vllm:generation_tokens_total +{account.counter:,.0f}, "
            f"{account.events:,} token events"
        )
    mismatch = token_mismatch(account)
    if mismatch:
        lines.append(f"Warning: {mismatch}")
    lines += [f"Note: {n}" for n in s.notes]
    if s.spec_note and s.spec_status != NOT_SPECULATIVE:
        lines.append(f"Note: {s.spec_note}")
    errors = sorted({r.error for r in result.records if r.error})
    lines += [f"Error: {e}" for e in errors[:5]]
    return "\n".join(lines)
