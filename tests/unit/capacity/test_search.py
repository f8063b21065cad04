"""The capacity search over fake probes (capacity/search.py): a knee found within one step,
a noisy boundary repeated until decided, a spent budget left undecided, the SLO that broke
first, and wrong arguments refused with their fix."""

from collections.abc import Callable

import numpy as np
import pytest

from pytest_llmperf.capacity.search import Breach, Resolution, search
from pytest_llmperf.capacity.slo import Outcome, ProbeResult, SLOSet, judge

P99 = {"ttft_ms_p99": 2000, "tpot_ms_p99": 80}
P90 = {"ttft_ms_p90": 2000, "tpot_ms_p90": 80}
WITHIN = (1, 256)
FAST = {"ttft": 0.5, "tpot": 0.04, "e2el": 5.0}
SLOW = {"ttft": {"ttft": 2.41, "tpot": 0.04, "e2el": 7.0}, "tpot": {"ttft": 0.5, "tpot": 0.095, "e2el": 9.0}}


class FakeServer:
    """A probe: at each load, `share(load)` of a run's `requests` meet both SLOs and the
    rest are over the SLO `slow(load)` names; counts exact, or drawn with `rng`."""

    def __init__(
        self,
        share: Callable[[float], float],
        requests: int = 1000,
        slow: Callable[[float], str] = lambda load: "ttft",
        seconds: float | None = 60.0,
        rng: np.random.Generator | None = None,
    ):
        self.share, self.requests, self.slow, self.seconds, self.rng = share, requests, slow, seconds, rng
        self.loads: list[float] = []

    def __call__(self, load: float) -> ProbeResult:
        self.loads.append(load)
        p = self.share(load)
        good = int(self.rng.binomial(self.requests, p)) if self.rng else round(p * self.requests)
        bad = SLOW[self.slow(load)]
        return ProbeResult((FAST,) * good + (bad,) * (self.requests - good), 0, self.seconds)


def knee(at: float, past: float = 0.8) -> Callable[[float], float]:
    return lambda load: 1.0 if load <= at else past


def runs_at(capacity, load):
    return next(p.runs for p in capacity.probes if p.load == load)


def outcome_at(capacity, load):
    return next(p.outcome for p in capacity.probes if p.load == load)


def test_a_clean_knee_is_found_within_one_step():
    server = FakeServer(knee(37))
    found = search(server, P99, within=WITHIN, resolution=4)
    assert found.interval == (36, 40)
    assert found.resolved and not found.budget_spent and found.undecided == ()
    # Doubling, bisection, then each bound of the interval confirmed on a second fresh start.
    assert server.loads == [1, 2, 4, 8, 16, 32, 64, 48, 40, 36, 36, 40]
    assert all(isinstance(load, int) for load in server.loads)  # whole users
    assert [p.runs for p in found.probes if p.load not in (36, 40)] == [1] * 8  # each decided at once
    assert (found.runs, found.seconds) == (12, 720.0)
    assert found.describe() == (
        "capacity 36 users (36-40): p99 TTFT 2,000 ms exceeded at 40 (2,410 ms); p99 TPOT held; 12 runs, 720 s"
    )


def test_a_request_rate_is_bisected_to_a_percentage():
    found = search(FakeServer(knee(11.3)), P99, over="rate", within=(0.5, 64), resolution="10%")
    low, high = found.interval
    assert low <= 11.3 < high
    assert high - low <= 0.1 * low
    assert found.resolved
    assert found.describe().startswith(f"capacity {low:g} req/s ({low:g}-{high:g}): ")


def test_a_noisy_boundary_is_repeated_until_decided():
    # 87 % within at 32 users, 90 % asked: one run of 200 requests cannot tell them apart.
    server = FakeServer(lambda load: 1.0 if load < 32 else 0.87 if load < 48 else 0.5, requests=200)
    found = search(server, P90, within=WITHIN, resolution=1)
    assert outcome_at(found, 32) is Outcome.BROKEN
    assert runs_at(found, 32) > 1
    assert found.interval == (31, 32) and found.resolved
    assert runs_at(found, 31) == 2  # the bound confirmed
    assert all(p.runs == 1 for p in found.probes if p.load not in (31, 32))  # clear loads once


