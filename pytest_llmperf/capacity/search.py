"""The capacity search over concurrency (or request rate): a bracketing pass doubling the
load from the lowest of `within` to its highest until a probe is decided broken, then
bisection to the resolution asked (a step of the load, or a percentage of it). Each probe
is the caller's `probe(load)`: one run of the test's workload at that load on a fresh
start. A probe is repeated until its runs, pooled, decide it met or broken (slo.judge) or
the budget is spent: a probe left undecided is reported so, never read as a pass, and the
bisection narrows each side of it instead. The interval's two bounds are each made on more
than one fresh start (`confirm_runs`), so neither rests on one lucky run; a bound the
repetition overturns is bisected past.

The capacity is the largest load decided met; its interval runs from there to the smallest
load decided broken above it. The search starts no server and knows nothing of pytest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pytest_llmperf.capacity.slo import (
    Outcome,
    ProbeResult,
    Reading,
    SLOSet,
    Verdict,
    format_ms,
    judge,
)

Probe = Callable[[float], ProbeResult]
UNITS = {"concurrency": "users", "rate": "req/s"}
# The provenance key a recorded capacity keeps its search's probes under, so a later report
# draws the baseline's curve beside tonight's.
CAPACITY_PROBES = "capacity_probes"


def _whole(over: str) -> bool:
    return over == "concurrency"


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Resolution:
    """When the bisection stops: the interval at most `step` wide (load units), or at most
    `percent` % of its lower end; concurrency stops too at neighbouring whole users."""

    step: float | None = None
    percent: float | None = None

    @classmethod
    def parse(cls, value: float | str, over: str = "concurrency") -> Resolution:
        """4 (a step of the load) or '5%' (of the load)."""
        fix = f"give a step of the load in {UNITS.get(over, 'load')} (resolution=4) or a percentage (resolution='5%')"
        percent = isinstance(value, str) and value.strip().endswith("%")
        if isinstance(value, str):
            try:
                step = float(value.strip().removesuffix("%"))
            except ValueError:
                raise ValueError(f"resolution {value!r} is not a number; {fix}") from None
        elif _number(value):
            step = float(value)
        else:
            raise ValueError(f"resolution must be a number > 0, got {value!r}; {fix}")
        if not math.isfinite(step) or step <= 0:
            raise ValueError(f"resolution must be > 0, got {value!r}; {fix}")
        if percent:
            return cls(percent=step)
        if _whole(over) and not step.is_integer():
            raise ValueError(f"resolution={value!r}: concurrency moves in whole users; {fix}")
        return cls(step=step)

    def closed(self, low: float, high: float, over: str) -> bool:
        if _whole(over) and high - low <= 1:
            return True
        if self.step is not None:
            return high - low <= self.step
        return high - low <= low * (self.percent or 0.0) / 100

    def __str__(self) -> str:
        return f"{self.percent:g} %" if self.percent is not None else f"{self.step:g}"


@dataclass(frozen=True)
class ProbeRecord:
    """One load probed: its verdict over its runs, and their seconds (None if a run gave none)."""

    load: float
    verdict: Verdict
    seconds: float | None

    @property
    def outcome(self) -> Outcome:
        return self.verdict.outcome

    @property
    def runs(self) -> int:
        return self.verdict.runs


@dataclass(frozen=True)
class Breach:
    """The lowest load decided broken and its verdict: its worst SLO, and those that held."""

    load: float
    verdict: Verdict

    @property
    def reading(self) -> Reading:
        worst = self.verdict.worst
        assert worst is not None  # an SLOSet holds at least one SLO
        return worst

    def describe(self) -> str:
        """'p99 TTFT 2,000 ms exceeded at 40 (2,410 ms); p99 TPOT held', or the share that met
        every SLO where no percentile went over its limit (failures, or SLOs missed by
        different requests); other SLOs over their limits there follow, 'exceeded too'."""
        r, v, at = self.reading, self.verdict, _load(self.load)
        if _over(r):
            text = f"{r.slo.label} {format_ms(r.slo.limit_ms)} ms exceeded at {at} ({format_ms(r.value_ms or 0.0)} ms)"
        else:
            text = f"{v.share.share * 100:.1f} % met every SLO at {at}, {v.asked * 100:g} % asked"
        if v.failed:
            text += f", {v.failed:,} of {v.requests:,} requests failed"
        parts = [text]
        parts += [
            f"{x.slo.label} {format_ms(x.slo.limit_ms)} ms exceeded too ({format_ms(x.value_ms or 0.0)} ms)"
            for x in v.broken
            if x is not r and _over(x)
        ]
        held = [x.slo.label for x in v.readings if x.held and not (x is r and _over(r))]
        if held:
            parts.append(f"{', '.join(held)} held")
        return "; ".join(parts)


def _over(reading: Reading) -> bool:
    return reading.value_ms is not None and reading.value_ms > reading.slo.limit_ms


@dataclass(frozen=True)
class Capacity:
    over: str
    within: tuple[float, float]
    resolution: Resolution
    slos: SLOSet
    capacity: float | None  # the largest load decided met; None: none was
    broken_at: float | None  # the smallest load decided broken above it; None: none was
    probes: tuple[ProbeRecord, ...]  # in the order they were made
    budget_spent: bool

    @property
    def interval(self) -> tuple[float | None, float | None]:
        return self.capacity, self.broken_at

    @property
    def undecided(self) -> tuple[float, ...]:
        """Loads left undecided inside the interval: the boundary lies somewhere among them."""
        low, high = self.capacity, self.broken_at
        return tuple(
            sorted(
                p.load
                for p in self.probes
                if p.outcome is Outcome.UNDECIDED and (low is None or p.load > low) and (high is None or p.load < high)
            )
        )

    @property
    def resolved(self) -> bool:
        """Bounded both sides, nothing undecided between, and as narrow as the resolution."""
        low, high = self.interval
        if low is None or high is None or self.undecided:
            return False
        return self.resolution.closed(low, high, self.over)

    @property
    def first_broken(self) -> Breach | None:
        broken = [p for p in self.probes if p.outcome is Outcome.BROKEN]
        first = min(broken, key=lambda p: p.load, default=None)
        return Breach(first.load, first.verdict) if first else None

    @property
    def runs(self) -> int:
        return sum(p.runs for p in self.probes)

    @property
    def seconds(self) -> float | None:
        """The probes' seconds together; None unless every probe reported its own."""
        seconds = [p.seconds for p in self.probes]
        return None if not seconds or None in seconds else sum(s or 0.0 for s in seconds)

    def describe(self) -> str:
        """One line: 'capacity 36 users (36-40): p99 TTFT 2,000 ms exceeded at 40 (2,410 ms);
        p99 TPOT held; 9 runs, 540 s'."""
        parts: list[str] = []
        breach = self.first_broken
        if breach is not None:
            parts.append(breach.describe())
        if self.undecided:
            parts.append(f"undecided at {', '.join(map(_load, self.undecided))}")
        cost = f"{self.runs} run{'s' if self.runs != 1 else ''}"
        if self.seconds is not None:
            cost += f", {self.seconds:,.0f} s"
        parts.append(cost + ("; budget spent" if self.budget_spent else ""))
        return f"{self._figure()}: {'; '.join(parts)}"

    def _figure(self) -> str:
        unit = UNITS[self.over]
        low, high = self.interval
        span = f"{_load(self.within[0])}-{_load(self.within[1])} {unit}"
        if low is None and high is not None and high <= self.within[0]:
            return f"no capacity within {span} (broken at the lowest load)"
        if low is None:
            return f"capacity undecided within {span} (no load decided met)"
        if high is None:
            return f"capacity at least {_load(low)} {unit} (nothing up to {_load(self.within[1])} decided broken)"
        return f"capacity {_load(low)} {unit} ({_load(low)}-{_load(high)}{'' if self.resolved else ', unresolved'})"


