"""What CI systems read: a GitHub Actions step summary and JUnit XML properties.

`summary_markdown` is the one Markdown rendering of a report document used here (the
verdict tables); a fuller Markdown report can take its place without touching the
mechanism. `append_step_summary` appends it to `$GITHUB_STEP_SUMMARY` (the plugin calls
it once per session, on the xdist controller). `junit_properties` gives one test's key
figures and verdicts as (name, value) pairs for `item.user_properties`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmperf.baselines.compare import Verdict
from pytest_llmperf.metrics.registry import format_value
from pytest_llmperf.report.document import verdict_from_dict
from pytest_llmperf.report.table import format_change, format_noise

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"

# The figures a test's JUnit properties carry for each run it used (the seeds' headline ones).
KEY_FIGURES = (
    "decode_tok_s",
    "prefill_tok_s",
    "ttft_ms_median",
    "tpot_ms_median",
    "acceptance_rate",
    "acceptance_length",
)

_COLUMNS = ("conc", "metric", "baseline", "measured", "change", "noise", "allowed", "verdict")
_ALIGN = "|---:|---|---:|---:|---:|---:|---:|---|"
_FAILING_OUTCOMES = ("fail", "refused")


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _verdict_cells(concurrency: int, v: Verdict) -> list[str]:
    word = str(v.status)
    return [
        str(concurrency),
        f"`{v.metric}`",
        format_value(v.metric, v.baseline),
        format_value(v.metric, v.measured),
        format_change(v),
        format_noise(v),
        v.allowed,
        word if v.ok else f"**{word}**",
    ]


def summary_markdown(doc: Mapping[str, Any]) -> str:
    """The verdict tables of a report document as GitHub-flavoured Markdown: one table per
    server (concurrency, metric, baseline, measured, change, noise, allowed, verdict), the
    tests that failed without a table (refused baselines, runs not recorded) and the
    baselines recorded."""
    gates = list(doc.get("verdicts", []))
    failed = sum(1 for gate in gates if gate["outcome"] in _FAILING_OUTCOMES)
    lines = [
        f"## llmperf: target {doc.get('target')}, profile {doc.get('profile')}",
        "",
        f"{len(gates)} assertion(s), {failed} failing; {len(doc.get('runs', []))} run(s)",
    ]
    by_server: dict[str, list[list[str]]] = {}
    others: list[str] = []
    for gate in gates:
        if gate["verdicts"]:
            by_server.setdefault(gate["server"], []).extend(
                _verdict_cells(gate["concurrency"], verdict_from_dict(v)) for v in gate["verdicts"]
            )
        elif gate["message"]:
            first = next(iter(gate["message"].splitlines()), "")
            others.append(f"- `{gate['test']}` ({gate['outcome']}): {first}")
    for server, rows in by_server.items():
        lines += ["", f"### {server}", "", _row(_COLUMNS), _ALIGN]
        lines += [_row(cells) for cells in rows]
    if others:
        lines += ["", *others]
    return "\n".join(lines) + "\n"


def append_step_summary(doc: Mapping[str, Any], environ: Mapping[str, str]) -> Path | None:
    """Append `summary_markdown(doc)` to the file `$GITHUB_STEP_SUMMARY` names (GitHub
    Actions shows it on the run's page); None, writing nothing, when it is not set."""
    where = environ.get(STEP_SUMMARY_ENV)
    if not where:
        return None
    path = Path(where)
    with path.open("a", encoding="utf-8") as out:
        out.write(summary_markdown(doc) + "\n")
    return path


def junit_properties(
    runs: Sequence[tuple[str, int, Mapping[str, Any]]],
    gates: Sequence[tuple[str, int, str, Sequence[Verdict]]],
) -> list[tuple[str, str]]:
    """One test's JUnit properties: for each run it used (server, concurrency, figures)
    `llmperf.<server>@<conc>.<figure>`; for each of its assertions (server, concurrency,
    outcome, verdicts) `...outcome`, and per gated metric its measured value and
    `.verdict`, `.baseline`, `.change`."""
    props: dict[str, str] = {}
    for server, concurrency, figures in runs:
        label = f"llmperf.{server}@{concurrency}"
        for name in KEY_FIGURES:
            if figures.get(name) is not None:
                props[f"{label}.{name}"] = format_value(name, figures[name])
    for server, concurrency, outcome, verdicts in gates:
        label = f"llmperf.{server}@{concurrency}"
        props[f"{label}.outcome"] = outcome
        for v in verdicts:
            if v.measured is not None:
                props[f"{label}.{v.metric}"] = format_value(v.metric, v.measured)
            props[f"{label}.{v.metric}.verdict"] = str(v.status)
            if v.baseline is not None:
                props[f"{label}.{v.metric}.baseline"] = format_value(v.metric, v.baseline)
            if v.change is not None:
                props[f"{label}.{v.metric}.change"] = format_change(v)
    return list(props.items())
