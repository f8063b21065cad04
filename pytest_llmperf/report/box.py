"""The box check: when most of a session's decode cells moved the same way, the summary
says the whole box (or the whole image) moved, by how much and with what noise, and shows
each flagged cell against that move as well as against its baseline."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_llmperf.baselines.compare import Verdict
from pytest_llmperf.metrics.registry import GATED_DECODE, TPOT_MEDIAN, Direction
from pytest_llmperf.stats.median import median_variance

BOX_METRICS = frozenset({GATED_DECODE, TPOT_MEDIAN})  # a box's speed moves them all; ratios cancel it
MIN_CELLS = 6  # fewer decode cells say nothing about the box
TOGETHER = 0.8  # this share of them worse (or better) is the box moving
FLAGGED = frozenset({"regressed", "suspect"})


@dataclass(frozen=True)
class BoxMove:
    cells: int  # decode cells judged
    together: int  # of them, moved the way the median did
    worse: float  # the median cell's change in the bad direction (0.04: 4 % worse)
    noise: float  # the median's standard error: sd times the square root of median_variance(n)


def worse_share(verdict: Verdict) -> float | None:
    """A verdict's relative change in its bad direction (None without one)."""
    change = verdict.change
    if change is None or change.relative is None:
        return None
    return -change.relative if verdict.direction is Direction.HIGHER else change.relative


def box_move(verdicts: Sequence[tuple[str, int, Verdict]]) -> BoxMove | None:
    """The box's move over (server, concurrency, verdict) of the session's decode cells, when
    at least TOGETHER of MIN_CELLS or more moved the same way; else None."""
    moves = [w for _, _, v in verdicts if v.metric in BOX_METRICS and (w := worse_share(v)) is not None]
    if len(moves) < MIN_CELLS:
        return None
    middle = statistics.median(moves)
    together = sum(1 for w in moves if w * middle > 0)
    if middle == 0 or together < TOGETHER * len(moves):
        return None
    noise = statistics.stdev(moves) * math.sqrt(median_variance(len(moves)))
    return BoxMove(len(moves), together, middle, noise)


def box_lines(verdicts: Sequence[tuple[str, int, Verdict]]) -> list[str]:
    """The summary's box check: the move, and each flagged cell against the baseline and the box."""
    move = box_move(verdicts)
    if move is None:
        return []
    way = "slower" if move.worse > 0 else "faster"
    lines = [
        f"box check: {move.together} of {move.cells} decode cells moved together, the median "
        f"{abs(move.worse):.1%} {way} (+/- {move.noise:.1%}): the whole box or the whole image moved "
        "(ratios within the session, such as mtp_speedup, cancel a box's move; a rerun on another "
        "night tells the two apart)"
    ]
    for server, concurrency, verdict in verdicts:
        worse = worse_share(verdict)
        if str(verdict.status) in FLAGGED and verdict.metric in BOX_METRICS and worse is not None:
            lines.append(
                f"  {server} @ {concurrency} {verdict.metric}: {_by(worse)} against the baseline, "
                f"{_by(worse - move.worse)} against the box"
            )
    return lines


def _by(worse: float) -> str:
    return f"worse by {worse:.1%}" if worse > 0 else f"better by {-worse:.1%}"
