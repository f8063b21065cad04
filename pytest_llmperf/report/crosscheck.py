"""The cross-checks in words (docs/verdicts.md, "Cross-checks"): the output canary's line
beside the verdict and the checks a baseline's lines could not run. Why a run whose token
counts disagree, or whose outputs stopped early, cannot be judged is said where the check
is made (metrics/crosscheck.token_mismatch, baselines/crosscheck.output_change_reason)."""

from __future__ import annotations

from pytest_llmperf.baselines.crosscheck import MIN_SHARED, OutputChange
from pytest_llmperf.baselines.crosscheck import output_change_reason as output_change_reason
from pytest_llmperf.metrics.crosscheck import token_mismatch as token_mismatch
from pytest_llmperf.metrics.failures import ErrorBudget

OLD_BASELINE_NOTE = (
    "the baseline has no output lines (recorded by an older version): the EOS share and the output "
    "canary are not checked; re-record it to check them"
)
OLDEST_BASELINE_NOTE = (
    "the baseline has no per-request lines (recorded by an older version): output lengths, the EOS "
    "share and the output canary are not checked; re-record it to check them"
)


def canary_line(change: OutputChange | None, budget: ErrorBudget | None = None) -> str | None:
    """The line "outputs changed for N of M prompts" beside the verdict; None without output
    lines. `budget`: --llmperf-changed-outputs (None: the canary gates nothing)."""
    if change is None or change.compared is None or not change.compared:
        return None
    gate = "canary, not gated" if budget is None else f"canary, at most {budget} by --llmperf-changed-outputs"
    if not change.changed:
        return f"outputs: unchanged for all {change.compared} prompts (temperature 0; {gate})"
    shown = ", ".join(str(i) for i in change.changed_indices)
    more = ", ..." if (change.changed or 0) > len(change.changed_indices) else ""
    return (
        f"outputs changed for {change.changed} of {change.compared} prompts at temperature 0 (prompt index "
        f"{shown}{more}; {gate}): a few are batch nondeterminism on a GPU, many mean the model "
        "answers differently now"
    )


def canary_failure(change: OutputChange | None, budget: ErrorBudget | None) -> str | None:
    """Why the test fails on its changed outputs (--llmperf-changed-outputs), or None."""
    if change is None or not change.changed_beyond(budget):
        return None
    return (
        f"outputs changed for {change.changed} of {change.compared} prompts, beyond --llmperf-changed-outputs "
        f"{budget}: the model answers differently from the baseline; if the new outputs are right, re-record "
        "with --update-baselines"
    )


def check_lines(
    change: OutputChange | None, has_requests: bool, has_outputs: bool, budget: ErrorBudget | None = None
) -> list[str]:
    """The lines printed beside a verdict: the canary (`budget`: --llmperf-changed-outputs),
    and why a check did not run."""
    if not has_requests:
        return [OLDEST_BASELINE_NOTE]
    lines = []
    if (line := canary_line(change, budget)) is not None:
        lines.append(line)
    if change is not None and not change.judged:
        lines.append(
            f"output lengths: not judged, {change.shared} prompts completed by both runs (fewer than {MIN_SHARED})"
        )
    if not has_outputs:
        lines.append(OLD_BASELINE_NOTE)
    return lines
