"""What one assertion comes to (GateRecord, Outcome) and the errors and warnings the
session raises: the values the gate produces and the plugin and reports read."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class PerfFailure(AssertionError):
    """A gated metric regressed, has no data, or has no comparable baseline. The message
    is the verdict table; `headline` says it in one line (pytest's short test summary)."""

    def __init__(self, message: str, headline: str | None = None) -> None:
        super().__init__(message)
        self.headline = headline or next(iter(message.splitlines()), "")


class SetupError(ValueError):
    """Input the session cannot run with, found before any server starts; the message
    names what is wrong and the fix."""


class HistoryWarning(UserWarning):
    """The history file could not be written (the verdict stands)."""


class InconclusiveWarning(UserWarning):
    """A gated metric the noise could not decide (--llmperf-inconclusive warn)."""


class SuspectWarning(UserWarning):
    """A regression not yet confirmed by the sessions before (--llmperf-confirm)."""


class Outcome(str, Enum):
    """What one assertion came to."""

    PASS = "pass"
    WARN = "warn"  # inconclusive under --llmperf-inconclusive warn, or suspect
    FAIL = "fail"
    RECORDED = "recorded"  # --update-baselines
    REFUSED = "refused"  # the baseline was recorded under another workload or hardware

    def __str__(self) -> str:
        return self.value


@dataclass
class GateRecord:
    """One assertion's outcome, for the terminal summary and the JSON report."""

    nodeid: str
    server: str
    concurrency: int
    baseline_path: str
    verdicts: list[Any] = field(default_factory=list)
    outcome: Outcome = Outcome.PASS
    message: str = ""
    # The baseline entry judged against (None: none), for the reports' plots and blocks.
    baseline_figures: dict[str, float] | None = None
    baseline_provenance: dict[str, Any] | None = None
    # Under a failing or improved table (report/explain.py): changes, decode split, lines.
    changes: list[str] = field(default_factory=list)
    attribution: dict[str, Any] | None = None
    explanation: list[str] = field(default_factory=list)
    # Beside the verdict (report/crosscheck.py): the output canary, and cross-checks not run.
    checks: list[str] = field(default_factory=list)
