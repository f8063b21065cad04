"""RunResult: one measured run, with its raw records and raw /metrics pages.

Everything else (summary, spec-decode figures, verdicts) is computed from this, so
a result written to JSON can be recomputed later.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.workload.records import RequestRecord

STOP_REASONS = ("completed", "max_seconds", "interrupted")


@dataclass
class RunResult:
    config: dict[str, Any]                # the workload (RunConfig as a dict, dataset, seed)
    records: list[RequestRecord]          # measured requests only (warm-up excluded)
    duration: float                       # first dispatch to last completion, seconds
    attempted: int                        # requests sent in the measured window
    stop_reason: str                      # one of STOP_REASONS
    metrics_before: str | None = None     # raw /metrics text before the window (None: no /metrics)
    metrics_after: str | None = None      # raw /metrics text after the window
    started_at: str = ""                  # ISO-8601 wall-clock time of the first dispatch
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def partial(self) -> bool:
        return self.stop_reason == "interrupted"

    @property
    def completed(self) -> int:
        return sum(1 for r in self.records if r.ok)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.records if not r.ok)
