"""Capacity at SLOs end to end with pytester against the simulated server
(tests/plugin_project.py): `llmperf.capacity(...)` searched through the session's runs,
recorded in the baseline with its interval, judged by the gate, in the terminal summary,
the report document and the JUnit properties; the simulator's knee knob
(`--sim-max-prefill-seqs 1`: one prompt prefilled a step) reads a capacity loss that the
fixed-concurrency cell at concurrency 1 does not. Long random prompts (1,024 tokens) make
prefill the cost that knob moves: with it, prefill steps come between more decode steps,
and the median TPOT rises from about 21 ms to 27 at concurrency 4 and 41 at 8, while
concurrency 1 is unchanged."""

import json
import re

import pytest

from tests.plugin_project import make_project, run

SUITE = """
import pytest
from conftest import BASE

W = dict(num_prompts=16, max_tokens=32, warmup=0, dataset_name="random", random_input_len=1024, random_output_len=32)

@pytest.mark.llmperf(server=BASE, **W)
def test_capacity(llmperf):
    found = llmperf.capacity(
        slos={"ttft_ms_median": 1500, "tpot_ms_median": 24.5},
        within=(1, 8),
        resolution=2,
        runs_per_probe=2,
        confirm_runs=1,
        max_runs=10,
    )
    assert found.runs >= len(found.probes) >= 3
    assert found.capacity is not None and found.seconds > 0
    found.assert_no_regression()

@pytest.mark.parametrize("concurrency", [1])
@pytest.mark.llmperf(server=BASE, **W)
def test_decode(llmperf, concurrency):
    llmperf.run(concurrency=concurrency).assert_no_regression("decode_tok_s")
"""

KNEE = ("--llmperf-sim-args", "--sim-max-prefill-seqs 1")


@pytest.fixture
def project(pytester, monkeypatch, tmp_path_factory):
    project = make_project(pytester, monkeypatch, tmp_path_factory)
    project.makepyfile(test_suite=SUITE)
    return project


def _capacity_entry(project):
    baseline = json.loads((project.path / "baselines" / "sim" / "tiny.json").read_text())
    return [
        entry
        for section in baseline["concurrency"].values()
        for entry in section.values()
        if "capacity" in entry["metrics"]
    ]


def test_a_recorded_capacity_passes_unchanged(project):
    recorded = run(project, "--update-baselines", "-k", "test_capacity", "--junitxml", "junit.xml")
    recorded.assert_outcomes(passed=1, deselected=1)
    (entry,) = _capacity_entry(project)
    assert entry["workload"]["capacity_search"] == "concurrency:1-8:2"
    # The default server holds both SLOs up to 8 users, its --max-num-seqs: nothing within 1-8 broke.
    assert entry["metrics"]["capacity"]["value"] == 8 and "capacity_broken_at" not in entry["metrics"]
    out = recorded.stdout.str()
    # How many runs: 4, or more where a load near the SLO was repeated until decided.
    assert re.search(r"capacity tiny: capacity at least 8 users \(nothing up to 8 decided broken\): \d+ runs", out)
    assert "  capacity 8 users, recorded: no SLO decided broken up to 8" in out
    assert 'name="llmperf.tiny@8.capacity" value="8"' in (project.path / "junit.xml").read_text()

    judged = run(project, "-k", "test_capacity", "--llmperf-report", "report")
    judged.assert_outcomes(passed=1, deselected=1)
    judged.stdout.fnmatch_lines(
        ["  capacity 8 -> 8 users, pass: no SLO decided broken up to 8", "tiny*8*capacity*8*8*pass"]
    )
    document = json.loads((project.path / "report" / "report.json").read_text())
    (line,) = document["capacities"]
    assert line["test"].endswith("test_capacity") and line["verdict"].startswith("capacity ")


def test_the_knee_knob_regresses_capacity_while_decode_at_concurrency_1_passes(project):
    run(project, "--update-baselines").assert_outcomes(passed=2)
    knee = run(project, *KNEE)
    knee.assert_outcomes(passed=1, failed=1)
    assert "FAILED test_suite.py::test_decode" not in knee.stdout.str()  # decode at concurrency 1: unchanged
    knee.stdout.fnmatch_lines(
        [
            "capacity * -> * users, regressed: p50 TPOT 24.5 ms exceeded at * (* ms); p50 TTFT held",
            "FAILED test_suite.py::test_capacity - capacity * -> * users, regressed*",
        ]
    )


def test_a_paired_session_skips_a_capacity_test_rather_than_failing_it(project):
    paired = run(project, "--llmperf-against-sim-args=defaults", "-rs", "-k", "test_capacity")
    paired.assert_outcomes(skipped=1, deselected=1)
    paired.stdout.fnmatch_lines(["SKIPPED*llmperf.capacity(): a capacity is judged against stored baselines*"])
