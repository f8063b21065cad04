"""The gate returns a Judgement (it raises nothing and writes no record); the session's
assertions make it a GateRecord and fail or warn; auto repetitions ask MoreRuns."""

import pytest

from pytest_llmperf.baselines.compare import Status, compare
from pytest_llmperf.baselines.judgement import Judgement
from pytest_llmperf.baselines.outcome import Outcome, PerfFailure
from pytest_llmperf.metrics.registry import Tolerance
from pytest_llmperf.workload.workload import resolve_workload
from tests.unit.judging.test_session import BASE, make_session

WORKLOAD = resolve_workload({"num_prompts": 4}, 8)


def judge(perf, nodeid="t.py::test_decode[8]"):
    run = perf.run(BASE, WORKLOAD)
    return perf.gate.judge(run, lambda: {"decode_tok_s": run.samples["decode_tok_s"]}, nodeid=nodeid)


def record(tmp_path, speed):
    updater, _, _ = make_session(tmp_path, [speed], llmperf_update_baselines=True)
    judgement = judge(updater)
    updater.finish()
    return judgement


def test_a_missing_baseline_is_a_failing_judgement_not_an_exception(tmp_path):
    perf, _, _ = make_session(tmp_path, [100.0])
    judgement = judge(perf)
    assert isinstance(judgement, Judgement)
    assert judgement.outcome == Outcome.FAIL and judgement.entry is None
    assert [v.status for v in judgement.verdicts] == [Status.MISSING_BASELINE]
    assert judgement.failing == judgement.verdicts
    assert judgement.baseline == "baselines/sim/m.json"
    assert perf.gates == []  # the gate keeps no record: the session's assertions do


def test_recording_is_a_judgement_with_its_message(tmp_path):
    judgement = record(tmp_path, 100.0)
    assert judgement.outcome == Outcome.RECORDED and judgement.verdicts == ()
    assert judgement.message.startswith("recorded decode_tok_s") and "baselines/sim/m.json" in judgement.message


def test_a_regression_is_judged_against_the_typed_entry_and_the_assertion_fails_with_its_table(tmp_path):
    record(tmp_path, 100.0)
    perf, _, _ = make_session(tmp_path, [90.0, 90.0])
    judgement = judge(perf)
    assert judgement.outcome == Outcome.FAIL
    assert judgement.entry is not None and judgement.entry.figures["decode_tok_s"] == pytest.approx(100.0)
    (verdict,) = judgement.verdicts
    assert verdict.status == Status.REGRESSED and judgement.failing == (verdict,)
    assert judgement.title == "m @ concurrency 8 vs baselines/sim/m.json [sim]"

    run = perf.bind(perf.run(BASE, WORKLOAD), "t.py::test_decode[8]")
    with pytest.raises(PerfFailure) as failure:
        run.assert_no_regression("decode_tok_s")
    assert failure.value.headline.startswith("decode_tok_s 100.0 -> 90.0")
    (gate,) = perf.gates
    assert gate.outcome == Outcome.FAIL and gate.verdicts[0].status == Status.REGRESSED
    assert str(failure.value) == gate.message and gate.message.startswith(judgement.title)
    assert gate.baseline_figures is not None and gate.baseline_figures["decode_tok_s"] == pytest.approx(100.0)


def test_more_runs_asks_for_another_run_while_a_verdict_wants_one(tmp_path):
    perf, _, _ = make_session(tmp_path, [100.0], llmperf_repetitions="auto")
    run = perf.run(BASE, WORKLOAD)
    tolerance = Tolerance("relative", 0.05)
    regressed = compare("decode_tok_s", 100.0, 80.0, tolerance, "higher", error=1.0)
    passed = compare("decode_tok_s", 100.0, 100.0, tolerance, "higher", error=1.0)
    assert regressed.status == Status.REGRESSED and passed.status == Status.PASS
    repeater = perf.gate.repeater
    assert repeater.worth_another(run, [regressed]) == "decode_tok_s regressed, read again"
    assert repeater.worth_another(run, [regressed], read_before=["decode_tok_s"]) is None
    assert repeater.worth_another(run, [passed]) is None

    fixed, _, _ = make_session(tmp_path, [100.0])  # --llmperf-repetitions 1: never another
    assert fixed.gate.repeater.worth_another(fixed.run(BASE, WORKLOAD), [regressed]) is None
