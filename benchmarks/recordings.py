"""Rates over many recordings: each figure of benchmarks/nights.py as the mean over
independent recordings (each its own baseline, recorded on its own night, followed by its
own nights and episodes) with its spread across them.

A recording's rates are one row (`recording_rates`): rate -> value, the rate named by
(what, figure), e.g. ("unchanged nights", "red") or ("whole image 5% slower", "red within
2"). `aggregate`
gives each rate's mean over the rows, its 10th and 90th percentile (linear between the
closest ranks, as numpy's default and statistics.quantiles' inclusive method) and its
min and max; `print_spreads` prints the tables of them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

Rate = tuple[str, str]  # (what: "unchanged nights" or a change's name, the figure)
UNCHANGED = "unchanged nights"
UNCHANGED_FIGURES = ("red", "with a suspect cell", "GPU-minutes a night")
CHANGE_FIGURES = ("flagged night 1", "red night 1", "red within 2", "red within 3")
# Paired nights (benchmarks/paired_nights.py): each night stands alone, a change is read in the night it comes.
PAIRED_UNCHANGED_FIGURES = ("red", "with a suspect cell", "with an inconclusive cell", "GPU-minutes a night")
PAIRED_CHANGE_FIGURES = ("flagged", "red", "night red")


Episode = tuple[Sequence[str], bool]  # each night's "red", "suspect" or ""; whether night 1 was noisy


class JudgedNight(Protocol):
    """What a recording's rates read of an unchanged night (nights.NightSummary)."""

    @property
    def red(self) -> bool: ...
    @property
    def flagged(self) -> list[tuple[str, str, int, str, str]]: ...  # (test, server, concurrency, metric, status)
    @property
    def gpu_s(self) -> float: ...


class PairedNight(JudgedNight, Protocol):
    """What a recording's paired rates read of a night (nights.NightSummary): every verdict too."""

    @property
    def cells(self) -> list[tuple[str, str, int, str, str]]: ...  # (test, server, concurrency, metric, status)


def suspect(night: JudgedNight) -> bool:
    """Whether some cell of `night` read suspect."""
    return any(cell[4] == "suspect" for cell in night.flagged)


def change_rates(name: str, runs: Sequence[Sequence[str]]) -> dict[Rate, float]:
    """A change's shares of its episodes `runs` (each night's "red", "suspect" or ""):
    flagged (red or suspect) on night 1, red on night 1, red within 2 and within 3."""
    n = len(runs)
    return {
        (name, "flagged night 1"): sum(bool(r[0]) for r in runs) / n,
        (name, "red night 1"): sum(r[0] == "red" for r in runs) / n,
        (name, "red within 2"): sum("red" in r[:2] for r in runs) / n,
        (name, "red within 3"): sum("red" in r[:3] for r in runs) / n,
    }


def recording_rates(
    nights: Sequence[JudgedNight], seen: Mapping[int, Sequence[Episode]], names: Sequence[str]
) -> dict[Rate, float]:
    """One recording's rates: of its unchanged `nights` the share red and with a suspect
    cell and the GPU-minutes a night; of each change (`names`, by index in `seen`) the
    shares of its episodes (a change without episodes: none)."""
    rates: dict[Rate, float] = {
        (UNCHANGED, "red"): sum(night.red for night in nights) / len(nights),
        (UNCHANGED, "with a suspect cell"): sum(suspect(night) for night in nights) / len(nights),
        (UNCHANGED, "GPU-minutes a night"): statistics.mean(night.gpu_s for night in nights) / 60,
    }
    for k, name in enumerate(names):
        runs = seen.get(k, [])
        if runs:
            rates.update(change_rates(name, [r for r, _ in runs]))
    return rates


def paired_rates(
    nights: Sequence[PairedNight], seen: Mapping[int, Sequence[tuple[str, bool]]], names: Sequence[str]
) -> dict[Rate, float]:
    """One recording's paired rates: of its unchanged `nights` the share red, with a suspect
    cell and with an inconclusive cell, and the GPU-minutes a night (both images); of each
    change (`names`, by index in `seen`: each night's "red", "suspect" or "" in the cells it
    touches, and whether the night was red) the share of its nights flagged (red or suspect)
    and red in the cells it touches, and red at all (a change without nights: none)."""
    rates: dict[Rate, float] = {
        (UNCHANGED, "red"): sum(night.red for night in nights) / len(nights),
        (UNCHANGED, "with a suspect cell"): sum(suspect(night) for night in nights) / len(nights),
        (UNCHANGED, "with an inconclusive cell"): sum(
            any(cell[4] == "inconclusive" for cell in night.cells) for night in nights
        )
        / len(nights),
        (UNCHANGED, "GPU-minutes a night"): statistics.mean(night.gpu_s for night in nights) / 60,
    }
    for k, name in enumerate(names):
        runs = seen.get(k, [])
        if runs:
            n = len(runs)
            rates[name, "flagged"] = sum(bool(status) for status, _ in runs) / n
            rates[name, "red"] = sum(status == "red" for status, _ in runs) / n
            rates[name, "night red"] = sum(red for _, red in runs) / n
    return rates


