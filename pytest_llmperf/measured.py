"""MeasuredRun: what `llmperf.run()` returns — one server, one concurrency, one workload.

It holds the raw RunResults (one per repetition) and their summaries in real time;
assertions hand the figures to the session's gate, which owns baselines and verdicts.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.workload.result import RunResult
from pytest_llmperf.workload.spec import Workload

if TYPE_CHECKING:  # pragma: no cover
    from pytest_llmperf.session import PerfSession


def flatten_summary(summary: Mapping[str, Any]) -> dict[str, float | None]:
    """Scalar figures only; the per-position list becomes acceptance_pos1..k."""
    flat: dict[str, float | None] = {}
    for key, value in summary.items():
        if isinstance(value, (list, tuple)):
            for i, v in enumerate(value, start=1):
                flat[f"acceptance_pos{i}" if key.startswith("acceptance") else f"{key}_{i}"] = v
        elif isinstance(value, bool):
            continue
        elif value is None or isinstance(value, (int, float)):
            flat[key] = value
    return flat


@dataclass
class MeasuredRun:
    spec: ServerSpec
    workload: Workload
    results: list[RunResult]
    samples: dict[str, list[float | None]]  # metric -> one value per repetition (real time)
    provenance: dict[str, Any]
    # The first repetition's per-request figures (metrics/uncertainty.request_rows, real
    # time): what the verdict rule pairs with the baseline's to tell a change from noise.
    rows: list[tuple] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. "spec-decode counters did not move"
    published: dict[str, float] = field(default_factory=dict)
    _session: PerfSession | None = field(default=None, repr=False, compare=False)
    _nodeid: str = field(default="", repr=False, compare=False)
    _tolerances: dict[str, str] = field(default_factory=dict, repr=False, compare=False)  # the marker's

    @property
    def concurrency(self) -> int:
        return self.workload.concurrency

    def value(self, metric: str) -> float | None:
        """Median over repetitions; None when no repetition produced the figure."""
        values = [v for v in self.samples.get(metric, []) if v is not None]
        return statistics.median(values) if values else None

    @property
    def summary(self) -> dict[str, float | None]:
        return {name: self.value(name) for name in self.samples}

    @property
    def completed(self) -> int:
        return sum(r.completed for r in self.results)

    @property
    def attempted(self) -> int:
        return sum(r.attempted for r in self.results)

    def speedup_samples(self, base: MeasuredRun) -> list[float | None]:
        """This run's decode tok/s over `base`'s, repetition by repetition."""
        if base.workload != self.workload:
            raise ValueError(
                f"speedup needs the same workload: {self.spec.name} ran {self.workload.to_dict()}, "
                f"{base.spec.name} ran {base.workload.to_dict()}"
            )
        if base.spec.model != self.spec.model:
            raise ValueError(f"speedup compares one model: {self.spec.model} vs {base.spec.model}")
        ours, theirs = self.samples.get("decode_tok_s", []), base.samples.get("decode_tok_s", [])
        if len(ours) != len(theirs):
            # Auto repetitions added runs to one side only: each over the other's median.
            present = [v for v in theirs if v is not None]
            median = statistics.median(present) if present else None
            return [a / median if a is not None and median else None for a in ours]
        return [a / b if a is not None and b else None for a, b in zip(ours, theirs)]

    def speedup_over(self, base: MeasuredRun) -> float | None:
        values = [v for v in self.speedup_samples(base) if v is not None]
        return statistics.median(values) if values else None

    def assert_no_regression(self, *metrics: str, tolerances: Mapping[str, str] | None = None) -> None:
        """Compare the named metrics (default: the marker's `metrics`, else decode tok/s)
        with the baseline; fail with a table on a regression; record under --update-baselines."""
        names = self._metrics(metrics)
        self._require_session().gate(
            self, lambda: {m: self.samples.get(m, [None]) for m in names}, {**self._tolerances, **(tolerances or {})}
        )

    def assert_speedup_over(self, base: MeasuredRun, tolerance: str | None = None) -> None:
        """Gate `mtp_speedup` (this run's decode tok/s / the base run's) against the baseline."""
        self.speedup_samples(base)  # refuses a different workload or model before anything is judged
        tolerances = {**self._tolerances, **({"mtp_speedup": tolerance} if tolerance else {})}
        self._require_session().gate(self, lambda: {"mtp_speedup": self.speedup_samples(base)}, tolerances, base=base)

    def bound_to(self, nodeid: str, tolerances: Mapping[str, str] | None = None) -> MeasuredRun:
        """A view of this (cached, shared) run for one test: its id and marker tolerances."""
        return replace(self, _nodeid=nodeid, _tolerances=dict(tolerances or {}))

    def _metrics(self, metrics: tuple[str, ...]) -> tuple[str, ...]:
        if metrics:
            return metrics
        # Speculative: the length too. The rate alone can rise while the length falls
        # (real vLLM CPU, ngram k 3 -> 1: rate 0.756 -> 0.842, length 3.26 -> 1.84).
        if self.spec.is_speculative:
            return ("decode_tok_s", "acceptance_rate", "acceptance_length")
        return ("decode_tok_s",)

    def _require_session(self) -> PerfSession:
        if self._session is None:
            raise RuntimeError("this run is not attached to a pytest session; use the llmperf fixture")
        return self._session
