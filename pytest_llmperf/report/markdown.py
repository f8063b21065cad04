"""summary.md: the report document as GitHub-flavoured Markdown.

Text only (a CI step summary cannot show images), in report.html's order: the outcome in
one line, the verdict matrix, the verdict tables (failing first) with explanations, where
the plots are, measured and published figures, provenance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.report import sections
from pytest_llmperf.report.table import PUBLISHED_HEADER

Doc = Mapping[str, Any]

STATUS_MARK = {"regressed": "**regressed**", "invalid": "**invalid**", "no-data": "**no-data**"}
STATUS_MARK["missing-baseline"] = "**missing-baseline**"
OUTCOME_MARK = {"fail": "FAIL", "warn": "warn", "pass": "pass", "recorded": "recorded", "refused": "REFUSED"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    """A Markdown table; columns in `right` are right-aligned."""
    align = ["---:" if i in right else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def outcome_line(doc: Doc) -> str:
    counts = sections.outcome_counts(doc)
    order = ("fail", "refused", "warn", "pass", "recorded")
    tests = ", ".join(f"{counts[o]} {o}" for o in order if o in counts) or "no assertion judged"
    return (
        f"target **{doc.get('target') or '?'}**, profile `{doc.get('profile')}`, plugin {doc.get('plugin_version')}: "
        f"{tests}"
    )


def banner_line(doc: Doc) -> str:
    """ "**FAIL**: 10 of 18 tests failed; target **sim**, profile `smoke`, plugin 0.1.0: 10 fail, 5 warn, 3 pass"."""
    b = sections.banner(doc)
    return f"**{b.word}**: {b.headline}; {outcome_line(doc)}"


def matrix(doc: Doc) -> list[str]:
    """The verdict matrix: a row per server and concurrency, a column per gated metric,
    each cell the change and its verdict (bold when failing), failing rows and columns first."""
    metrics, rows = sections.verdict_matrix(doc)
    if not rows:
        return []
    body = []
    for server, concurrency, cells in rows:
        texts = []
        for metric in metrics:
            cell = cells.get(metric)
            if cell is None:
                texts.append("")
                continue
            status = STATUS_MARK.get(cell.status, f"**{cell.status}**" if cell.rank == 0 else cell.status)
            texts.append(status if cell.text == cell.status else f"{cell.text} {status}")
        body.append([server, str(concurrency), *texts])
    return table(["server", "conc", *metrics], body, right=range(1, len(metrics) + 2))


def _gate(section: sections.GateSection) -> list[str]:
    lines = [f"### {OUTCOME_MARK.get(section.outcome, section.outcome)}: {section.title}", ""]
    if section.message and not section.rows:
        return [*lines, section.message.splitlines()[0], ""]
    rows = []
    for status, row in zip(section.statuses, section.rows):
        rows.append([*row[:-1], STATUS_MARK.get(status, status)])
    lines += table(sections.VERDICT_HEADER, rows, right=(1, 2, 3, 4, 5))
    if section.explanation:
        lines += ["", *(f"> {line.strip()}  " for line in section.explanation)]
    if section.hints:
        lines += ["", *(f"- {hint}" for hint in section.hints)]
    return [*lines, ""]


def markdown_summary(doc: Doc, plots: Sequence[str] = (), plots_note: str | None = None) -> str:
    """The summary of a report document. `plots`: the plot files' paths relative to the
    Markdown file; `plots_note`: said instead when there are none (e.g. how to get them)."""
    lines = ["# pytest-llmperf report", "", banner_line(doc), ""]
    if doc.get("servers_started"):
        lines += [f"servers started, one at a time: {', '.join(doc['servers_started'])}", ""]
    grid = matrix(doc)
    if grid:
        lines += ["## Verdict matrix", "", *grid, ""]
    gates = sections.gate_sections(doc)
    if gates:
        lines += ["## Verdicts", ""]
        for section in gates:
            lines += _gate(section)
    capacities = doc.get("capacities") or []
    if capacities:  # llmperf.capacity(): one line per search, then the gate's where judged
        lines += ["## Capacity at SLOs", ""]
        for found in capacities:
            verdict = f"; {found['verdict']}" if found.get("verdict") else ""
            lines.append(f"- `{found['server']}` ({found['test']}): {found['line']}{verdict}")
        lines.append("")
    lines += ["## Plots", ""]
    if plots:
        lines += [f"- [{path}]({path})" for path in plots]
        lines += ["", "report.html shows them inline, with the tables."]
    else:
        lines.append(plots_note or "no plots")
    lines.append("")
    header, rows = sections.measured_table(doc)
    if rows:
        lines += ["## Measured", ""]
        lines += table(header, rows, right=range(1, len(header)))
        lines.append("")
        if any(row[0].strip().startswith("published") for row in rows):
            lines += [f"_{PUBLISHED_HEADER}: figures from a published run, never gating_", ""]
    notes = sections.notes(doc)
    if notes:
        lines += ["## Notes", "", *(f"- {note}" for note in notes), ""]
    header, rows = sections.provenance_table(doc)
    if rows:
        lines += ["## Provenance", "", *table(header, rows), ""]
    return "\n".join(lines).rstrip() + "\n"
