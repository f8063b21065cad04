"""Drift detection over the history (baselines/history.py), with Apache Otava.

A nightly gate compares tonight with a reference; a slide of 1.5 % a night passes every
night's gate (tonight's image against last night's, or against a baseline re-recorded on
each adoption) while the level falls 8.6 % in six nights. Change-point detection over
the history sees it.

The detector is Apache Otava's (`apache-otava`, formerly DataStax's Hunter): its
E-Divisive (Matteson and James, "A Nonparametric Approach for Multiple Change Point
Analysis of Multivariate Data", 2014: split the series where the energy distance
between the two sides is largest, while a permutation test calls the split
significant), with a fixed permutation seed so one history always gives one answer.
It was picked over MongoDB's signal-processing-algorithms (the same E-Divisive means,
unseeded) and over Otava's own windowed t-test variant (`compute_change_points`, whose
merge step missed clean ramps and reported stale segment means) by
benchmarks/drift_detectors.py; docs/history.md has the figures and the reasons.
Otava is an optional dependency (`pip install 'pytest-llmperf[history]'`, part of
`[dev]`): without it DetectorMissing says so and the trend is still shown.

The level on each side of a change point is the mean of the runs between it and its
neighbours; change points that move the level by less than `min_change` are dropped
(the smallest first, the levels recomputed after each). Runs whose own noise (the
verdict's, kept in the history) is over NOISY times the series' median are left out:
they measured a disturbed box.

A *sustained shift* (`sustained_shift`): the last change points of a series, taken
together while each moves the metric the same way, moved it the worse way; at least
MIN_RUNS runs were measured since the first of them, and none of those runs failed its
gate (one that did was already reported red). Its size is the level after the last of
them (the mean of the runs since) against the level before the first.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.metrics.registry import Direction, metric

# The detector's settings, chosen on benchmarks/drift_detectors.py (docs/history.md).
PVALUE = 0.05  # the permutation test's significance
MIN_CHANGE = 0.02  # relative; a smaller move is not called a change point
PERMUTATIONS = 100  # what compute_change_points_orig runs (not a parameter of it)
SEED = 0  # the permutation test's: one history, one answer
MAX_RUNS = 60  # the latest runs searched (E-Divisive is quadratic in the runs)
MIN_POINTS = 5  # fewer runs are too few to split
MIN_RUNS = 3  # a shift is sustained after this many runs at the new level
# A run whose own noise (the verdict's interval, in the history) is this many times the
# series' median noise measured a disturbed box, not the image: left out of the series.
NOISY = 5.0
# Outcomes after which the gate itself failed: such a shift was already reported red.
FAILED = frozenset({"regressed", "invalid"})

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
    """The change points Otava's E-Divisive finds in the latest MAX_RUNS of `values`
    (oldest first), in index order, each with the levels either side. DetectorMissing
    when Otava is not installed."""
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
    """The series' runs to read levels from, and those left out: a run whose noise is over
    NOISY times the median noise of the runs that have one (a loaded host, a stalled
    stream: the verdict was usually inconclusive). Runs without a noise are kept."""
    noises = [float(line["noise"]) for line in lines if isinstance(line.get("noise"), (int, float))]
    if len(noises) < MIN_POINTS:
        return list(lines), []
    bound = NOISY * statistics.median(noises)
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
    """The series' sustained shift for the worse that every run since passed its gate (the
    nightly summary's flag), or None. `lines`: one series' history lines, oldest first;
    the runs `trusted` leaves out are not read."""
    lines, _ = trusted(lines)
    shift = latest_shift(lines, change_points([line["value"] for line in lines], pvalue=pvalue, min_change=min_change))
    return shift if shift is not None and shift.worse and shift.passed else None
