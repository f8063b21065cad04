"""What the plots show, read from a report document: plain numbers, no drawing library.

Values are in real time (sped-up simulator clocks scaled back); baselines and noise come
from the verdicts, published figures from each run's `published_reference`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.capacity.search import CAPACITY_PROBES
from pytest_llmperf.metrics.registry import CAPACITY, DECODE, SPEEDUP

Doc = Mapping[str, Any]

TIMELINE_BINS = 60
MAX_TIMELINES = 3


def server_name(run: Doc) -> str:
    return str(run["server"]["name"])


def concurrency_of(run: Doc) -> int:
    return int(run["workload"]["concurrency"])


def is_speculative(run: Doc) -> bool:
    return bool(run["server"].get("speculative_config"))


def model_of(run: Doc) -> str:
    return str(run["server"].get("model") or server_name(run))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def gates_of(doc: Doc, server: str, concurrency: int) -> Iterator[Doc]:
    for gate in doc.get("verdicts", []):
        if gate.get("server") == server and gate.get("concurrency") == concurrency:
            yield gate


def baseline_figures(doc: Doc, server: str, concurrency: int) -> dict[str, float]:
    """The baseline figures of a cell, from every gate of it (the first to have a metric wins)."""
    figures: dict[str, float] = {}
    for gate in gates_of(doc, server, concurrency):
        for name, value in (gate.get("baseline_figures") or {}).items():
            figures.setdefault(name, value)
    return figures


def verdict_of(doc: Doc, server: str, concurrency: int, metric: str) -> Doc | None:
    for gate in gates_of(doc, server, concurrency):
        for verdict in gate.get("verdicts", []):
            if verdict.get("metric") == metric:
                return dict(verdict)
    return None


@dataclass
class Series:
    """One server's metric against concurrency, with its baseline and published figures."""

    server: str
    speculative: bool
    measured: list[tuple[int, float]] = field(default_factory=list)
    baseline: list[tuple[int, float, float]] = field(default_factory=list)  # (c, value, noise half-width)
    published: list[tuple[int, float]] = field(default_factory=list)


def by_model(doc: Doc) -> dict[str, list[Doc]]:
    """Runs grouped by model (base and speculative servers of one model together), in order."""
    models: dict[str, list[Doc]] = {}
    for run in doc.get("runs", []):
        models.setdefault(model_of(run), []).append(run)
    return models


def concurrency_series(doc: Doc, runs: list[Doc], metric: str) -> list[Series]:
    """`metric` per server of `runs`, sorted by concurrency; base servers first."""
    series: dict[str, Series] = {}
    for run in sorted(runs, key=lambda r: (is_speculative(r), server_name(r), concurrency_of(r))):
        name, c = server_name(run), concurrency_of(run)
        s = series.setdefault(name, Series(name, is_speculative(run)))
        value = _number(run.get("summary", {}).get(metric))
        if value is not None:
            s.measured.append((c, value))
        base = _number(baseline_figures(doc, name, c).get(metric))
        if base is not None:
            verdict = verdict_of(doc, name, c, metric)
            noise = _number(verdict.get("noise")) if verdict else None
            s.baseline.append((c, base, abs(noise or 0.0)))
        published = _number(run.get("published_reference", {}).get(metric))
        if published is not None:
            s.published.append((c, published))
    return [s for s in series.values() if s.measured or s.baseline or s.published]


@dataclass(frozen=True)
class SpeedupPoint:
    concurrency: int
    measured: float | None
    noise: float | None  # the verdict's interval half-width; None without a verdict
    baseline: float | None
    published: float | None


def _base_run(runs: list[Doc], mtp: Doc) -> Doc | None:
    for run in runs:
        if not is_speculative(run) and run["workload"] == mtp["workload"]:
            return run
    return None


