"""The SLOs of a capacity search, as a test writes them (`{"ttft_ms_p99": 2000,
"tpot_ms_p99": 80}`: a registered per-request latency percentile and its limit in ms), and
the verdict of one probe's runs against them.

A request meets the SLOs as goodput judges it (metrics/goodput.py: each value at or under
its limit; a failed request meets none, so a server shedding load by errors gains nothing).
The share asked is the keys' percentile (p99: 99 % of requests meet every SLO), one share
for the set as goodput's definition has it. A probe meets the SLOs when that share, pooled
over its runs, is decided at or above the asked share at the confidence (its interval wholly
at or above it), is broken when decided below, and is undecided otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from pytest_llmperf.metrics.goodput import MS_PER_S, SLO_NAMES, format_slos, is_good, request_values
from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.metrics.registry import is_known, unknown_message
from pytest_llmperf.metrics.summary import PERCENTILES
from pytest_llmperf.stats.proportion import Share, pooled_share

EXAMPLE = {"ttft_ms_p99": 2000, "tpot_ms_p99": 80}
_FORM = (
    f"an SLO is {', '.join(SLO_NAMES)} at {', '.join(PERCENTILES)} with its limit in ms, "
    f"e.g. slos={EXAMPLE!r} (99 % of requests within both)"
)
_LABELS = {"median": "p50"}


class Outcome(str, Enum):
    MET = "met"
    BROKEN = "broken"
    UNDECIDED = "undecided"  # the interval straddles the asked share: never read as a pass


@dataclass(frozen=True)
class SLO:
    kind: str  # goodput's name: ttft, tpot or e2el
    stat: str  # median, p90 or p99: the share of requests that must meet the limit
    limit_ms: float

    @property
    def name(self) -> str:
        """Its registry name: ttft_ms_p99."""
        return f"{self.kind}_ms_{self.stat}"

    @property
    def label(self) -> str:
        """In words: p99 TTFT."""
        return f"{_LABELS.get(self.stat, self.stat)} {self.kind.upper()}"


def _slo(name: Any, limit: Any) -> SLO:
    """One SLO of the form, checked against the registry; ValueError saying the fix."""
    if not isinstance(name, str) or not is_known(name):
        raise ValueError(f"{unknown_message(name, 'slos: ')}; {_FORM}")
    kind, _, stat = name.rpartition("_ms_")
    if kind not in SLO_NAMES or stat not in (*PERCENTILES, "mean"):
        raise ValueError(f"slos: {name!r} is not a per-request latency percentile; {_FORM}")
    if stat == "mean":
        raise ValueError(
            f"slos: {name!r} is a mean, which no share of requests meets; "
            f"write {kind}_ms_p99 (99 % of requests within the limit) or {kind}_ms_p90, "
            f"e.g. {{'{kind}_ms_p99': {limit!r}}}"
        )
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit) or limit < 0:
        raise ValueError(f"slos: {name}={limit!r}: give the limit as milliseconds, a number >= 0, e.g. {name!r}: 2000")
    return SLO(kind, stat, float(limit))


@dataclass(frozen=True)
class SLOSet:
    slos: tuple[SLO, ...]
    share: float  # of requests that must meet every SLO

    @classmethod
    def parse(cls, form: Mapping[str, float]) -> SLOSet:
        """`{"ttft_ms_p99": 2000, "tpot_ms_p99": 80}` -> the SLOs and their share (0.99)."""
        if not isinstance(form, Mapping):
            raise ValueError(f"slos must be a dict of metric name to milliseconds; {_FORM}; got {form!r}")
        if not form:
            raise ValueError(f"slos is empty: a capacity is judged against at least one SLO; {_FORM}")
        slos = tuple(sorted((_slo(n, v) for n, v in form.items()), key=lambda s: SLO_NAMES.index(s.kind)))
        stats = sorted({s.stat for s in slos}, key=list(PERCENTILES).index)
        if len(stats) > 1:
            names = ", ".join(s.name for s in slos)
            raise ValueError(
                f"slos: {names} ask different shares of requests ({', '.join(stats)}), and goodput judges one "
                f"share meeting every SLO: write every SLO at one percentile, "
                f"e.g. {', '.join(f'{s.kind}_ms_{stats[-1]}' for s in slos if s.stat != stats[-1])}"
            )
        return cls(slos, PERCENTILES[stats[0]] / 100.0)

    @property
    def limits_ms(self) -> dict[str, float]:
        """Goodput's form: {'ttft': 2000.0, 'tpot': 80.0}."""
        return {s.kind: s.limit_ms for s in self.slos}

    @property
    def goodput_text(self) -> str:
        """The workload's `slos` text for these limits ('ttft:2000 tpot:80'), so its runs report goodput."""
        return format_slos(self.limits_ms)


