"""Verdicts: a measured value against its baseline, and whether two runs are comparable.

The rule (docs/verdicts.md has it with its assumptions). `worse` is the change in the
metric's bad direction (relative to the baseline for a relative tolerance), `t` the
tolerance, `sigma` the standard error of the change (both sides' errors combined) and
`q` the one-sided quantile of the confidence (normal 1.645 at 95 %, or Student's t on
the degrees of freedom the error rests on):

  regressed         worse > t and worse - q*sigma > 0: beyond tolerance, and the interval
                    excludes no change; fails
  improved          -worse > t and worse + q*sigma < 0; passes, with a hint to record the
                    new level (--update-baselines)
  pass              worse + q*sigma <= t: the evidence bounds the change within tolerance
                    (exactly at the limit passes)
  inconclusive      anything else: the noise is too wide to tell; says how much more data
                    would decide it; --llmperf-inconclusive decides (default warn). Also a
                    statistic over requests from runs of too few requests (the registry's
                    min_requests: 10 for a median, 5 on each side of a percentile)
  missing-baseline  nothing recorded yet; fails with the command that records it
  no-data           the run produced no value (e.g. spec-decode counters absent because the
                    server ran with --disable-log-stats); fails with the reason
  invalid           the run cannot be judged (its failed requests exceed the error budget,
                    or none completed); fails with the causes, never reads pass or regressed

With no error known on either side (sigma 0) the rule is the plain tolerance check.
"""

from __future__ import annotations

import json
import math
import numbers
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from functools import partial
from typing import Any

from pytest_llmperf.baselines.tolerances import tolerance_for
from pytest_llmperf.metrics import registry
from pytest_llmperf.metrics.registry import Direction, Tolerance


class Status(str, Enum):
    """A verdict's status; compares equal to its value ("regressed" == Status.REGRESSED)."""

    PASS = "pass"
    IMPROVED = "improved"
    REGRESSED = "regressed"
    INCONCLUSIVE = "inconclusive"
    MISSING_BASELINE = "missing-baseline"
    NO_DATA = "no-data"
    INVALID = "invalid"

    def __str__(self) -> str:
        return self.value


PASSING = frozenset({Status.PASS, Status.IMPROVED})
DEFAULT_CONFIDENCE = 0.95  # of a pass: the change shown within the tolerance
# Of a claimed change (regressed, improved), at each look (each judgement of auto
# repetitions): a false alarm is what gets a gate switched off (docs/verdicts.md).
DEFAULT_ALARM_CONFIDENCE = 0.99

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
    # The half-width at the pass confidence, whatever the verdict was judged at (a change read
    # beyond the tolerance is judged at the claim's): what `resolution` asks of a pass.
    pass_noise: float | None = None

    @property
    def ok(self) -> bool:
        return self.status in PASSING

    @property
    def resolution(self) -> float | None:
        """How many times this run's data an unchanged value would need to be shown within
        the tolerance: (the pass interval's half-width / the tolerance)^2, whichever side of
        the tolerance the change read (a pass is claimed at the pass confidence, so a change
        read beyond the tolerance, judged at the claim's, does not make the noise look
        wider). Above the repetition budget, no amount of repeating within it can decide
        the metric. None without noise."""
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
        """Whether more measured runs, up to `budget` in all, could decide this inconclusive
        verdict: by the change as read (more_data) or by the noise alone (resolution: an
        unchanged value would be shown within the tolerance). The factor asks the variance
        to fall that many times. `project` with a known run_share: by as much as the
        measured side's share can fall (variance_shrink: the baseline's share stays);
        otherwise as if all of it fell with the runs (runs / budget)."""
        factor = self.more_data if by_change else self.resolution
        if factor is None or runs >= budget:
            return False
        shrink = variance_shrink(self.run_share, runs, budget) if project else None
        return factor * (runs / budget if shrink is None else shrink) <= 1.0


