"""Tolerances: how far a metric may move, in its worse direction, before it regresses.

"5%" is relative, "0.03" absolute. A sign, if given, must be that of the worse move ("-5%"
on a higher-is-better metric); the opposite sign is refused. Precedence: assertion > marker >
ini > default. An assertion's layers are parsed once (`Tolerances`), each metric's into a
`Bound` that answers how far a move went in the tolerance's units and whether it fails.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.metrics.registry import Direction, Tolerance, check_names, metric

_ACCEPTED_FORMS = (
    'accepted forms: "5%" or "-5%" or "+10%" (relative to the baseline), '
    '"0.03" or "-0.03" (absolute, in the metric\'s units); the sign is optional and, '
    "when given, is the way the metric worsens: - for higher-is-better, + for lower-is-better"
)
# Boundary slack for float noise only: 407.9 * 0.95 must count as "exactly -5%".
_REL_EPS = 1e-9
_ABS_EPS = 1e-12
_TOLERANCE_RE = re.compile(r"^[+-]?\s*(\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*(%?)$")


def parse_tolerance(text: str | Tolerance, name: str | None = None) -> Tolerance:
    """Parse "5%" (relative 0.05) or "0.03" (absolute); with `name`, a wrong sign is refused."""
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
    if name is not None and s[0] in "+-":
        _check_sign(name, s)
    if m.group(2) == "%":
        return Tolerance("relative", number / 100.0)
    return Tolerance("absolute", number)


def _check_sign(name: str, text: str) -> None:
    direction = metric(name).direction
    worse = "-" if direction is Direction.HIGHER else "+"
    if text[0] == worse:
        return
    magnitude = text[1:].strip()
    moves = "a drop" if direction is Direction.HIGHER else "a rise"
    raise ValueError(
        f"{text!r} has the wrong sign: {name} is {direction.value}-is-better, so a regression is {moves}; "
        f"write {magnitude!r} or {worse + magnitude!r} (a sign, when given, is the way the metric may worsen)"
    )


def parse_tolerance_overrides(text: str) -> dict[str, Tolerance]:
    """The ini form: one `metric = tolerance` per line (or comma separated)."""
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
        check_names([name], "tolerance override: ")
        try:
            out[name] = parse_tolerance(value, name)
        except ValueError as exc:
            raise ValueError(f"tolerance override for {name}: {exc}") from None
    return out


@dataclass(frozen=True)
class Bound:
    """A metric's tolerance in its worse direction: a move in the tolerance's units, and
    whether it is beyond (pytest-benchmark's threshold checks, direction and kind parsed once)."""

    tolerance: Tolerance
    direction: Direction

    @property
    def allowed(self) -> str:
        """ "-5%", "+10%", "-0.03": the tolerance in the metric's worse direction."""
        return self.tolerance.allowed(self.direction)

    def worse(self, change: float) -> float:
        """A change (measured - baseline, in the metric's units) in its bad direction: > 0 is worse."""
        return -change if self.direction is Direction.HIGHER else change

    def in_units(self, amount: float, baseline: float) -> float | None:
        """`amount` (in the metric's units) in the tolerance's: relative to |baseline| for a
        relative tolerance; None there at a baseline of 0 (every move is infinitely large)."""
        if self.tolerance.kind != "relative":
            return amount
        return amount / abs(baseline) if baseline else None

    def beyond(self, amount: float) -> bool:
        """Whether `amount` (in the tolerance's units) lies beyond the tolerance, float noise aside."""
        limit = self.tolerance.limit
        return amount > limit and not math.isclose(amount, limit, rel_tol=_REL_EPS, abs_tol=_ABS_EPS)

    def fails(self, baseline: float, measured: float) -> bool:
        """The plain tolerance check, noise aside: the move from `baseline` to `measured` is
        worse than the tolerance allows."""
        worse = self.worse(measured - baseline)
        amount = self.in_units(worse, baseline)
        if amount is None:
            amount = math.copysign(math.inf, worse) if worse else 0.0
        return self.beyond(amount)


class Tolerances:
    """The tolerance layers one assertion is judged with, most specific first (the
    assertion's, the marker's, the ini's): each metric's parsed once, on first use."""

    def __init__(self, *layers: Mapping[str, Any] | None) -> None:
        self.layers = tuple(layers)
        self.parsed: dict[str, Tolerance] = {}

    def tolerance(self, name: str) -> Tolerance:
        """The first layer that names the metric, else its default."""
        if name not in self.parsed:
            self.parsed[name] = _first_layer(name, self.layers)
        return self.parsed[name]

    def bound(self, name: str) -> Bound:
        """The metric's tolerance in its worse direction."""
        return Bound(self.tolerance(name), metric(name).direction)


def _first_layer(name: str, layers: tuple[Mapping[str, Any] | None, ...]) -> Tolerance:
    entry = metric(name)
    for layer in layers:
        if layer and name in layer:
            try:
                return parse_tolerance(layer[name], name)
            except ValueError as exc:
                raise ValueError(f"tolerance for {name}: {exc}") from None
    if entry.tolerance is not None:
        return entry.tolerance
    raise ValueError(
        f"{name} has no default tolerance; give one for it per test (marker "
        f'tolerances={{"{name}": "5%"}}) or per project (ini llmperf_tolerances = "{name} = 5%")'
    )


def tolerance_for(name: str, *overrides: Mapping[str, Any] | None) -> Tolerance:
    """The first override layer (most specific first) that names the metric, else its default."""
    return Tolerances(*overrides).tolerance(name)


def parse_tolerances(values: Mapping[str, Any], where: str = "") -> dict[str, Tolerance]:
    """A marker's `tolerances={...}`: known metric names, each a valid tolerance."""
    if not isinstance(values, Mapping):
        raise ValueError(f"{where}tolerances must be a dict of metric -> tolerance, got {values!r}")
    check_names(values, where)
    out = {}
    for name, value in values.items():
        try:
            out[name] = parse_tolerance(value, name)
        except ValueError as exc:
            raise ValueError(f"{where}tolerance for {name}: {exc}") from None
    return out
