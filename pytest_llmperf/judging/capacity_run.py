"""A capacity test through the session (`llmperf.capacity(...)`): capacity/search.py's
search, each probe one run of the test's workload at a concurrency made by the session's
measurer (the first at a load on the server running, every later one at that load on a
fresh start, as auto repetitions make theirs), its request records judged against the SLOs
(capacity/slo.py). The capacity found is a figure the gate judges as it judges a run's:
a `CapacityRun` holds it (and its interval's other end) as one repetition, keyed in the
baselines by the workload with the search it came from."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.baselines.judgement import GateRecord
from pytest_llmperf.baselines.outcome import PerfFailure
from pytest_llmperf.capacity.search import CAPACITY_PROBES, UNITS, Capacity, Resolution, search
from pytest_llmperf.capacity.slo import ProbeResult, SLOSet
from pytest_llmperf.judging.session import PerfSession
from pytest_llmperf.measuring.measured import MeasuredRun, Samples
from pytest_llmperf.measuring.measurer import Measurer, stop_if_interrupted
from pytest_llmperf.metrics.failures import ErrorBudget
from pytest_llmperf.metrics.registry import CAPACITY, CAPACITY_BROKEN_AT, format_value
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.workload.workload import Workload

WorkloadAt = Callable[[int], Workload]  # the test's workload at a concurrency, with the SLOs' goodput text


@dataclass(frozen=True)
class SearchedWorkload(Workload):
    """The workload a capacity is recorded under: the test's (at the top of the search) and
    the search itself (`concurrency:1-64:4`), so a capacity's entry is never a run's and a
    search over another range or resolution is another workload."""

    capacity_search: str = ""


@dataclass
class CapacityRun(MeasuredRun):
    """A capacity search as the gate reads a run: no results of its own, its figures the
    capacity and its interval's other end (one repetition); its requests the probes'."""

    probe_requests: int = 0
    probe_attempted: int = 0

    @property
    def completed(self) -> int:
        return self.probe_requests

    @property
    def attempted(self) -> int:
        return self.probe_attempted


class SessionProbe:
    """`probe(load)` for capacity.search: one run of `workload_at(load)` by the measurer."""

    def __init__(self, measurer: Measurer, spec: ServerSpec, workload_at: WorkloadAt) -> None:
        self.measurer = measurer
        self.spec = spec
        self.workload_at = workload_at
        self.runs: dict[int, MeasuredRun] = {}  # each load's runs, one repetition per probe

    def __call__(self, load: float) -> ProbeResult:
        concurrency = int(load)
        started = self.measurer.clock()
        measured = self.runs.get(concurrency)
        fresh = measured is not None
        if measured is None:
            measured = self.measurer.blank(self.measurer.policy.effective(self.spec), self.workload_at(concurrency))
            self.runs[concurrency] = measured
        endpoint = self.measurer.start(measured, fresh=fresh)
        if endpoint is not None:
            self.measurer.repeat(measured, endpoint)
        stop_if_interrupted(measured)
        if measured.server_death or not measured.results:
            raise PerfFailure(
                f"capacity: the probe at concurrency {concurrency} broke: {measured.server_death or 'no run was made'}"
            )
        result = measured.results[-1]
        seconds = self.measurer.clock() - started
        return ProbeResult.from_records(result.records, result.clock_speed, seconds, ramp=concurrency)

    @property
    def provenance(self) -> dict[str, Any]:
        first = next(iter(self.runs.values()), None)
        return dict(first.provenance) if first is not None else {}

    @property
    def requests(self) -> tuple[int, int]:
        """Completed and attempted requests over every probe."""
        runs = list(self.runs.values())
        return sum(r.completed for r in runs), sum(r.attempted for r in runs)


@dataclass
class CapacityResult:
    """What `llmperf.capacity(...)` returns: the capacity (None: no load met the SLOs), its
    interval, the search's line (`line`: the SLO broken first and where), its probes and
    cost; `assert_no_regression()` judges it against the baseline."""

    search: Capacity
    run: MeasuredRun  # the CapacityRun, bound to the test's assertions
    lines: list[dict[str, Any]]  # the session's capacity lines (the report document's `capacities`)
    nodeid: str
    records: Callable[[], list[GateRecord]]  # the session's gate records, the last of them this one's
    verdict: str | None = None  # the gate's line once judged

    @property
    def capacity(self) -> float | None:
        return self.search.capacity

    @property
    def interval(self) -> tuple[float | None, float | None]:
        return self.search.interval

    @property
    def line(self) -> str:
        """'capacity 8 users (8-9): p99 TTFT 2,000 ms exceeded at 9 (2,410 ms); p99 TPOT held; 7 runs, 40 s'."""
        return self.search.describe()

    @property
    def probes(self) -> tuple[Any, ...]:
        return self.search.probes

    @property
    def runs(self) -> int:
        return self.search.runs

    @property
    def seconds(self) -> float | None:
        return self.search.seconds

    def assert_no_regression(self, tolerance: str | None = None) -> None:
        """Judge the capacity against its baseline by the session's gate (regressed,
        inconclusive, pass, improved), or record it under --update-baselines; a failure's
        headline says what moved and which SLO broke first, at what load."""
        tolerances = {CAPACITY: tolerance} if tolerance else None
        judge = self.run.judge
        if judge is None:
            raise RuntimeError("this capacity is not bound to a test; search it through the llmperf fixture")
        collect: Callable[[], Samples] = lambda: {CAPACITY: self.run.samples[CAPACITY]}  # noqa: E731
        try:
            judge(self.run, collect, tolerances or {}, None)
        except PerfFailure as failure:
            self.verdict = self._verdict_line(failure)
            self._keep()
            raise PerfFailure(f"{failure}\n{self.verdict}", headline=self.verdict) from None
        self.verdict = self._verdict_line(None)
        self._keep()

    def _verdict_line(self, failure: PerfFailure | None) -> str:
        """'capacity 8 -> 2 users, regressed: p50 TPOT 24.5 ms exceeded at 4 (27.4 ms); p50 TTFT held'."""
        unit = UNITS[self.search.over]
        measured = f"{format_value(CAPACITY, self.capacity)} {unit}"
        breach = self.search.first_broken
        said = breach.describe() if breach is not None else f"no SLO decided broken up to {self.search.within[1]:g}"
        record = next((r for r in reversed(self.records()) if r.nodeid == self.nodeid), None)
        verdict = next((v for v in record.verdicts if v.metric == CAPACITY), None) if record is not None else None
        if verdict is not None and verdict.baseline is not None:
            baseline = format_value(CAPACITY, verdict.baseline)
            return f"capacity {baseline} -> {measured}, {verdict.status}: {said}"
        if record is not None:
            return f"capacity {measured}, {record.outcome.value}: {said}"
        return f"{failure.headline if failure is not None else f'capacity {measured}'}: {said}"

    def _keep(self) -> None:
        for line in self.lines:
            if line["test"] == self.nodeid and line["line"] == self.line:
                line["verdict"] = self.verdict


def capacity_run(probe: SessionProbe, found: Capacity, workload: Workload, search_key: str) -> CapacityRun:
    """The capacity as a run the gate judges: its figures one repetition each, its notes the
    search's line, its probes in its provenance."""
    completed, attempted = probe.requests
    samples: dict[str, list[float | None]] = {
        CAPACITY: [found.capacity],
        CAPACITY_BROKEN_AT: [found.broken_at],
    }
    return CapacityRun(
        server=probe.measurer.policy.effective(probe.spec),
        workload=SearchedWorkload(**dataclasses.asdict(workload), capacity_search=search_key),
        results=[],
        samples=samples,
        provenance={**probe.provenance, CAPACITY_PROBES: probe_rows(found)},
        notes=[found.describe()],
        probe_requests=completed,
        probe_attempted=attempted,
    )