def wanting_another(
    verdicts: Iterable[Verdict], runs: int, budget: int, *, by_change: bool, project: bool = True, confirm: bool = False
) -> list[str]:
    """The metrics of `verdicts` that ask for another measured run when `runs` were made
    of at most `budget`: an inconclusive one that more runs could decide
    (Verdict.decidable), and under `confirm` (the first look of auto repetitions) a
    regressed one. A regression read at the first look is read again with one more run
    before it is reported: a host that ran slow for a while (a shared machine's other
    load, a neighbour on the hypervisor) reads as a regression of one server start that
    the next start does not repeat, while a real one repeats (docs/verdicts.md, "Auto
    repetitions"). Empty: stop."""
    if runs >= budget:
        return []
    return [
        v.metric
        for v in verdicts
        if (v.status == Status.INCONCLUSIVE and v.decidable(runs, budget, by_change=by_change, project=project))
        or (confirm and v.status == Status.REGRESSED)
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


def _beyond(amount: float, limit: float) -> bool:
    return amount > limit and not math.isclose(amount, limit, rel_tol=_REL_EPS, abs_tol=_ABS_EPS)


def z_value(confidence: float, dof: float | None = None) -> float:
    """One-sided quantile of the confidence: normal (0.95 -> 1.645), or Student's t with
    `dof` degrees of freedom when the error rests on few independent units (2 -> 2.92).

    One-sided because each claim the rule makes points one way: "worse than the
    baseline" (regressed), "better" (improved), "not worse than the tolerance" (pass).
    Each is wrong at most 1 - confidence of the time (two one-sided tests, as in
    equivalence testing)."""
    if not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must be in [0.5, 1), got {confidence!r}")
    p = confidence
    if dof is None or not math.isfinite(dof) or dof > 1e6:
        return statistics.NormalDist().inv_cdf(p)
    return t_quantile(p, max(float(dof), 1.0))


def t_quantile(p: float, dof: float) -> float:
    """Student's t quantile: exact for 1 and 2 degrees of freedom, else the Cornish-Fisher
    expansion around the normal quantile (within 0.3 % of the exact value from 3 up)."""
    if dof <= 1:
        return math.tan(math.pi * (p - 0.5))
    if dof <= 2:
        return (2 * p - 1) * math.sqrt(2 / (4 * p * (1 - p)))
    z = statistics.NormalDist().inv_cdf(p)
    v = dof
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4)
    )


@dataclass(frozen=True)
class Noise:
    """The standard error of a metric's change, and the degrees of freedom it rests on."""

    sigma: float
    dof: float | None = None  # None: normal quantiles (many independent units)
    # The share of sigma**2 that is the measured side's spread between runs, the one part
    # more measured runs shrink (by _median_variance); None when that is not known.
    run_share: float | None = None


@dataclass(frozen=True)
class Spread:
    """The spread between server starts of one metric, pooled from other cells (other
    servers' baselines at the same concurrency): the variance of a repetition's value over
    its cell's median (a squared coefficient of variation), and its degrees of freedom."""

    variance: float
    dof: int


