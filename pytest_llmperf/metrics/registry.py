"""The metric registry: every figure a run can be judged on, with its direction, unit,
default tolerance, time scaling, decimals and meaning. Nothing else infers a metric's
nature from its name. `acceptance_pos<i>` stands for every draft position.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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


class UnknownMetric(ValueError):
    """A metric name the registry does not know; the message lists the nearest names."""


_H, _L = Direction.HIGHER, Direction.LOWER
_REL5, _REL10 = Tolerance("relative", 0.05), Tolerance("relative", 0.10)
_REL3 = Tolerance("relative", 0.03)
_LATENCY = {
    "ttft": "time to first token: first token chunk (any chunk with choices) minus send time",
    "tpot": "time per output token: (E2EL - TTFT) / (output tokens - 1), per request",
    "itl": "inter-chunk latency, pooled over every chunk gap (per chunk, not per token)",
    "e2el": "end-to-end latency: last token chunk minus send time",
}
_TTFA = (
    "time to first answer token (reasoning runs): first chunk with answer text (`content`, after the "
    "reasoning) minus send time, over the requests that answered"
)
_STATS = {"mean": "mean", "median": "median", "p90": "90th percentile", "p99": "99th percentile"}
# Five requests on each side of a percentile (ten for the mean): with fewer, one request
# changing rank moves the statistic by the gap between two.
MIN_EACH_SIDE = 5
_MIN_REQUESTS = {
    "mean": 2 * MIN_EACH_SIDE,
    "median": 2 * MIN_EACH_SIDE,
    "p90": 10 * MIN_EACH_SIDE,
    "p99": 100 * MIN_EACH_SIDE,
}

_TABLE: tuple[Metric, ...] = (
    Metric("decode_tok_s", _H, "tok/s", Scaling.RATE, 1, "sum of output tokens (from `usage`) / wall duration", _REL5),
    Metric(
        "steady_decode_tok_s",
        _H,
        "tok/s",
        Scaling.RATE,
        1,
        "output tokens / s while >= 90% of the concurrency was in flight (no ramp-down tail)",
        _REL3,  # the gated decode figure: 3 % catches a 5 % drop
    ),
    Metric("prefill_tok_s", _H, "tok/s", Scaling.RATE, 1, "sum of prompt tokens / wall duration", _REL5),
    Metric("total_tok_s", _H, "tok/s", Scaling.RATE, 1, "prompt and output tokens / wall duration"),
    Metric("request_throughput", _H, "req/s", Scaling.RATE, 3, "completed requests / wall duration", _REL5),
    Metric(
        "request_goodput",
        _H,
        "req/s",
        Scaling.RATE,
        3,
        "completed requests meeting every SLO (TTFT, TPOT, E2EL <= the marker's `slos=` or --llmperf-slos, ms) "
        "/ wall duration, as `vllm bench serve --goodput`; none without SLOs",
        _REL5,
    ),
    Metric(
        "slo_attainment",
        _H,
        "ratio",
        Scaling.NONE,
        3,
        "share of completed requests meeting every SLO; none without SLOs",
        Tolerance("absolute", 0.05),
    ),
    Metric("per_stream_tok_s", _H, "tok/s", Scaling.RATE, 1, "1 / median TPOT: the decode speed one stream sees"),
    *(
        Metric(
            f"{kind}_ms_{stat}",
            _L,
            "ms",
            Scaling.DURATION,
            1,
            f"{_STATS[stat]} {meaning}",
            _REL10 if stat == "median" else None,
            None if kind == "itl" else _MIN_REQUESTS[stat],  # ITL: over chunk gaps, not requests
        )
        for kind, meaning in _LATENCY.items()
        for stat in _STATS
    ),
    *(
        Metric(
            f"ttfa_ms_{stat}",
            _L,
            "ms",
            Scaling.DURATION,
            1,
            f"{_STATS[stat]} {_TTFA}",
            _REL10 if stat == "median" else None,
            _MIN_REQUESTS[stat],
        )
        for stat in _STATS
    ),
    Metric(
        "answered",
        _H,
        "requests",
        Scaling.NONE,
        0,
        "reasoning runs: completed requests whose reply got past its reasoning to answer text",
    ),
    Metric(
        "total_reasoning_tokens",
        _L,
        "tokens",
        Scaling.NONE,
        0,
        "reasoning runs: reasoning tokens of completed requests (usage `completion_tokens_details.reasoning_tokens`)",
    ),
    Metric(
        "total_answer_tokens",
        _H,
        "tokens",
        Scaling.NONE,
        0,
        "reasoning runs: output tokens that are not reasoning (the answer, `</think>` and EOS included)",
    ),
    Metric(
        "reasoning_share",
        _L,
        "ratio",
        Scaling.NONE,
        3,
        "reasoning runs: reasoning tokens / output tokens, over completed requests",
    ),
    Metric(
        "acceptance_rate",
        _H,
        "ratio",
        Scaling.NONE,
        3,
        "Δaccepted / Δdraft tokens (vLLM's spec-decode counters over the run)",
        Tolerance("absolute", 0.02),  # the gated acceptance figure: 0.02 catches a 0.03 drop
    ),
    Metric("acceptance_length", _H, "tokens", Scaling.NONE, 2, "1 + Δaccepted / Δdrafts", _REL5),
    Metric("acceptance_pos<i>", _H, "ratio", Scaling.NONE, 3, "Δaccepted at draft position i / Δdrafts"),
    Metric("mtp_speedup", _H, "x", Scaling.NONE, 3, "MTP steady decode tok/s / base's, same workload", _REL5),
    Metric("completed", _H, "requests", Scaling.NONE, 0, "requests that finished without error"),
    Metric("failed", _L, "requests", Scaling.NONE, 0, "requests that ended in an error"),
    Metric("total_prompt_tokens", _H, "tokens", Scaling.NONE, 0, "prompt tokens of completed requests"),
    Metric("total_output_tokens", _H, "tokens", Scaling.NONE, 0, "output tokens of completed requests"),
    Metric("duration_s", _L, "s", Scaling.DURATION, 2, "first dispatch to last completion, warm-up excluded"),
)

METRICS: dict[str, Metric] = {m.name: m for m in _TABLE}
# None (absent from tables, reports and baselines) unless a run's replies carried reasoning.
REASONING_METRICS = (
    *(f"ttfa_ms_{stat}" for stat in _STATS),
    "answered",
    "total_reasoning_tokens",
    "total_answer_tokens",
    "reasoning_share",
)
GATED_DECODE = "steady_decode_tok_s"  # what an MTP speedup divides and the default gate judges
_FAMILIES = {re.compile(r"acceptance_pos([1-9][0-9]*)"): METRICS["acceptance_pos<i>"]}


def metric(name: str) -> Metric:
    """The registry entry for `name`; UnknownMetric (with the nearest names) otherwise."""
    found = METRICS.get(name) if "<" not in name else None
    if found is not None:
        return found
    for pattern, family in _FAMILIES.items():
        if isinstance(name, str) and pattern.fullmatch(name):
            return family
    raise UnknownMetric(unknown_message(name))


def is_known(name: str) -> bool:
    try:
        metric(name)
    except UnknownMetric:
        return False
    return True


def unknown_message(name: Any, where: str = "") -> str:
    names = [n for n in METRICS if "<" not in n] + ["acceptance_pos1"]
    close = difflib.get_close_matches(str(name), names, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}?" if close else f"known metrics: {', '.join(sorted(METRICS))}"
    return f"{where}unknown metric {name!r}; {hint}"


def check_names(names: Iterable[str], where: str = "") -> None:
    """Raise UnknownMetric for the first name the registry does not know."""
    for name in names:
        if not is_known(name):
            raise UnknownMetric(unknown_message(name, where))


def flatten(summary: Mapping[str, Any]) -> dict[str, float | None]:
    """A summary's known scalar figures by name, the per-position list as acceptance_pos1..k."""
    flat: dict[str, float | None] = {}
    for key, value in summary.items():
        if key == "acceptance_per_position":
            for i, v in enumerate(value or (), start=1):
                flat[f"acceptance_pos{i}"] = v
        elif is_known(key) and (value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))):
            flat[key] = value
    return flat