def speedups(doc: Doc, runs: list[Doc]) -> dict[str, list[SpeedupPoint]]:
    """Per speculative server of `runs`: MTP decode over base decode at each concurrency,
    from the speedup verdict where a test gated it, else from the two runs' figures."""
    out: dict[str, list[SpeedupPoint]] = {}
    for run in sorted(runs, key=concurrency_of):
        if not is_speculative(run):
            continue
        name, c = server_name(run), concurrency_of(run)
        verdict = verdict_of(doc, name, c, SPEEDUP)
        measured = _number(verdict.get("measured")) if verdict else None
        noise = _number(verdict.get("noise")) if verdict else None
        if measured is None:
            base = _base_run(runs, run)
            ours = _number(run.get("summary", {}).get(DECODE))
            theirs = _number(base.get("summary", {}).get(DECODE)) if base else None
            measured = ours / theirs if ours is not None and theirs else None
        baseline = _number(baseline_figures(doc, name, c).get(SPEEDUP))
        published = _number(run.get("published_reference", {}).get(SPEEDUP))
        if measured is not None or baseline is not None or published is not None:
            out.setdefault(name, []).append(SpeedupPoint(c, measured, noise, baseline, published))
    return out


@dataclass
class Acceptance:
    """Per draft position (1..k): acceptance at each concurrency, its baseline, published."""

    server: str
    positions: int
    measured: dict[int, list[float | None]] = field(default_factory=dict)
    baseline: dict[int, list[float | None]] = field(default_factory=dict)
    published: dict[int, list[float | None]] = field(default_factory=dict)


def _positions(figures: Mapping[str, Any]) -> int:
    found = [int(k.removeprefix("acceptance_pos")) for k in figures if k.startswith("acceptance_pos")]
    return max(found, default=0)


def acceptance(doc: Doc) -> list[Acceptance]:
    """Per-position acceptance of every speculative server that has it."""
    out: dict[str, Acceptance] = {}
    for run in sorted(doc.get("runs", []), key=concurrency_of):
        summary = run.get("summary", {})
        k = _positions(summary)
        if not is_speculative(run) or not k:
            continue
        name, c = server_name(run), concurrency_of(run)
        a = out.setdefault(name, Acceptance(name, k))
        a.positions = max(a.positions, k)
        base = baseline_figures(doc, name, c)
        published = run.get("published_reference", {})
        pos = range(1, k + 1)
        a.measured[c] = [_number(summary.get(f"acceptance_pos{i}")) for i in pos]
        a.baseline[c] = [_number(base.get(f"acceptance_pos{i}")) for i in pos]
        a.published[c] = [_number(published.get(f"acceptance_pos{i}")) for i in pos]
    return list(out.values())


def _records(run: Doc) -> Iterator[tuple[Doc, float]]:
    for result in run.get("results", []):
        speed = float(result.get("clock_speed", 1.0) or 1.0)
        for record in result.get("records", []):
            yield record, speed


def latencies(run: Doc) -> tuple[list[float], list[float]]:
    """(TTFT ms, TPOT ms) of every successful request of every repetition, real time."""
    ttfts, tpots = [], []
    for record, speed in _records(run):
        chunks = record.get("chunk_times") or []
        if record.get("error") is not None or not chunks:
            continue
        ttfts.append((chunks[0] - record["send_time"]) * speed * 1000.0)
        tokens = record.get("completion_tokens")
        if isinstance(tokens, int) and tokens > 1:
            tpots.append((chunks[-1] - chunks[0]) / (tokens - 1) * speed * 1000.0)
    return ttfts, tpots


@dataclass
class Timeline:
    server: str
    concurrency: int
    in_flight: list[tuple[float, int]]  # (seconds since the first send, requests in flight from then)
    tokens: list[tuple[float, float]]  # (bin start, output tok/s in the bin)
    bin_s: float


def timeline(run: Doc, bins: int = TIMELINE_BINS) -> Timeline | None:
    """Requests in flight and output tokens/s over the first repetition of `run`."""
    results = run.get("results", [])
    if not results or not results[0].get("records"):
        return None
    first = results[0]
    speed = float(first.get("clock_speed", 1.0) or 1.0)
    records = first["records"]
    t0 = min(r["send_time"] for r in records)
    events: list[tuple[float, int]] = []
    chunks: list[tuple[float, float]] = []  # (time, tokens the chunk carried)
    for r in records:
        times = r.get("chunk_times") or []
        end = r.get("end_time") or (times[-1] if times else r["send_time"])
        events += [((r["send_time"] - t0) * speed, 1), ((end - t0) * speed, -1)]
        tokens = r.get("completion_tokens")
        if r.get("error") is None and times and isinstance(tokens, int):
            chunks += [((t - t0) * speed, tokens / len(times)) for t in times]
    events.sort(key=lambda e: (e[0], e[1]))
    level, in_flight = 0, [(0.0, 0)]
    for t, step in events:
        level += step
        in_flight.append((t, level))
    span = max((t for t, _ in events), default=0.0)
    width = span / bins if span > 0 else 1.0
    sums = [0.0] * bins
    for t, n in chunks:
        sums[min(int(t / width), bins - 1)] += n
    return Timeline(
        server_name(run),
        concurrency_of(run),
        in_flight,
        [(i * width, s / width) for i, s in enumerate(sums)],
        width,
    )


