"""A capacity search through a PerfSession with a fake runner whose TTFT jumps past a knee:
the probes are the measurer's runs (repeated loads on fresh starts), the capacity is
recorded with its interval and judged by the gate, its noise is its interval's width, and
a regression's headline names the SLO broken first and where."""

import json
import math

import pytest

from pytest_llmperf.baselines.compare import Status
from pytest_llmperf.baselines.outcome import Outcome, PerfFailure
from pytest_llmperf.judging.capacity_run import capacity_test
from pytest_llmperf.judging.noise import capacity_error
from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.workload.result import RunResult
from pytest_llmperf.workload.workload import resolve_workload
from tests.unit.judging.test_session import BASE, FakeTarget, fake_session

SLOS = {"ttft_ms_p90": 500}
NODEID = "t.py::test_capacity"


def knee_at(knee, runs):
    """Runs of 40 requests after the opening wave (left out of a probe's share): TTFT 100 ms up
    to `knee` users, 1 s beyond it; each run's concurrency in `runs`."""

    def measure(endpoint, requests, workload, speed):
        runs.append(workload.concurrency)
        ttft = 0.1 if workload.concurrency <= knee else 1.0
        records = [
            RequestRecord(
                index=i,
                send_time=0.0,
                chunk_times=[ttft + 0.02 * k for k in range(10)],
                end_time=ttft + 0.18,
                prompt_tokens=50,
                completion_tokens=10,
                finish_reason="length",
                status=200,
            )
            for i in range(40 + workload.concurrency)
        ]
        return RunResult(config={}, records=records, duration=1.0, attempted=len(records), stop_reason="completed")

    return measure


def search(tmp_path, knee, **cli):
    runs, target = [], FakeTarget()
    options = {"llmperf_sim": True, "llmperf_repetitions": "1", **cli}
    perf = fake_session(tmp_path, options, target, measure=knee_at(knee, runs))
    found = capacity_test(
        perf,
        BASE,
        lambda c: resolve_workload({"num_prompts": 40, "slos": "ttft:500"}, c),
        SLOS,
        nodeid=NODEID,
        within=(1, 16),
        resolution=1,
        confidence=0.95,
        budget={"runs_per_probe": 3, "confirm_runs": 2, "max_runs": 20, "max_seconds": None},
    )
    return perf, found, runs, target


def test_the_probes_are_the_measurers_runs_and_repeated_loads_start_afresh(tmp_path):
    perf, found, runs, target = search(tmp_path, knee=8)
    assert found.capacity == 8 and found.interval == (8, 9)
    assert sorted(set(runs)) == [1, 2, 4, 8, 9, 10, 12, 16] and runs.count(8) == runs.count(9) == 2
    assert found.runs == len(runs) == 10
    assert sum(event == ("start", "m") for event in target.events) == 1 + 2  # the bounds' second runs
    assert found.line.startswith("capacity 8 users (8-9): p90 TTFT 500 ms exceeded at 9 (1,000 ms); 10 runs")
    assert perf.capacities[0]["capacity"] == 8 and perf.capacities[0]["interval"] == [8, 9]
    perf.close()


def test_the_report_line_keeps_each_probe_with_its_slo_values_and_the_slo_broken_first(tmp_path):
    perf, found, _, _ = search(tmp_path, knee=8)
    line = perf.capacities[0]
    assert line["over"] == "concurrency" and line["first_broken"] == "ttft_ms_p90"
    assert line["slos"] == [{"name": "ttft_ms_p90", "label": "p90 TTFT", "limit_ms": 500.0}]
    at = {p["load"]: p for p in line["probes"]}
    assert sorted(at) == [1, 2, 4, 8, 9, 10, 12, 16]
    assert at[8]["outcome"] == "met" and at[8]["values_ms"]["ttft_ms_p90"] == pytest.approx(100.0)
    assert at[9]["outcome"] == "broken" and at[9]["values_ms"]["ttft_ms_p90"] == pytest.approx(1000.0)
    assert at[9]["runs"] == 2
    perf.close()


def test_recorded_with_its_interval_then_judged_pass_and_regressed_naming_the_slo(tmp_path):
    perf, found, _, _ = search(tmp_path, knee=8, llmperf_update_baselines=True)
    found.assert_no_regression()
    assert found.verdict == "capacity 8 users, recorded: p90 TTFT 500 ms exceeded at 9 (1,000 ms)"
    perf.finish()
    perf.close()

    (entry,) = json.loads((tmp_path / "baselines" / "sim" / "m.json").read_text())["concurrency"]["16"].values()
    probes = entry["provenance"]["capacity_probes"]  # the baseline's search, for the report's knee
    assert {p["load"] for p in probes} == {1, 2, 4, 8, 9, 10, 12, 16} and probes[0]["values_ms"]["ttft_ms_p90"] > 0

    perf, found, _, _ = search(tmp_path, knee=8)
    found.assert_no_regression()
    (gate,) = perf.gates
    assert gate.outcome == Outcome.PASS and gate.verdicts[0].status == Status.PASS
    assert found.verdict.startswith("capacity 8 -> 8 users, pass: ")
    perf.close()

    perf, found, _, _ = search(tmp_path, knee=5)
    with pytest.raises(PerfFailure) as failure:
        found.assert_no_regression()
    assert failure.value.headline == "capacity 8 -> 5 users, regressed: p90 TTFT 500 ms exceeded at 6 (1,000 ms)"
    assert perf.capacities[0]["verdict"] == failure.value.headline
    (gate,) = perf.gates
    assert gate.verdicts[0].status == Status.REGRESSED and gate.verdicts[0].metric == "capacity"
    perf.close()


def test_a_capacitys_noise_is_its_intervals_width_on_both_sides(tmp_path):
    perf, found, _, _ = search(tmp_path, knee=8, llmperf_update_baselines=True)
    found.assert_no_regression()
    perf.finish()
    perf.close()
    perf, found, _, _ = search(tmp_path, knee=8)
    entry = perf.gate.reference.entry(found.run, None, "sim")
    noise = capacity_error(found.run, entry)
    assert noise is not None and noise.sigma == pytest.approx(math.sqrt(2) / math.sqrt(12))
    perf.close()


def test_a_bad_argument_is_refused_before_any_run(tmp_path):
    with pytest.raises(ValueError, match="within"):
        perf = fake_session(tmp_path, {"llmperf_sim": True}, measure=knee_at(8, []))
        capacity_test(
            perf,
            BASE,
            lambda c: resolve_workload({"num_prompts": 40}, c),
            SLOS,
            nodeid=NODEID,
            within=(16, 1),
            resolution=1,
            confidence=0.95,
            budget={},
        )
