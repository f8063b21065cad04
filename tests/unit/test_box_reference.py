"""benchmarks/box_reference.py's candidate rule: each server's steady decode judged against
tonight's shared shift of the box (the median of the other servers' cells)."""

import math
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import box_reference as box  # noqa: E402

SERVERS = ("a", "a-mtp", "b", "b-mtp")


def night(shift=0.0, slower=None, by=0.0, rng=None, noise=0.0):
    """A night's cells: every server moved by `shift` (a ratio), `slower` by `by` more."""
    draw = rng or random.Random(0)
    x = {
        (s, c): math.log(1 + shift) + (math.log(1 - by) if s == slower else 0.0) + draw.gauss(0.0, noise)
        for s in SERVERS
        for c in (8, 32)
    }
    return box.Cells(x, frozenset())


def history(seed=1, noise=0.01):
    rng = random.Random(seed)
    return [night(shift=rng.gauss(0.0, 0.02), rng=rng, noise=noise) for _ in range(20)]


def test_the_residual_is_a_cell_less_the_median_of_the_other_servers_at_its_concurrency():
    tonight = box.Cells({("a", 8): 0.10, ("b", 8): 0.02, ("c", 8): 0.04, ("a", 32): 0.5}, frozenset())
    residuals = box.residuals(tonight)
    assert residuals["a", 8] == pytest.approx(0.10 - 0.03)
    assert residuals["b", 8] == pytest.approx(0.02 - 0.07)
    assert ("a", 32) not in residuals  # alone at its concurrency: no box to judge it against


def test_a_whole_box_shift_reads_nothing_and_one_server_5_percent_slower_reads_red():
    before = history()
    for center in box.CENTERS:
        assert box.red_cells(night(shift=-0.05), before, 2.33, center) == set()
        assert box.red_cells(night(slower="a", by=0.05), before, 2.33, center) == {("a", 8), ("a", 32)}


def test_a_drop_within_the_tolerance_or_the_cells_spread_is_not_red():
    assert box.red_cells(night(slower="a", by=0.025), history(), 2.33, "nights") == set()  # within -3 %
    wide = history(noise=0.05)  # residuals spread about 5 %: a 5 % drop is within 2.33 of them
    assert box.red_cells(night(slower="a", by=0.05), wide, 2.33, "nights") == set()


def test_from_the_last_nights_a_level_the_cell_has_held_for_weeks_is_not_red():
    rng = random.Random(2)
    low = [night(slower="a", by=0.06, rng=rng, noise=0.005) for _ in range(20)]  # a has read 6 % low all along
    tonight = night(slower="a", by=0.06, rng=rng, noise=0.005)
    assert ("a", 8) in box.red_cells(tonight, low, 2.33, "baseline")
    assert box.red_cells(tonight, low, 2.33, "nights") == set()
