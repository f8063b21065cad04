import pytest

from pytest_llmperf.metrics.failures import ErrorBudget, combine, failures, parse_budget
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