def _load(value: float) -> str:
    return f"{value:g}"


class _Probes:
    """The probes made so far and the budget left: each load's runs, repeated until decided
    (and at least as many as asked), `runs_per_probe` made, or the budget spent."""

    def __init__(
        self,
        probe: Probe,
        slos: SLOSet,
        confidence: float,
        budget: tuple[int, int, float | None],
    ) -> None:
        self.probe, self.slos, self.confidence = probe, slos, confidence
        self.runs_per_probe, self.runs_left, self.seconds_left = budget
        self.made: dict[float, ProbeRecord] = {}
        self.results: dict[float, list[ProbeResult]] = {}
        self.cut_short = False  # a probe left undecided because the budget ran out

    @property
    def spent(self) -> bool:
        return self.runs_left <= 0 or (self.seconds_left is not None and self.seconds_left <= 0)

    def run(self, load: float) -> ProbeResult:
        result = self.probe(load)
        if not isinstance(result, ProbeResult):
            raise TypeError(f"probe({load:g}) must return a ProbeResult, got {type(result).__name__}")
        self.runs_left -= 1
        if self.seconds_left is not None and result.seconds is not None:
            self.seconds_left -= result.seconds
        return result

    def measure(self, load: float, least: int = 1) -> Outcome:
        """Runs at `load` (more of them if it was probed before) until decided and `least` made."""
        runs = self.results.setdefault(load, [])
        verdict = self.made[load].verdict if load in self.made else None
        while (
            verdict is None
            or len(runs) < least
            or (verdict.outcome is Outcome.UNDECIDED and len(runs) < self.runs_per_probe)
        ):
            if self.spent:
                self.cut_short = True
                break
            runs.append(self.run(load))
            verdict = judge(runs, self.slos, self.confidence)
        assert verdict is not None  # a load is measured only while the budget lasts
        seconds = [r.seconds for r in runs]
        total = None if None in seconds else sum(s or 0.0 for s in seconds)
        self.made[load] = ProbeRecord(load, verdict, total)
        return verdict.outcome

    def bounds(self) -> tuple[float | None, float | None, list[float]]:
        """The largest load decided met, the smallest decided broken above it, the undecided between."""
        passed = max((x for x, p in self.made.items() if p.outcome is Outcome.MET), default=None)
        failed = min(
            (x for x, p in self.made.items() if p.outcome is Outcome.BROKEN and (passed is None or x > passed)),
            default=None,
        )
        undecided = sorted(
            x
            for x, p in self.made.items()
            if p.outcome is Outcome.UNDECIDED and (passed is None or x > passed) and (failed is None or x < failed)
        )
        return passed, failed, undecided


