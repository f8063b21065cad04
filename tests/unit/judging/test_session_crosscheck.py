"""The session's cross-checks on known runs: token counts that disagree and outputs that
stopped early make a run invalid; changed texts are reported beside the verdict; older
baselines load and say what they cannot check (docs/verdicts.md, "Cross-checks")."""

import json

import pytest

from pytest_llmperf.baselines.outcome import PerfFailure
from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.workload.result import RunResult
from pytest_llmperf.workload.workload import resolve_workload
from tests.unit.judging.test_session import BASE, fake_session

N = 12
WORKLOAD = resolve_workload({"num_prompts": N, "max_tokens": 100}, 4)


def counter_page(generated):
    return f'# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{engine="0"}} {generated}\n'


def result(lengths=None, finishes=None, texts=None, counter=None, usage_offset=0):
    """N requests at 100 tok/s each, from one send time; `counter`: the generation counter's
    delta over the window (None: no /metrics pages)."""
    lengths = lengths or [100] * N
    finishes = finishes or ["length"] * N
    texts = texts or [f"reply {i}" for i in range(N)]
    records = [
        RequestRecord(
            index=i,
            send_time=0.0,
            chunk_times=[(k + 1) / 100 for k in range(n)],
            end_time=n / 100,
            prompt_tokens=50,
            completion_tokens=n + usage_offset,
            finish_reason=finish,
            output_text=text,
            status=200,
        )
        for i, (n, finish, text) in enumerate(zip(lengths, finishes, texts))
    ]
    pages = (counter_page(500), counter_page(500 + counter)) if counter is not None else (None, None)
    return RunResult(
        config={"concurrency": 4, "max_tokens": 100, "endpoint": "completions"},
        records=records,
        duration=max(lengths) / 100,
        attempted=N,
        stop_reason="completed",
        metrics_before=pages[0],
        metrics_after=pages[1],
    )


def session(tmp_path, run, **cli):
    cli = {"llmperf_sim": True, "llmperf_repetitions": "1", **cli}
    return fake_session(tmp_path, cli, measure=lambda *args: run)


def judge(tmp_path, run, **cli):
    perf = session(tmp_path, run, **cli)
    try:
        perf.bind(perf.run(BASE, WORKLOAD), "t").assert_no_regression("decode_tok_s")
    finally:
        perf.finish()
        perf.close()
    return perf.gates[-1]


def record(tmp_path):
    judge(tmp_path, result(counter=N * 100), llmperf_update_baselines=True)
    path = tmp_path / "baselines" / "sim" / "m.json"
    return path, json.loads(path.read_text())


def test_a_recorded_baseline_keeps_a_line_per_output_and_an_unchanged_run_says_so(tmp_path):
    _, doc = record(tmp_path)
    (entry,) = doc["concurrency"]["4"].values()
    assert [line.split()[:2] for line in entry["outputs"]] == [[str(i), "length"] for i in range(N)]
    gate = judge(tmp_path, result(counter=N * 100))
    assert gate.outcome == "pass"
    assert gate.checks == [f"outputs: unchanged for all {N} prompts (temperature 0; canary, not gated)"]
    assert gate.message.endswith(gate.checks[0])


def test_usage_that_the_engines_counter_does_not_confirm_makes_the_run_invalid(tmp_path):
    record(tmp_path)
    with pytest.raises(PerfFailure) as failure:
        judge(tmp_path, result(counter=N * 100, usage_offset=5))  # usage 5 high a request
    message = str(failure.value)
    assert "INVALID RUN" in message
    assert (
        "invalid run: output tokens disagree: usage 1,260 output tokens, vllm:generation_tokens_total +1,200 over "
        "the window, the client 1,200 token events (at least one token each): the engine's counter holds fewer "
        "tokens than usage reports (bound 0.5% of usage, at least 2 tokens)"
    ) in message
    with pytest.raises(PerfFailure, match="the engine generated more tokens than the requests report"):
        judge(tmp_path, result(counter=N * 100 + 40))  # another client, or usage short
    with pytest.raises(PerfFailure, match="usage counted 24 tokens fewer than the token events received"):
        judge(tmp_path, result(counter=N * 98, usage_offset=-2))


