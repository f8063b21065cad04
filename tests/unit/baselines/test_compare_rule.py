"""The noise-aware verdict rule at its edges (baselines/compare.py, docs/verdicts.md)."""

import dataclasses
from statistics import NormalDist

import pytest

from pytest_llmperf.baselines.compare import compare, compare_metrics, confirmed, rule_chances, wanting_another
from pytest_llmperf.metrics.registry import Tolerance
from pytest_llmperf.stats.error import Noise, change_error
from pytest_llmperf.stats.spread import Spread

REL5 = Tolerance("relative", 0.05)
ABS003 = Tolerance("absolute", 0.03)


def status(baseline, measured, error, tol=REL5, direction="higher", **kw):
    return compare("decode_tok_s", baseline, measured, tol, direction, error=error, **kw).status


def test_without_noise_the_rule_is_the_plain_tolerance_check():
    assert status(100.0, 95.0, None) == "pass"  # exactly at the limit passes
    assert status(100.0, 94.9, None) == "regressed"
    assert status(100.0, 105.1, None) == "improved"
    assert status(100.0, 95.0, 0.0) == "pass"


def test_exactly_at_tolerance_with_noise_is_inconclusive_not_a_coin_flip():
    v = compare("decode_tok_s", 100.0, 95.0, REL5, "higher", error=1.0)
    assert v.status == "inconclusive"
    assert "sits at the boundary" in v.hint


def test_beyond_tolerance_and_beyond_noise_regresses():
    v = compare("decode_tok_s", 100.0, 90.0, REL5, "higher", error=1.0)
    assert v.status == "regressed" and not v.ok
    assert v.noise == pytest.approx(1.645 * 1.0, rel=1e-3)  # one-sided 95 %
    assert "beyond the noise (95% confidence)" in v.hint


def test_beyond_tolerance_within_noise_is_inconclusive_and_says_how_much_data_decides():
    v = compare("decode_tok_s", 100.0, 93.0, REL5, "higher", error=5.0)
    assert v.status == "inconclusive"
    # the bound (7 - 8.22 < 0) must shrink to the 7-point change: (8.22 / 7)^2 = 1.38 -> at least 2x
    assert "about 2x the data would decide it" in v.hint


def test_noise_wider_than_tolerance_is_inconclusive_even_without_a_change():
    v = compare("decode_tok_s", 100.0, 100.0, REL5, "higher", error=10.0)
    assert v.status == "inconclusive"
    # +16.4 must shrink below 5: (16.45 / 5)^2 = 10.8 -> 11x
    assert "about 11x the data" in v.hint


def test_small_change_with_small_noise_passes():
    assert status(100.0, 98.0, 1.0) == "pass"  # 2 + 1.645 <= 5
    assert status(100.0, 97.0, 1.5) == "inconclusive"  # 3 + 2.47 > 5


def test_improvement_needs_to_clear_the_noise_too():
    assert status(100.0, 110.0, 1.0) == "improved"
    # +6 % with +/-6.6: not shown better, but shown not worse than the tolerance
    assert status(100.0, 106.0, 4.0) == "pass"


def test_lower_is_better_metrics_turn_the_rule_around():
    assert status(100.0, 112.0, 0.5, Tolerance("relative", 0.10), "lower") == "regressed"
    assert status(100.0, 88.0, 0.5, Tolerance("relative", 0.10), "lower") == "improved"


def test_absolute_tolerance_uses_the_noise_in_metric_units():
    assert status(0.67, 0.62, 0.005, ABS003) == "regressed"
    assert status(0.67, 0.66, 0.002, ABS003) == "pass"
    assert status(0.67, 0.65, 0.01, ABS003) == "inconclusive"


def test_few_independent_blocks_widen_the_interval_by_students_t():
    # 2 degrees of freedom: one-sided t = 2.92 instead of 1.645
    assert status(100.0, 90.0, Noise(4.0)) == "regressed"  # 10 - 6.6 > 0
    v = compare("decode_tok_s", 100.0, 90.0, REL5, "higher", error=Noise(4.0, dof=2))
    assert v.status == "inconclusive" and v.noise == pytest.approx(2.920 * 4.0, rel=1e-3)  # 10 - 11.7 < 0


