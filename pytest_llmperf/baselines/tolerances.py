"""Tolerances and directions: how far a metric may move before it is a regression.

A tolerance is a magnitude; the metric's direction says which way is worse.
"5%" on decode tok/s (higher is better) allows measured >= baseline * 0.95;
"10%" on TTFT (lower is better) allows measured <= baseline * 1.10;
"0.03" on acceptance rate allows measured >= baseline - 0.03.
The same magnitude in the better direction is the "improved" threshold.

Precedence for a metric's tolerance: per-test marker > project ini > DEFAULT_TOLERANCES.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
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


DIRECTIONS: dict[str, Direction] = {
    "decode_tok_s": Direction.HIGHER,
    "prefill_tok_s": Direction.HIGHER,
    "request_throughput": Direction.HIGHER,
    "acceptance_length": Direction.HIGHER,
    "acceptance_rate": Direction.HIGHER,
    "mtp_speedup": Direction.HIGHER,
    "ttft_ms_median": Direction.LOWER,
    "tpot_ms_median": Direction.LOWER,
    "itl_ms_median": Direction.LOWER,
    "e2el_ms_median": Direction.LOWER,
}

DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "decode_tok_s": Tolerance("relative", 0.05),
    "prefill_tok_s": Tolerance("relative", 0.05),
    "request_throughput": Tolerance("relative", 0.05),
    "acceptance_length": Tolerance("relative", 0.05),
    "acceptance_rate": Tolerance("absolute", 0.03),
    "mtp_speedup": Tolerance("relative", 0.05),
    "ttft_ms_median": Tolerance("relative", 0.10),
    "tpot_ms_median": Tolerance("relative", 0.10),
    "itl_ms_median": Tolerance("relative", 0.10),
    "e2el_ms_median": Tolerance("relative", 0.10),
}

# Directions for metrics outside the table (ttft_ms_p99, per_stream_tok_s, ...),
# inferred from the summary's naming scheme. First match wins.
_DIRECTION_PATTERNS: tuple[tuple[re.Pattern[str], Direction], ...] = (
    (re.compile(r"tok_s|throughput|speedup"), Direction.HIGHER),  # before "_s": tok_s is a rate
    (re.compile(r"^acceptance"), Direction.HIGHER),
    (re.compile(r"(^|_)ms(_|$)"), Direction.LOWER),
    (re.compile(r"(^|_)s$"), Direction.LOWER),  # durations in seconds
    # The summary's counters: under a time cap, more done is better, failures worse.
    (re.compile(r"^completed$|tokens$"), Direction.HIGHER),
    (re.compile(r"^failed$|errors?$"), Direction.LOWER),
)

_ACCEPTED_FORMS = (
    'accepted forms: "5%" or "-5%" or "+10%" (relative to the baseline), '
    '"0.03" or "-0.03" (absolute, in the metric\'s units); the sign is optional '
    "and only documents the direction, which comes from the metric"
)
_TOLERANCE_RE = re.compile(r"^[+-]?\s*(\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*(%?)$")


def parse_tolerance(text: str | Tolerance) -> Tolerance:
    """Parse an ini/marker tolerance string: "5%" -> relative 0.05, "0.03" -> absolute 0.03."""
    if isinstance(text, Tolerance):
        return text
    if not isinstance(text, str):
        # A bare 0.05 is ambiguous (5% or 0.05 units?), so only strings are accepted.
        raise ValueError(f"tolerance must be a string, got {text!r}; {_ACCEPTED_FORMS}")
    s = text.strip()
    m = _TOLERANCE_RE.match(s)
    if not m:
        raise ValueError(f"invalid tolerance {text!r}; {_ACCEPTED_FORMS}")
    number = float(s.rstrip("%").replace(" ", "").lstrip("+-"))
    if not math.isfinite(number):
        raise ValueError(f"invalid tolerance {text!r}; {_ACCEPTED_FORMS}")
    if m.group(2) == "%":
        return Tolerance("relative", number / 100.0)
    return Tolerance("absolute", number)


def parse_tolerance_overrides(text: str) -> dict[str, Tolerance]:
    """Parse the ini form: one `metric = tolerance` per line (or comma separated).

    Example:  decode_tok_s = 3%
              acceptance_rate = 0.02
    """
    out: dict[str, Tolerance] = {}
    for raw in re.split(r"[\n,]", text or ""):
        item = raw.split("#", 1)[0].strip()
        if not item:
            continue
        if "=" not in item:
            raise ValueError(
                f"invalid tolerance override {item!r}: expected 'metric = tolerance', e.g. 'decode_tok_s = 3%'"
            )
        name, _, value = item.partition("=")
        name = name.strip()
        if not name:
            raise ValueError(f"invalid tolerance override {item!r}: the metric name is empty")
        try:
            out[name] = parse_tolerance(value)
        except ValueError as exc:
            raise ValueError(f"tolerance override for {name}: {exc}") from None
    return out


def direction_for(metric: str, recorded: Direction | str | None = None) -> Direction:
    """The metric's direction: the table, then the naming scheme, then what a baseline recorded."""
    if metric in DIRECTIONS:
        return DIRECTIONS[metric]
    for pattern, direction in _DIRECTION_PATTERNS:
        if pattern.search(metric):
            return direction
    if recorded is not None:
        return Direction.parse(recorded)
    raise ValueError(f"unknown metric {metric!r}: no direction known; known metrics: {', '.join(sorted(DIRECTIONS))}")


def tolerance_for(metric: str, *overrides: Mapping[str, Any] | None) -> Tolerance:
    """The tolerance for a metric: the first override layer that names it, else the default.

    Pass layers most specific first: tolerance_for(m, marker_tolerances, ini_tolerances).
    Values may be Tolerance objects or strings ("5%", "0.03").
    """
    for layer in overrides:
        if layer and metric in layer:
            try:
                return parse_tolerance(layer[metric])
            except ValueError as exc:
                raise ValueError(f"tolerance for {metric}: {exc}") from None
    if metric in DEFAULT_TOLERANCES:
        return DEFAULT_TOLERANCES[metric]
    raise ValueError(
        f"unknown metric {metric!r}: no default tolerance; give one for it per test "
        f'(marker) or per project (ini), e.g. "{metric} = 5%"; '
        f"metrics with defaults: {', '.join(sorted(DEFAULT_TOLERANCES))}"
    )
