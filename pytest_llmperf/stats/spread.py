"""The spread between server starts: one cell's repetitions, pooled over cells."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pytest_llmperf.stats.outliers import without_events


@dataclass(frozen=True)
class Spread:
    """The spread between server starts of one metric pooled over cells: the variance of a
    repetition's value over its cell's median, and its degrees of freedom."""

    variance: float
    dof: int


def pooled_spread(cells: Iterable[Iterable[float | None]]) -> Spread | None:
    """Sum of (n - 1) * var(value / median) over sum of (n - 1), over `cells` of repetitions;
    None when no cell has two."""
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


def spread_pools(cells: Sequence[Mapping[str, list[float | None]]], names: list[str]) -> dict[str, Spread]:
    """Per metric of `names`, the relative spread between starts pooled over the `cells`
    (each a mapping of metric -> repetitions) that have it; a metric none has is left out."""
    pools = {}
    for name in names:
        spread = pooled_spread(cell[name] for cell in cells if name in cell)
        if spread is not None:
            pools[name] = spread
    return pools


NIGHTS_WINDOW = 20  # the last sessions whose values give a cell's nightly spread
MIN_NIGHTS = 5  # fewer than this many earlier sessions: no nightly term


def nightly_spread(values: Sequence[float]) -> Spread | None:
    """The spread of one cell's value between sessions: the sample variance (in the metric's
    units) of the last NIGHTS_WINDOW values, on n - 1 degrees of freedom; None below
    MIN_NIGHTS. Noisier nights among them count: tonight may be one. A session whose value
    lies more than EVENT robust standard deviations (stats/outliers.py) from the window's median (a start that
    came up slow, a hiccup of the box) is left out: it is an event the confirming session
    deals with, and one such value would widen every verdict of the cell for NIGHTS_WINDOW
    nights."""
    recent = list(values)[-NIGHTS_WINDOW:]
    if len(recent) < MIN_NIGHTS:
        return None
    kept = without_events(recent, MIN_NIGHTS)
    return Spread(statistics.variance(kept), len(kept) - 1)