def test_an_undecided_probe_is_never_read_as_a_pass():
    # 93 % within between 32 and 47 users, 90 % asked: above, but one run of 200 cannot decide it.
    share = lambda load: 1.0 if load < 32 else 0.93 if load < 48 else 0.5  # noqa: E731
    found = search(FakeServer(share, requests=200), P90, within=WITHIN, resolution=4, runs_per_probe=1, confirm_runs=1)
    assert found.undecided == (32, 40, 44)
    assert found.interval == (28, 48)  # wider than the 4 asked: the boundary is somewhere in it
    assert not found.resolved
    assert found.describe().startswith("capacity 28 users (28-48, unresolved): ")
    assert "undecided at 32, 40, 44" in found.describe()
    # Allowed a second run, the same loads are decided met.
    again = search(FakeServer(share, requests=200), P90, within=WITHIN, resolution=4, runs_per_probe=2)
    assert again.interval == (44, 48) and again.resolved


def test_a_bound_its_second_start_overturns_is_bisected_past():
    # 36 users: a lucky first start (all within), a second with 20 % over TTFT.
    starts, clean = {36: iter([1.0, 0.8])}, knee(37)
    server = FakeServer(lambda load: next(starts[load]) if load in starts else clean(load))
    found = search(server, P99, within=WITHIN, resolution=4)
    assert outcome_at(found, 36) is Outcome.BROKEN and runs_at(found, 36) == 2
    assert found.interval == (32, 36) and found.resolved
    assert runs_at(found, 32) == 2


def test_a_spent_budget_stops_the_search_with_a_wider_interval():
    found = search(FakeServer(knee(37)), P99, within=WITHIN, resolution=4, max_runs=7)
    assert found.budget_spent and not found.resolved
    assert found.interval == (32, 64)
    assert found.runs == 7
    assert found.describe().endswith("7 runs, 420 s; budget spent")


def test_a_budget_spent_inside_a_probe_leaves_it_undecided():
    share = lambda load: 1.0 if load < 32 else 0.87  # noqa: E731
    found = search(FakeServer(share, requests=200), P90, within=WITHIN, resolution=4, max_runs=6)
    assert found.probes[-1].load == 32 and found.probes[-1].outcome is Outcome.UNDECIDED
    assert found.budget_spent
    assert found.interval == (16, None)


def test_a_seconds_budget_counts_the_probes_seconds():
    found = search(FakeServer(knee(37), seconds=100.0), P99, within=WITHIN, resolution=4, max_seconds=250)
    assert found.runs == 3 and found.budget_spent


def test_the_slo_that_broke_first_is_named_with_its_load_and_value():
    # TPOT breaks from 40 users, TTFT from 64: the breach is TPOT's, at the lowest broken load.
    server = FakeServer(knee(39), slow=lambda load: "tpot" if load < 64 else "ttft")
    found = search(server, P99, within=WITHIN, resolution=1)
    breach = found.first_broken
    assert breach is not None and breach.load == 40
    assert breach.reading.slo.name == "tpot_ms_p99"
    assert breach.reading.value_ms == pytest.approx(95.0)
    assert "p99 TPOT 80 ms exceeded at 40 (95 ms); p99 TTFT held" in found.describe()


def test_a_server_broken_at_the_lowest_load_has_no_capacity():
    found = search(FakeServer(knee(2)), P99, within=(4, 64), resolution=4)
    assert found.interval == (None, 4)
    assert found.describe().startswith("no capacity within 4-64 users (broken at the lowest load): ")


def test_a_server_that_holds_everywhere_has_at_least_the_top():
    found = search(FakeServer(knee(1000)), P99, within=(4, 64), resolution=4)
    assert found.interval == (64, None) and not found.resolved
    assert found.describe() == "capacity at least 64 users (nothing up to 64 decided broken): 6 runs, 360 s"


def test_seconds_are_none_unless_every_probe_gave_them():
    found = search(FakeServer(knee(37), seconds=None), P99, within=WITHIN, resolution=4)
    assert found.seconds is None
    assert found.describe().endswith("; 12 runs")


