"""A share (successes over trials) pooled over runs, with its Wilson score interval. Runs
that disagree more than binomial noise says (a fresh server start moves every request of
its run alike) widen the interval: the trials count for fewer by the quasi-binomial
dispersion of the runs' shares."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_llmperf.stats.quantiles import z_value


@dataclass(frozen=True)
class Share:
    """A pooled share, its interval (each bound one-sided at the confidence), and the trials
    it counts as, dispersion between runs taken out."""

    share: float
    low: float
    high: float
    effective: float


def wilson(share: float, trials: float, z: float) -> tuple[float, float]:
    """The Wilson score interval of `share` observed over `trials` at normal quantile `z`."""
    if trials <= 0:
        return 0.0, 1.0
    z2 = z * z
    center = (share + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z / (1 + z2 / trials) * math.sqrt(share * (1 - share) / trials + z2 / (4 * trials * trials))
    return max(0.0, center - half), min(1.0, center + half)


def dispersion(successes: Sequence[int], trials: Sequence[int]) -> float:
    """Pearson's dispersion of the runs' shares around the pooled share, at least 1: 1 when
    they scatter as binomial noise alone would, or with fewer than two runs."""
    runs = [(s, n) for s, n in zip(successes, trials) if n > 0]
    total = sum(n for _, n in runs)
    if len(runs) < 2 or total == 0:
        return 1.0
    p = sum(s for s, _ in runs) / total
    if p <= 0.0 or p >= 1.0:
        return 1.0
    chi2 = sum((s - n * p) ** 2 / (n * p * (1 - p)) for s, n in runs)
    return max(1.0, chi2 / (len(runs) - 1))


def pooled_share(successes: Sequence[int], trials: Sequence[int], confidence: float) -> Share:
    """The share of successes over every run's trials and its interval at `confidence` (one
    claim each way, as the verdict rule's: z_value), the trials discounted by the dispersion."""
    if len(successes) != len(trials):
        raise ValueError("successes and trials must be given run by run, as many of each")
    if any(n < 0 or not 0 <= s <= n for s, n in zip(successes, trials)):
        raise ValueError("each run's successes must be within 0 and its trials")
    total = sum(trials)
    share = sum(successes) / total if total else 0.0
    effective = total / dispersion(successes, trials)
    low, high = wilson(share, effective, z_value(confidence))
    return Share(share, low, high, effective)
