"""Medians of repetitions, their relative range, and the variance of a median."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable


def median_of(values: Iterable[float | None]) -> float | None:
    """The median of `values` that are not None (a cell's repetitions); None when none is."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def median_and_range(samples: list[float]) -> tuple[float, float | None]:
    """(median, spread) of repetitions; spread = (max - min) / |median|: 0 for one sample,
    None when the median is 0."""
    med = statistics.median(samples)
    if len(samples) == 1:
        return med, 0.0
    if med == 0:
        return med, None
    return med, (max(samples) - min(samples)) / abs(med)


def median_variance(n: int) -> float:
    """Variance of the median of n runs per unit variance of one: 1/n up to two, pi/2n from three."""
    return 1.0 / n if n <= 2 else math.pi / (2 * n)
