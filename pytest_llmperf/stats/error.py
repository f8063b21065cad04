"""The standard error of a change between two sides' values, and how it propagates."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_llmperf.stats.median import median_variance
from pytest_llmperf.stats.spread import Spread


@dataclass(frozen=True)
class Noise:
    """The standard error of a metric's change, and the degrees of freedom it rests on."""

    sigma: float
    dof: float | None = None  # None: normal quantiles (many independent units)
    # The share of sigma**2 that is the measured side's spread between runs, the one part
    # more measured runs shrink (by median_variance); None when that is not known.
    run_share: float | None = None


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
    this metric's level), times the variance factor of each side's median (median_variance),
    on the pooled degrees of freedom. Every repetition sends the same prompts, so that
    spread already holds how the same prompts' figures move within a run; adding the
    request-level error to it would count that twice.

    Where it is not (one repetition a side and no pool), `paired`: the request-level error
    of the change (metrics/uncertainty.paired_errors) from one repetition of each side, on
    `paired_dof` degrees of freedom (its independent blocks less one). None when neither
    is known.
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
            variance = spread * (median_variance(len(b)) + median_variance(len(m)))
            if variance <= 0:
                return Noise(0.0)
            return Noise(math.sqrt(variance), dof, median_variance(len(m)) * spread / variance)
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
    return 1.0 - run_share + run_share * median_variance(budget) / median_variance(runs)


def ratio_error(ratio: float, numerator: tuple[float, float], denominator: tuple[float, float]) -> float:
    """The standard error of `ratio` = a / b from each side's (error, value): independent
    relative errors add in quadrature."""
    (err_a, a), (err_b, b) = numerator, denominator
    relative: float = ((err_a / a) ** 2 + (err_b / b) ** 2) ** 0.5
    return ratio * relative
