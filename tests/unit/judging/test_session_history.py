"""The session appends history lines where it judges: what, where, and when not."""

from __future__ import annotations

import pytest

from pytest_llmperf.baselines import history
from pytest_llmperf.baselines.outcome import PerfFailure
from pytest_llmperf.workload.workload import resolve_workload
from tests.unit.judging.test_session import BASE, make_session

WORKLOAD = resolve_workload({"num_prompts": 4}, 8)


def lines(path):
    return history.read([path]).records


def test_recording_then_judging_appends_one_line_per_gated_metric_beside_the_baselines(tmp_path):
    path = tmp_path / "baselines" / "sim" / "history.jsonl"
    updater, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True)
    updater.bind(updater.run(BASE, WORKLOAD), "t").assert_no_regression("decode_tok_s", "tpot_ms_median")
    assert not path.exists()  # written when the session finishes
    updater.finish()
    assert [(r["metric"], r["outcome"]) for r in lines(path)] == [
        ("decode_tok_s", "recorded"),
        ("tpot_ms_median", "recorded"),
    ]

    slow, _, _ = make_session(tmp_path, [90.0])
    with pytest.raises(PerfFailure):
        slow.bind(slow.run(BASE, WORKLOAD), "t").assert_no_regression("decode_tok_s")
    slow.finish()
    last = lines(path)[-1]
    assert (last["metric"], last["value"], last["baseline"], last["outcome"]) == (
        "decode_tok_s",
        90.0,
        100.0,
        "regressed",
    )
    assert last["server"] == "m" and last["concurrency"] == 8 and last["target"] == "sim"
    assert last["vllm"] == "0.32.0" and last["reps"] == 1 and last["date"]
    assert last["workload"] == lines(path)[0]["workload"]  # the same workload, one series


def test_a_configured_path_and_off(tmp_path):
    perf, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True, llmperf_history="runs/h.jsonl")
    perf.bind(perf.run(BASE, WORKLOAD), "t").assert_no_regression("decode_tok_s")
    perf.finish()
    assert len(lines(tmp_path / "runs" / "h.jsonl")) == 1
    assert not (tmp_path / "baselines" / "sim" / "history.jsonl").exists()

    quiet, _, _ = make_session(tmp_path / "q", [100.0], llmperf_update_baselines=True, llmperf_history="off")
    quiet.bind(quiet.run(BASE, WORKLOAD), "t").assert_no_regression("decode_tok_s")
    quiet.finish()
    assert quiet.gate.history.path("sim") is None
    assert history.find_files(tmp_path / "q") == []


def test_an_unwritable_history_warns_and_the_verdict_stands(tmp_path):
    (tmp_path / "taken").mkdir()  # a folder where the file should be
    perf, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True, llmperf_history="taken")
    perf.bind(perf.run(BASE, WORKLOAD), "t").assert_no_regression("decode_tok_s")
    with pytest.warns(UserWarning, match="history .*taken: not written"):
        end = perf.finish()
    assert perf.gates[-1].outcome == "recorded"
    assert not end.failed and (tmp_path / "baselines" / "sim" / "m.json").exists()