def to_real_time(figures: Mapping[str, Any], clock_speed: float) -> dict[str, Any]:
    """Figures from a clock `clock_speed` times faster, in real time: durations longer, rates lower."""
    out = dict(figures)
    if clock_speed == 1.0:
        return out
    for name, value in figures.items():
        if value is None or not is_known(name):
            continue
        scaling = metric(name).scaling
        if scaling is Scaling.DURATION:
            out[name] = value * clock_speed
        elif scaling is Scaling.RATE:
            out[name] = value / clock_speed
    return out


def format_value(name: str, value: float | None) -> str:
    """A figure with the decimals that suit its metric: 407.9 tok/s, 0.670 rate, 624.0 ms."""
    if value is None:
        return "-"
    return f"{value:.{metric(name).decimals}f}"


def markdown_table() -> str:
    """The metric table of docs/reference/metrics.md, generated from the registry (a test keeps them equal)."""
    lines = ["| metric | unit | better | default tolerance | meaning |", "|---|---|---|---|---|"]
    for m in _TABLE:
        tolerance = m.tolerance.allowed(m.direction) if m.tolerance else "(give one)"
        lines.append(f"| `{m.name}` | {m.unit} | {m.direction.value} | {tolerance} | {m.meaning} |")
    return "\n".join(lines)
