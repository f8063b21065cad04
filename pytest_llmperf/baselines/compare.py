"""Verdicts: a measured value against its baseline (the rule: docs/verdicts.md).

With `worse` the change in the bad direction, `t` the tolerance and `q*sigma` the noise:
regressed when worse > t and worse - q*sigma > 0, improved when the mirror holds, pass when
worse + q*sigma <= t, else inconclusive. Without noise it is the plain tolerance check.
Under --llmperf-confirm N a regression the N - 1 sessions before did not read is `suspect`
(`unconfirmed`), unless worse - q*sigma > 2t: a gross one fails at once.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from functools import partial
from statistics import NormalDist
from typing import Any

from pytest_llmperf.baselines.tolerances import Bound, Tolerances
from pytest_llmperf.metrics import registry
from pytest_llmperf.metrics.registry import Direction, Tolerance
from pytest_llmperf.stats.error import Noise, variance_shrink
from pytest_llmperf.stats.quantiles import z_value


class Status(str, Enum):
    """A verdict's status; compares equal to its value ("regressed" == Status.REGRESSED)."""

    PASS = "pass"
    IMPROVED = "improved"
    REGRESSED = "regressed"
    INCONCLUSIVE = "inconclusive"
    SUSPECT = "suspect"  # regressed tonight, not yet read by the sessions before (--llmperf-confirm)
    MISSING_BASELINE = "missing-baseline"
    NO_DATA = "no-data"
    INVALID = "invalid"

    def __str__(self) -> str:
        return self.value


PASSING = frozenset({Status.PASS, Status.IMPROVED})
DEFAULT_CONFIDENCE = 0.95  # of a pass: the change shown within the tolerance
DEFAULT_ALARM_CONFIDENCE = 0.99  # of a claimed change, at each look: false alarms get gates switched off

DEFAULT_UPDATE_COMMAND = "pytest --update-baselines"


@dataclass(frozen=True)
class Change:
    absolute: float  # measured - baseline, in the metric's units
    relative: float | None  # (measured - baseline) / |baseline|; None when baseline is 0


@dataclass(frozen=True)
class Verdict:
    metric: str
    baseline: float | None
    measured: float | None
    change: Change | None  # None unless both values exist
    allowed: str  # "-5%", "+10%", "-0.03"
    status: Status
    hint: str = ""
    direction: Direction = Direction.HIGHER
    tolerance: Tolerance | None = None
    command: str = ""  # what records a new baseline, for reports that print it once
    noise: float | None = None  # half-width of the change's interval (z * sigma), metric units
    confidence: float = DEFAULT_CONFIDENCE
    note: str = ""  # how the noise was estimated, when it needs saying
    more_data: float | None = None  # inconclusive: about this many times the data would decide it
    run_share: float | None = None  # Noise.run_share: the part of the noise more measured runs shrink
    pass_noise: float | None = None  # the half-width at the pass confidence, whatever was judged
    # With no change, the chance under this noise of reading a regression, a gross one, and one
    # confirmed at the pass confidence (rule_chances).
    chances: tuple[float, float, float] | None = None
    false_red: float | None = None  # of these, the one that fails this session (confirmed() picks)

    @property
    def ok(self) -> bool:
        return self.status in PASSING

    @property
    def bound(self) -> Bound | None:
        """The tolerance in the metric's worse direction (None without a tolerance)."""
        return Bound(self.tolerance, self.direction) if self.tolerance is not None else None

    @property
    def resolution(self) -> float | None:
        """How many times this run's data an unchanged value would need to be shown within
        the tolerance: (pass half-width / tolerance)^2. None without noise."""
        tol = self.tolerance
        half = self.pass_noise if self.pass_noise is not None else self.noise
        if half is None or tol is None or tol.limit <= 0:
            return None
        if tol.kind == "relative":
            if not self.baseline:
                return None
            return (half / abs(self.baseline) / tol.limit) ** 2
        return (half / tol.limit) ** 2

    def decidable(self, runs: int, budget: int, *, by_change: bool, project: bool = True) -> bool:
        """Whether up to `budget` measured runs could decide this inconclusive verdict, by the
        change as read (more_data) or by the noise alone (resolution). `project`: only the
        measured side's share of the variance falls (variance_shrink), else all of it."""
        factor = self.more_data if by_change else self.resolution
        if factor is None or runs >= budget:
            return False
        shrink = variance_shrink(self.run_share, runs, budget) if project else None
        return factor * (runs / budget if shrink is None else shrink) <= 1.0


CONFIRMING = frozenset({Status.REGRESSED, Status.SUSPECT})  # earlier outcomes that confirm a regression


