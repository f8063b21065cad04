"""A test's assertions: each judged by the gate, its Judgement put in words by report/
(a GateRecord the session keeps), then failed or warned as its outcome says."""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable, Mapping

from pytest_llmperf.baselines.judgement import GateRecord
from pytest_llmperf.baselines.outcome import InconclusiveWarning, Outcome, PerfFailure, SuspectWarning
from pytest_llmperf.judging.gate import NO_FAILURES, Gate
from pytest_llmperf.measuring.measured import MeasuredRun, Samples
from pytest_llmperf.metrics.failures import ErrorBudget, parse_budget
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.report.gate_record import gate_record, headline


class Assertions:
    """The session's assertions and their records, in the order made."""

    def __init__(self, gate: Gate, options: LlmperfOptions) -> None:
        self.gate = gate
        self.options = options
        self.records: list[GateRecord] = []

    def bind(
        self,
        run: MeasuredRun,
        nodeid: str,
        marker_tolerances: Mapping[str, str] | None = None,
        error_budget: ErrorBudget | str | None = None,
    ) -> MeasuredRun:
        """`run` (cached, shared between tests) as one test sees it: its assertions are
        judged for `nodeid` with the test's marker tolerances and error budget (else
        --llmperf-error-budget)."""
        judge = functools.partial(
            self.judge,
            nodeid=nodeid,
            marker_tolerances=dict(marker_tolerances or {}),
            error_budget=self.options.error_budget if error_budget is None else parse_budget(error_budget),
        )
        return dataclasses.replace(run, judge=judge)

    def judge(
        self,
        run: MeasuredRun,
        collect: Callable[[], Samples],
        tolerances: Mapping[str, str] | None = None,
        base: MeasuredRun | None = None,
        *,
        nodeid: str,
        marker_tolerances: Mapping[str, str] | None = None,
        error_budget: ErrorBudget = NO_FAILURES,
    ) -> None:
        """One assertion: PerfFailure where it fails, InconclusiveWarning where undecided under
        --llmperf-inconclusive warn, SuspectWarning where a regression waits for confirming."""
        judgement = self.gate.judge(
            run,
            collect,
            tolerances,
            base,
            nodeid=nodeid,
            marker_tolerances=marker_tolerances,
            error_budget=error_budget,
        )
        budget = self.options.changed_outputs
        record = gate_record(judgement, budget)
        self.records.append(record)
        if judgement.outcome in (Outcome.FAIL, Outcome.REFUSED):
            raise PerfFailure(record.message, headline=headline(judgement, budget))
        if judgement.suspect:
            needed = self.options.confirm
            message = (
                f"suspect: {', '.join(v.metric for v in judgement.suspect)} read a regression that the sessions "
                f"before did not; it fails when {needed} sessions in a row read it (the llmperf summary has its "
                "table, without -q)"
            )
            warnings.warn(SuspectWarning(message), stacklevel=3)
        if judgement.undecided and self.options.inconclusive == "warn":
            message = "inconclusive: the noise was too wide to tell (the llmperf summary has its table, without -q)"
            warnings.warn(InconclusiveWarning(message), stacklevel=3)
