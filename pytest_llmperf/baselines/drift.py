"""Drift over the history: a slow slide passes every nightly gate, change points see it.

The detector is Apache Otava's seeded E-Divisive (optional: `[history]`; without it
DetectorMissing). A sustained shift: the last change points, moving the same way, moved
the metric the worse way, MIN_RUNS runs since, none of which failed its gate.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.metrics.registry import Direction, metric
from pytest_llmperf.stats.outliers import noise_bound

PVALUE = 0.05  # the permutation test's significance
MIN_CHANGE = 0.02  # relative; a smaller move is not called a change point
PERMUTATIONS = 100  # what compute_change_points_orig runs (not a parameter of it)
SEED = 0  # the permutation test's: one history, one answer
MAX_RUNS = 60  # the latest runs searched (E-Divisive is quadratic in the runs)
MIN_POINTS = 5  # fewer runs are too few to split
MIN_RUNS = 3  # a shift is sustained after this many runs at the new level
FAILED = frozenset({"regressed", "invalid"})  # the gate already reported these red

INSTALL_HINT = "pip install 'pytest-llmperf[history]' (apache-otava)"


class DetectorMissing(ImportError):
    """Apache Otava is not installed."""

    def __init__(self) -> None:
        super().__init__(f"change points need Apache Otava: {INSTALL_HINT}")


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first run at the new level
    before: float  # mean of the runs since the previous change point
    after: float  # mean of the runs up to the next change point
    pvalue: float

    @property
    def relative(self) -> float | None:
        return (self.after - self.before) / abs(self.before) if self.before else None


def detector_available() -> bool:
    try:
        import otava.analysis  # noqa: F401
    except ImportError:
        return False
    return True


def change_points(
    values: Sequence[float], *, pvalue: float = PVALUE, min_change: float = MIN_CHANGE
) -> list[ChangePoint]:
    """The change points in the latest MAX_RUNS of `values` (oldest first), each with the
    levels either side; those moving the level less than `min_change` are dropped."""
    try:
        from otava.analysis import compute_change_points_orig
    except ImportError:
        raise DetectorMissing() from None
    series = [float(v) for v in values]
    offset = max(len(series) - MAX_RUNS, 0)
    window = series[offset:]
    if len(window) < MIN_POINTS:
        return []
    found, _ = compute_change_points_orig(window, max_pvalue=pvalue, seed=SEED)
    indices = sorted({int(cp.index) for cp in found if 0 < int(cp.index) < len(window)})
    pvalues = {int(cp.index): float(cp.stats.pvalue) for cp in found}
    while True:
        points = _levels(window, indices, pvalues)
        small = [cp for cp in points if cp.relative is None or abs(cp.relative) < min_change]
        if not small:
            break
        indices.remove(min(small, key=lambda cp: abs(cp.relative or 0.0)).index)
    return [ChangePoint(cp.index + offset, cp.before, cp.after, cp.pvalue) for cp in points]


def _levels(values: Sequence[float], indices: Sequence[int], pvalues: Mapping[int, float]) -> list[ChangePoint]:
    bounds = [0, *indices, len(values)]
    means = [statistics.fmean(values[a:b]) for a, b in zip(bounds, bounds[1:])]
    return [ChangePoint(i, means[k], means[k + 1], pvalues.get(i, math.nan)) for k, i in enumerate(indices)]


@dataclass(frozen=True)
class Shift:
    """A sustained move of one series, from `before` (the level before run `start`) to
    `after` (the mean since the last change point)."""

    metric: str
    start: int  # index of the first run of the shift
    runs: int  # runs measured since (the shift's steps)
    before: float
    after: float
    worse: bool
    passed: bool  # every run since passed its gate
    since: Mapping[str, Any]  # the history line of the first run of the shift

    @property
    def relative(self) -> float:
        return (self.after - self.before) / abs(self.before) if self.before else 0.0


def trusted(lines: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(kept, left out): a run whose noise is over the series' noise bound (stats/outliers.py:
    NOISY times the median noise) is left out; runs without a noise are kept."""
    noises = [float(line["noise"]) for line in lines if isinstance(line.get("noise"), (int, float))]
    if len(noises) < MIN_POINTS:
        return list(lines), []
    bound = noise_bound(noises)
    kept: list[Mapping[str, Any]] = []
    dropped: list[Mapping[str, Any]] = []
    for line in lines:
        noise = line.get("noise")
        (dropped if isinstance(noise, (int, float)) and bound > 0 and noise > bound else kept).append(line)
    return kept, dropped


def _worse(name: str, move: float) -> bool:
    try:
        direction = metric(name).direction
    except ValueError:  # a metric this version does not know: no direction, never "worse"
        return False
    return move < 0 if direction is Direction.HIGHER else move > 0


def latest_shift(lines: Sequence[Mapping[str, Any]], points: Sequence[ChangePoint]) -> Shift | None:
    """The shift the series' last change points make, taken together while they move the
    same way; None without change points or with fewer than MIN_RUNS runs since."""
    if not points:
        return None
    last = points[-1]
    sign = last.after > last.before
    first = last
    for cp in reversed(points[:-1]):
        if (cp.after > cp.before) != sign:
            break
        first = cp
    runs = len(lines) - first.index
    if runs < MIN_RUNS:
        return None
    name = str(lines[0]["metric"])
    since = lines[first.index :]
    return Shift(
        metric=name,
        start=first.index,
        runs=runs,
        before=first.before,
        after=last.after,
        worse=_worse(name, last.after - first.before),
        passed=not any(line.get("outcome") in FAILED for line in since),
        since=lines[first.index],
    )


def sustained_shift(
    lines: Sequence[Mapping[str, Any]], *, pvalue: float = PVALUE, min_change: float = MIN_CHANGE
) -> Shift | None:
    """The sustained shift for the worse of one series' history lines (oldest first) that
    every run since passed its gate, or None."""
    lines, _ = trusted(lines)
    shift = latest_shift(lines, change_points([line["value"] for line in lines], pvalue=pvalue, min_change=min_change))
    return shift if shift is not None and shift.worse and shift.passed else None
