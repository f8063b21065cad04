"""report.html: one self-contained page, opened from disk with no network.

Inline CSS and SVG, no JavaScript or fetched resource. In reading order: a red or green
banner with the counts, the verdict matrix, the verdict tables (failing tests first and
open), then the plots, the measured figures, notes and one provenance block per server.
Every table fits a 1280 px window; under 640 px each table row becomes a block of its own
(a verdict table's row: the metric and its verdict on the first line, the figures under
them), so a phone reads it without scrolling sideways.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from pytest_llmperf.report import sections
from pytest_llmperf.report.markdown import OUTCOME_MARK
from pytest_llmperf.report.plots import Plot, PlotError
from pytest_llmperf.report.table import PUBLISHED_HEADER

Doc = Mapping[str, Any]

# Below this width every table row becomes a block (NARROW in the CSS).
NARROW_PX = 640

CSS = """
:root { --fail: #b3261e; --warn: #8a6d00; --ok: #1e6b32; --muted: #5f6368; --line: #dadce0; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; color: #202124;
       background: #fff; overflow-wrap: anywhere; }
header, main, footer { max-width: 1240px; margin: 0 auto; padding: 0 16px; }
header { padding-top: 12px; }
h1 { font-size: 1.1em; margin: 0.2em 0 0.5em; color: var(--muted); font-weight: 600; }
h2 { font-size: 1.2em; border-bottom: 1px solid var(--line); padding-bottom: 4px; margin-top: 1.6em; }
h3 { font-size: 1em; margin: 0 0 4px; }
.banner { border-radius: 8px; padding: 10px 16px; color: #fff; background: var(--muted); }
.banner.fail { background: var(--fail); }
.banner.pass { background: var(--ok); }
.banner p { margin: 2px 0; }
.banner .headline { font-size: 1.35em; font-weight: 700; }
.banner .headline b { letter-spacing: 0.04em; margin-right: 0.4em; }
.banner .counts span { display: inline-block; margin-right: 1.1em; }
.banner .meta { opacity: 0.92; font-size: 0.9em; }
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
th { vertical-align: bottom; }
td.num, th.num { text-align: right; }
table.wrap th { white-space: normal; overflow-wrap: normal; }
tr.regressed td, tr.invalid td, tr.no-data td, tr.missing-baseline td { color: var(--fail); font-weight: 600; }
tr.improved td { color: var(--ok); font-weight: 600; }
tr.inconclusive td, tr.suspect td { color: var(--warn); }
tr.published td { color: var(--muted); font-style: italic; }
table.matrix tbody th { white-space: nowrap; vertical-align: middle; }
.at { display: none; font-weight: 400; }
table.matrix thead th { white-space: normal; overflow-wrap: normal; text-align: right; }
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
.provenance { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 380px), 1fr)); gap: 12px; }
.provenance > div { border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; }
.provenance dl { display: grid; grid-template-columns: minmax(6em, max-content) minmax(0, 1fr); gap: 2px 12px;
                 margin: 0; font-size: 0.92em; }
