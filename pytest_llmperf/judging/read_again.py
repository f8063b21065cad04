"""A flagged MTP speedup read again at once on fresh MTP + base pairs (docs/verdicts.md,
"A flagged speedup is read again at once"): the night's shift of the box moves both
servers alike and cancels in their ratio, so a look in the same session is as independent
as the next night's."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pytest_llmperf.baselines.compare import Status, Verdict, clears_at_pass, reads_it_again
from pytest_llmperf.measuring.measured import MeasuredRun, Samples
from pytest_llmperf.metrics.registry import SPEEDUP

SPEEDUP_CONFIRMING_PAIRS = 3  # the fresh MTP + base pairs a flagged speedup is read again on


def flagged_metrics(verdicts: Sequence[Verdict], needed: int) -> list[str]:
    """The metrics flagged at the pass confidence, after --llmperf-confirm (`needed`: the
    sessions before that must agree): suspect, or inconclusive where the change clears the
    tolerance at the pass confidence (with nothing to confirm, inconclusive stays so)."""
    return [
        v.metric
        for v in verdicts
        if v.status == Status.SUSPECT or (needed > 0 and v.status == Status.INCONCLUSIVE and clears_at_pass(v))
    ]


def read_again(
    extend: Callable[..., bool],
    run: MeasuredRun,
    base: MeasuredRun,
    flagged: Sequence[str],
    judge: Callable[[Samples], list[Verdict]],
) -> tuple[dict[str, list[str]], str]:
    """`flagged` (suspect, or beyond the tolerance at the pass confidence) read again on
    SPEEDUP_CONFIRMING_PAIRS fresh pairs made by `extend` (the gate's Repeater, beyond
    --llmperf-max-repetitions) and judged alone by `judge`: each flagged metric's outcome of
    that look, as a session before would have given it (reads_it_again), and the note saying so."""
    why = f"{', '.join(flagged)} flagged, read again on fresh MTP + base pairs"
    made = 0
    while made < SPEEDUP_CONFIRMING_PAIRS and extend(run, why, confirming=True):
        if not extend(base, why, confirming=True):
            break
        made += 1
    if not made:
        return {}, f"{', '.join(flagged)}: flagged, not read again: no fresh MTP + base pair could be made"
    looks = [v for v in judge({SPEEDUP: run.speedup_samples(base, last=made)}) if v.metric in flagged]
    again = {v.metric: [(Status.REGRESSED if reads_it_again(v) else v.status).value] for v in looks}
    said = "; ".join(f"{v.metric} {_change(v)} ({'reads it' if reads_it_again(v) else str(v.status)})" for v in looks)
    return again, f"read again at once on {made} fresh MTP + base pair(s): {said}"


def _change(verdict: Verdict) -> str:
    """A verdict's measured value against its baseline, as a signed percentage."""
    if verdict.measured is None or not verdict.baseline:
        return "no value"
    return f"{verdict.measured / verdict.baseline - 1:+.1%}"


def with_look(earlier: Callable[[str, int], list[str]], again: dict[str, list[str]]) -> Callable[[str, int], list[str]]:
    """`earlier` (the last sessions' outcomes of a metric, oldest first) with the look read
    again as the newest of them."""
    return lambda metric, count: (earlier(metric, count) + again.get(metric, []))[-count:]