@dataclass(frozen=True)
class ProbeResult:
    """One run at one load: each completed request's TTFT, TPOT and E2EL in real-time seconds
    (as metrics/goodput.request_values reads them), the requests that failed, its seconds."""

    requests: tuple[Mapping[str, float], ...]
    failed: int = 0
    seconds: float | None = None

    def __post_init__(self) -> None:
        if self.failed < 0:
            raise ValueError(f"failed must be a count >= 0, got {self.failed!r}")
        if self.seconds is not None and not (math.isfinite(self.seconds) and self.seconds >= 0):
            raise ValueError(f"seconds must be a finite number >= 0 or None, got {self.seconds!r}")

    @classmethod
    def from_records(
        cls, records: Iterable[RequestRecord], clock_speed: float = 1.0, seconds: float | None = None, ramp: int = 0
    ) -> ProbeResult:
        """A run's records as goodput reads them: a request without a token event failed. Left
        out: the first `ramp` requests sent (a closed loop's opening wave, its `concurrency`
        requests sent at once: a burst no steady population of users makes, whose queue
        for prefill would set the TTFT of a short run), and a request cut at the run's time
        cap, as the run's failure count leaves it out (the benchmark ended it, not the server)."""
        steady = sorted(records, key=lambda r: r.send_time)[max(ramp, 0) :]
        values = [request_values(r, clock_speed) for r in steady if not r.cut_at_cap]
        return cls(tuple(v for v in values if v is not None), sum(v is None for v in values), seconds)

    @property
    def total(self) -> int:
        return len(self.requests) + self.failed


@dataclass(frozen=True)
class Reading:
    """One SLO over a probe's pooled runs: its percentile's value (completed requests, as the
    summary computes it) and the share of every request that met it alone."""

    slo: SLO
    value_ms: float | None
    met_share: float
    held: bool  # met_share at or above the asked share

    def describe(self) -> str:
        """'p99 TTFT 2,410 ms over 2,000 ms (+20.5 %)' or 'p99 TPOT 61 ms within 80 ms'."""
        limit = f"{format_ms(self.slo.limit_ms)} ms"
        if self.value_ms is None:
            return f"{self.slo.label}: no completed request (limit {limit})"
        if self.value_ms <= self.slo.limit_ms:
            return f"{self.slo.label} {format_ms(self.value_ms)} ms within {limit}"
        over = f" (+{(self.value_ms / self.slo.limit_ms - 1) * 100:.1f} %)" if self.slo.limit_ms > 0 else ""
        return f"{self.slo.label} {format_ms(self.value_ms)} ms over {limit}{over}"


def format_ms(value: float) -> str:
    """Milliseconds as the capacity lines write them: 2,410 or 61.3."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    share: Share  # of requests meeting every SLO, pooled over the runs, with its interval
    asked: float
    requests: int  # every request sent, failed ones included
    good: int
    failed: int
    runs: int
    readings: tuple[Reading, ...]

    @property
    def worst(self) -> Reading | None:
        """The SLO furthest from holding: the lowest share met alone, then the largest overshoot."""
        if not self.readings:
            return None
        return min(self.readings, key=lambda r: (r.met_share, -((r.value_ms or 0.0) / (r.slo.limit_ms or 1.0))))

    @property
    def broken(self) -> tuple[Reading, ...]:
        """The SLOs that did not hold alone, worst first."""
        return tuple(sorted((r for r in self.readings if not r.held), key=lambda r: r.met_share))

    def describe(self) -> str:
        """'broken: 96.1 % of 1,000 requests (2 runs) met every SLO (95.0-97.0 %), 99 % asked; p99 TTFT ...'."""
        head = (
            f"{self.outcome.value}: {self.share.share * 100:.1f} % of {self.requests:,} requests ({self.runs} "
            f"run{'s' if self.runs != 1 else ''}) met every SLO ({self.share.low * 100:.1f}-"
            f"{self.share.high * 100:.1f} %), {self.asked * 100:g} % asked"
            + (f", {self.failed:,} failed" if self.failed else "")
        )
        return "; ".join([head, *(r.describe() for r in self.readings)])


def _reading(slo: SLO, runs: Sequence[ProbeResult], total: int, asked: float) -> Reading:
    values = [r[slo.kind] * MS_PER_S for run in runs for r in run.requests]
    value = float(np.percentile(values, PERCENTILES[slo.stat])) if values else None
    met = sum(is_good(r, {slo.kind: slo.limit_ms}) for run in runs for r in run.requests)
    share = met / total if total else 0.0
    return Reading(slo, value, share, share >= asked)


def judge(runs: Sequence[ProbeResult], slos: SLOSet, confidence: float) -> Verdict:
    """The verdict of one load's runs: met, broken or undecided at `confidence`, each SLO's reading."""
    limits = slos.limits_ms
    goods = [sum(is_good(r, limits) for r in run.requests) for run in runs]
    totals = [run.total for run in runs]
    share = pooled_share(goods, totals, confidence)
    total = sum(totals)
    if total and share.low >= slos.share:
        outcome = Outcome.MET
    elif total and share.high < slos.share:
        outcome = Outcome.BROKEN
    else:
        outcome = Outcome.UNDECIDED
    readings = tuple(_reading(s, runs, total, slos.share) for s in slos.slos)
    failed = sum(run.failed for run in runs)
    return Verdict(outcome, share, slos.share, total, sum(goods), failed, len(runs), readings)