def _bracket(probes: _Probes, low: float, high: float) -> bool:
    """Double the load from `low` until a probe is decided broken or `high` is probed; False
    when the budget ran out first."""
    load = low
    while not probes.spent:
        if probes.measure(load) is Outcome.BROKEN or load >= high:
            return True
        load = min(load * 2, high)
    return False


def _next_load(probes: _Probes, resolution: Resolution, over: str) -> float | None:
    """The midpoint of the first gap wider than the resolution: between the largest pass and
    the smallest fail, or, with undecided loads between them, on each side of those."""
    passed, failed, undecided = probes.bounds()
    if undecided:
        gaps = [(passed, undecided[0]), (undecided[-1], failed)]
    else:
        gaps = [(passed, failed)]
    for low, high in gaps:
        if low is None or high is None or resolution.closed(low, high, over):
            continue
        mid = int(low + high) // 2 if _whole(over) else (low + high) / 2
        if low < mid < high and mid not in probes.made:
            return mid
    return None


def _next(probes: _Probes, resolution: Resolution, over: str, confirm: int) -> tuple[float, int] | None:
    """The next load and the runs it needs: a new load to bisect at, else a bound of the
    interval made on fewer than `confirm` fresh starts, so no bound rests on one lucky run."""
    load = _next_load(probes, resolution, over)
    if load is not None:
        return load, 1
    passed, failed, _ = probes.bounds()
    for bound in (passed, failed):
        if bound is not None and probes.made[bound].runs < confirm:
            return bound, confirm
    return None