def gross(verdict: Verdict) -> bool:
    """A regression whose interval lies beyond twice the tolerance: no night-to-night
    wobble of the box reads that, so it needs no confirming session."""
    if verdict.status != Status.REGRESSED or verdict.tolerance is None:
        return False
    if verdict.tolerance.kind == "relative" and verdict.change is not None and not verdict.baseline:
        return True  # every move away from a baseline of 0 is infinitely large in relative terms
    amounts = _in_tolerance_units(verdict, verdict.noise or 0.0)
    return amounts is not None and amounts[0] - amounts[1] > 2 * verdict.tolerance.limit


def unconfirmed(verdict: Verdict, agreed: int, needed: int) -> Verdict:
    """A regression that `agreed` of the `needed` sessions before this one did not all read:
    suspect, with what would make it fail."""
    return replace(
        verdict,
        status=Status.SUSPECT,
        hint=(
            f"{verdict.metric}: suspect: worse than the baseline by more than the allowed {verdict.allowed}, "
            f"beyond the noise, but not confirmed: {agreed} of the {needed} session(s) before read it; it fails "
            f"when {needed + 1} sessions in a row read it (--llmperf-confirm {needed + 1}; 1 fails at once)"
        ),
    )


def confirmed(verdicts: list[Verdict], needed: int, earlier: Callable[[str, int], list[str]]) -> list[Verdict]:
    """--llmperf-confirm: each regression, unless gross, made suspect where the `needed`
    sessions before (`earlier(metric, needed)`: their outcomes) did not all read it. Where
    they all did, tonight confirms it at the pass confidence (a change beyond the tolerance
    whose interval at that confidence excludes none): a second look at a flagged cell asks
    less than the first. Each verdict's `false_red` is the chance, with no change, that it
    fails this session (Verdict.chances: at once, gross, or confirming)."""
    out = []
    for verdict in verdicts:
        agreed = sum(outcome in CONFIRMING for outcome in earlier(verdict.metric, needed)) if needed > 0 else 0
        if verdict.status == Status.REGRESSED and not gross(verdict) and agreed < needed:
            verdict = unconfirmed(verdict, agreed, needed)
        elif needed > 0 and agreed >= needed and verdict.status == Status.INCONCLUSIVE and clears_at_pass(verdict):
            verdict = replace(
                verdict,
                status=Status.REGRESSED,
                noise=verdict.pass_noise,
                hint=(
                    f"{verdict.metric}: worse than the baseline by more than the allowed {verdict.allowed}, beyond "
                    f"the noise at the pass confidence, and the {needed} session(s) before read it too; if that is "
                    f"expected and accepted, re-record with: {verdict.command}"
                ),
            )
        if verdict.chances is not None:
            verdict = replace(verdict, false_red=verdict.chances[0 if needed <= 0 else 2 if agreed >= needed else 1])
        out.append(verdict)
    return out


def reads_it_again(verdict: Verdict) -> bool:
    """Whether a second look reads the regression a first one flagged: regressed, or (it asks
    less than the first) a change beyond the tolerance at the pass confidence."""
    return verdict.status == Status.REGRESSED or clears_at_pass(verdict)


def clears_at_pass(verdict: Verdict) -> bool:
    """A change beyond its tolerance whose interval at the pass confidence excludes no change."""
    bound = verdict.bound
    if bound is None or verdict.pass_noise is None:
        return False
    amounts = _in_tolerance_units(verdict, verdict.pass_noise)
    return amounts is not None and bound.beyond(amounts[0]) and amounts[0] - amounts[1] > 0


def _in_tolerance_units(verdict: Verdict, half: float) -> tuple[float, float] | None:
    """The verdict's change in its bad direction and the half-width `half`, both in its
    tolerance's units (relative to the baseline for a relative one); None without a change,
    a tolerance, or (relative) a baseline other than 0."""
    bound, change = verdict.bound, verdict.change
    if bound is None or change is None:
        return None
    baseline = verdict.baseline or 0.0
    amount, half_amount = bound.in_units(bound.worse(change.absolute), baseline), bound.in_units(half, baseline)
    if amount is None or half_amount is None:
        return None
    return amount, half_amount


def rule_chances(
    amount_sigma: float, limit: float, z: float, confidence: float, z_pass: float, pass_confidence: float
) -> tuple[float, float, float]:
    """With no change and a noise of `amount_sigma` (in the tolerance's units), the chance of
    reading a regression (the change beyond both `limit` and z * sigma), a gross one (its
    interval beyond 2 * limit), and one confirmed at the pass confidence (beyond `limit` and
    z_pass * sigma). A Student quantile is carried to the normal one of the same confidence,
    so the tails match at each level."""
    if amount_sigma <= 0:
        return 0.0, 0.0, 0.0
    normal = NormalDist()

    def beyond(x: float, q: float, level: float) -> float:
        return 1.0 - normal.cdf(x * normal.inv_cdf(level) / q)

    bar = limit / amount_sigma
    return (
        beyond(max(z, bar), z, confidence),
        beyond(z + 2 * bar, z, confidence),
        beyond(max(z_pass, bar), z_pass, pass_confidence),
    )