def test_a_run_that_stops_early_is_invalid_whatever_its_speed_reads(tmp_path):
    record(tmp_path)
    lengths = [100] * 6 + [50] * 6
    finishes = ["length"] * 6 + ["stop"] * 6
    with pytest.raises(PerfFailure) as failure:
        judge(tmp_path, result(lengths, finishes, counter=sum(lengths)))
    message = str(failure.value)
    assert "INVALID RUN" in message and "IMPROVED" not in message
    assert (
        "outputs changed length on the 12 prompts both runs completed: 900 output tokens against the baseline's "
        "1,200 (-25.0%, bound 5%); 6 of 12 replies ended with EOS against the baseline's 0 (+50 points, bound 10); "
        "the server stops early"
    ) in message


def test_replies_that_run_longer_are_invalid_too_and_say_so(tmp_path):
    judge(tmp_path, result([50] * N, ["stop"] * N, counter=50 * N), llmperf_update_baselines=True)
    with pytest.raises(PerfFailure, match="the server's replies run longer"):
        judge(tmp_path, result(counter=N * 100))


def test_changed_texts_are_reported_beside_a_passing_verdict(tmp_path):
    record(tmp_path)
    texts = [f"reply {i}" if i not in (2, 9) else "something else" for i in range(N)]
    gate = judge(tmp_path, result(texts=texts, counter=N * 100))
    assert gate.outcome == "pass"
    assert gate.checks[0].startswith("outputs changed for 2 of 12 prompts at temperature 0 (prompt index 2, 9;")


def test_changed_outputs_fail_the_test_only_beyond_the_budget_asked_for(tmp_path):
    record(tmp_path)
    texts = [f"reply {i}" if i not in (2, 9) else "something else" for i in range(N)]
    changed = result(texts=texts, counter=N * 100)
    assert judge(tmp_path, changed, llmperf_changed_outputs="2").outcome == "pass"  # 2 of 12 allowed
    assert judge(tmp_path, changed, llmperf_changed_outputs="20%").outcome == "pass"  # 2.4 of 12
    with pytest.raises(PerfFailure) as failure:
        judge(tmp_path, changed, llmperf_changed_outputs="10%")
    expected = (
        "outputs changed for 2 of 12 prompts, beyond --llmperf-changed-outputs 10%: the model answers differently "
        "from the baseline; if the new outputs are right, re-record with --update-baselines"
    )
    assert failure.value.headline == expected and str(failure.value).endswith(expected)
    assert "(1 pass)" in str(failure.value)  # the performance verdict itself passed
    assert "prompt index 2, 9; canary, at most 10% by --llmperf-changed-outputs)" in str(failure.value)
    assert judge(tmp_path, result(counter=N * 100), llmperf_changed_outputs="0").outcome == "pass"


def test_an_invalid_run_is_never_recorded_for_disagreeing_counts(tmp_path):
    with pytest.raises(PerfFailure, match="not recorded: invalid run: output tokens disagree"):
        judge(tmp_path, result(counter=N * 100 + 50), llmperf_update_baselines=True)
    assert not (tmp_path / "baselines" / "sim" / "m.json").exists()


def test_older_baselines_load_and_say_which_checks_they_cannot_run(tmp_path):
    path, doc = record(tmp_path)
    (entry,) = doc["concurrency"]["4"].values()
    del entry["outputs"]
    path.write_text(json.dumps(doc))
    gate = judge(tmp_path, result(counter=N * 100))
    assert gate.outcome == "pass" and gate.checks == [
        "the baseline has no output lines (recorded by an older version): the EOS share and the output canary "
        "are not checked; re-record it to check them"
    ]
    with pytest.raises(PerfFailure, match="outputs changed length"):  # lengths still come from its request lines
        judge(tmp_path, result([50] * N, counter=50 * N))
    del entry["requests"]
    path.write_text(json.dumps(doc))
    gate = judge(tmp_path, result([50] * N, counter=50 * N), llmperf_inconclusive="pass")
    assert gate.checks == [
        "the baseline has no per-request lines (recorded by an older version): output lengths, the EOS share and "
        "the output canary are not checked; re-record it to check them"
    ]


def test_a_hand_broken_output_line_is_named_when_the_baseline_loads(tmp_path):
    from pytest_llmperf.baselines.store import BaselineError, BaselineStore

    path, doc = record(tmp_path)
    (entry,) = doc["concurrency"]["4"].values()
    entry["outputs"][3] = "3 length nothex!!!!!!"
    path.write_text(json.dumps(doc))
    with pytest.raises(
        BaselineError, match=r"\.outputs: output line 3 '3 length nothex!!!!!!': the hash is not hexadecimal"
    ):
        BaselineStore(tmp_path / "baselines").load("sim", "m")