def test_auto_adds_a_run_only_where_the_noise_it_can_take_off_could_decide():
    # Inconclusive with no change: (16.45 / 10)^2 = 2.7 times less variance would pass it.
    v = compare("decode_tok_s", 100.0, 100.0, Tolerance("relative", 0.10), "higher", error=Noise(10.0, run_share=0.95))
    assert v.status == "inconclusive" and v.resolution == pytest.approx(2.706, rel=1e-3)
    # As if all the noise fell with the runs, 5 runs would decide it (2.7 * 1/5 < 1) ...
    assert v.decidable(1, 5, by_change=False, project=False)
    # ... and with 95 % of it the measured side's spread (0.05 + 0.95 * pi / 10 = 0.35 left) too,
    assert v.decidable(1, 5, by_change=False)
    # but not where the baseline's share is most of it.
    mostly_fixed = compare(
        "decode_tok_s", 100.0, 100.0, Tolerance("relative", 0.10), "higher", error=Noise(10.0, run_share=0.3)
    )
    assert not mostly_fixed.decidable(1, 5, by_change=False)
    assert mostly_fixed.decidable(1, 5, by_change=False, project=False)
    # an unknown share falls back to the square-root rule; a spent budget adds nothing
    unknown = compare("decode_tok_s", 100.0, 100.0, Tolerance("relative", 0.10), "higher", error=10.0)
    assert unknown.run_share is None and unknown.decidable(1, 5, by_change=False)
    assert not v.decidable(5, 5, by_change=False)


def test_a_regression_the_look_before_did_not_read_asks_for_one_more_run_and_only_then():
    tol = Tolerance("relative", 0.10)
    regressed = compare("decode_tok_s", 100.0, 80.0, tol, "higher", error=2.0)
    passed = compare("tpot_ms_median", 10.0, 10.0, tol, "lower", error=0.1)
    hopeful = compare("ttft_ms_median", 100.0, 100.0, tol, "lower", error=Noise(10.0, run_share=0.95))
    assert (regressed.status, passed.status, hopeful.status) == ("regressed", "pass", "inconclusive")
    # the first look (the look before read nothing), or a look after one that did not read it
    assert wanting_another([regressed, passed], 1, 5, by_change=False, read_before=()) == ["decode_tok_s"]
    assert wanting_another([regressed, passed], 3, 5, by_change=True, read_before=["tpot_ms_median"]) == [
        "decode_tok_s"
    ]
    # read by the look before too: reported as read; a pass never asks
    assert wanting_another([regressed, passed], 2, 5, by_change=True, read_before=["decode_tok_s"]) == []
    # an inconclusive verdict asks by Verdict.decidable, beside a reading again or not
    assert wanting_another([hopeful, regressed], 1, 5, by_change=False, read_before=()) == [
        "ttft_ms_median",
        "decode_tok_s",
    ]
    assert wanting_another([hopeful], 1, 5, by_change=False) == ["ttft_ms_median"]
    # a spent budget asks for nothing
    assert wanting_another([hopeful, regressed], 5, 5, by_change=False, read_before=()) == []


def test_a_pooled_spread_turns_an_inconclusive_drop_into_a_decided_one():
    baseline, measured = [100.0, 102.0, 98.0, 101.0, 99.0], [95.0]
    tolerance = Tolerance("relative", 0.03)
    alone = compare(
        "x", 100.0, 95.0, tolerance, "higher", error=change_error(None, baseline, measured), confidence=0.99
    )
    pooled = compare(
        "x",
        100.0,
        95.0,
        tolerance,
        "higher",
        error=change_error(None, baseline, measured, pool=Spread(0.0001, 16)),
        confidence=0.99,
    )
    assert alone.status == "inconclusive"  # t(4) at 99 % is 3.75
    assert pooled.status == "regressed"


def test_identical_repetitions_carry_no_noise():
    noise = change_error(0.0, [100.0, 100.0], [100.0], paired_dof=3)
    assert noise.sigma == 0.0
    assert status(100.0, 95.0, noise) == "pass"


def test_compare_metrics_takes_errors_and_notes_per_metric():
    recorded = {
        "decode_tok_s": {"value": 100.0, "samples": [100.0], "direction": "higher"},
        "acceptance_rate": {"value": 0.67, "samples": [0.67], "direction": "higher"},
    }
    verdicts = compare_metrics(
        ["decode_tok_s", "acceptance_rate"],
        recorded,
        {"decode_tok_s": 93.0, "acceptance_rate": 0.60},
        errors={"decode_tok_s": Noise(5.0)},
        notes={"acceptance_rate": "the baseline has no per-request figures"},
    )
    assert [v.status for v in verdicts] == ["inconclusive", "regressed"]
    assert verdicts[1].note == "the baseline has no per-request figures"


