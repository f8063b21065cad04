"""A metric registry's row and its parts: direction, time scaling, tolerance, what a
figure needs besides a completed request (and the reason it has no data without it), its
noise estimator. The rows themselves are metrics/registry.py's."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum


class Direction(str, Enum):
    HIGHER = "higher"  # higher is better (throughput, acceptance)
    LOWER = "lower"  # lower is better (latency)

    @classmethod
    def parse(cls, value: Direction | str) -> Direction:
        if isinstance(value, Direction):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            raise ValueError(f"direction must be 'higher' or 'lower', got {value!r}") from None


class Scaling(str, Enum):
    """How a figure measured on a clock `speed` times faster reads in real time."""

    DURATION = "duration"  # x speed: latencies, durations
    RATE = "rate"  # / speed: throughputs
    NONE = "none"  # ratios and counts


@dataclass(frozen=True)
class Tolerance:
    kind: str  # "relative" (limit is a fraction: 0.05 = 5%) or "absolute" (metric units)
    limit: float  # non-negative magnitude

    def __post_init__(self) -> None:
        if self.kind not in ("relative", "absolute"):
            raise ValueError(f"tolerance kind must be 'relative' or 'absolute', got {self.kind!r}")
        if isinstance(self.limit, bool) or not isinstance(self.limit, (int, float)):
            raise ValueError(f"tolerance limit must be a number, got {self.limit!r}")
        if not math.isfinite(self.limit) or self.limit < 0:
            raise ValueError(f"tolerance limit must be a finite number >= 0, got {self.limit!r}")
        object.__setattr__(self, "limit", float(self.limit))

    def allowed(self, direction: Direction | str) -> str:
        """Human form with the sign of the allowed (worse) move: "-5%", "+10%", "-0.03"."""
        sign = "-" if Direction.parse(direction) is Direction.HIGHER else "+"
        if self.kind == "relative":
            return f"{sign}{_trim(self.limit * 100)}%"
        return f"{sign}{_trim(self.limit)}"

    def __str__(self) -> str:
        return f"{_trim(self.limit * 100)}%" if self.kind == "relative" else _trim(self.limit)


def _trim(x: float) -> str:
    """Shortest readable form: 5.0 -> "5", 0.030000000000000002 -> "0.03"."""
    return f"{x:.6g}"


class Needs(Enum):
    """What a figure needs besides a completed request; the first a run lacks is why the
    figure has no data (the value). Their order is the order of the groups of gated
    figures and of table columns."""

    SPEC_DECODE = "the server's spec-decode counters gave no figure"
    BASE_RUN = "decode tok/s is missing on this run or on its base run"
    REASONING = (
        "no reply carried reasoning: it needs a chat run (endpoint='chat') of a server that streams "
        "reasoning (vLLM with --reasoning-parser)"
    )
    ANSWER = "no reply got past its reasoning to answer text: raise max_tokens"
    SLOS = (
        "no SLOs were given, so there is no goodput: set slos='ttft:500 tpot:50' (ms) in the llmperf "
        "marker or --llmperf-slos for the session"
    )

    @property
    def reason(self) -> str:
        return str(self.value)


# The needs a run plans before it starts, as the documentation's "gated by default" says them.
PLANNED = {Needs.SPEC_DECODE: "speculative servers", Needs.SLOS: "runs with SLOs"}


@dataclass(frozen=True)
class OverRequests:
    """A noise estimator: the figure is a statistic (mean, median, p90, p99) of one
    per-request column (metrics/uncertainty.py's ttft_ms, tpot_ms, e2el_ms), recomputed on
    each resample; with `inverse` k, k over that statistic."""

    column: str
    stat: str
    inverse: float | None = None


@dataclass(frozen=True)
class ScaledRatio:
    """A noise estimator: the run's figure scaled on each resample by the move of a ratio
    of per-request sums, `numerator` columns (none: one per request) over `denominator`
    (None: one per request); `offset` stays out of the scaling (1 + accepted / drafts)."""

    numerator: tuple[str, ...]
    denominator: str | None
    offset: float = 0.0


Estimator = OverRequests | ScaledRatio
Derive = Callable[[Mapping[str, "float | None"]], "float | None"]


@dataclass(frozen=True)
class Metric:
    name: str
    direction: Direction
    unit: str
    scaling: Scaling
    decimals: int
    meaning: str
    tolerance: Tolerance | None = None  # None: no default, a test or the project gives one
    min_requests: int | None = None  # a statistic over requests is judged from this many a run
    estimator: Estimator | None = None  # its paired noise on resampled requests; None: repetitions only
    needs: tuple[Needs, ...] = ()  # besides a completed request; the first a run lacks is why it has no data
    gated: bool = False  # gated by default on a run that plans its needs (a speculative server, SLOs)
    column: str = ""  # its header in the measured table (terminal, Markdown, HTML); "": not a column
    key: bool = False  # a key figure: a JUnit property of every run that has it
    derive: Derive | None = field(default=None, compare=False)  # from the run's other figures; None: the summary's

    @property
    def group(self) -> int:
        """Its place among gated figures and table columns: by its first need, none first."""
        return list(Needs).index(self.needs[0]) if self.needs else -1

    @property
    def gated_on(self) -> str:
        """The runs that gate it by default, in words ("" for none)."""
        if not self.gated:
            return ""
        return " and ".join(PLANNED[n] for n in self.needs if n in PLANNED) or "every run"


class UnknownMetric(ValueError):
    """A metric name the registry does not know; the message lists the nearest names."""
