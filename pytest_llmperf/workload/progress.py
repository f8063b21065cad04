"""A running progress line for long runs: done/total, failures, output tok/s in real time.
Its last line counts the decoded records, so it says what the result says."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from time import perf_counter
from typing import TextIO

from pytest_llmperf.metrics.records import RequestRecord


class Progress:
    def __init__(
        self,
        total: int,
        enabled: bool = True,
        stream: TextIO | None = None,
        quiet_for: float = 3.0,
        interval: float | None = None,
        clock_speed: float = 1.0,
        label: str = "",
    ) -> None:
        self.total = total
        self.label = f"{label}: " if label else ""
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.quiet_for = quiet_for  # short runs print nothing
        self.clock_speed = clock_speed
        self.done = 0
        self.failed = 0
        self.tokens = 0
        self.start = perf_counter()
        self._duration: float | None = None  # the run's own, once it ended (on the server's clock)
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
        duration = self._duration if self._duration is not None else elapsed
        real = duration * self.clock_speed  # the server's seconds, in real time
        rate = self.tokens / real if real > 0 else 0.0
        clock = f" (x{self.clock_speed:g} clock, tok/s in real time)" if self.clock_speed != 1.0 else ""
        return (
            f"llmperf: {self.label}{self.done}/{self.total} done, {self.failed} failed, {rate:,.0f} output tok/s, "
            f"{elapsed:.0f} s{clock}"
        )

    def tick(self) -> None:
        if not self.enabled or perf_counter() - self.start < self.quiet_for:
            return
        end = "\r" if self._tty else "\n"
        self.stream.write(self.line() + end)
        self.stream.flush()
        self._printed = True

    def close(self, records: Sequence[RequestRecord] | None = None, duration: float | None = None) -> None:
        """The last line, when one was shown: from the decoded `records` and `duration` when given."""
        if records is not None:
            ok = [r for r in records if r.ok]
            self.done, self.failed = len(records), len(records) - len(ok)
            self.tokens = sum(r.completion_tokens or 0 for r in ok)
            self._duration = duration
        if self.enabled and self._printed:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self._printed = False  # once