def test_zero_drafts_are_no_data_whatever_the_noise():
    v = compare(
        "acceptance_rate", 0.67, None, ABS003, "higher", error=Noise(0.01), no_data_reason="drafts did not move"
    )
    assert v.status == "no-data" and "drafts did not move" in v.hint


def test_a_pass_is_claimed_at_its_own_confidence_and_a_change_at_the_looks():
    # change -1 %, sigma 1 %, tolerance 3 %: the bound is 2.64 % at 95 % (a pass), 3.33 % at 99 % (not)
    noise = Noise(1.0)
    tol = Tolerance("relative", 0.03)
    strict = compare("x", 100.0, 99.0, tol, "higher", error=noise, confidence=0.99)
    assert strict.status == "inconclusive" and strict.confidence == 0.99
    split = compare("x", 100.0, 99.0, tol, "higher", error=noise, confidence=0.99, pass_confidence=0.95)
    assert split.status == "pass" and split.confidence == 0.95
    assert split.noise == pytest.approx(1.645, abs=1e-3)  # shown at the confidence of its claim
    # a regression still needs the looks' confidence: -4 % with a 99 % half-width of 2.33 % is one
    assert compare("x", 100.0, 96.0, tol, "higher", error=noise, confidence=0.99, pass_confidence=0.95).status == (
        "regressed"
    )
    # -3.5 % is beyond the tolerance, but with sigma 2 % its 99 % interval reaches 0: undecided, at 99 %
    wide = compare("x", 100.0, 96.5, tol, "higher", error=Noise(2.0), confidence=0.99, pass_confidence=0.95)
    assert wide.status == "inconclusive" and wide.confidence == 0.99 and "(99%)" in wide.hint


def test_the_noise_alone_is_read_at_the_pass_confidence_whichever_side_the_change_read():
    # sigma 1.7 %, tolerance 3 %, claims at 99 % (normal quantiles), passes at 95 %. Read at
    # -3.5 %, beyond the tolerance, the 99 % interval (+/-3.95 %) reaches 0: inconclusive, shown
    # at 99 %. What an unchanged value needs to be shown within the tolerance is the pass
    # interval's (1.645 * 1.7 / 3)^2 = 0.87 times this data, as read at -1 %; not the 99 %
    # interval's 1.74.
    tol = Tolerance("relative", 0.03)
    noise = Noise(1.7, run_share=0.5)
    beyond = compare("x", 100.0, 96.5, tol, "higher", error=noise, confidence=0.99, pass_confidence=0.95)
    inside = compare("x", 100.0, 99.0, tol, "higher", error=noise, confidence=0.99, pass_confidence=0.95)
    assert beyond.status == inside.status == "inconclusive" and beyond.confidence == 0.99
    assert beyond.noise == pytest.approx(2.326 * 1.7, rel=1e-3)  # shown at its claim's confidence
    assert beyond.resolution == pytest.approx((1.645 * 1.7 / 3) ** 2, rel=1e-3)
    assert beyond.resolution == pytest.approx(inside.resolution)
    # Half the variance the measured side's: five runs leave 0.5 + 0.5 * pi / 10 = 0.66 of it.
    # After one run, five could decide it either way it read (0.87 * 0.66 < 1) ...
    assert beyond.decidable(1, 5, by_change=False) and inside.decidable(1, 5, by_change=False)
    # ... where the 99 % half-width (what a report written before kept) says they could not.
    older = dataclasses.replace(beyond, pass_noise=None)
    assert older.resolution == pytest.approx((2.326 * 1.7 / 3) ** 2, rel=1e-3)
    assert not older.decidable(1, 5, by_change=False)


@pytest.mark.parametrize(
    "name, requests, judged",
    [
        ("ttft_ms_median", 4, False),  # a one-stream nightly run's four requests
        ("ttft_ms_median", 9, False),
        ("ttft_ms_median", 10, True),  # five on each side of the median
        ("tpot_ms_p90", 49, False),
        ("tpot_ms_p90", 50, True),
        ("e2el_ms_p99", 499, False),
        ("e2el_ms_mean", 10, True),
        ("itl_ms_median", 4, True),  # over chunk gaps, not requests
        ("steady_decode_tok_s", 2, True),  # not a statistic over requests
    ],
)
def test_a_statistic_over_requests_is_judged_only_from_enough_requests(name, requests, judged):
    tol = {name: "10%"}
    verdict = compare_metrics([name], {name: {"value": 100.0}}, {name: 150.0}, overrides=(tol,), requests=requests)[0]
    if judged:  # far beyond the tolerance without noise: a plain regression (or improvement)
        assert verdict.status in ("regressed", "improved")
    else:
        assert verdict.status == "inconclusive"
        assert f"a statistic over {requests} requests a run is not judged" in verdict.hint
        assert "more prompts" in verdict.hint and "more repetitions would not" in verdict.hint
        # Neither a factor nor noise: auto repetitions add no run for it (session._worth_another).
        assert verdict.more_data is None and verdict.resolution is None
        assert verdict.change is not None and verdict.change.relative == pytest.approx(0.5)


