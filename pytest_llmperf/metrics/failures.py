"""Faults of a run: failed requests grouped by cause and weighed against an error budget
(beyond it the run cannot be judged; requests cut at the time cap are not counted), and
stalled streams, named beside a verdict they may explain.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_llmperf.metrics.records import RequestRecord

_BUDGET_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(%?)\s*$")
BUDGET_FORMS = 'a count of failed requests ("0", "3") or a share of those sent ("5%")'


@dataclass(frozen=True)
class ErrorBudget:
    """How many failed requests a run may have and still be judged."""

    limit: float
    relative: bool = False  # limit is a fraction of the requests sent

    def allows(self, failed: int, attempted: int) -> bool:
        return failed <= (self.limit * attempted if self.relative else self.limit)

    def __str__(self) -> str:
        return f"{self.limit * 100:g}%" if self.relative else f"{self.limit:g}"


def parse_budget(text: str | int | ErrorBudget) -> ErrorBudget:
    """ "0" -> none may fail, "3" -> three may, "5%" -> 5 % of those sent may."""
    if isinstance(text, ErrorBudget):
        return text
    if isinstance(text, int) and not isinstance(text, bool) and text >= 0:
        return ErrorBudget(float(text))
    m = _BUDGET_RE.match(text) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"invalid error budget {text!r}: use {BUDGET_FORMS}")
    number = float(m.group(1))
    if m.group(2):
        if number > 100:
            raise ValueError(f"invalid error budget {text!r}: a share is at most 100%")
        return ErrorBudget(number / 100, relative=True)
    if not number.is_integer():
        raise ValueError(f"invalid error budget {text!r}: a count is a whole number; use {BUDGET_FORMS}")
    return ErrorBudget(number)


@dataclass(frozen=True)
class Failures:
    attempted: int  # requests sent in the measured window
    failed: int  # failed for a cause of the server's or the network's (cut-at-cap excluded)
    cut_at_cap: int  # ended by the run's time cap
    causes: tuple[tuple[str, int], ...]  # (error, count), most common first

    def describe(self, most: int = 3) -> str:
        """'48 of 64 failed: 46x HTTP 500, 2x ...' or 'none of 64 failed'."""
        if not self.failed:
            text = f"none of {self.attempted} failed"
            return text + (f" ({self.cut_at_cap} cut at the time cap, not counted)" if self.cut_at_cap else "")
        shown = ", ".join(f"{n}x {cause}" for cause, n in self.causes[:most])
        more = len(self.causes) - most
        text = f"{self.failed} of {self.attempted} failed: {shown}" + (f", and {more} other causes" if more > 0 else "")
        if self.cut_at_cap:
            text += f" ({self.cut_at_cap} more cut at the time cap, not counted)"
        return text


def failures(records: Iterable[RequestRecord], attempted: int | None = None) -> Failures:
    """The failed requests among `records`, grouped by their error."""
    records = list(records)
    errors = [r for r in records if not r.ok]
    cut = sum(1 for r in errors if r.cut_at_cap)
    causes = Counter(_cause(r.error or "") for r in errors if not r.cut_at_cap)
    total = len(records) if attempted is None else attempted
    return Failures(total, len(errors) - cut, cut, tuple(causes.most_common()))


def _cause(error: str, limit: int = 120) -> str:
    """One line of the error, short enough to group and to read."""
    line = error.strip().splitlines()[0] if error.strip() else "unknown error"
    return line if len(line) <= limit else line[: limit - 3] + "..."


def combine(parts: Iterable[Failures]) -> Failures:
    """The failures of several repetitions as one."""
    parts = list(parts)
    causes: Counter[str] = Counter()
    for part in parts:
        causes.update(dict(part.causes))
    return Failures(
        sum(p.attempted for p in parts),
        sum(p.failed for p in parts),
        sum(p.cut_at_cap for p in parts),
        tuple(causes.most_common()),
    )


# A stream stalled when one gap between its chunks is this many times the run's median
# gap, and at least STALL_FLOOR_S long in real time (a cold cache is not a stall).
STALL_FACTOR = 20.0
STALL_FLOOR_S = 1.0


@dataclass(frozen=True)
class Stalls:
    streams: int  # completed streams with a stall
    longest_s: float  # the longest gap, real seconds
    median_gap_s: float  # the run's median gap between chunks, real seconds

    def describe(self) -> str:
        """ "3 streams stalled (longest gap 5.0 s, 250x the median gap of 20 ms)" """
        times = self.longest_s / self.median_gap_s if self.median_gap_s else float("inf")
        return (
            f"{self.streams} stream{'s' if self.streams != 1 else ''} stalled (longest gap "
            f"{self.longest_s:.1f} s, {times:.0f}x the median gap of {self.median_gap_s * 1000:.0f} ms)"
        )


def stalls(records: Iterable[RequestRecord], clock_speed: float = 1.0) -> Stalls:
    """Completed streams with a pause between chunks far beyond the run's usual gap.
    Records are on the server's clock, `clock_speed` times real time."""
    gaps = [[g / clock_speed for g in r.itls] for r in records if r.ok and len(r.chunk_times) > 1]
    every = [g for per in gaps for g in per]
    if not every:
        return Stalls(0, 0.0, 0.0)
    median = statistics.median(every)
    threshold = max(STALL_FLOOR_S, STALL_FACTOR * median)
    stalled = [max(per) for per in gaps if max(per) > threshold]
    return Stalls(len(stalled), max(stalled, default=0.0), median)


def faults_note(parts: Iterable[Failures], stalled: Iterable[Stalls], budget: ErrorBudget) -> str | None:
    """Failures within the budget and stalls of a judged run, in one line; None when clean."""
    broken = combine(parts)
    stalled = [s for s in stalled if s.streams]
    notes = []
    if broken.failed:
        notes.append(f"{broken.describe()} (within the error budget {budget})")
    if stalled:
        worst = max(stalled, key=lambda s: s.longest_s)
        notes.append(Stalls(sum(s.streams for s in stalled), worst.longest_s, worst.median_gap_s).describe())
    return "; ".join(notes) or None
