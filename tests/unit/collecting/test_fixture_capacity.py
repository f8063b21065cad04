"""`llmperf.capacity(...)` on the fixture's object: bad arguments refused in one line
before any run, and a search's capacity among the test's used runs (its JUnit properties)."""

import re

import pytest

from pytest_llmperf.collecting.fixture import LlmperfFixture
from tests.unit.judging.test_capacity_run import knee_at
from tests.unit.judging.test_session import BASE, fake_session

SLOS = {"ttft_ms_p90": 500}


def fixture(tmp_path, runs, **cli):
    perf = fake_session(tmp_path, {"llmperf_sim": True, "llmperf_repetitions": "1", **cli}, measure=knee_at(4, runs))
    used = []
    return LlmperfFixture(perf, {"server": BASE, "num_prompts": 40}, "t.py::test_capacity", "full", used=used), used


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"over": "rate"}, "over='rate': a test's workload sends a closed loop of streams"),
        ({"slos": {"ttft_ms_mean": 500}}, "'ttft_ms_mean' is a mean"),
        ({"within": (8, 1)}, "within=(8, 1) is reversed"),
        ({"resolution": 1.5}, "concurrency moves in whole users"),
        ({"max_tokens": -1}, "max_tokens"),
    ],
)
def test_a_bad_argument_fails_the_test_in_one_line_before_any_run(tmp_path, kwargs, message):
    runs = []
    llmperf, _ = fixture(tmp_path, runs)
    with pytest.raises(
        pytest.fail.Exception, match=r"t\.py::test_capacity: llmperf\.capacity\(\).*" + re.escape(message)
    ):
        llmperf.capacity(**{"slos": SLOS, "within": (1, 8), **kwargs})
    assert runs == []


def test_the_capacity_is_among_the_tests_used_runs_with_its_slos_workload(tmp_path):
    runs = []
    llmperf, used = fixture(tmp_path, runs)
    found = llmperf.capacity(slos=SLOS, within=(1, 8), confirm_runs=1)
    assert found.capacity == 4 and found.interval == (4, 5)
    (run,) = used
    assert run.figures == {"capacity": 4, "capacity_broken_at": 5}
    assert run.workload.slos == "ttft:500" and run.workload.to_dict()["capacity_search"] == "concurrency:1-8:1"


def test_a_test_reads_the_sessions_profile_to_skip_a_search_it_should_not_run(tmp_path):
    llmperf, _ = fixture(tmp_path, [])
    assert llmperf.profile == "full"
