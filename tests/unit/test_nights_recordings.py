"""benchmarks/nights.py --recordings: each rate is the mean over recordings with its spread
across them, and one recording prints one recording's tables."""

import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import nights  # noqa: E402
import recordings  # noqa: E402

SUSPECT = ("test_mtp_speedup", "qwen3.6-27b-fp8-mtp", 8, "mtp_speedup", "suspect")
FAILED = ("test_base_decode", "qwen3.6-27b-fp8", 8, "steady_decode_tok_s", "regressed")
PASSED = ("test_base_decode", "qwen3.6-27b-fp8", 8, "steady_decode_tok_s", "pass")
NAMES = ["decode 5% slower", "speedup 5% lower"]


def summary(index, red=False, suspect=False, minutes=40.0):
    failing = [FAILED] if red else []
    flagged = failing + ([SUSPECT] if suspect else [])
    return nights.NightSummary(index, red, failing, flagged, [PASSED, *flagged], minutes * 60, 4)


def recording(flags, episodes, minutes=40.0):
    """A made-up recording: its unchanged nights' (red, suspect) and each change's episodes."""
    return nights.Recording(
        nights.Recorded(18, 52, 7200.0),
        [summary(i, red, suspect, minutes) for i, (red, suspect) in enumerate(flags)],
        {k: [(list(runs), False) for runs in episodes[k]] for k in range(len(episodes))},
    )


def test_a_recordings_rates_are_the_shares_of_its_nights_and_episodes():
    one = recording(
        [(True, False), (False, True), (False, False), (False, False)],
        [[["red"], ["suspect", "red"], ["", "suspect", "red"], ["", "", ""]], [["suspect", "", ""]]],
        minutes=30.0,
    )
    rates = recordings.recording_rates(one.nights, one.seen, NAMES)
    assert rates[recordings.UNCHANGED, "red"] == 0.25
    assert rates[recordings.UNCHANGED, "with a suspect cell"] == 0.25
    assert rates[recordings.UNCHANGED, "GPU-minutes a night"] == pytest.approx(30.0)
    decode = {figure: rates[NAMES[0], figure] for figure in recordings.CHANGE_FIGURES}
    assert decode == {"flagged night 1": 0.5, "red night 1": 0.25, "red within 2": 0.5, "red within 3": 0.75}
    assert rates[NAMES[1], "flagged night 1"] == 1.0 and rates[NAMES[1], "red within 3"] == 0.0


def test_the_aggregate_is_the_mean_and_the_percentiles_of_the_recordings_rates():
    reds = [0.0, 0.04, 0.01, 0.0, 0.02, 0.005, 0.0, 0.015, 0.03, 0.0]
    made = [recording([(i < round(red * 200), False) for i in range(200)], [[["red"]]]) for red in reds]
    rows = [recordings.recording_rates(one.nights, one.seen, NAMES) for one in made]
    spreads = recordings.aggregate(rows)
    red = spreads[recordings.UNCHANGED, "red"]
    deciles = statistics.quantiles(reds, n=10, method="inclusive")
    assert red.mean == pytest.approx(statistics.mean(reds))
    assert red.p10 == pytest.approx(deciles[0]) and red.p90 == pytest.approx(deciles[8])
    assert (red.low, red.high) == (0.0, 0.04)
    assert spreads[NAMES[0], "red night 1"] == recordings.Spread(1.0, 1.0, 1.0, 1.0, 1.0)
    assert (NAMES[1], "red night 1") not in spreads  # no recording ran an episode of it


def test_a_rate_some_recording_lacks_is_left_out_and_two_recordings_spread_between_them():
    rows = [{("a", "x"): 0.2, ("b", "x"): 1.0}, {("a", "x"): 0.6}]
    spreads = recordings.aggregate(rows)
    assert list(spreads) == [("a", "x")]
    a = spreads["a", "x"]
    assert (a.mean, a.p10, a.p90, a.low, a.high) == pytest.approx((0.4, 0.24, 0.56, 0.2, 0.6))
    with pytest.raises(ValueError):
        recordings.percentile([], 0.5)


def test_several_recordings_print_each_rate_with_its_spread(capsys):
    many = [
        recording([(r == 0, False), (False, False)], [[["red"]], [["", "", "red" if r else ""]]], minutes=40.0 + r)
        for r in range(3)
    ]
    nights.report(many, NAMES, nights.NoiseModel.load(), 4, 2, 1)
    out = capsys.readouterr().out
    assert "unchanged nights of 3 recordings: 1 of 6 red (16.7%)" in out
    assert "  red                                         16.7%       0.0%-40.0%       0.0%-50.0%" in out
    assert "  GPU-minutes a night                          41.0        40.2-41.8        40.0-42.0" in out
    row = next(line for line in out.splitlines() if line.startswith(NAMES[1]))
    assert row.split()[-12:] == ["0%", "[0-0]", "(0-0)"] * 3 + ["67%", "[20-100]", "(0-100)"]


def test_one_recording_prints_one_recordings_tables(capsys):
    """--recordings 1 is the run of one recording: the first recording draws with --seed
    itself, and its tables are one recording's, without a spread."""
    assert nights.recording_seed(7, 0) == 7
    assert len({nights.recording_seed(7, r) for r in range(20)} | {nights.recording_seed(8, 0)}) == 21
    assert nights.parse_args([]).recordings == 1
    one = recording([(False, False)] * 3, [[["suspect", "red"], [""] * 3], [["", "", ""]]], minutes=33.0)
    nights.report([one], NAMES, nights.NoiseModel.load(), 4, 3, 2)
    assert capsys.readouterr().out.splitlines() == [
        "",
        "changes (2 episodes of up to three nights each; a cell the change touches is red or suspect)",
        "change                                      flagged night 1  red night 1  red within 2  red within 3"
        "    flagged night 1: quiet / noisy first nights",
        "decode 5% slower                                       50%          0%          50%          50%"
        "                                50% of 2 / none",
        "speedup 5% lower                                        0%          0%           0%           0%"
        "                                 0% of 1 / none",
        "",
        "GPU-minutes a night (simulated runs, plus 120 s for each server start beyond one per server): mean 33.0, "
        "max 33.0, against 81.8 for the seeds' fixed runs (40%)",
    ]
