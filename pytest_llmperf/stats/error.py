"""The standard error of a change between two sides' values, and how it propagates."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import NormalDist

from pytest_llmperf.stats.median import median_variance
from pytest_llmperf.stats.spread import Spread


@dataclass(frozen=True)
class Noise:
    """The standard error of a metric's change, and the degrees of freedom it rests on."""

    sigma: float
    dof: float | None = None  # None: normal quantiles (many independent units)
    run_share: float | None = None  # the measured side's share of sigma**2, what more runs shrink


def change_error(
    paired: float | None,
    baseline_samples: Iterable[float | None] = (),
    measured_samples: Iterable[float | None] = (),
    *,
    paired_dof: float | None = None,
    pool: Spread | None = None,
) -> Noise | None:
    """The noise of (measured - baseline): the spread between repetitions (pooled over both
    sides and `pool`) times each side's median_variance, which already holds the
    request-level noise; else the `paired` error on `paired_dof`; else None."""
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
            if noisier(m, spread, dof):  # tonight spreads beyond what the pool allows: its own spread
                spread, dof = statistics.variance(m), len(m) - 1
            variance = spread * (median_variance(len(b)) + median_variance(len(m)))
            if variance <= 0:
                return Noise(0.0)
            return Noise(math.sqrt(variance), dof, median_variance(len(m)) * spread / variance)
    if paired is None:
        return None
    return Noise(abs(paired), paired_dof)


NOISIER = 0.99  # the confidence at which tonight's runs are shown noisier than the pool


def noisier(measured: list[float], spread: float, dof: int) -> bool:
    """Whether tonight's runs (two or more) spread wider than `spread` (the pooled variance
    on `dof` degrees of freedom, theirs included) beyond chance at NOISIER: (n - 1) s^2 /
    spread beyond the chi-square quantile on n - 1 (Wilson-Hilferty). A noisier night is
    then judged on its own spread, not on the quieter nights' it would borrow."""
    own = len(measured) - 1
    if own < 1 or dof <= own or spread <= 0:
        return False
    return wider(Spread(statistics.variance(measured), own), spread)


def wider(tonight: Spread, spread: float) -> bool:
    """Whether `tonight`'s variance on its degrees of freedom is beyond chance above `spread`
    (taken as known) at NOISIER: dof * s^2 / spread beyond the chi-square quantile on dof
    (Wilson-Hilferty)."""
    if tonight.dof < 1 or spread <= 0:
        return False
    k = float(tonight.dof)
    quantile = k * (1 - 2 / (9 * k) + NormalDist().inv_cdf(NOISIER) * math.sqrt(2 / (9 * k))) ** 3
    return k * tonight.variance / spread > quantile


def with_nightly(noise: Noise | None, nightly: Spread | None) -> Noise | None:
    """`noise` with tonight's side at least the cell's spread between sessions (`nightly`, in
    the metric's units): the baseline side's variance plus the larger of tonight's measured
    side (run_share of it; half when not known) and the nightly variance. Where the nightly
    term is the larger, more runs tonight do not shrink it (run_share 0) and the degrees of
    freedom are Welch-Satterthwaite's."""
    if nightly is None:
        return noise
    if noise is None:
        return Noise(math.sqrt(nightly.variance), nightly.dof, 0.0)
    total = noise.sigma**2
    measured = (0.5 if noise.run_share is None else noise.run_share) * total
    if nightly.variance <= measured:
        return noise
    rest = total - measured
    variance = rest + nightly.variance
    dof: float | None = nightly.dof
    if rest > 0 and noise.dof is not None:
        dof = variance**2 / (rest**2 / noise.dof + nightly.variance**2 / nightly.dof)
    elif rest > 0:
        dof = variance**2 / (nightly.variance**2 / nightly.dof)
    return Noise(math.sqrt(variance), dof, 0.0)


def variance_shrink(run_share: float | None, runs: int, budget: int) -> float | None:
    """The variance of a change's noise after `budget` measured runs over that after `runs`:
    only the measured side's `run_share` falls. None when run_share is not known."""
    if run_share is None or runs < 1 or budget < runs:
        return None
    return 1.0 - run_share + run_share * median_variance(budget) / median_variance(runs)


def ratio_error(ratio: float, numerator: tuple[float, float], denominator: tuple[float, float]) -> float:
    """The standard error of `ratio` = a / b from each side's (error, value): independent
    relative errors add in quadrature."""
    (err_a, a), (err_b, b) = numerator, denominator
    relative: float = ((err_a / a) ** 2 + (err_b / b) ** 2) ** 0.5
    return ratio * relative
