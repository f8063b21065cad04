"""What one assertion comes to (Outcome; its Judgement and GateRecord are judgement.py's)
and the errors and warnings the session raises."""

from __future__ import annotations

from enum import Enum


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