def timeline_runs(doc: Doc) -> list[Doc]:
    """The runs whose timeline the report shows: those of failing tests (up to
    MAX_TIMELINES), else the first run at the highest concurrency."""
    runs = [r for r in doc.get("runs", []) if r.get("results")]
    failing = {(g["server"], g["concurrency"]) for g in doc.get("verdicts", []) if g.get("outcome") == "fail"}
    chosen = [r for r in runs if (server_name(r), concurrency_of(r)) in failing][:MAX_TIMELINES]
    if chosen or not runs:
        return chosen
    top = max(concurrency_of(r) for r in runs)
    return [next(r for r in runs if concurrency_of(r) == top)]


@dataclass
class Knee:
    """One SLO of one capacity search against load: tonight's probes, the SLO's limit, the
    capacity found and the baseline's capacity (None where no verdict had one)."""

    test: str
    server: str
    over: str  # concurrency or rate
    slo: str  # its registry name: ttft_ms_p99
    label: str  # in words: p99 TTFT
    limit_ms: float
    probes: list[tuple[float, float, str]]  # (load, the SLO's value in ms, the probe's outcome)
    capacity: float | None
    baseline_capacity: float | None
    first_broken: bool  # this SLO is the one broken first
    baseline_probes: list[tuple[float, float, str]] = field(default_factory=list)  # the baseline search's


def _baseline_capacity(doc: Doc, test: str) -> tuple[float | None, list[Doc]]:
    """The capacity the test's search was judged against, and that search's probes (the
    baseline entry's provenance keeps them; none in an entry recorded without them)."""
    for gate in doc.get("verdicts", []):
        if gate.get("test") != test:
            continue
        for verdict in gate.get("verdicts", []):
            if verdict.get("metric") == CAPACITY:
                probes = (gate.get("baseline_provenance") or {}).get(CAPACITY_PROBES) or []
                return _number(verdict.get("baseline")), list(probes)
    return None, []


def _slo_points(probes: list[Doc], name: str) -> list[tuple[float, float, str]]:
    """(load, the SLO's value in ms, outcome) of each probe that read it, the latest at a load."""
    at_load: dict[float, Doc] = {}
    for probe in probes:
        load = _number(probe.get("load"))
        if load is not None:
            at_load[load] = probe
    return [
        (load, value, str(probe.get("outcome")))
        for load, probe in sorted(at_load.items())
        if (value := _number((probe.get("values_ms") or {}).get(name))) is not None
    ]


def knees(doc: Doc) -> list[Knee]:
    """Each SLO of each capacity search (`capacities`) with probes, the latest probe at a load kept."""
    out: list[Knee] = []
    for found in doc.get("capacities") or []:
        probes = list(found.get("probes") or [])
        if not any(_number(probe.get("load")) is not None for probe in probes):
            continue
        baseline, baseline_probes = _baseline_capacity(doc, str(found.get("test")))
        for slo in found.get("slos") or []:
            name = str(slo["name"])
            points = _slo_points(probes, name)
            out.append(
                Knee(
                    test=str(found.get("test")),
                    server=str(found.get("server")),
                    over=str(found.get("over") or "concurrency"),
                    slo=name,
                    label=str(slo.get("label") or name),
                    limit_ms=float(slo["limit_ms"]),
                    probes=points,
                    capacity=_number(found.get("capacity")),
                    baseline_capacity=baseline,
                    first_broken=found.get("first_broken") == name,
                    baseline_probes=_slo_points(baseline_probes, name),
                )
            )
    return out
