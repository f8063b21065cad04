"""--llmperf-report DIR: the report folder (report.json, summary.md, report.html, plots/*.svg).

A path ending in `.json` keeps its old meaning, the JSON document alone. Every file is
written atomically, and plots this report no longer draws are removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmperf.report.html import html_report
from pytest_llmperf.report.json_report import write_report
from pytest_llmperf.report.markdown import markdown_summary
from pytest_llmperf.report.plots import MISSING, available, render_plots
from pytest_llmperf.util.files import atomic_write_text

JSON_NAME = "report.json"
HTML_NAME = "report.html"
MARKDOWN_NAME = "summary.md"
PLOTS_DIR = "plots"


@dataclass
class ReportFiles:
    json: Path
    html: Path | None = None
    markdown: Path | None = None
    plots: list[Path] = field(default_factory=list)
    plots_missing: str | None = None  # why there are no plots (matplotlib absent)
    plot_errors: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """The terminal's line: where the report is."""
        if self.html is None:
            return f"full report: {self.json} (JSON only; give --llmperf-report a folder for report.html and plots)"
        text = f"report: {self.html} (with {MARKDOWN_NAME}, {JSON_NAME}"
        text += f", {len(self.plots)} plots in {PLOTS_DIR}/)" if self.plots else ")"
        if self.plots_missing:
            text += f"; {self.plots_missing}"
        return text


def json_only(path: Path) -> bool:
    return path.suffix.lower() == ".json"


def write_report_files(doc: Mapping[str, Any], path: Path) -> ReportFiles:
    """Write the report for `doc` at `path`: a folder, or a `.json` file alone."""
    if json_only(path):
        write_report(doc, path)
        return ReportFiles(json=path)
    path.mkdir(parents=True, exist_ok=True)
    html, markdown = path / HTML_NAME, path / MARKDOWN_NAME
    files = ReportFiles(json=path / JSON_NAME, html=html, markdown=markdown)
    write_report(doc, files.json)
    plots, errors = render_plots(doc)
    files.plot_errors = [f"{e.name}: {e.error}" for e in errors]
    if not available():
        files.plots_missing = MISSING
    folder = path / PLOTS_DIR
    if plots:
        folder.mkdir(exist_ok=True)
    for plot in plots:
        target = folder / f"{plot.name}.svg"
        atomic_write_text(target, '<?xml version="1.0" encoding="utf-8" standalone="no"?>\n' + plot.svg)
        files.plots.append(target)
    if folder.is_dir():
        for stale in folder.glob("*.svg"):
            if stale not in files.plots:
                stale.unlink()
    relative = [f"{PLOTS_DIR}/{p.name}" for p in files.plots]
    atomic_write_text(markdown, markdown_summary(doc, relative, files.plots_missing))
    atomic_write_text(html, html_report(doc, plots, errors, files.plots_missing))
    return files
