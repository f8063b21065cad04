"""--llmperf-confirm: a regression fails when the sessions before it read it too; alone it
is suspect (its test passes with a warning), unless it is gross."""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest

from pytest_llmperf.baselines.compare import Change, Status, Verdict, compare_metrics, gross
from pytest_llmperf.baselines.outcome import PerfFailure, SuspectWarning
from pytest_llmperf.metrics.registry import Direction, Tolerance
from pytest_llmperf.options import resolve_options
from pytest_llmperf.workload.workload import resolve_workload
from tests.unit.judging.test_session import BASE, MTP, FakeTarget, fake_session, make_result, make_session

WORKLOAD = resolve_workload({"num_prompts": 4}, 8)
NIGHTLY = {"llmperf_profile": "nightly"}


def session(tmp_path, speed, **cli):
    """One session judging decode_tok_s (tolerance -5 %) at `speed` against a baseline of
    100: its verdict, whether the test failed, and the warnings it raised."""
    perf, _, _ = make_session(tmp_path, [speed], **{**NIGHTLY, **cli})
    run = perf.bind(perf.run(BASE, WORKLOAD), "t")
    failed, caught = fails(lambda: run.assert_no_regression("decode_tok_s"))
    perf.finish()
    return perf.gates[-1], failed, [w.message for w in caught if issubclass(w.category, SuspectWarning)]


