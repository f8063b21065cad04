"""The terminal summary: what was measured per server, then the verdicts."""

from __future__ import annotations

from typing import Any

from pytest_llmperf.report.table import SummaryRow, format_server_table, format_value, render_columns

# (column header, metric) for the measured-figures table; the seeds' headline figures.
FIGURES = (
    ("decode tok/s", "decode_tok_s"),
    ("prefill tok/s", "prefill_tok_s"),
    ("TTFT p50 ms", "ttft_ms_median"),
    ("TPOT p50 ms", "tpot_ms_median"),
    ("accept rate", "acceptance_rate"),
    ("accept len", "acceptance_length"),
)


def _completed(run: Any) -> str:
    text = f"{run.completed}/{run.attempted}"
    reasons = {r.stop_reason for r in run.results}
    if "max_seconds" in reasons:
        text += " (time cap)"
    if "interrupted" in reasons:
        text += " (interrupted)"
    failed = sum(r.failed for r in run.results)
    return text + (f", {failed} failed" if failed else "")


def measured_table(runs: list[Any]) -> list[str]:
    header = ["server", "conc", "completed", *(h for h, _ in FIGURES)]
    rows = []
    for run in runs:
        rows.append(
            [run.spec.name, str(run.concurrency), _completed(run), *(format_value(m, run.value(m)) for _, m in FIGURES)]
        )
        published = {m: run.published.get(m) for _, m in FIGURES}
        if any(v is not None for v in published.values()):
            rows.append(["  published (ref only)", "", "", *(format_value(m, published[m]) for _, m in FIGURES)])
    return render_columns(header, rows, right=set(range(1, 3 + len(FIGURES))))


def summary_lines(perf: Any) -> list[str]:
    lines: list[str] = []
    runs = list(perf.runs.values())
    if perf.pool.starts:
        lines.append("servers started (one at a time): " + ", ".join(perf.pool.starts))
    if not runs:
        return lines + ["no workload ran"]
    lines += ["", *measured_table(runs)]
    for run in runs:
        for note in run.notes:
            if run.spec.is_speculative or "speculative" not in note:  # base servers: expected
                lines.append(f"note: {run.spec.name} @ {run.concurrency}: {note}")

    by_server: dict[str, list[SummaryRow]] = {}
    recorded: list[str] = []
    for gate in perf.gates:
        if gate.outcome == "recorded":
            recorded.append(f"{gate.server} @ {gate.concurrency}: {gate.message}")
            continue
        if gate.outcome == "refused":
            lines.append(
                f"REFUSED {gate.server} @ {gate.concurrency}: baseline recorded under another workload "
                f"or hardware ({gate.baseline_path})"
            )
            continue
        published = _published_for(perf, gate.server, gate.concurrency)
        for verdict in gate.verdicts:
            by_server.setdefault(gate.server, []).append(
                SummaryRow(gate.concurrency, verdict, published.get(verdict.metric))
            )
    for server, rows in by_server.items():
        lines += ["", format_server_table(server, rows)]
    hints = [
        f"{gate.server} @ {gate.concurrency}: {v.hint}"
        for gate in perf.gates
        for v in gate.verdicts
        if v.status == "improved"
    ]
    if hints:
        lines += ["", "improvements beyond tolerance:", *hints]
    undecided = [
        f"{gate.server} @ {gate.concurrency}: {v.hint}"
        for gate in perf.gates
        for v in gate.verdicts
        if v.status == "inconclusive"
    ]
    if undecided:
        policy = getattr(perf.options, "inconclusive", "warn")
        lines += ["", f"inconclusive: the noise is too wide to tell (--llmperf-inconclusive {policy}):", *undecided]
    if recorded:
        lines += ["", "baselines recorded (review and commit them):", *recorded]
    return lines


def _published_for(perf: Any, server: str, concurrency: int) -> dict[str, float]:
    for run in perf.runs.values():
        if run.spec.name == server and run.concurrency == concurrency:
            return run.published
    return {}
