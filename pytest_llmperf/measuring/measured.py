"""MeasuredRun: what `llmperf.run()` returns — one server, one concurrency, one workload:
the raw RunResults and their figures. Its assertions hand the figures to `judge`, which
the llmperf fixture binds to one test."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from pytest_llmperf.baselines.tolerances import parse_tolerance, parse_tolerances
from pytest_llmperf.metrics.registry import ANSWERED, GATED_DECODE, SPEEDUP, Needs, active, check_names, metric
from pytest_llmperf.metrics.uncertainty import Row
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.stats.median import median_of
from pytest_llmperf.workload.result import RunResult
from pytest_llmperf.workload.workload import Workload

Samples = Mapping[str, list[float | None]]
# judge(run, collect, tolerances, base): judge (or record) the samples `collect()` returns;
# auto repetitions call `collect` again after each run they add.
Judge = Callable[["MeasuredRun", Callable[[], Samples], Mapping[str, str], Optional["MeasuredRun"]], None]


@dataclass
class MeasuredRun:
    server: ServerSpec
    workload: Workload
    results: list[RunResult]
    samples: dict[str, list[float | None]]  # metric -> one value per repetition (real time)
    provenance: dict[str, Any]
    rows: list[Row] = field(default_factory=list)  # the first repetition's, paired with the baseline's
    notes: list[str] = field(default_factory=list)  # e.g. "spec-decode counters did not move"
    spec_note: str | None = None  # why acceptance has no figures, whether or not that is news
    published: dict[str, float] = field(default_factory=dict)
    server_death: str | None = None  # the server was found gone after failures: invalid, whatever the budget
    server_log: list[str] = field(default_factory=list)  # its last log lines, redacted
    server_warmup: dict[str, float | None] | None = None  # a fresh server's warm-up before this run
    judge: Judge | None = field(default=None, repr=False, compare=False)

    @property
    def concurrency(self) -> int:
        return self.workload.concurrency

    def value(self, metric: str) -> float | None:
        """Median over repetitions; None when no repetition produced the figure."""
        return median_of(self.samples.get(metric, []))

    @property
    def figures(self) -> dict[str, float | None]:
        """Every figure of the run: the median over repetitions, by metric name."""
        return {name: self.value(name) for name in self.samples}

    @property
    def completed(self) -> int:
        return sum(r.completed for r in self.results)

    @property
    def attempted(self) -> int:
        return sum(r.attempted for r in self.results)

    def speedup_samples(self, base: MeasuredRun, last: int | None = None) -> list[float | None]:
        """This run's steady decode tok/s over `base`'s, repetition by repetition; `last`: the
        ratios of the last `last` repetitions of each, pair by pair (the pairs made together)."""
        if base.workload != self.workload:
            raise ValueError(
                f"speedup needs the same workload: {self.server.name} ran {self.workload.to_dict()}, "
                f"{base.server.name} ran {base.workload.to_dict()}"
            )
        if base.server.model != self.server.model:
            raise ValueError(f"speedup compares one model: {self.server.model} vs {base.server.model}")
        ours, theirs = self.samples.get(GATED_DECODE, []), base.samples.get(GATED_DECODE, [])
        if last is not None:
            ours, theirs = ours[len(ours) - last :], theirs[len(theirs) - last :]
        if len(ours) != len(theirs):
            # Auto repetitions added runs to one side only: each over the other's median.
            median = median_of(theirs)
            return [a / median if a is not None and median else None for a in ours]
        return [a / b if a is not None and b else None for a, b in zip(ours, theirs)]

    def speedup_over(self, base: MeasuredRun) -> float | None:
        """Median over repetitions of this run's steady decode tok/s over `base`'s."""
        return median_of(self.speedup_samples(base))

    def assert_no_regression(self, *metrics: str, tolerances: Mapping[str, str] | None = None) -> None:
        """Compare the named metrics (default: those the metric registry gates on this run:
        steady decode tok/s, acceptance for a speculative server, goodput and SLO attainment
        for a workload with SLOs) with the baseline; fail with a table on a regression;
        record under --update-baselines."""
        names = self._metrics(metrics)
        check_names(names, "assert_no_regression: ")
        # Checked before judging: a typo or a wrong sign must not be skipped silently.
        parse_tolerances(tolerances or {}, "assert_no_regression: ")
        ungated = [name for name in tolerances or {} if name not in names]
        if ungated:
            raise ValueError(
                f"assert_no_regression: tolerances for {', '.join(ungated)}, which this assertion does not gate "
                f"(it gates {', '.join(names)}); gate them too, or move their tolerances to the marker"
            )
        self._judge(lambda: {m: self.samples.get(m, [None]) for m in names}, tolerances or {}, None)

    def assert_speedup_over(self, base: MeasuredRun, tolerance: str | None = None) -> None:
        """Gate `mtp_speedup` (this run's steady decode tok/s / the base run's) against the baseline."""
        self.speedup_samples(base)  # refuses a different workload or model before anything is judged
        if tolerance:
            try:
                parse_tolerance(tolerance, SPEEDUP)
            except ValueError as exc:
                raise ValueError(f"assert_speedup_over: tolerance: {exc}") from None
        tolerances = {SPEEDUP: tolerance} if tolerance else {}
        self._judge(lambda: {SPEEDUP: self.speedup_samples(base)}, tolerances, base)

    def _judge(self, collect: Callable[[], Samples], tolerances: Mapping[str, str], base: MeasuredRun | None) -> None:
        if self.judge is None:
            raise RuntimeError("this run is not bound to a test; assert through the llmperf fixture's runs")
        self.judge(self, collect, tolerances, base)

    def _metrics(self, metrics: tuple[str, ...]) -> tuple[str, ...]:
        """The names asked, else the registry's gated by default on this run."""
        if metrics:
            return metrics
        return active().gated(speculative=self.server.is_speculative, slos=bool(self.workload.slos))

    def has(self, need: Needs) -> bool:
        """Whether the run has what a figure needs (registry rows' `needs`). The spec-decode
        counters and a base run are read from the figure itself: asked, they are missing."""
        if need is Needs.REASONING:
            return self.value(ANSWERED) is not None
        if need is Needs.ANSWER:
            return bool(self.value(ANSWERED))
        if need is Needs.SLOS:
            return bool(self.workload.slos)
        return False

    def no_data_reason(self, name: str) -> str:
        """Why metric `name` has no value on this run: the first of its row's needs the run
        lacks, each with its own reason (the spec-decode counters: the run's own note first)."""
        if not self.completed:
            return "no request completed"
        for need in metric(name).needs:
            if not self.has(need):
                return (self.spec_note if need is Needs.SPEC_DECODE else None) or need.reason
        return "; ".join(self.notes) or f"the run produced no value for {name}"
