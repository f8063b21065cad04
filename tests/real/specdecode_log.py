"""Read vLLM's own `SpecDecoding metrics:` log lines back into integer counts.

vLLM prints, per logging interval, the accepted and drafted token counts exactly, and
the mean acceptance length (2 decimals), the per-position rates (3 decimals) and the
overall rate (1 decimal) as ratios over a number of drafts it does not print. For each
line we find every draft count that reproduces all printed figures (with the per-
position counts it implies): that is what the log says, independent of our counter
code, to compare the plugin's figures with.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

LINE_RE = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: (?P<length>[\d.]+), "
    r".*?Accepted: (?P<accepted>\d+) tokens, Drafted: (?P<drafted>\d+) tokens, "
    r"Per-position acceptance rate: (?P<pos>[\d.]+(?:, [\d.]+)*), "
    r"Avg Draft acceptance rate: (?P<rate>[\d.]+|nan)%"
)


@dataclass(frozen=True)
class LogWindow:
    length: str  # as printed, e.g. "3.14"
    accepted: int
    drafted: int
    rates: tuple[str, ...]
    rate: str

    def explanations(self) -> list[tuple[int, tuple[int, ...]]]:
        """Every (drafts, accepted per position) that prints exactly this line."""
        k = len(self.rates)
        found = []
        for n in range(max(1, math.ceil(self.drafted / k)), self.drafted + 1):
            counts = tuple(round(float(r) * n) for r in self.rates)
            if any(f"{c / n:.3f}" != r for c, r in zip(counts, self.rates)):
                continue
            # An accepted token at position i needs all earlier ones accepted too.
            if sum(counts) != self.accepted or list(counts) != sorted(counts, reverse=True):
                continue
            if f"{1 + self.accepted / n:.2f}" != self.length:
                continue
            if self.drafted and f"{self.accepted / self.drafted * 100:.1f}" != self.rate:
                continue
            found.append((n, counts))
        return found


def parse_lines(lines: list[str]) -> list[LogWindow]:
    windows = []
    for line in lines:
        m = LINE_RE.search(line)
        if m:
            windows.append(
                LogWindow(m["length"], int(m["accepted"]), int(m["drafted"]), tuple(m["pos"].split(", ")), m["rate"])
            )
    return windows


@dataclass(frozen=True)
class LogTotals:
    windows: int
    accepted: int
    drafted: int
    drafts_min: int  # the printed figures pin the drafts only to a range
    drafts_max: int  # when a window accepted nothing
    accepted_per_pos: tuple[int, ...]


class UnexplainedLine(ValueError):
    pass


def totals(windows: list[LogWindow]) -> LogTotals:
    if not windows:
        raise ValueError("no SpecDecoding lines in the window")
    k = len(windows[0].rates)
    lo = hi = 0
    per_pos = [0] * k
    for w in windows:
        options = w.explanations()
        if not options:
            raise UnexplainedLine(f"no draft count reproduces this SpecDecoding line: {w}")
        if len({counts for _, counts in options}) != 1:
            raise UnexplainedLine(f"the per-position counts of {w} are ambiguous: {options}")
        lo += min(n for n, _ in options)
        hi += max(n for n, _ in options)
        per_pos = [a + b for a, b in zip(per_pos, options[0][1])]
    return LogTotals(
        len(windows), sum(w.accepted for w in windows), sum(w.drafted for w in windows), lo, hi, tuple(per_pos)
    )
