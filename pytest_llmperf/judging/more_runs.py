"""Whether auto repetitions make another run: the verdict rule's `wanting_another` read
over the measurer's repetition policy (the gate's Repeater). The measurer only makes the
run it is asked for; what a verdict asks of it is decided here (docs/verdicts.md)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pytest_llmperf.baselines.compare import Status, Verdict, wanting_another
from pytest_llmperf.measuring.measured import MeasuredRun
from pytest_llmperf.measuring.measurer import Measurer


class MoreRuns:
    """The session's auto repetitions: another run while a verdict wants one, made by the measurer."""

    def __init__(self, measurer: Measurer) -> None:
        self.measurer = measurer

    def worth_another(
        self, run: MeasuredRun, verdicts: Sequence[Verdict], read_before: Collection[str] = ()
    ) -> str | None:
        """Why auto repetitions add a run (for the log), or None to stop: a verdict is decidable
        within the budget, or regressed where the look before (`read_before`: the metrics it
        read `regressed`) did not: read again on a fresh start before it is reported."""
        options, policy = self.measurer.options, self.measurer.policy
        if options.repetitions != "auto":
            return None
        runs = len(run.results)
        asking = wanting_another(
            verdicts,
            runs,
            options.max_repetitions,
            by_change=policy.stop_on_change and runs >= 2,
            project=policy.project_noise,
            read_before=read_before,
        )
        if not asking:
            return None
        regressed = [v.metric for v in verdicts if v.metric in asking and v.status == Status.REGRESSED]
        return f"{', '.join(regressed)} regressed, read again" if regressed else "inconclusive"

    def extend(
        self, measured: MeasuredRun, why: str = "inconclusive", *, stalled: bool = False, confirming: bool = False
    ) -> bool:
        return self.measurer.extend(measured, why, stalled=stalled, confirming=confirming)
