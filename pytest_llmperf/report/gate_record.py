"""A gate's Judgement in words: the GateRecord the terminal summary, the reports and a
failing test's message read (the verdict table with its title, faults, explanation,
cross-check lines and output canary), and a failure's one-line headline."""

from __future__ import annotations

from pytest_llmperf.baselines.judgement import GateRecord, Judgement
from pytest_llmperf.metrics.failures import ErrorBudget
from pytest_llmperf.report.crosscheck import canary_failure, check_lines
from pytest_llmperf.report.explain import explanation
from pytest_llmperf.report.table import format_verdict_table, verdict_line


def gate_record(judgement: Judgement, changed_outputs: ErrorBudget | None = None) -> GateRecord:
    """The record of one assertion; `changed_outputs`: --llmperf-changed-outputs (the canary's budget)."""
    record = GateRecord(
        judgement.nodeid,
        judgement.server,
        judgement.concurrency,
        judgement.baseline,
        list(judgement.verdicts),
        judgement.outcome,
        judgement.message,
    )
    if judgement.message:  # recorded, refused or not recorded: said in full
        return record
    entry = judgement.entry
    if entry is not None:
        _explain(record, judgement)
        if judgement.checked:
            record.checks = check_lines(
                judgement.outputs, entry.requests is not None, entry.outputs is not None, changed_outputs
            )
    record.message = format_verdict_table(
        judgement.verdicts, title=judgement.title, faults=judgement.faults, explanation=record.explanation
    )
    if record.checks:
        record.message += "\n" + "\n".join(record.checks)
    canary = canary_failure(judgement.outputs, changed_outputs) if judgement.canary else None
    if canary:
        record.message += f"\n{canary}"
    for note in judgement.notes:
        record.message += f"\n{note}"
    return record


def headline(judgement: Judgement, changed_outputs: ErrorBudget | None = None) -> str | None:
    """A failing judgement in one line (pytest's short summary); None: its message's first line."""
    if judgement.failing:
        return verdict_line(judgement.failing)
    return canary_failure(judgement.outputs, changed_outputs) if judgement.canary else None


def _explain(record: GateRecord, judgement: Judgement) -> None:
    """The baseline's figures on the record; under a failing or improved table, what
    changed between the baseline's provenance and the run's (report/explain.py)."""
    entry = judgement.entry
    assert entry is not None
    record.baseline_figures = entry.figures
    record.baseline_provenance = dict(entry.provenance)
    if not judgement.explain:
        return
    # An invalid run's figures explain nothing; what changed may (a new image that crashes).
    lines, changes, attribution = explanation(
        entry.provenance, judgement.provenance, record.baseline_figures, judgement.figures, judgement.speculative
    )
    record.explanation = lines
    record.changes = [change.describe() for change in changes]
    record.attribution = attribution.to_dict() if attribution is not None else None