def fails(assertion) -> tuple[bool, list[warnings.WarningMessage]]:
    """Whether `assertion()` failed its test (PerfFailure), and the warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            assertion()
        except PerfFailure:
            return True, list(caught)
    return False, list(caught)


def record(tmp_path, **cli):
    gate, failed, _ = session(tmp_path, 100.0, llmperf_update_baselines=True, **cli)
    assert gate.outcome == "recorded" and not failed


def test_a_first_regression_is_suspect_and_fails_when_the_next_session_reads_it_too(tmp_path):
    record(tmp_path)
    gate, failed, suspect = session(tmp_path, 93.0)
    assert not failed and gate.outcome == "warn"
    assert gate.verdicts[0].status == Status.SUSPECT
    assert "suspect: decode_tok_s" in str(suspect[0]) and "2 sessions in a row" in str(suspect[0])
    assert "0 of the 1 session(s) before read it" in gate.verdicts[0].hint
    assert "?! suspect" in gate.message

    gate, failed, suspect = session(tmp_path, 93.0)
    assert failed and gate.verdicts[0].status == Status.REGRESSED and not suspect
    assert "REGRESSED" in gate.message


def test_a_session_that_reads_no_regression_between_two_that_do_resets_it(tmp_path):
    record(tmp_path)
    assert session(tmp_path, 93.0)[0].verdicts[0].status == Status.SUSPECT
    assert session(tmp_path, 100.0)[0].verdicts[0].status == Status.PASS
    gate, failed, _ = session(tmp_path, 93.0)
    assert not failed and gate.verdicts[0].status == Status.SUSPECT


def test_re_recording_the_baseline_resets_it(tmp_path):
    record(tmp_path)
    assert session(tmp_path, 93.0)[0].verdicts[0].status == Status.SUSPECT
    record(tmp_path)
    assert session(tmp_path, 93.0)[0].verdicts[0].status == Status.SUSPECT


def test_a_regression_beyond_twice_the_tolerance_fails_at_once(tmp_path):
    record(tmp_path)
    gate, failed, _ = session(tmp_path, 85.0)  # -15 %: beyond 2 x 5 %
    assert failed and gate.verdicts[0].status == Status.REGRESSED


def test_three_sessions_in_a_row_under_confirm_3(tmp_path):
    record(tmp_path)
    for _ in range(2):
        gate, failed, _ = session(tmp_path, 93.0, llmperf_confirm="3")
        assert not failed and gate.verdicts[0].status == Status.SUSPECT
    assert "1 of the 2 session(s) before read it" in gate.verdicts[0].hint
    gate, failed, _ = session(tmp_path, 93.0, llmperf_confirm="3")
    assert failed and gate.verdicts[0].status == Status.REGRESSED


def test_confirm_1_fails_at_once(tmp_path):
    record(tmp_path)
    gate, failed, _ = session(tmp_path, 93.0, llmperf_confirm="1")
    assert failed and gate.verdicts[0].status == Status.REGRESSED


@pytest.mark.parametrize(
    ("cli", "confirm"),
    [
        ({"llmperf_profile": "nightly"}, 2),
        ({"llmperf_profile": "nightly", "llmperf_history": "off"}, 1),  # nothing to confirm against
        ({"llmperf_profile": "full"}, 1),
        ({"llmperf_profile": "smoke"}, 1),
        ({"llmperf_profile": "full", "llmperf_confirm": "2"}, 2),
        ({"llmperf_profile": "nightly", "llmperf_confirm": "1"}, 1),
    ],
)
def test_the_default_is_2_at_the_nightly_profile_with_a_history_kept(cli, confirm):
    options = resolve_options(lambda dest: {"llmperf_sim": True, **cli}.get(dest), lambda name: "")
    assert options.confirm == confirm


@pytest.mark.parametrize("bad", ["0", "-1", "two"])
def test_a_bad_confirm_is_an_error_naming_the_flag(bad):
    with pytest.raises(ValueError, match="--llmperf-confirm"):
        resolve_options(lambda dest: {"llmperf_sim": True, "llmperf_confirm": bad}.get(dest), lambda name: "")


def verdict(measured, noise, kind="relative", limit=0.05, direction=Direction.HIGHER):
    return Verdict(
        "m",
        100.0,
        measured,
        Change(measured - 100.0, (measured - 100.0) / 100.0),
        "-5%",
        Status.REGRESSED,
        direction=direction,
        tolerance=Tolerance(kind, limit),
        noise=noise,
    )


@pytest.mark.parametrize(
    ("measured", "noise", "direction", "expected"),
    [
        (89.0, 0.0, Direction.HIGHER, True),  # 11 % worse, no noise: beyond 10 %
        (89.0, 2.0, Direction.HIGHER, False),  # its interval reaches 9 %: not clear of 10 %
        (90.0, 0.0, Direction.HIGHER, False),  # exactly twice is not beyond
        (112.0, 1.0, Direction.LOWER, True),  # lower is better: 12 % up, 11 % clear of the noise
    ],
)
def test_gross_is_an_interval_clear_of_twice_the_tolerance(measured, noise, direction, expected):
    assert gross(verdict(measured, noise, direction=direction)) is expected


def test_a_cell_whose_level_moves_between_sessions_is_judged_with_that_spread(tmp_path):
    record(tmp_path)
    for speed in (100.0, 97.0, 103.0, 98.0, 102.0):  # five sessions within the tolerance, 2.5 apart
        assert session(tmp_path, speed)[0].verdicts[0].status == Status.PASS
    gate, failed, suspect = session(tmp_path, 93.0)  # read as a regression with no history (above)
    verdict = gate.verdicts[0]
    assert verdict.status == Status.INCONCLUSIVE and not failed and not suspect
    assert verdict.note == "tonight's side: the spread of the last 6 sessions' values"
    assert verdict.noise > 7.0  # wider than the change: the nights alone move the cell that much


SPEEDUP_WORKLOAD = resolve_workload({"num_prompts": 4}, 8)
READ_AGAIN = "flagged, read again on a fresh MTP + base pair"


def speedup_session(tmp_path, first, again=None, *, wide_first_look=False, **cli):
    """A nightly session's speedup test: its base at 100 tok/s, its MTP server at `first`
    tok/s until the gate reads a flagged speedup again, then at `again` (default `first`);
    the gate's record, whether the test failed, and the MTP run. `wide_first_look`: the
    rule reads a regression before the fresh pairs `inconclusive` (its 99 % interval
    reaching no change, its 95 % one clear of it)."""
    target = FakeTarget()
    said = []

    def rule(*args, **kwargs):
        verdicts = compare_metrics(*args, **kwargs)
        if not wide_first_look or any(READ_AGAIN in line for line in said):
            return verdicts
        return [replace(v, status=Status.INCONCLUSIVE) if v.status == Status.REGRESSED else v for v in verdicts]

    def measure(endpoint, requests, workload, speed):
        server = next(name for event, name in reversed(target.events) if event == "start")
        if server == BASE.name:
            return make_result(100.0)
        reading_again = any(READ_AGAIN in line for line in said)
        return make_result(again if reading_again and again is not None else first)

    given = {"llmperf_sim": True, **NIGHTLY, **cli}
    perf = fake_session(tmp_path, given, target, measure=measure, log=said.append, rule=rule)
    base, mtp = perf.run(BASE, SPEEDUP_WORKLOAD), perf.bind(perf.run(MTP, SPEEDUP_WORKLOAD), "t::test_speedup[8]")
    failed, _ = fails(lambda: mtp.assert_speedup_over(base))
    perf.finish()
    return perf.gates[-1], failed, mtp


def test_a_suspect_speedup_is_read_again_at_once_and_fails_where_the_fresh_pairs_read_it_too(tmp_path):
    assert speedup_session(tmp_path, 150.0, llmperf_update_baselines=True)[0].outcome == "recorded"
    gate, failed, mtp = speedup_session(tmp_path, 144.0, llmperf_repetitions="auto")  # 4 % lower, beyond 3 %
    assert failed and gate.verdicts[0].status == Status.REGRESSED
    assert "read again at once on 3 fresh MTP + base pair(s): mtp_speedup -4.0% (reads it)" in gate.message
    assert len(mtp.results) == 2 + 3  # the first look's two (a regression is read again on a fresh start), then 3


def test_a_suspect_speedup_the_fresh_pairs_do_not_read_stays_suspect(tmp_path):
    speedup_session(tmp_path, 150.0, llmperf_update_baselines=True)
    gate, failed, _ = speedup_session(tmp_path, 144.0, again=150.0, llmperf_repetitions="auto")
    assert not failed and gate.outcome == "warn" and gate.verdicts[0].status == Status.SUSPECT
    assert "read again at once on 3 fresh MTP + base pair(s): mtp_speedup +0.0% (pass)" in gate.message
    # the next session's reading confirms it, as without the fresh pairs
    gate, failed, _ = speedup_session(tmp_path, 144.0, again=150.0, llmperf_repetitions="auto")
    assert failed and gate.verdicts[0].status == Status.REGRESSED


def test_fixed_repetitions_read_no_speedup_again(tmp_path):
    speedup_session(tmp_path, 150.0, llmperf_update_baselines=True)
    gate, failed, mtp = speedup_session(tmp_path, 144.0, llmperf_repetitions="1")
    assert not failed and gate.verdicts[0].status == Status.SUSPECT
    assert "read again" not in gate.message and len(mtp.results) == 1


def test_a_speedup_beyond_its_tolerance_at_95_but_not_at_99_is_read_again_and_fails_where_the_pairs_read_it(
    tmp_path,
):
    speedup_session(tmp_path, 150.0, llmperf_update_baselines=True)
    gate, failed, _ = speedup_session(tmp_path, 144.0, wide_first_look=True, llmperf_repetitions="auto")
    assert failed and gate.verdicts[0].status == Status.REGRESSED
    assert "read again at once on 3 fresh MTP + base pair(s): mtp_speedup -4.0% (reads it)" in gate.message

    # where the fresh pairs do not read it, it stays inconclusive: no warning of a regression
    other = tmp_path / "other"
    other.mkdir()
    speedup_session(other, 150.0, llmperf_update_baselines=True)
    gate, failed, _ = speedup_session(other, 144.0, 150.0, wide_first_look=True, llmperf_repetitions="auto")
    assert not failed and gate.verdicts[0].status == Status.INCONCLUSIVE