def median_of(values: Iterable[float | None]) -> float | None:
    """The median of `values` that are not None (a cell's repetitions); None when none is."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def pooled_spread(cells: Iterable[Iterable[float | None]]) -> Spread | None:
    """The relative between-start spread pooled over `cells` (each a list of one cell's
    repetitions): sum of (n - 1) * var(value / median) over sum of (n - 1). None when no
    cell has two repetitions (or a cell's median is 0)."""
    squares, dof = 0.0, 0
    for cell in cells:
        values = [v for v in cell if v is not None]
        if len(values) < 2:
            continue
        center = statistics.median(values)
        if center == 0:
            continue
        squares += (len(values) - 1) * statistics.variance([v / center for v in values])
        dof += len(values) - 1
    return Spread(squares / dof, dof) if dof else None


def change_error(
    paired: float | None,
    baseline_samples: Iterable[float | None] = (),
    measured_samples: Iterable[float | None] = (),
    *,
    paired_dof: float | None = None,
    pool: Spread | None = None,
) -> Noise | None:
    """The noise of (measured - baseline) for one metric.

    Where the spread between repetitions is known, it alone: the variance of a run's value
    between repetitions, pooled over both sides (same setup, same noise: a side with one
    repetition has the other's) and over `pool` (other cells' relative spread, scaled to
    this metric's level), times the variance factor of each side's median (1/n, or pi/2n
    from three repetitions), on the pooled degrees of freedom. Every repetition sends the
    same prompts, so that spread already holds how the same prompts' figures move within a
    run; adding the request-level error to it would count that twice.

    Where it is not (one repetition a side and no pool: an older baseline, the smoke
    profile), `paired`: the request-level error of the change
    (metrics/uncertainty.paired_errors) from one repetition of each side, on `paired_dof`
    degrees of freedom (its independent blocks less one). None when neither is known.
    """
    b = [v for v in baseline_samples if v is not None]
    m = [v for v in measured_samples if v is not None]
    if b and m:
        squares = sum((len(x) - 1) * statistics.variance(x) for x in (b, m) if len(x) >= 2)
        dof = sum(len(x) - 1 for x in (b, m) if len(x) >= 2)
        if pool is not None and pool.dof > 0:
            level = statistics.median(b)
            squares += pool.dof * pool.variance * level**2
            dof += pool.dof
        if dof:
            spread = squares / dof
            variance = spread * (_median_variance(len(b)) + _median_variance(len(m)))
            if variance <= 0:
                return Noise(0.0)
            return Noise(math.sqrt(variance), dof, _median_variance(len(m)) * spread / variance)
    if paired is None:
        return None
    return Noise(abs(paired), paired_dof)


def variance_shrink(run_share: float | None, runs: int, budget: int) -> float | None:
    """The variance of a change's noise after `budget` measured runs over what it is after
    `runs`, `run_share` of it being the measured side's: the baseline's share stays as it
    is, the measured side's falls as its median's variance. None when run_share is not
    known (a request-level error alone, which more runs of the measured side do not
    shrink either: judged by the square-root rule)."""
    if run_share is None or runs < 1 or budget < runs:
        return None
    return 1.0 - run_share + run_share * _median_variance(budget) / _median_variance(runs)


def _median_variance(n: int) -> float:
    """Variance of the median of n runs, per unit variance of one: 1/n up to two runs (the
    median is the mean), pi/2n from three (the large-sample efficiency of the median). The
    exact small-sample values for normal runs are lower (0.449, 0.298, 0.287 at 3, 4, 5);
    judged with them, one-stream cells, whose spread between starts is not normal (a TTFT
    median of four requests), read regressed with no change far more often
    (docs/verdicts.md), so the larger large-sample value stays."""
    return 1.0 / n if n <= 2 else math.pi / (2 * n)


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
    """Judge one metric. `update_command` is what the hints tell the user to run.

    `confidence` is that of the claims of a change (regressed, improved); `pass_confidence`
    (default: the same) that of the claim "within the tolerance". Auto repetitions judge
    changes at a confidence split over their looks, and passes at the nominal one: a false
    alarm is what gets a gate switched off (docs/verdicts.md).

    `error`: the noise of the change (a Noise, or a bare standard error in metric units
    with normal quantiles; see change_error); None judges the change on the tolerance
    alone. `note` says how the noise was estimated
    when that needs saying (e.g. an older baseline without per-request figures).
    `invalid`: why the run cannot be judged at all; the verdict is then invalid.
    `requests`: the fewest requests a run on either side completed; a statistic over
    requests (`min_requests`, from the registry) on fewer is inconclusive, and says that
    more prompts, not more repetitions, would judge it.
    """
    direction = Direction.parse(direction)
    base = _number(baseline_value)
    meas = _number(measured)
    allowed = tolerance.allowed(direction)
    noise = error if isinstance(error, Noise) or error is None else Noise(float(error))
    z = z_value(confidence, noise.dof if noise else None)
    pass_confidence = confidence if pass_confidence is None else pass_confidence
    z_pass = z_value(pass_confidence, noise.dof if noise else None)
    verdict = partial(
        Verdict,
        metric=metric,
        baseline=base,
        measured=meas,
        allowed=allowed,
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

    delta = meas - base
    relative = delta / abs(base) if base != 0 else None
    if min_requests is not None and requests is not None and requests < min_requests:
        # No noise and no factor: repetitions take the median of such statistics, which
        # rests on as few requests; Verdict.resolution is None, so auto adds none for it.
        return verdict(
            change=Change(absolute=delta, relative=relative),
            status=Status.INCONCLUSIVE,
            hint=(
                f"{metric}: inconclusive: a statistic over {requests} requests a run is not judged (it needs "
                f"{min_requests}: one request changing rank moves it by the gap between two); more prompts per "
                "run or a longer time cap would judge it, more repetitions would not"
            ),
            note=note,
        )
    sigma = abs(noise.sigma) if noise is not None and math.isfinite(noise.sigma) else 0.0
    worse = -delta if direction is Direction.HIGHER else delta  # > 0 means worse
    if tolerance.kind == "relative":
        if base != 0:
            amount, sigma_amount = worse / abs(base), sigma / abs(base)
        else:  # every move away from 0 is infinitely large in relative terms
            amount = math.copysign(math.inf, worse) if worse else 0.0
            sigma_amount = 0.0
    else:
        amount, sigma_amount = worse, sigma
    half, half_pass = z * sigma_amount, z_pass * sigma_amount
    limit = tolerance.limit
    change = Change(absolute=delta, relative=relative)

    def judged(status: Status, hint: str = "", more_data: float | None = None, at: float = confidence) -> Verdict:
        factor = z_pass if at == pass_confidence else z
        return verdict(
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

    if _beyond(amount, limit) and amount - half > 0:
        return judged(
            status=Status.REGRESSED,
            hint=(
                f"{metric}: worse than the baseline by more than the allowed {allowed}, beyond the "
                f"noise ({level} confidence); if that is expected and accepted, re-record with: "
                f"{update_command}"
            ),
        )
    if _beyond(-amount, limit) and amount + half < 0:
        return judged(
            status=Status.IMPROVED,
            hint=(
                f"{metric}: better than the baseline by more than {allowed.lstrip('+-')}; "
                f"if this is the new normal, record it with: {update_command}"
            ),
        )
    if not _beyond(amount + half_pass, limit):
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
    overrides: Iterable[Mapping[str, Any] | None] = (),
    update_command: str = DEFAULT_UPDATE_COMMAND,
    no_data_reasons: Mapping[str, str] | None = None,
    errors: Mapping[str, Noise | float | None] | None = None,
    notes: Mapping[str, str] | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    invalid: str | None = None,
    pass_confidence: float | None = None,
    requests: int | None = None,
) -> list[Verdict]:
    """Judge several metrics of one run against one baseline entry's "metrics" section.

    `overrides`: tolerance layers, most specific first (marker, then ini).
    `errors`: the standard error of each metric's change (see change_error); `notes`: how
    it was estimated, where that needs saying. `requests`: the fewest requests a run on
    either side completed (statistics over requests need the registry's min_requests).
    An unknown metric raises UnknownMetric, one without a tolerance ValueError (from tolerance_for).
    """
    layers = tuple(overrides)
    verdicts = []
    for name in names:
        recorded = (baseline_metrics or {}).get(name)
        known = registry.metric(name)
        tolerance = tolerance_for(name, *layers)
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


def _same(a: Any, b: Any) -> bool:
    """Equality that survives the store's rounding (6 significant digits) and 256 vs 256.0."""
    num = numbers.Real
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


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


def other_workload_message(
    path: Any, concurrency: int, differences: list[str], update_command: str, others: int = 1
) -> str:
    """No entry for this workload, but `others` entries of other workloads at this
    concurrency: what differs from the nearest, and how to record this one beside them."""
    which = "its entry there was" if others == 1 else f"its {others} entries there were"
    lines = [
        f"baseline {path} has no entry for this workload at concurrency {concurrency}: {which} "
        "recorded under a different workload; nothing to compare with. Differences"
        + (" from the nearest:" if others > 1 else ":"),
    ]
    lines += [f"  - {d}" for d in differences]
    lines.append(
        f"Record this workload beside {'it' if others == 1 else 'them'} with: {update_command} "
        "(entries of other workloads are kept: delete one from the file once no test asks for it)"
    )
    return "\n".join(lines)


def incompatibility_message(path: Any, concurrency: int, differences: list[str], update_command: str) -> str:
    """The refusal text: what differs, and how to re-record deliberately."""
    lines = [
        f"baseline {path} (concurrency {concurrency}) was recorded under a different workload or hardware;",
        "refusing to compare. Differences:",
    ]
    lines += [f"  - {d}" for d in differences]
    lines.append(f"If the new setup is intended, re-record with: {update_command}")
    return "\n".join(lines)