def test_drawn_counts_never_make_an_undecided_load_the_capacity():
    rng = np.random.default_rng(7)
    share = lambda load: min(1.0, 1.05 - load / 400)  # noqa: E731  # 90 % within at 60 users
    found = search(FakeServer(share, requests=300, rng=rng), P90, within=WITHIN, resolution=2, runs_per_probe=4)
    low, high = found.interval
    assert low is not None and outcome_at(found, low) is Outcome.MET
    assert high is not None and outcome_at(found, high) is Outcome.BROKEN
    assert 40 <= low < 60 < high <= 80


@pytest.mark.parametrize(
    "kwargs, says",
    [
        ({"slos": {}}, "at least one SLO"),
        ({"slos": {"ttft_ms_p999": 2000}}, "did you mean ttft_ms_p99"),
        ({"within": (256, 1)}, "within=(256, 1) is reversed: write within=(1, 256)"),
        ({"within": (0, 8)}, "give loads > 0"),
        ({"within": (1.5, 8)}, "whole users"),
        ({"within": 8}, "within must be (lowest, highest) users"),
        ({"resolution": 0}, "resolution must be > 0"),
        ({"resolution": -4}, "resolution must be > 0"),
        ({"resolution": "0%"}, "resolution must be > 0"),
        ({"resolution": "five"}, "is not a number"),
        ({"resolution": 1.5}, "whole users"),
        ({"over": "tokens"}, "over must be 'concurrency' or 'rate'"),
        ({"confidence": 1.0}, "confidence must be in [0.5, 1)"),
        ({"runs_per_probe": 0}, "runs_per_probe must be a whole number of runs >= 1"),
        ({"max_runs": True}, "max_runs must be a whole number of runs >= 1"),
        ({"confirm_runs": 3, "runs_per_probe": 2}, "give runs_per_probe >= 3, or fewer confirm_runs"),
        ({"max_seconds": 0}, "max_seconds must be seconds > 0"),
    ],
)
def test_wrong_arguments_say_the_fix(kwargs, says):
    arguments = {"slos": P99, "within": WITHIN, "resolution": 4, **kwargs}
    with pytest.raises(ValueError) as caught:
        search(FakeServer(knee(37)), **arguments)
    assert says in str(caught.value)


def test_resolution_reads_a_step_or_a_percentage():
    assert Resolution.parse(4) == Resolution(step=4.0)
    assert Resolution.parse(" 5% ") == Resolution(percent=5.0)
    assert Resolution.parse(0.25, "rate") == Resolution(step=0.25)
    assert Resolution(percent=5.0).closed(100, 105, "rate") and not Resolution(percent=5.0).closed(100, 106, "rate")


def test_a_probe_must_return_a_probe_result():
    with pytest.raises(TypeError, match="must return a ProbeResult"):
        search(lambda load: {"ttft": 1.0}, P99, within=WITHIN, resolution=4)


def test_a_breach_by_failures_says_so_rather_than_a_value_over_its_limit():
    errors = Breach(40, judge([ProbeResult((FAST,) * 900, failed=100)], SLOSet.parse(P99), 0.95))
    assert errors.describe() == "90.0 % met every SLO at 40, 99 % asked, 100 of 1,000 requests failed"


def test_a_breach_by_slos_missed_by_different_requests_says_the_share():
    # 0.8 % over TTFT, 0.8 % others over TPOT: each p99 within its limit, 98.4 % within both.
    requests = (FAST,) * 984 + (SLOW["ttft"],) * 8 + (SLOW["tpot"],) * 8
    split = Breach(40, judge([ProbeResult(requests)] * 3, SLOSet.parse(P99), 0.95))
    assert split.verdict.outcome is Outcome.BROKEN
    assert split.describe() == "98.4 % met every SLO at 40, 99 % asked; p99 TTFT, p99 TPOT held"


def test_a_breach_names_the_other_slos_over_their_limits_too():
    requests = (FAST,) * 800 + (SLOW["ttft"],) * 150 + (SLOW["tpot"],) * 50
    both = Breach(64, judge([ProbeResult(requests)], SLOSet.parse(P99), 0.95))
    assert both.describe() == "p99 TTFT 2,000 ms exceeded at 64 (2,410 ms); p99 TPOT 80 ms exceeded too (95 ms)"
