import pytest

from pytest_llmperf.metrics.failures import ErrorBudget, Failures, combine, failures, faults_note, parse_budget, stalls
from pytest_llmperf.metrics.records import RequestRecord


def record(i, error=None, cut_at_cap=False):
    return RequestRecord(index=i, send_time=0.0, chunk_times=[] if error else [0.1], error=error, cut_at_cap=cut_at_cap)


@pytest.mark.parametrize(
    ("text", "budget"),
    [("0", ErrorBudget(0.0)), ("3", ErrorBudget(3.0)), (" 5% ", ErrorBudget(0.05, True)), (2, ErrorBudget(2.0))],
)
def test_budget_forms(text, budget):
    assert parse_budget(text) == budget


@pytest.mark.parametrize(
    ("text", "why"), [("-1", "a count"), ("1.5", "whole number"), ("150%", "at most 100%"), ("x", "a count")]
)
def test_bad_budgets_say_the_accepted_forms(text, why):
    with pytest.raises(ValueError, match=why):
        parse_budget(text)


def test_a_budget_is_a_count_or_a_share_of_those_sent():
    assert ErrorBudget(0.0).allows(0, 64) and not ErrorBudget(0.0).allows(1, 64)
    assert ErrorBudget(0.05, relative=True).allows(3, 64) and not ErrorBudget(0.05, relative=True).allows(4, 64)


def test_failures_are_grouped_by_cause_most_common_first_and_cuts_at_the_cap_are_apart():
    records = [record(0), *(record(i, "HTTP 500: EngineCore encountered an issue") for i in range(1, 47))]
    records += [record(47, "connection closed mid-response"), record(48, "connection closed mid-response")]
    records += [record(49, "cut: still running 30 s after the 60 s cap", cut_at_cap=True)]
    found = failures(records, attempted=64)
    assert (found.attempted, found.failed, found.cut_at_cap) == (64, 48, 1)
    assert found.describe() == (
        "48 of 64 failed: 46x HTTP 500: EngineCore encountered an issue, 2x connection closed mid-response "
        "(1 more cut at the time cap, not counted)"
    )
    both = combine([found, failures([record(0, "connection closed mid-response")])])
    assert both.causes[1] == ("connection closed mid-response", 3) and both.failed == 49


def stream(i, gaps, start=0.0):
    times = [start]
    for gap in gaps:
        times.append(times[-1] + gap)
    return RequestRecord(index=i, send_time=0.0, chunk_times=times, completion_tokens=len(times))


def test_a_gap_far_beyond_the_runs_usual_one_is_a_stall_in_real_time():
    steady = [stream(i, [0.02] * 50) for i in range(9)]
    stalled = stream(9, [0.02] * 20 + [5.0] + [0.02] * 29)
    found = stalls([*steady, stalled])
    assert (found.streams, found.longest_s, found.median_gap_s) == (1, 5.0, pytest.approx(0.02))
    assert found.describe() == "1 stream stalled (longest gap 5.0 s, 250x the median gap of 20 ms)"
    # On a clock 10x real time the same records hold gaps ten times shorter in real time:
    # 0.5 s is below the one-second floor, so no stall.
    assert stalls([*steady, stalled], clock_speed=10.0).streams == 0
    assert stalls(steady).streams == 0
    assert stalls([]).streams == 0


def test_faults_note_names_failures_within_budget_and_stalls_or_nothing():
    budget = ErrorBudget(0.05, relative=True)
    parts = [failures([record(0), record(1, "connection reset by peer")])]
    found = stalls([stream(0, [0.02] * 50), stream(1, [0.02] * 10 + [3.0])])
    assert faults_note(parts, [found], budget) == (
        "1 of 2 failed: 1x connection reset by peer (within the error budget 5%); "
        "1 stream stalled (longest gap 3.0 s, 150x the median gap of 20 ms)"
    )
    assert faults_note([failures([record(0)])], [stalls([stream(0, [0.02] * 5)])], budget) is None


def test_no_failure_reads_as_none_failed_not_an_empty_list_of_causes():
    assert Failures(attempted=12, failed=0, cut_at_cap=0, causes=()).describe() == "none of 12 failed"
    assert Failures(attempted=12, failed=0, cut_at_cap=2, causes=()).describe() == (
        "none of 12 failed (2 cut at the time cap, not counted)"
    )