.provenance dt { color: var(--muted); }
.provenance dd { margin: 0; }
footer { color: var(--muted); font-size: 0.85em; padding: 24px 16px; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 0.92em; }
@media (max-width: NARROWpx) {
  header, main, footer { padding: 0 10px; }
  table.stack, table.stack tbody, table.stack td, table.stack th { display: block; }
  table.stack { width: 100%; }
  table.stack thead { display: none; }
  table.stack tr { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 2px 8px;
                   border-bottom: 1px solid var(--line); padding: 6px 0; }
  table.stack td, table.stack th { border: 0; padding: 0 4px; white-space: normal; text-align: left; }
  table.stack td:empty { display: none; }
  table.stack [data-label]::before { content: attr(data-label); display: block; color: var(--muted);
                                     font-weight: 400; font-style: normal; font-size: 0.78em; }
  table.stack .key { grid-column: 1 / -1; font-weight: 600; }
  table.verdict .key { grid-column: 1 / 3; }
  table.verdict tr { grid-template-columns: minmax(0, 1fr) minmax(0, 1fr) max-content; }
  table.verdict .first { grid-column: 3; grid-row: 1; text-align: right; white-space: nowrap; }
  table.matrix tr { grid-template-columns: repeat(auto-fill, minmax(8.5em, 1fr)); }
  table.matrix th[scope=row] { grid-column: 1 / -1; white-space: normal; }
  table.stack .at { display: inline; }
  table.stack .conc { display: none; }
  table.matrix td.v { padding: 0; text-align: left; }
  table.matrix td.v::before { padding: 2px 8px 0; font-size: 0.72em; }
  table.matrix td.v a { padding: 0 8px 3px; }
}
""".replace("NARROW", str(NARROW_PX))


def _attrs(classes: Sequence[str], label: str | None = None) -> str:
    cls = " ".join(c for c in classes if c)
    out = f' class="{escape(cls)}"' if cls else ""
    return out + (f' data-label="{escape(label)}"' if label else "")


def _table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    right: Sequence[int] = (),
    classes: Sequence[str] = (),
    first: int | None = None,
    at: int | None = None,
    kind: str = "",
) -> str:
    """A table that stacks on a narrow screen: column 0 is each row's key, column `first`
    (the verdict) goes beside it, column `at` (a concurrency) joins the key as "@ 8", and
    every other cell is labelled with its header there."""
    head = "".join(f"<th{_attrs(['num' if i in right else ''])}>{escape(str(h))}</th>" for i, h in enumerate(header))
    body = []
    for j, row in enumerate(rows):
        cells = []
        for i, c in enumerate(row):
            role = "key" if i == 0 else "first" if i == first else "conc" if i == at else "more"
            label = None if role != "more" or not str(c) else str(header[i])
            text = escape(str(c))
            if i == 0 and at is not None and str(row[at]):
                text += f'<span class="at"> @ {escape(str(row[at]))}</span>'
            cells.append(f"<td{_attrs(['num' if i in right else '', role], label)}>{text}</td>")
        cls = classes[j] if j < len(classes) and classes[j] else ""
        body.append(f"<tr{_attrs([cls])}>{''.join(cells)}</tr>")
    return (
        f'<div class="scroll"><table{_attrs(["stack wrap", kind])}><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _banner(doc: Doc) -> str:
    b = sections.banner(doc)
    tests = "".join(f"<span>{n} {escape(o)}</span>" for o, n in b.tests)
    cells = sum(n for _, n in b.cells)
    cell_counts = ", ".join(f"{n} {escape(s)}" for s, n in b.cells)
    servers = len(dict.fromkeys(str(g["server"]) for g in doc.get("verdicts", [])))
    meta = [f"target {escape(str(doc.get('target') or '?'))}", f"profile {escape(str(doc.get('profile')))}"]
    if servers:
        meta.append(f"{servers} server{'s' if servers != 1 else ''}")
    if cells:
        meta.append(f"{cells} gated cell{'s' if cells != 1 else ''}: {cell_counts}")
    meta.append(f"plugin {escape(str(doc.get('plugin_version', '')))}")
    return (
        f'<div id="banner" class="banner {b.state}" role="status">'
        f'<p class="headline"><b>{escape(b.word)}</b> {escape(b.headline)}</p>'
        + (f'<p class="counts">{tests}</p>' if b.tests else "")
        + f'<p class="meta">{" · ".join(meta)}</p></div>'
    )


def _cell(c: sections.MatrixCell | None, metric: str) -> str:
    if c is None:
        return "<td></td>"
    words = f"{escape(c.text)}<small>{escape(c.status)}</small>"
    return f'<td class="v {escape(c.status)}" data-label="{escape(metric)}"><a href="#{c.anchor}">{words}</a></td>'


def _matrix(doc: Doc) -> str:
    metrics, rows = sections.verdict_matrix(doc)
    if not rows:
        return ""
    head = "".join(f"<th>{escape(m).replace('_', '_<wbr>')}</th>" for m in metrics)  # wraps at _
    body = "".join(
        f'<tr><th scope=row>{escape(server)}<span class="at"> @ {escape(str(concurrency))}</span></th>'
        f'<td class="num conc">'
        f"{escape(str(concurrency))}</td>" + "".join(_cell(cells.get(m), m) for m in metrics) + "</tr>"
        for server, concurrency, cells in rows
    )
    return (
        '<section id="matrix"><h2>Verdict matrix</h2><p class="hints">Each gated metric per server and '
        "concurrency: its change against the baseline and its verdict, failing rows and columns first; a cell "
        'links to its test\'s table.</p><div class="scroll"><table class="matrix stack"><thead><tr><th>server</th>'
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
        header = sections.VERDICT_HEADER
        parts.append(
            _table(
                header,
                section.rows,
                right=(1, 2, 3, 4, 5),
                classes=section.statuses,
                first=len(header) - 1,
                kind="verdict",
            )
        )
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


def _provenance(doc: Doc) -> str:
    blocks = sections.provenance_blocks(doc)
    if not blocks:
        return ""
    parts = ['<section id="provenance"><h2>Provenance</h2><div class="provenance">']
    for block in blocks:
        rows = "".join(f"<dt>{escape(label)}</dt><dd>{escape(value)}</dd>" for label, value in block.rows)
        parts.append(f"<div><h3>{escape(block.title)}</h3><dl>{rows}</dl></div>")
    parts.append("</div></section>")
    return "".join(parts)


def html_report(
    doc: Doc, plots: Sequence[Plot] = (), errors: Sequence[PlotError] = (), plots_missing: str | None = None
) -> str:
    """The page. `plots_missing`: what to say in place of the plots (matplotlib absent)."""
    head = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>pytest-llmperf report: {escape(str(doc.get('target') or ''))}</title>"
        f"<style>{CSS}</style></head><body>"
    )
    body = [f"<header><h1>pytest-llmperf report</h1>{_banner(doc)}</header><main>", _matrix(doc)]
    gates = sections.gate_sections(doc)
    if gates:
        body.append('<section id="verdicts"><h2>Verdicts</h2>' + "".join(_gate(s) for s in gates) + "</section>")
    body.append(_plots(plots, errors, plots_missing))
    header, rows = sections.measured_table(doc)
    if rows:
        classes = ["published" if r[0].strip().startswith("published") else "" for r in rows]
        body.append(
            '<section id="measured"><h2>Measured</h2>'
            + _table(header, rows, right=range(1, len(header)), classes=classes, at=1, kind="measured")
            + f"<p class=hints>{escape(PUBLISHED_HEADER)}: figures from a published run, shown for "
            "context, never gating.</p></section>"
        )
    notes = sections.notes(doc)
    if notes:
        body.append('<section id="notes"><h2>Notes</h2><ul>' + "".join(f"<li>{escape(n)}</li>" for n in notes))
        body.append("</ul></section>")
    body.append(_provenance(doc))
    body.append(
        "</main><footer>pytest-llmperf "
        f"{escape(str(doc.get('plugin_version', '')))}: every figure is recomputable from "
        "<code>report.json</code> beside this page (raw per-request records, /metrics pages).</footer>"
    )
    return head + "".join(body) + "</body></html>\n"
