"""`llmperf compare` judges B's saved run by the gate, A's saved run its reference."""

from pathlib import Path

from pytest_llmperf.baselines.compare import Status
from pytest_llmperf.baselines.outcome import Outcome
from pytest_llmperf.judging.saved_reference import SavedReference, judge_saved, measured_run
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.report.saved import compare_text, load_runs
from tests.unit.commands.test_cli_history import bench_result, write

OPTIONS = LlmperfOptions(target=None, history="off")


def saved(tmp_path, name, decode, seed=0):
    (_, [run]) = load_runs(Path(write(tmp_path / name, bench_result(decode, seed=seed))))
    return run


def test_b_is_judged_by_the_gate_against_a_as_its_entry(tmp_path):
    a, b = saved(tmp_path, "a.json", 400.0), saved(tmp_path, "b.json", 360.0, seed=1)
    reference = SavedReference(OPTIONS, a, b, "B against A")
    entry = reference.entry(measured_run(b), None, "saved")
    assert entry.figures == a.figures and entry.requests is not None and entry.outputs is not None
    assert not reference.keeps_history and reference.update_command("x") == ""

    judgement = judge_saved(a, b, "B against A", OPTIONS, ["steady_decode_tok_s"], {})
    assert judgement.outcome == Outcome.FAIL and judgement.title == "B against A"
    (verdict,) = judgement.verdicts
    assert verdict.status == Status.REGRESSED and verdict.noise is not None
    text, ok = compare_text([judgement], ["only in A: m @ 1"])
    assert not ok and text.startswith("B against A\n") and "only in A: m @ 1" in text
    assert text.endswith("llmperf compare: FAIL: steady_decode_tok_s 390.3 -> 352.6 (-9.7%) regressed")
    assert "re-record" not in text  # nothing is recorded from a comparison


def test_an_invalid_a_is_named_as_a(tmp_path):
    a, b = saved(tmp_path, "a.json", 400.0), saved(tmp_path, "b.json", 400.0, seed=1)
    a.invalid = "no request completed"
    judgement = judge_saved(a, b, "B against A", OPTIONS, ["steady_decode_tok_s"], {})
    assert judgement.invalid == "A: no request completed"
    assert [v.status for v in judgement.verdicts] == [Status.INVALID]
