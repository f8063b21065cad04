"""A flagged cell read again at once on fresh runs (docs/verdicts.md, "A flagged cell is
read again at once"), where the night's shift of the box cancels: an MTP speedup on fresh
MTP + base pairs (the shift moves both servers alike, and their ratio drops it), and any
cell of a paired session on fresh blocks of OLD and NEW (both images share the night). A
look in the same session is then as independent as the next night's."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pytest_llmperf.baselines.compare import Status, Verdict, clears_at_pass, reads_it_again
from pytest_llmperf.measuring.measured import MeasuredRun, Samples
from pytest_llmperf.metrics.registry import SPEEDUP

CONFIRMING_RUNS = 3  # the fresh MTP + base pairs, or paired blocks, a flagged cell is read again on


def flagged_metrics(verdicts: Sequence[Verdict], needed: int) -> list[str]:
    """The metrics flagged at the pass confidence, after --llmperf-confirm (`needed`: the
    sessions before that must agree): suspect, or inconclusive where the change clears the
    tolerance at the pass confidence (with nothing to confirm, inconclusive stays so)."""
    return [
        v.metric
        for v in verdicts
        if v.status == Status.SUSPECT or (needed > 0 and v.status == Status.INCONCLUSIVE and clears_at_pass(v))
    ]


def fresh_samples(run: MeasuredRun, base: MeasuredRun | None, names: Sequence[str], last: int) -> Samples:
    """The samples of `names` from the `last` runs of `run` alone (a speedup: its last pairs with `base`)."""
    return {
        name: (
            run.speedup_samples(base, last=last)
            if name == SPEEDUP and base is not None
            else run.samples.get(name, [None])[-last:]
        )
        for name in names
    }


def read_again(
    extend: Callable[..., bool],
    runs: Sequence[MeasuredRun],
    flagged: Sequence[str],
    judge: Callable[[int], list[Verdict]],
    fresh: str,
) -> tuple[dict[str, list[str]], str]:
    """`flagged` (suspect, or beyond the tolerance at the pass confidence) read again on
    CONFIRMING_RUNS fresh runs of each of `runs` (a speedup's MTP and base; `fresh` names
    what one such run is: "MTP + base pair", "paired block") made by `extend` (the gate's
    Repeater, beyond --llmperf-max-repetitions), `judge(made)` judging the last `made` alone:
    each flagged metric's outcome of that look, as a session before would have given it
    (reads_it_again), and the note saying so."""
    why = f"{', '.join(flagged)} flagged, read again on a fresh {fresh}"
    made = 0
    while made < CONFIRMING_RUNS and all(extend(run, why, confirming=True) for run in runs):
        made += 1
    if not made:
        return {}, f"{', '.join(flagged)}: flagged, not read again: no fresh {fresh} could be made"
    looks = [v for v in judge(made) if v.metric in flagged]
    again = {v.metric: [(Status.REGRESSED if reads_it_again(v) else v.status).value] for v in looks}
    said = "; ".join(f"{v.metric} {_change(v)} ({'reads it' if reads_it_again(v) else str(v.status)})" for v in looks)
    return again, f"read again at once on {made} fresh {fresh}(s): {said}"


def _change(verdict: Verdict) -> str:
    """A verdict's measured value against its baseline, as a signed percentage."""
    if verdict.measured is None or not verdict.baseline:
        return "no value"
    return f"{verdict.measured / verdict.baseline - 1:+.1%}"


def with_look(earlier: Callable[[str, int], list[str]], again: dict[str, list[str]]) -> Callable[[str, int], list[str]]:
    """`earlier` (the last sessions' outcomes of a metric, oldest first) with the look read
    again as the newest of them."""
    return lambda metric, count: (earlier(metric, count) + again.get(metric, []))[-count:]
