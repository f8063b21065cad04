"""Tolerances: how far a metric may move, in its worse direction, before it regresses.

"5%" is relative, "0.03" absolute. A sign, if given, must be that of the worse move ("-5%"
on a higher-is-better metric); the opposite sign is refused. Precedence: marker > ini > default.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from pytest_llmperf.metrics.registry import Direction, Tolerance, check_names, metric

_ACCEPTED_FORMS = (
    'accepted forms: "5%" or "-5%" or "+10%" (relative to the baseline), '
    '"0.03" or "-0.03" (absolute, in the metric\'s units); the sign is optional and, '
    "when given, is the way the metric worsens: - for higher-is-better, + for lower-is-better"
)
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


def tolerance_for(name: str, *overrides: Mapping[str, Any] | None) -> Tolerance:
    """The first override layer (most specific first) that names the metric, else its default."""
    entry = metric(name)
    for layer in overrides:
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
