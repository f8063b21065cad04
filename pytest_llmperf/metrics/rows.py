"""A metric registry's rows and the registry that holds them: a row (`Metric`) and its
parts (direction, time scaling, tolerance, what a figure needs besides a completed request
and the reason it has no data without it, its noise estimator), and `Registry`: rows by
name and what the rest of the package asks of them. The rows themselves, and the registry
in force, are metrics/registry.py's."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


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


PER_POSITION = "acceptance_per_position"  # the summary's list, flattened to acceptance_pos1..k

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


def _trim_family(name: str) -> tuple[str, str] | None:
    """A family row's name around its `<i>` (acceptance_pos<i>: ("acceptance_pos", "")), else None."""
    before, marker, after = name.partition("<i>")
    return (before, after) if marker else None


class Registry:
    """Metric rows by name, and what the rest of the package asks of them."""

    def __init__(self, rows: Iterable[Metric]) -> None:
        self.rows = tuple(rows)
        self.by_name = {m.name: m for m in self.rows}
        if len(self.by_name) != len(self.rows):
            raise ValueError("a metric registry holds each name once")
        self.families = [
            (re.compile(re.escape(parts[0]) + "([1-9][0-9]*)" + re.escape(parts[1])), m)
            for m in self.rows
            if (parts := _trim_family(m.name)) is not None
        ]

    def with_rows(self, *rows: Metric) -> Registry:
        """A copy with `rows` added (a row of a known name replaces it)."""
        added = {m.name: m for m in rows}
        kept = [added.pop(m.name, m) for m in self.rows]
        return Registry([*kept, *added.values()])

    def metric(self, name: str) -> Metric:
        """The row of `name`; UnknownMetric (with the nearest names) otherwise."""
        found = self.by_name.get(name) if "<" not in name else None
        if found is not None:
            return found
        for pattern, family in self.families:
            if isinstance(name, str) and pattern.fullmatch(name):
                return family
        raise UnknownMetric(self.unknown_message(name))

    def is_known(self, name: str) -> bool:
        try:
            self.metric(name)
        except UnknownMetric:
            return False
        return True

    def unknown_message(self, name: Any, where: str = "") -> str:
        names = [n.replace("<i>", "1") for n in self.by_name]
        close = difflib.get_close_matches(str(name), names, n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}?" if close else f"known metrics: {', '.join(sorted(self.by_name))}"
        return f"{where}unknown metric {name!r}; {hint}"

    def needing(self, need: Needs) -> tuple[str, ...]:
        """The names of the rows that need `need`."""
        return tuple(m.name for m in self.rows if need in m.needs)

    def gated(self, *, speculative: bool, slos: bool) -> tuple[str, ...]:
        """What a run gates by default: the gated rows whose needs it plans (the spec-decode
        counters of a speculative server, SLOs), by group, then in the table's order."""
        planned = {Needs.SPEC_DECODE: speculative, Needs.SLOS: slos}
        rows = [m for m in self.rows if m.gated and all(planned.get(n, False) for n in m.needs)]
        return tuple(m.name for m in sorted(rows, key=lambda m: m.group))

    def columns(self) -> tuple[Metric, ...]:
        """The measured table's columns, by group, then in the table's order."""
        return tuple(sorted((m for m in self.rows if m.column), key=lambda m: m.group))

    def key_figures(self) -> tuple[str, ...]:
        """The key figures (JUnit properties of each run), by group, then in the table's order."""
        return tuple(m.name for m in sorted((m for m in self.rows if m.key), key=lambda m: m.group))

    def flatten(self, summary: Mapping[str, Any]) -> dict[str, float | None]:
        """A summary's known scalar figures by name, the per-position list as acceptance_pos1..k,
        then the figures rows derive from those."""
        flat: dict[str, float | None] = {}
        for key, value in summary.items():
            if key == PER_POSITION:
                for i, v in enumerate(value or (), start=1):
                    flat[f"acceptance_pos{i}"] = v
            elif self.is_known(key) and (
                value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
            ):
                flat[key] = value
        for m in self.rows:
            if m.derive is not None and m.name not in flat:
                flat[m.name] = m.derive(flat)
        return flat

    def to_real_time(self, figures: Mapping[str, Any], clock_speed: float) -> dict[str, Any]:
        out = dict(figures)
        if clock_speed == 1.0:
            return out
        for name, value in figures.items():
            if value is None or not self.is_known(name):
                continue
            scaling = self.metric(name).scaling
            if scaling is Scaling.DURATION:
                out[name] = value * clock_speed
            elif scaling is Scaling.RATE:
                out[name] = value / clock_speed
        return out

    def markdown_table(self) -> str:
        lines = [
            "| metric | unit | better | default tolerance | gated by default | meaning |",
            "|---|---|---|---|---|---|",
        ]
        for m in self.rows:
            tolerance = m.tolerance.allowed(m.direction) if m.tolerance else "(give one)"
            lines.append(f"| `{m.name}` | {m.unit} | {m.direction.value} | {tolerance} | {m.gated_on} | {m.meaning} |")
        return "\n".join(lines)
