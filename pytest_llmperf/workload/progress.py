"""A running progress line for long runs: done/total, failures, output tok/s.

Only running counts: aggregates belong to metrics/summary.py.
"""

from __future__ import annotations

import sys
from time import perf_counter
from typing import TextIO


class Progress:
    def __init__(
        self,
        total: int,
        enabled: bool = True,
        stream: TextIO | None = None,
        quiet_for: float = 3.0,
        interval: float | None = None,
    ) -> None:
        self.total = total
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.quiet_for = quiet_for  # short runs print nothing
        self.done = 0
        self.failed = 0
        self.tokens = 0
        self.start = perf_counter()
        self._printed = False
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        # How often `tick` is worth calling: often on a terminal, sparingly in logs.
        self.interval = interval if interval is not None else (1.0 if self._tty else 10.0)

    def add(self, ok: bool, completion_tokens: int | None) -> None:
        self.done += 1
        if not ok:
            self.failed += 1
        self.tokens += completion_tokens or 0

    def line(self) -> str:
        elapsed = perf_counter() - self.start
        rate = self.tokens / elapsed if elapsed > 0 else 0.0
        return (
            f"llmperf: {self.done}/{self.total} done, {self.failed} failed, {rate:,.0f} output tok/s, {elapsed:.0f} s"
        )

    def tick(self) -> None:
        if not self.enabled or perf_counter() - self.start < self.quiet_for:
            return
        end = "\r" if self._tty else "\n"
        self.stream.write(self.line() + end)
        self.stream.flush()
        self._printed = True

    def close(self) -> None:
        if self.enabled and self._printed:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