def wanting_another(
    verdicts: Iterable[Verdict],
    runs: int,
    budget: int,
    *,
    by_change: bool,
    project: bool = True,
    read_before: Collection[str] = (),
) -> list[str]:
    """The metrics that ask for another measured run: an inconclusive one more runs could
    decide, and a regressed one the look before did not read `regressed` (`read_before`:
    the metrics it did; none at the first look), since a host that ran slow for one start
    reads as a regression the next start does not repeat. Empty: stop."""
    if runs >= budget:
        return []
    return [
        v.metric
        for v in verdicts
        if (v.status == Status.INCONCLUSIVE and v.decidable(runs, budget, by_change=by_change, project=project))
        or (v.status == Status.REGRESSED and v.metric not in read_before)
    ]


def _number(value: Any) -> float | None:
    """A finite float, or None for "no value" (None, NaN)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy scalars are Real
        raise TypeError(f"expected a number or None, got {value!r}")
    number = float(value)
    if math.isnan(number):
        return None
    if math.isinf(number):
        raise ValueError(f"expected a finite number, got {number!r}")
    return number


def compare(
    metric: str,
    baseline_value: float | None,
    measured: float | None,
    tolerance: Tolerance,
    direction: Direction | str,
    *,
    update_command: str = DEFAULT_UPDATE_COMMAND,
    no_data_reason: str | None = None,
    error: Noise | float | None = None,
    note: str = "",
    confidence: float = DEFAULT_CONFIDENCE,
    invalid: str | None = None,
    pass_confidence: float | None = None,
    requests: int | None = None,
    min_requests: int | None = None,
) -> Verdict:
    """Judge one metric: `confidence` is that of a claimed change, `pass_confidence` (default:
    the same) that of a pass; `error` (a Noise or a standard error; None: the tolerance
    alone); `invalid`: why the run cannot be judged; fewer than `min_requests`: inconclusive."""
    direction = Direction.parse(direction)
    base, meas = _number(baseline_value), _number(measured)
    noise = error if isinstance(error, Noise) or error is None else Noise(float(error))
    verdict = partial(
        Verdict,
        metric=metric,
        baseline=base,
        measured=meas,
        allowed=tolerance.allowed(direction),
        direction=direction,
        tolerance=tolerance,
        command=update_command,
        confidence=confidence,
    )
    if invalid:
        return verdict(change=None, status=Status.INVALID, hint=f"invalid run: {invalid}")
    # No data beats missing baseline: recording would not help, the run must be fixed.
    if meas is None:
        reason = no_data_reason or f"the run produced no value for {metric}"
        return verdict(change=None, status=Status.NO_DATA, hint=f"{metric}: no data: {reason}")
    if base is None:
        return verdict(
            change=None,
            status=Status.MISSING_BASELINE,
            hint=f"{metric}: no baseline recorded; record it with: {update_command}",
        )
    change = Change(absolute=meas - base, relative=(meas - base) / abs(base) if base != 0 else None)
    if min_requests is not None and requests is not None and requests < min_requests:
        # No noise and no factor: more repetitions would not help, so auto adds none for it.
        return verdict(
            change=change,
            status=Status.INCONCLUSIVE,
            hint=(
                f"{metric}: inconclusive: a statistic over {requests} requests a run is not judged (it needs "
                f"{min_requests}: one request changing rank moves it by the gap between two); more prompts per "
                "run or a longer time cap would judge it, more repetitions would not"
            ),
            note=note,
        )
    pass_confidence = confidence if pass_confidence is None else pass_confidence
    return _judge_change(verdict, change, base, tolerance, direction, noise, note, confidence, pass_confidence)


def _judge_change(
    verdict: partial[Verdict],
    change: Change,
    base: float,
    tolerance: Tolerance,
    direction: Direction,
    noise: Noise | None,
    note: str,
    confidence: float,
    pass_confidence: float,
) -> Verdict:
    """A change with both values known: regressed or improved beyond the tolerance and the
    noise at `confidence`, within it at `pass_confidence`, else inconclusive."""
    metric, update_command = verdict.keywords["metric"], verdict.keywords["command"]
    allowed = verdict.keywords["allowed"]
    z = z_value(confidence, noise.dof if noise else None)
    z_pass = z_value(pass_confidence, noise.dof if noise else None)
    sigma = abs(noise.sigma) if noise is not None and math.isfinite(noise.sigma) else 0.0
    bound = Bound(tolerance, direction)
    worse = bound.worse(change.absolute)  # > 0 means worse
    in_units = bound.in_units(worse, base)
    if in_units is None:  # relative to a baseline of 0: every move away is infinitely large
        amount = math.copysign(math.inf, worse) if worse else 0.0
        sigma_amount = 0.0
    else:
        amount, sigma_amount = in_units, bound.in_units(sigma, base) or 0.0
    half, half_pass = z * sigma_amount, z_pass * sigma_amount
    limit = tolerance.limit

    chances = rule_chances(sigma_amount, limit, z, confidence, z_pass, pass_confidence) if noise is not None else None

    def judged(status: Status, hint: str = "", more_data: float | None = None, at: float = confidence) -> Verdict:
        factor = z_pass if at == pass_confidence else z
        return verdict(
            chances=chances,
            status=status,
            hint=hint,
            more_data=more_data,
            change=change,
            noise=factor * sigma,
            pass_noise=z_pass * sigma if noise is not None else None,
            run_share=noise.run_share if noise is not None else None,
            note=note,
            confidence=at,
        )

    level = f"{confidence:.0%}"
    if bound.beyond(amount) and amount - half > 0:
        return judged(
            status=Status.REGRESSED,
            hint=(
                f"{metric}: worse than the baseline by more than the allowed {allowed}, beyond the "
                f"noise ({level} confidence); if that is expected and accepted, re-record with: "
                f"{update_command}"
            ),
        )
    if bound.beyond(-amount) and amount + half < 0:
        return judged(
            status=Status.IMPROVED,
            hint=(
                f"{metric}: better than the baseline by more than {allowed.lstrip('+-')}; "
                f"if this is the new normal, record it with: {update_command}"
            ),
        )
    if not bound.beyond(amount + half_pass):
        return judged(status=Status.PASS, at=pass_confidence)
    # Undecided: the boundary that would decide is 0 for a change beyond the tolerance
    # (a claim of change), the tolerance for one inside it (a pass).
    beyond = amount > limit
    text, factor = _resolution(
        amount, limit, half if beyond else half_pass, level if beyond else f"{pass_confidence:.0%}"
    )
    return judged(
        status=Status.INCONCLUSIVE,
        hint=f"{metric}: inconclusive: {text}",
        more_data=factor,
        at=confidence if beyond else pass_confidence,
    )


def _resolution(amount: float, limit: float, half: float, level: str) -> tuple[str, float | None]:
    """Why it is undecided, and how much more measuring would decide it (the factor; None
    when no amount of data would decide it soon)."""
    shown = f"change {amount:+.3g} against a tolerance of {limit:.3g}, noise +/-{half:.3g} ({level})"
    # The interval decides once it clears the nearest boundary: above 0 (regressed) when
    # the change is beyond the tolerance, below the tolerance (pass) otherwise.
    room = amount if amount > limit else limit - amount
    if half <= 0:
        return shown, None
    if room <= 0.05 * half:
        return f"{shown}; the change sits at the boundary, more data will not settle it quickly", None
    # The noise falls with the square root of the data (repetitions, or prompts).
    factor = (half / room) ** 2
    return (
        f"{shown}; about {max(2, math.ceil(factor))}x the data would decide it (--llmperf-repetitions, or more prompts)"
    ), factor


def compare_metrics(
    names: Iterable[str],
    baseline_metrics: Mapping[str, Mapping[str, Any]] | None,
    measured: Mapping[str, Any],
    *,
    overrides: Tolerances | Iterable[Mapping[str, Any] | None] = (),
    update_command: str = DEFAULT_UPDATE_COMMAND,
    no_data_reasons: Mapping[str, str] | None = None,
    errors: Mapping[str, Noise | float | None] | None = None,
    notes: Mapping[str, str] | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    invalid: str | None = None,
    pass_confidence: float | None = None,
    requests: int | None = None,
) -> list[Verdict]:
    """Judge several metrics of one run against one baseline entry's "metrics" section;
    `overrides`: the tolerances, or their layers most specific first (marker, then ini)."""
    tolerances = overrides if isinstance(overrides, Tolerances) else Tolerances(*overrides)
    verdicts = []
    for name in names:
        recorded = (baseline_metrics or {}).get(name)
        known = registry.metric(name)
        tolerance = tolerances.tolerance(name)
        reason = (no_data_reasons or {}).get(name)
        if reason is None and name not in measured:
            reason = f"the run summary has no metric named {name!r}"
        verdicts.append(
            compare(
                name,
                recorded.get("value") if recorded else None,
                measured.get(name),
                tolerance,
                known.direction,
                update_command=update_command,
                no_data_reason=reason,
                error=(errors or {}).get(name),
                note=(notes or {}).get(name, ""),
                confidence=confidence,
                invalid=invalid,
                pass_confidence=pass_confidence,
                requests=requests,
                min_requests=known.min_requests,
            )
        )
    return verdicts
