"""The box check: most decode cells moving together is named as the box's move."""

import dataclasses
import math
import statistics

import pytest

from pytest_llmperf.baselines.compare import compare
from pytest_llmperf.metrics.registry import Tolerance
from pytest_llmperf.report.box import box_lines, box_move

DECODE = Tolerance("relative", 0.03)
TPOT = Tolerance("relative", 0.10)


def decode(measured, baseline=100.0):
    return compare("steady_decode_tok_s", baseline, measured, DECODE, "higher", error=0.5)


def tpot(measured, baseline=10.0):
    return compare("tpot_ms_median", baseline, measured, TPOT, "lower", error=0.05)


def test_most_decode_cells_slower_together_is_the_box_moving_and_flagged_cells_are_shown_against_it():
    cells = [("a", c, decode(v)) for c, v in ((1, 96.0), (8, 95.0), (32, 96.5))]
    cells += [("b", c, decode(v)) for c, v in ((1, 95.5), (8, 90.0), (32, 96.0))]
    cells += [("a", 8, tpot(10.4)), ("b", 8, tpot(10.5)), ("a", 8, compare("mtp_speedup", 1.5, 1.5, DECODE, "higher"))]
    move = box_move(cells)
    assert (move.cells, move.together) == (8, 8)  # the speedup is a ratio: not a box's cell
    assert move.worse == pytest.approx(0.0425)  # the median of 4, 5, 3.5, 4.5, 10, 4, 4, 5 % slower
    # the median's standard error as stats/median gives it: sd x sqrt(pi / 2n) for n >= 3
    worse = [0.04, 0.05, 0.035, 0.045, 0.10, 0.04, 0.04, 0.05]
    assert move.noise == pytest.approx(statistics.stdev(worse) * math.sqrt(math.pi / (2 * 8)))
    lines = box_lines(cells)
    assert lines[0].startswith("box check: 8 of 8 decode cells moved together, the median 4.3% slower (+/- 0.9%): ")
    # every decode cell reads regressed against its baseline; against the box one stands out
    assert len(lines) == 7 and lines[2:6:3] == [
        "  a @ 8 steady_decode_tok_s: worse by 5.0% against the baseline, worse by 0.7% against the box",
        "  b @ 8 steady_decode_tok_s: worse by 10.0% against the baseline, worse by 5.7% against the box",
    ]
    assert lines[1] == "  a @ 1 steady_decode_tok_s: worse by 4.0% against the baseline, better by 0.3% against the box"


def test_cells_that_do_not_move_together_or_too_few_cells_say_nothing():
    mixed = [("a", c, decode(v)) for c, v in enumerate((96.0, 104.0, 95.0, 105.0, 97.0, 103.0))]
    assert box_move(mixed) is None and box_lines(mixed) == []
    few = [("a", c, decode(95.0)) for c in range(5)]
    assert box_move(few) is None
    still = [("a", c, dataclasses.replace(decode(100.0))) for c in range(8)]
    assert box_move(still) is None  # no move at all
