"""What CI systems read: a GitHub Actions step summary and JUnit XML properties.

`append_step_summary` appends summary.md to `$GITHUB_STEP_SUMMARY` (once, on the xdist
controller); `junit_properties` gives a test's figures and verdicts for `item.user_properties`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmperf.baselines.compare import Verdict
from pytest_llmperf.metrics.registry import active, format_value
from pytest_llmperf.report.markdown import markdown_summary
from pytest_llmperf.report.table import format_change

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
PLOTS_NOTE = "the plots are in the report folder's report.html (--llmperf-report DIR)"


def append_step_summary(doc: Mapping[str, Any], environ: Mapping[str, str]) -> Path | None:
    """Append the Markdown summary of `doc` to the file `$GITHUB_STEP_SUMMARY` names (GitHub
    Actions shows it on the run's page); None, writing nothing, when it is not set."""
    where = environ.get(STEP_SUMMARY_ENV)
    if not where:
        return None
    path = Path(where)
    with path.open("a", encoding="utf-8") as out:
        out.write(markdown_summary(doc, plots_note=PLOTS_NOTE) + "\n")
    return path


def junit_properties(
    runs: Sequence[tuple[str, int, Mapping[str, Any]]],
    gates: Sequence[tuple[str, int, str, Sequence[Verdict]]],
) -> list[tuple[str, str]]:
    """One test's JUnit properties: `llmperf.<server>@<conc>.<figure>` per key figure of the
    metric registry a run has (the seeds' headline ones), then `...outcome` and per gated
    metric its value, `.verdict`, `.baseline`, `.change`."""
    props: dict[str, str] = {}
    key_figures = active().key_figures()
    for server, concurrency, figures in runs:
        label = f"llmperf.{server}@{concurrency}"
        for name in key_figures:
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