def test_too_few_requests_do_not_hide_an_invalid_run_or_a_missing_baseline():
    def one(baseline, **kw):
        return compare_metrics(["ttft_ms_median"], baseline, {"ttft_ms_median": 150.0}, requests=4, **kw)[0].status

    assert one({"ttft_ms_median": {"value": 100.0}}, invalid="the server died") == "invalid"
    assert one(None) == "missing-baseline"
    assert one({"ttft_ms_median": {"value": 100.0}}) == "inconclusive"
    assert compare_metrics(["ttft_ms_median"], {}, {"ttft_ms_median": None}, requests=4)[0].status == "no-data"


def test_rule_chances_are_the_alarm_level_or_less_where_the_tolerance_is_the_wider_bar():
    # noise far wider than the tolerance: a regression is read whenever the change clears the
    # noise, 1 % of the time at 99 % (5 % at the pass confidence, a confirming night's bar);
    # a gross one needs z + 2 * 3 % / 10 % sigmas
    z, z_pass = 2.3263478740408408, 1.6448536269514722
    regress, gross, confirm = rule_chances(0.10, 0.03, z, 0.99, z_pass, 0.95)
    assert regress == pytest.approx(0.01) and confirm == pytest.approx(0.05)
    assert gross == pytest.approx(1 - NormalDist().cdf(z + 0.6))
    # a tolerance six sigmas wide: the tolerance bars a false alarm, not the interval
    regress, gross, confirm = rule_chances(0.005, 0.03, z, 0.99, z_pass, 0.95)
    assert regress == confirm == pytest.approx(1 - NormalDist().cdf(6.0)) and gross < 1e-30
    # Student quantiles are carried to the normal one at each level
    assert rule_chances(0.10, 0.03, 3.747, 0.99, 2.132, 0.95)[::2] == pytest.approx((0.01, 0.05))
    assert rule_chances(0.0, 0.03, z, 0.99, z_pass, 0.95) == (0.0, 0.0, 0.0)


def test_a_verdicts_false_red_is_a_gross_ones_until_the_sessions_before_read_it_then_a_confirming_ones():
    tol = Tolerance("relative", 0.05)
    judged = compare("decode_tok_s", 100.0, 99.0, tol, "higher", error=4.0, confidence=0.99, pass_confidence=0.95)
    regress, gross, confirm = judged.chances
    assert 0 < gross < regress < confirm == pytest.approx(0.05)
    assert confirmed([judged], 0, lambda metric, count: [])[0].false_red == regress  # fails at once
    assert confirmed([judged], 1, lambda metric, count: ["pass"])[0].false_red == gross
    assert confirmed([judged], 1, lambda metric, count: ["suspect"])[0].false_red == confirm
    plain = compare("decode_tok_s", 100.0, 99.0, tol, "higher")  # no noise: no chance stated
    assert plain.chances is None and confirmed([plain], 1, lambda metric, count: [])[0].false_red is None


def test_the_session_after_a_suspect_one_confirms_a_regression_at_the_pass_confidence():
    tol = Tolerance("relative", 0.05)
    # 5.5 % worse, sigma 2.5: beyond 99 % needs 5.8, beyond 95 % 4.1: inconclusive at the alarm level
    judged = compare("decode_tok_s", 100.0, 94.5, tol, "higher", error=2.5, confidence=0.99, pass_confidence=0.95)
    assert judged.status == "inconclusive"
    after = confirmed([judged], 1, lambda metric, count: ["suspect"])[0]
    assert after.status == "regressed" and after.noise == judged.pass_noise
    assert "the 1 session(s) before read it too" in after.hint
    assert confirmed([judged], 1, lambda metric, count: ["pass"])[0].status == "inconclusive"
    assert confirmed([judged], 0, lambda metric, count: ["suspect"])[0].status == "inconclusive"  # confirm 1
    within = compare("decode_tok_s", 100.0, 96.0, tol, "higher", error=2.5, confidence=0.99, pass_confidence=0.95)
    assert confirmed([within], 1, lambda metric, count: ["suspect"])[0].status == within.status  # inside 5 %
