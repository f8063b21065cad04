"""Verdicts: a measured value against its baseline, and whether two runs are comparable.

Statuses:
  pass              within tolerance (exactly at the limit passes)
  improved          better than the baseline by more than the tolerance; passes, with a
                    hint to record the new level (--update-baselines)
  regressed         worse than the baseline by more than the tolerance; fails
  missing-baseline  nothing recorded yet; fails with the command that records it
  no-data           the run produced no value (e.g. spec-decode counters absent because the
                    server ran with --disable-log-stats); fails with the reason
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from pytest_llmperf.baselines.tolerances import Direction, Tolerance, direction_for, tolerance_for

STATUSES = ("pass", "improved", "regressed", "missing-baseline", "no-data")
PASSING = frozenset({"pass", "improved"})

DEFAULT_UPDATE_COMMAND = "pytest --update-baselines"

# Boundary slack for float noise only: 407.9 * 0.95 must count as "exactly -5%".
_REL_EPS = 1e-9
_ABS_EPS = 1e-12

# Hardware that makes numbers incomparable. vLLM version and image are deliberately
# absent (a new nightly image is what the suite exists to judge); driver is recorded
# in provenance for the reader but does not refuse a comparison.
HARDWARE_KEYS = ("gpu_name", "gpu_count")


@dataclass(frozen=True)
class Change:
    absolute: float            # measured - baseline, in the metric's units
    relative: float | None     # (measured - baseline) / |baseline|; None when baseline is 0


@dataclass(frozen=True)
class Verdict:
    metric: str
    baseline: float | None
    measured: float | None
    change: Change | None      # None unless both values exist
    allowed: str               # "-5%", "+10%", "-0.03"
    status: str                # one of STATUSES
    hint: str = ""
    direction: Direction = Direction.HIGHER
    tolerance: Tolerance | None = None
    command: str = ""          # what records a new baseline, for reports that print it once

    @property
    def ok(self) -> bool:
        return self.status in PASSING


def _number(value: Any) -> float | None:
    """A finite float, or None for "no value" (None, NaN)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):   # numpy scalars are Real
        raise TypeError(f"expected a number or None, got {value!r}")
    value = float(value)
    if math.isnan(value):
        return None
    if math.isinf(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    return value


def _beyond(amount: float, limit: float) -> bool:
    return amount > limit and not math.isclose(amount, limit, rel_tol=_REL_EPS, abs_tol=_ABS_EPS)


def compare(
    metric: str,
    baseline_value: float | None,
    measured: float | None,
    tolerance: Tolerance,
    direction: Direction | str,
    *,
    update_command: str = DEFAULT_UPDATE_COMMAND,
    no_data_reason: str | None = None,
) -> Verdict:
    """Judge one metric. `update_command` is what the hints tell the user to run."""
    direction = Direction.parse(direction)
    base = _number(baseline_value)
    meas = _number(measured)
    allowed = tolerance.allowed(direction)
    common = dict(metric=metric, baseline=base, measured=meas, allowed=allowed,
                  direction=direction, tolerance=tolerance, command=update_command)

    # No data beats missing baseline: recording would not help, the run must be fixed.
    if meas is None:
        reason = no_data_reason or f"the run produced no value for {metric}"
        return Verdict(change=None, status="no-data", hint=f"{metric}: no data: {reason}", **common)
    if base is None:
        return Verdict(change=None, status="missing-baseline",
                       hint=f"{metric}: no baseline recorded; record it with: {update_command}", **common)

    delta = meas - base
    relative = delta / abs(base) if base != 0 else None
    worse = -delta if direction is Direction.HIGHER else delta   # > 0 means worse
    if tolerance.kind == "relative":
        if base != 0:
            amount = worse / abs(base)
        else:  # every move away from 0 is infinitely large in relative terms
            amount = math.copysign(math.inf, worse) if worse else 0.0
    else:
        amount = worse

    change = Change(absolute=delta, relative=relative)
    if _beyond(amount, tolerance.limit):
        return Verdict(change=change, status="regressed",
                       hint=(f"{metric}: worse than the baseline by more than the allowed {allowed}; "
                             f"if that is expected and accepted, re-record with: {update_command}"), **common)
    if _beyond(-amount, tolerance.limit):
        return Verdict(change=change, status="improved",
                       hint=(f"{metric}: better than the baseline by more than {allowed.lstrip('+-')}; "
                             f"if this is the new normal, record it with: {update_command}"), **common)
    return Verdict(change=change, status="pass", **common)


def compare_metrics(
    names: Iterable[str],
    baseline_metrics: Mapping[str, Mapping[str, Any]] | None,
    measured: Mapping[str, Any],
    *,
    overrides: Iterable[Mapping[str, Any] | None] = (),
    update_command: str = DEFAULT_UPDATE_COMMAND,
    no_data_reasons: Mapping[str, str] | None = None,
) -> list[Verdict]:
    """Judge several metrics of one run against one baseline entry's "metrics" section.

    `overrides`: tolerance layers, most specific first (marker, then ini).
    An unknown metric without a tolerance raises ValueError (from tolerance_for).
    """
    layers = tuple(overrides)
    verdicts = []
    for name in names:
        recorded = (baseline_metrics or {}).get(name)
        direction = direction_for(name, recorded.get("direction") if recorded else None)
        tolerance = tolerance_for(name, *layers)
        reason = (no_data_reasons or {}).get(name)
        if reason is None and name not in measured:
            reason = f"the run summary has no metric named {name!r}"
        verdicts.append(compare(
            name,
            recorded.get("value") if recorded else None,
            measured.get(name),
            tolerance,
            direction,
            update_command=update_command,
            no_data_reason=reason,
        ))
    return verdicts


def _same(a: Any, b: Any) -> bool:
    """Equality that survives the store's rounding (6 significant digits) and 256 vs 256.0."""
    num = numbers.Real
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _show(value: Any, present: bool) -> str:
    if not present:
        return "(absent)"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _differences(baseline: Mapping[str, Any], measured: Mapping[str, Any], keys: Iterable[str]) -> list[str]:
    out = []
    for key in keys:
        in_b, in_m = key in baseline, key in measured
        if in_b and in_m and _same(baseline[key], measured[key]):
            continue
        if not in_b and not in_m:
            continue
        out.append(f"{key}: baseline {_show(baseline.get(key), in_b)}, measured {_show(measured.get(key), in_m)}")
    return out


def hardware_of(info: Mapping[str, Any] | None) -> dict[str, Any]:
    """The comparability-relevant hardware keys of a provenance or hardware dict."""
    return {k: info[k] for k in HARDWARE_KEYS if info and k in info}


def check_compatible(
    baseline_workload: Mapping[str, Any],
    measured_workload: Mapping[str, Any],
    baseline_hw: Mapping[str, Any],
    measured_hw: Mapping[str, Any],
) -> list[str]:
    """Every difference that makes a baseline incomparable; empty means comparable.

    Workloads are compared key by key in full (a key on one side only is a difference).
    Hardware dicts may be whole provenance dicts: only HARDWARE_KEYS are compared.
    """
    baseline_workload = baseline_workload or {}
    measured_workload = measured_workload or {}
    keys = sorted(set(baseline_workload) | set(measured_workload))
    diffs = _differences(baseline_workload, measured_workload, keys)
    diffs += _differences(hardware_of(baseline_hw), hardware_of(measured_hw), HARDWARE_KEYS)
    return diffs


def incompatibility_message(path: Any, concurrency: int, differences: list[str], update_command: str) -> str:
    """The refusal text: what differs, and how to re-record deliberately."""
    lines = [f"baseline {path} (concurrency {concurrency}) was recorded under a different workload or hardware;",
             "refusing to compare. Differences:"]
    lines += [f"  - {d}" for d in differences]
    lines.append(f"If the new setup is intended, re-record with: {update_command}")
    return "\n".join(lines)