def _within(within: tuple[float, float], over: str) -> tuple[float, float]:
    unit = UNITS[over]
    try:
        low, high = within
    except (TypeError, ValueError):
        raise ValueError(f"within must be (lowest, highest) {unit}, e.g. within=(1, 256); got {within!r}") from None
    if not (_number(low) and _number(high) and low > 0 and high > 0):
        raise ValueError(f"within={within!r}: give loads > 0 in {unit}, e.g. within=(1, 256)")
    if _whole(over) and not (float(low).is_integer() and float(high).is_integer()):
        raise ValueError(f"within={within!r}: concurrency is whole users, e.g. within=(1, 256)")
    if low > high:
        raise ValueError(f"within={within!r} is reversed: write within=({high:g}, {low:g}), the lowest load first")
    return (int(low), int(high)) if _whole(over) else (float(low), float(high))


def _budget(
    runs_per_probe: int, confirm_runs: int, max_runs: int, max_seconds: float | None
) -> tuple[int, int, float | None]:
    for name, value in (("runs_per_probe", runs_per_probe), ("confirm_runs", confirm_runs), ("max_runs", max_runs)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number of runs >= 1, got {value!r}")
    if confirm_runs > runs_per_probe:
        raise ValueError(
            f"confirm_runs={confirm_runs} is more than runs_per_probe={runs_per_probe}: "
            f"give runs_per_probe >= {confirm_runs}, or fewer confirm_runs"
        )
    if max_seconds is not None and not (_number(max_seconds) and max_seconds > 0):
        raise ValueError(f"max_seconds must be seconds > 0, or None for no limit; got {max_seconds!r}")
    return runs_per_probe, max_runs, max_seconds


def search(
    probe: Probe,
    slos: SLOSet | Mapping[str, float],
    *,
    within: tuple[float, float],
    resolution: float | str,
    over: str = "concurrency",
    confidence: float = 0.95,
    runs_per_probe: int = 5,
    confirm_runs: int = 2,
    max_runs: int = 40,
    max_seconds: float | None = None,
) -> Capacity:
    """The largest load within `within` whose runs meet every SLO in the asked share, with its
    interval. `probe(load)` makes one run at `load` (a whole number of users for concurrency)
    on a fresh start. A probe is repeated up to `runs_per_probe` runs until decided at
    `confidence`, and the interval's bounds to at least `confirm_runs`; the search stops when
    the interval is as narrow as `resolution` and its bounds confirmed, or the budget
    (`max_runs` runs, `max_seconds` of the runs' reported seconds) is spent."""
    if over not in UNITS:
        raise ValueError(f"over must be 'concurrency' or 'rate', got {over!r}")
    set_ = slos if isinstance(slos, SLOSet) else SLOSet.parse(slos)
    low, high = _within(within, over)
    step = Resolution.parse(resolution, over)
    if not (_number(confidence) and 0.5 <= confidence < 1):
        raise ValueError(f"confidence must be in [0.5, 1), e.g. 0.95; got {confidence!r}")
    probes = _Probes(probe, set_, confidence, _budget(runs_per_probe, confirm_runs, max_runs, max_seconds))
    bracketed = _bracket(probes, low, high)
    while bracketed and not probes.spent and (todo := _next(probes, step, over, confirm_runs)) is not None:
        probes.measure(*todo)
    passed, failed, _ = probes.bounds()
    spent = probes.cut_short or not bracketed or (probes.spent and _next(probes, step, over, confirm_runs) is not None)
    return Capacity(over, (low, high), step, set_, passed, failed, tuple(probes.made.values()), spent)