def share(hits: int, of: int) -> str:
    return f"{hits / of:.0%} of {of}" if of else "none"


@dataclass(frozen=True)
class Spread:
    """One rate across recordings: its mean, 10th and 90th percentile, min and max."""

    mean: float
    p10: float
    p90: float
    low: float
    high: float


def percentile(values: Sequence[float], q: float) -> float:
    """The `q` quantile (0..1) of `values`, linear between the closest ranks."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def spread(values: Sequence[float]) -> Spread:
    return Spread(sum(values) / len(values), percentile(values, 0.1), percentile(values, 0.9), min(values), max(values))


def aggregate(rows: Sequence[Mapping[Rate, float]]) -> dict[Rate, Spread]:
    """Each rate's spread over the recordings' `rows`, for the rates every row has (a change
    a recording ran no episode of has no rate there), in the first row's order."""
    if not rows:
        return {}
    rates = [rate for rate in rows[0] if all(rate in row for row in rows)]
    return {rate: spread([row[rate] for row in rows]) for rate in rates}


def share_cell(s: Spread) -> str:
    """A share's mean, [p10-p90] and (min-max), the spread in percent."""
    p10, p90, low, high = (100 * v for v in (s.p10, s.p90, s.low, s.high))
    return f"{s.mean:4.0%} [{p10:.0f}-{p90:.0f}] ({low:.0f}-{high:.0f})"


def print_spreads(
    spreads: Mapping[Rate, Spread],
    recordings: int,
    nights: int,
    episodes: int,
    fixed_minutes: float,
    out: Callable[[str], None] = print,
    *,
    unchanged_figures: Sequence[str] = UNCHANGED_FIGURES,
    change_figures: Sequence[str] = CHANGE_FIGURES,
    changes_title: str = "",
    paired: bool = False,
) -> None:
    """The unchanged nights' rates and the changes' table, each figure the mean over
    `recordings` with its 10th-90th percentile and min-max across them; `unchanged_figures`,
    `change_figures`: the figures of each table, `changes_title`: the changes' table's title
    (before its spread's legend; default: nights.py's episodes); `paired`: the nights are
    paired ones (benchmarks/paired_nights.py), `episodes` each change's nights."""
    out("")
    each = (
        f"{nights} unchanged paired nights and {episodes} paired nights"
        if paired
        else f"{nights} unchanged nights and {episodes} episodes"
    )
    out(
        f"over {recordings} recordings (each its own baseline, recorded on its own night, then {each} per change): "
        "each rate the mean over recordings, [10th-90th percentile] and (min-max) across them"
    )
    out(f"{UNCHANGED:<42} {'mean':>8} {'p10-p90':>16} {'min-max':>16}")
    for figure in unchanged_figures:
        s = spreads.get((UNCHANGED, figure))
        if s is None:
            continue
        minutes = figure.startswith("GPU-minutes")
        form = ".1f" if minutes else ".1%"
        middle, ends = f"{s.p10:{form}}-{s.p90:{form}}", f"{s.low:{form}}-{s.high:{form}}"
        line = f"  {figure:<40} {s.mean:8{form}} {middle:>16} {ends:>16}"
        if minutes:
            line += f"   against {fixed_minutes:.1f} for the seeds' fixed runs ({s.mean / fixed_minutes:.0%})"
        out(line)
    changes = list(dict.fromkeys(what for what, _ in spreads if what != UNCHANGED))
    if not changes:
        return
    out("")
    title = changes_title or (
        f"changes ({episodes} episodes of up to three nights each per recording; a cell the change touches is red "
        "or suspect)"
    )
    out(f"{title}: mean [p10-p90] (min-max), in percent")
    out(f"{'change':<42} " + " ".join(f"{figure:>25}" for figure in change_figures))
    for what in changes:
        cells = [spreads.get((what, figure)) for figure in change_figures]
        out(f"{what:<42} " + " ".join(f"{share_cell(s) if s else 'none':>25}" for s in cells))
