"""report.html: one self-contained page, opened from disk with no network.

Inline CSS and SVG, no JavaScript or fetched resource. The verdict matrix, the plots, then
the details (failing tests first and open); readable on a phone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from pytest_llmperf.report import sections
from pytest_llmperf.report.markdown import OUTCOME_MARK, outcome_line
from pytest_llmperf.report.plots import Plot, PlotError
from pytest_llmperf.report.table import PUBLISHED_HEADER

Doc = Mapping[str, Any]

CSS = """
:root { --fail: #b3261e; --warn: #8a6d00; --ok: #1e6b32; --muted: #5f6368; --line: #dadce0; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; color: #202124;
       background: #fff; overflow-wrap: anywhere; }
header, main, footer { max-width: 1180px; margin: 0 auto; padding: 0 16px; }
header { padding-top: 16px; }
h1 { font-size: 1.5em; margin: 0.2em 0; }
h2 { font-size: 1.2em; border-bottom: 1px solid var(--line); padding-bottom: 4px; margin-top: 1.6em; }
.outcome { font-size: 1.05em; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600; font-size: 0.85em;
         color: #fff; background: var(--muted); }
.badge.fail, .badge.refused { background: var(--fail); }
.badge.warn { background: var(--warn); }
.badge.pass, .badge.recorded { background: var(--ok); }
details.gate { border: 1px solid var(--line); border-radius: 6px; margin: 8px 0; padding: 4px 10px; }
details.gate.fail { border-color: var(--fail); }
details.gate > summary { cursor: pointer; font-weight: 600; padding: 4px 0; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 6px 0; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px; border-bottom: 1px solid var(--line); text-align: left; white-space: nowrap; }
td.num, th.num { text-align: right; }
tr.regressed td, tr.invalid td, tr.no-data td, tr.missing-baseline td { color: var(--fail); font-weight: 600; }
tr.improved td { color: var(--ok); font-weight: 600; }
tr.inconclusive td { color: var(--warn); }
tr.published td { color: var(--muted); font-style: italic; }
table.matrix th[scope=row] { position: sticky; left: 0; background: #fff; overflow-wrap: normal; }
@media (max-width: 600px) { table.matrix th[scope=row] { white-space: normal; min-width: 7em; } }
table.matrix thead th { white-space: normal; overflow-wrap: normal; vertical-align: bottom; text-align: right; }
table.matrix thead th:first-child { text-align: left; }
table.matrix td.v { padding: 0; text-align: right; }
td.v a { display: block; padding: 3px 10px; color: inherit; text-decoration: none; }
td.v small { display: block; font-size: 0.75em; }
td.v.pass, td.v.recorded { background: #e6f4ea; }
td.v.improved { background: #ceead6; color: var(--ok); font-weight: 600; }
td.v.inconclusive, td.v.suspect, td.v.warn { background: #fef7e0; color: var(--warn); }
td.v.regressed, td.v.invalid, td.v.no-data, td.v.missing-baseline, td.v.fail, td.v.refused {
    background: #fce8e6; color: var(--fail); font-weight: 600; }
.explain { background: #f8f9fa; border-left: 4px solid var(--fail); padding: 6px 10px; margin: 8px 0; }
.explain p { margin: 2px 0; }
.explain p.detail { color: var(--muted); font-size: 0.9em; }
.hints { color: var(--muted); }
figure { margin: 16px 0; }
figure svg { max-width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 0.9em; }
figcaption b { color: #202124; }
.missing { background: #fef7e0; padding: 8px 12px; border-radius: 6px; }
footer { color: var(--muted); font-size: 0.85em; padding: 24px 16px; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 0.92em; }
"""


def _table(
    header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = (), classes: Sequence[str] = ()
) -> str:
    def cells(tag: str, row: Sequence[str]) -> str:
        return "".join(
            f"<{tag}{' class=num' if i in right else ''}>{escape(str(c))}</{tag}>" for i, c in enumerate(row)
        )

    body = []
    for j, row in enumerate(rows):
        cls = classes[j] if j < len(classes) and classes[j] else ""
        body.append(f'<tr class="{escape(cls)}">{cells("td", row)}</tr>' if cls else f"<tr>{cells('td', row)}</tr>")
    return (
        f'<div class="scroll"><table><thead><tr>{cells("th", header)}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _cell(c: sections.MatrixCell | None) -> str:
    if c is None:
        return "<td></td>"
    words = f"{escape(c.text)}<small>{escape(c.status)}</small>"
    return f'<td class="v {escape(c.status)}"><a href="#{c.anchor}">{words}</a></td>'


def _matrix(doc: Doc) -> str:
    metrics, rows = sections.verdict_matrix(doc)
    if not rows:
        return ""
    head = "".join(f"<th>{escape(m).replace('_', '_<wbr>')}</th>" for m in metrics)  # wraps at _
    body = "".join(
        f"<tr><th scope=row>{escape(server)}</th><td class=num>{escape(str(concurrency))}</td>"
        + "".join(_cell(cells.get(m)) for m in metrics)
        + "</tr>"
        for server, concurrency, cells in rows
    )
    return (
        '<section id="matrix"><h2>Verdict matrix</h2><p class="hints">Each gated metric per server and '
        "concurrency: its change against the baseline and its verdict, failing rows and columns first; a cell "
        'links to its test\'s table.</p><div class="scroll"><table class="matrix"><thead><tr><th>server</th>'
        f"<th class=num>conc</th>{head}</tr></thead><tbody>{body}</tbody></table></div></section>"
    )


def _gate(section: sections.GateSection) -> str:
    open_ = " open" if section.noteworthy else ""
    badge = f'<span class="badge {escape(section.outcome)}">{escape(OUTCOME_MARK.get(section.outcome, ""))}</span>'
    parts = [
        f'<details id="{section.anchor}" class="gate {escape(section.outcome)}"{open_}>'
        f"<summary>{badge} {escape(section.title)}</summary>"
    ]
    if section.message and not section.rows:
        parts.append(f"<p>{escape(section.message)}</p>")
    if section.rows:
        parts.append(_table(sections.VERDICT_HEADER, section.rows, right=(1, 2, 3, 4, 5), classes=section.statuses))
    if section.explanation:
        lines = "".join(
            f'<p class="detail">{escape(line.strip())}</p>' if line.startswith(" ") else f"<p>{escape(line)}</p>"
            for line in section.explanation
        )
        parts.append(f'<div class="explain">{lines}</div>')
    if section.hints:
        parts.append('<ul class="hints">' + "".join(f"<li>{escape(h)}</li>" for h in section.hints) + "</ul>")
    parts.append("</details>")
    return "".join(parts)


def _plots(plots: Sequence[Plot], errors: Sequence[PlotError], missing: str | None) -> str:
    parts = ['<section id="plots"><h2>Plots</h2>']
    if missing:
        parts.append(f'<p class="missing">{escape(missing)}</p>')
    for plot in plots:
        parts.append(
            f'<figure id="plot-{escape(plot.name)}">{plot.svg}'
            f"<figcaption><b>{escape(plot.title)}</b>: {escape(plot.caption)} "
            f"(<code>plots/{escape(plot.name)}.svg</code>)</figcaption></figure>"
        )
    for error in errors:
        parts.append(f'<p class="missing">plot {escape(error.name)} could not be drawn: {escape(error.error)}</p>')
    parts.append("</section>")
    return "".join(parts)


def html_report(
    doc: Doc, plots: Sequence[Plot] = (), errors: Sequence[PlotError] = (), plots_missing: str | None = None
) -> str:
    """The page. `plots_missing`: what to say in place of the plots (matplotlib absent)."""
    outcome = escape(outcome_line(doc)).replace("**", "").replace("`", "")
    head = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>pytest-llmperf report: {escape(str(doc.get('target') or ''))}</title>"
        f"<style>{CSS}</style></head><body>"
    )
    body = [f'<header><h1>pytest-llmperf report</h1><p class="outcome">{outcome}</p></header><main>', _matrix(doc)]
    body.append(_plots(plots, errors, plots_missing))
    gates = sections.gate_sections(doc)
    if gates:
        body.append('<section id="verdicts"><h2>Verdicts</h2>' + "".join(_gate(s) for s in gates) + "</section>")
    header, rows = sections.measured_table(doc)
    if rows:
        classes = ["published" if r[0].strip().startswith("published") else "" for r in rows]
        body.append(
            '<section id="measured"><h2>Measured</h2>'
            + _table(header, rows, right=range(1, len(header)), classes=classes)
            + f"<p class=hints>{escape(PUBLISHED_HEADER)}: figures from a published run, shown for "
            "context, never gating.</p></section>"
        )
    notes = sections.notes(doc)
    if notes:
        body.append('<section id="notes"><h2>Notes</h2><ul>' + "".join(f"<li>{escape(n)}</li>" for n in notes))
        body.append("</ul></section>")
    header, rows = sections.provenance_table(doc)
    if rows:
        body.append('<section id="provenance"><h2>Provenance</h2>' + _table(header, rows) + "</section>")
    body.append(
        "</main><footer>pytest-llmperf "
        f"{escape(str(doc.get('plugin_version', '')))}: every figure is recomputable from "
        "<code>report.json</code> beside this page (raw per-request records, /metrics pages).</footer>"
    )
    return head + "".join(body) + "</body></html>\n"
