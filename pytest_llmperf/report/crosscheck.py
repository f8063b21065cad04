"""The cross-checks in words (docs/verdicts.md, "Cross-checks"): why a run whose token
counts disagree, or whose outputs stopped early, cannot be judged; and the output canary's
line beside the verdict."""

from __future__ import annotations

from pytest_llmperf.baselines.crosscheck import EOS_BOUND, LENGTH_BOUND, MIN_SHARED, OutputChange
from pytest_llmperf.metrics.crosscheck import TOKEN_SLACK_MIN, TOKEN_SLACK_SHARE, TokenAccount
from pytest_llmperf.metrics.failures import ErrorBudget

OLD_BASELINE_NOTE = (
    "the baseline has no output lines (recorded by an older version): the EOS share and the output "
    "canary are not checked; re-record it to check them"
)
OLDEST_BASELINE_NOTE = (
    "the baseline has no per-request lines (recorded by an older version): output lengths, the EOS "
    "share and the output canary are not checked; re-record it to check them"
)


def token_mismatch(account: TokenAccount | None) -> str | None:
    """Why a run's output tokens cannot be trusted, with the three counts; None when they agree."""
    if account is None or not (account.counter_off or account.usage_short):
        return None
    counter = "not read" if account.counter is None else f"+{account.counter:,.0f} over the window"
    numbers = (
        f"usage {account.usage:,} output tokens, vllm:generation_tokens_total {counter}, "
        f"the client {account.events:,} token events (at least one token each)"
    )
    if account.unreported:
        high = account.counter_high
        numbers += (
            f"; {account.unreported} request(s) without usage (failed or cut at the cap) received "
            f"{account.unreported_low:,} token events, so the counter should read {account.counter_low:,.0f}"
            + (f" to {high:,.0f}" if high is not None else " or more")
        )
    bound = f"bound {TOKEN_SLACK_SHARE:.1%} of usage, at least {TOKEN_SLACK_MIN} tokens"
    if account.usage_short:
        what = (
            f"usage counted {account.events_over:,} tokens fewer than the token events received ({bound}): "
            "the server's usage under-reports, so every token figure is low; fix the server's usage (or a "
            "proxy in between that rewrites it)"
        )
    elif account.counter is not None and account.counter < account.counter_low:
        what = (
            f"the engine's counter holds fewer tokens than usage reports ({bound}): usage over-reports (every "
            "token figure is high) or the counter misses some; check the server's usage and its /metrics "
            "(a proxy in between that rewrites usage, or a /metrics of another server)"
        )
    else:
        what = (
            f"the engine generated more tokens than the requests report ({bound}): another client used the "
            "server during the run, or usage under-reports; measure on a server nobody else uses"
        )
    return f"output tokens disagree: {numbers}: {what}; figures that rest on usage judge nothing here"


def output_change_reason(change: OutputChange | None) -> str | None:
    """Why a run whose output lengths or EOS share moved against the baseline's cannot be
    judged; None when they agree (or too few prompts were shared to tell)."""
    if change is None or not (change.lengths_moved or change.eos_moved):
        return None
    parts = []
    length = change.length_change
    if length is not None:
        parts.append(
            f"{change.measured_tokens:,} output tokens against the baseline's {change.baseline_tokens:,} "
            f"({length:+.1%}, bound {LENGTH_BOUND:.0%})"
        )
    eos = change.eos_change
    if eos is not None and change.finish_compared:
        parts.append(
            f"{change.measured_stops} of {change.finish_compared} replies ended with EOS against the "
            f"baseline's {change.baseline_stops} ({eos * 100:+.0f} points, bound {EOS_BOUND * 100:.0f})"
        )
    shorter = (length or 0.0) < 0 or (eos or 0.0) > 0
    how = (
        "the server stops early: shorter replies do less work, which reads as faster per request"
        if shorter
        else "the server's replies run longer: more work per request, which reads as slower"
    )
    return (
        f"outputs changed length on the {change.shared} prompts both runs completed: {'; '.join(parts)}; "
        f"{how}, not a change of the engine; if the new lengths are right (a new chat template or "
        "tokenizer), re-record with --update-baselines, else the image has a correctness problem"
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