def capacity_line(nodeid: str, server: str, found: Capacity) -> dict[str, Any]:
    """A search as the report document keeps it: the test, its server, the line, the figures
    and cost, the SLOs, each probe (its load, outcome, runs and each SLO's value in ms) and
    the SLO broken first (its name; None where none was)."""
    breach = found.first_broken
    return {
        "test": nodeid,
        "server": server,
        "line": found.describe(),
        "capacity": found.capacity,
        "interval": list(found.interval),
        "runs": found.runs,
        "seconds": found.seconds,
        "verdict": None,
        "over": found.over,
        "slos": [{"name": s.name, "label": s.label, "limit_ms": s.limit_ms} for s in found.slos.slos],
        "probes": probe_rows(found),
        "first_broken": breach.reading.slo.name if breach is not None else None,
    }


def probe_rows(found: Capacity) -> list[dict[str, Any]]:
    """Each probe: its load, outcome, runs and each SLO's value in ms."""
    return [
        {
            "load": p.load,
            "outcome": p.outcome.value,
            "runs": p.runs,
            "values_ms": {r.slo.name: r.value_ms for r in p.verdict.readings},
        }
        for p in found.probes
    ]


def search_key(over: str, within: tuple[float, float], resolution: Resolution) -> str:
    """The search as the baseline's workload says it: 'concurrency:1-64:4' or 'concurrency:1-64:5%'."""
    step = f"{resolution.percent:g}%" if resolution.percent is not None else f"{resolution.step:g}"
    return f"{over}:{within[0]:g}-{within[1]:g}:{step}"


def capacity_test(
    perf: PerfSession,
    spec: ServerSpec,
    workload_at: WorkloadAt,
    slos: Mapping[str, float],
    *,
    nodeid: str,
    within: tuple[int, int],
    resolution: float | str,
    confidence: float,
    budget: Mapping[str, Any],
    tolerances: Mapping[str, str] | None = None,
    error_budget: ErrorBudget | str | None = None,
) -> CapacityResult:
    """Test `nodeid`'s capacity search through `perf`'s measurer; its line kept for the report
    document, its figure bound to the test's assertions. `budget`: search()'s runs_per_probe,
    confirm_runs, max_runs and max_seconds. ValueError for a bad argument, before any run."""
    probe = SessionProbe(perf.measurer, spec, workload_at)
    found = search(
        probe,
        SLOSet.parse(slos),
        within=within,
        resolution=resolution,
        over="concurrency",
        confidence=confidence,
        **budget,
    )
    perf.capacities.append(capacity_line(nodeid, spec.name, found))
    key = search_key(found.over, found.within, found.resolution)
    run = capacity_run(probe, found, workload_at(int(found.within[1])), key)
    bound = perf.bind(run, nodeid, tolerances, error_budget)
    return CapacityResult(found, bound, perf.capacities, nodeid, lambda: perf.gates)
