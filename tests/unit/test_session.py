"""PerfSession without pytest: caching, one server at a time, and the baseline gate."""

import json
from contextlib import contextmanager
from dataclasses import replace

import pytest

from pytest_llmperf import ServerSpec
from pytest_llmperf.baselines.compare import compare
from pytest_llmperf.metrics.failures import parse_budget
from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.metrics.registry import Tolerance
from pytest_llmperf.options import resolve_options
from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.session import PerfFailure, PerfSession
from pytest_llmperf.workload.result import RunResult
from pytest_llmperf.workload.workload import resolve_workload

BASE = ServerSpec(name="m", model="org/m")
MTP = BASE.with_speculative({"method": "mtp", "num_speculative_tokens": 3})


class FakeTarget:
    name = "sim"

    def __init__(self):
        self.events = []

    @contextmanager
    def start(self, spec):
        self.events.append(("start", spec.name))
        try:
            yield Endpoint("http://127.0.0.1:1", spec.model_id, "sim", {"vllm_version": "0.32.0"})
        finally:
            self.events.append(("stop", spec.name))


def make_result(decode_tok_s, n=4, tokens=100):
    """n requests of `tokens` output tokens over a duration giving `decode_tok_s`."""
    duration = n * tokens / decode_tok_s
    records = [
        RequestRecord(
            index=i,
            send_time=0.0,
            chunk_times=[0.1 + k * 0.01 for k in range(tokens)],
            end_time=2.0,
            prompt_tokens=50,
            completion_tokens=tokens,
            finish_reason="length",
            status=200,
        )
        for i in range(n)
    ]
    return RunResult(config={}, records=records, duration=duration, attempted=n, stop_reason="completed")


def make_session(tmp_path, speeds, **cli):
    cli = {"llmperf_sim": True, "llmperf_repetitions": "1", **cli}  # one run per speed given
    options = resolve_options(lambda d: cli.get(d), lambda n: "")
    target = FakeTarget()
    perf = PerfSession(options, target, tmp_path)
    perf._requests_for = lambda endpoint, workload: []
    perf.server_down = lambda endpoint: None  # the fake server lives through every fault
    calls = []

    def execute(endpoint, requests, workload, speed):
        calls.append(endpoint.model)
        return make_result(speeds[len(calls) - 1])  # the n-th run gets the n-th decode speed

    perf._execute = execute
    return perf, target, calls


def test_runs_are_cached_and_servers_start_once_one_at_a_time(tmp_path):
    perf, target, calls = make_session(tmp_path, [100.0, 150.0])
    workload = resolve_workload({"num_prompts": 4}, 8)
    base_run = perf.run(BASE, workload)
    mtp_run = perf.run(MTP, workload)
    assert perf.run(BASE, workload) is base_run and perf.run(MTP, workload) is mtp_run
    assert perf.run_count == 2 and len(calls) == 2
    perf.close()
    assert target.events == [("start", "m"), ("stop", "m"), ("start", "m-mtp"), ("stop", "m-mtp")]
    assert mtp_run.speedup_over(base_run) == pytest.approx(1.5)


def test_missing_baseline_fails_with_the_record_command_then_update_records_and_passes(tmp_path):
    workload = resolve_workload({"num_prompts": 4}, 8)
    perf, _, _ = make_session(tmp_path, [100.0])
    run = perf.bind(perf.run(BASE, workload), "tests/test_x.py::test_decode[8]")
    with pytest.raises(PerfFailure) as failure:
        run.assert_no_regression("decode_tok_s")
    message = str(failure.value)
    assert "MISSING BASELINE" in message
    assert "pytest 'tests/test_x.py::test_decode[8]' --llmperf-sim --update-baselines" in message

    updater, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True)
    updater.bind(updater.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    recorded = json.loads((tmp_path / "baselines" / "sim" / "m.json").read_text())["concurrency"]["8"]["metrics"]
    assert {"decode_tok_s", "tpot_ms_median", "prefill_tok_s"} <= set(recorded)  # every figure, not just the asserted
    assert updater.gates[-1].outcome == "recorded"

    again, _, _ = make_session(tmp_path, [97.0])  # -3%: within the default -5%
    again.bind(again.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    assert again.gates[-1].outcome == "pass"


def test_regression_fails_with_a_table_and_improvement_passes_with_a_hint(tmp_path):
    workload = resolve_workload({"num_prompts": 4}, 8)
    updater, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True)
    updater.bind(updater.run(BASE, workload), "t").assert_no_regression("decode_tok_s")

    slow, _, _ = make_session(tmp_path, [90.0])
    with pytest.raises(PerfFailure) as failure:
        slow.bind(slow.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    table = str(failure.value)
    for word in ("decode_tok_s", "100.0", "90.0", "-5%", "REGRESSED"):
        assert word in table

    fast, _, _ = make_session(tmp_path, [120.0])
    fast.bind(fast.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    assert fast.gates[-1].verdicts[0].status == "improved"
    assert "--update-baselines" in fast.gates[-1].message

    loose, _, _ = make_session(tmp_path, [90.0])
    loose.bind(loose.run(BASE, workload), "t", {"decode_tok_s": "15%"}).assert_no_regression("decode_tok_s")


def test_baseline_from_another_workload_is_refused_naming_the_difference(tmp_path):
    updater, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True)
    updater.bind(
        updater.run(BASE, resolve_workload({"num_prompts": 4, "max_tokens": 256}, 8)), "t"
    ).assert_no_regression()
    other, _, _ = make_session(tmp_path, [100.0])
    with pytest.raises(PerfFailure, match="max_tokens: baseline 256, measured 128"):
        other.bind(
            other.run(BASE, resolve_workload({"num_prompts": 4, "max_tokens": 128}, 8)), "t"
        ).assert_no_regression()
    assert other.gates[-1].outcome == "refused"


def test_speedup_is_gated_against_its_own_baseline(tmp_path):
    workload = resolve_workload({"num_prompts": 4}, 8)
    rec, _, _ = make_session(tmp_path, [100.0, 150.0], llmperf_update_baselines=True)
    base, mtp = rec.run(BASE, workload), rec.bind(rec.run(MTP, workload), "t")
    mtp.assert_speedup_over(base)
    slower, _, _ = make_session(tmp_path, [100.0, 120.0])
    base, mtp = slower.run(BASE, workload), slower.bind(slower.run(MTP, workload), "t")
    with pytest.raises(PerfFailure, match="mtp_speedup"):
        mtp.assert_speedup_over(base)


def test_acceptance_without_counters_is_no_data_not_zero(tmp_path):
    workload = resolve_workload({"num_prompts": 4}, 8)
    perf, _, _ = make_session(tmp_path, [100.0])
    with pytest.raises(PerfFailure, match="NO DATA"):
        perf.bind(perf.run(MTP, workload), "t").assert_no_regression("acceptance_rate")


def test_ctrl_c_keeps_the_partial_run_and_stops_the_session(tmp_path):
    perf, _, _ = make_session(tmp_path, [100.0], llmperf_repetitions="3")
    partial = make_result(100.0)
    partial.stop_reason = "interrupted"
    perf._execute = lambda endpoint, requests, workload, speed: partial
    workload = resolve_workload({"num_prompts": 4}, 8)
    with pytest.raises(KeyboardInterrupt, match="interrupted during m @ concurrency 8"):
        perf.run(BASE, workload)
    kept = perf.runs[(BASE, workload)]
    assert kept.results == [partial]  # no further repetition after the interrupt
    perf.close()


def jittered_result(ttfts, tokens=20):
    """Requests with the given TTFTs (s), one per wave of 1; decode speed fixed."""
    records = [
        RequestRecord(
            index=i,
            send_time=float(i),
            chunk_times=[i + t + k * 0.01 for k in range(tokens)],
            end_time=i + t + 1.0,
            prompt_tokens=50,
            completion_tokens=tokens,
            finish_reason="length",
            status=200,
        )
        for i, t in enumerate(ttfts)
    ]
    return RunResult(
        config={}, records=records, duration=float(len(ttfts)), attempted=len(ttfts), stop_reason="completed"
    )


def ttft_session(tmp_path, ttfts, **cli):
    cli = {"llmperf_sim": True, **cli}
    perf = PerfSession(resolve_options(lambda d: cli.get(d), lambda n: ""), FakeTarget(), tmp_path)
    perf._requests_for = lambda endpoint, workload: []
    perf.server_down = lambda endpoint: None
    perf._execute = lambda endpoint, requests, workload, speed: jittered_result(ttfts)
    return perf


BASE_TTFTS = [0.10, 0.30, 0.12, 0.28, 0.11, 0.29, 0.10, 0.31]
# The same prompts, each moved a lot but the median barely: noise wider than the 10 % tolerance.
NOISY_TTFTS = [0.30, 0.10, 0.28, 0.12, 0.29, 0.11, 0.31, 0.10]


def record_ttft_baseline(tmp_path, workload):
    recorder = ttft_session(tmp_path, BASE_TTFTS, llmperf_update_baselines=True)
    recorder.bind(recorder.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")


def test_a_change_within_the_noise_is_inconclusive_and_warns_by_default(tmp_path):
    workload = resolve_workload({"num_prompts": 8}, 1)
    record_ttft_baseline(tmp_path, workload)
    perf = ttft_session(tmp_path, NOISY_TTFTS)
    with pytest.warns(UserWarning, match="inconclusive"):
        perf.bind(perf.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    gate = perf.gates[-1]
    assert gate.outcome == "warn" and gate.verdicts[0].status == "inconclusive"
    assert "the data would decide it" in gate.message or "boundary" in gate.message


def test_inconclusive_fails_or_passes_as_the_option_says(tmp_path):
    workload = resolve_workload({"num_prompts": 8}, 1)
    record_ttft_baseline(tmp_path, workload)
    strict = ttft_session(tmp_path, NOISY_TTFTS, llmperf_inconclusive="fail")
    with pytest.raises(PerfFailure, match="inconclusive"):
        strict.bind(strict.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    lenient = ttft_session(tmp_path, NOISY_TTFTS, llmperf_inconclusive="pass")
    import warnings as _warnings

    with _warnings.catch_warnings():
        _warnings.simplefilter("error")
        lenient.bind(lenient.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    assert lenient.gates[-1].outcome == "pass"


def test_baselines_keep_the_runs_request_lines(tmp_path):
    workload = resolve_workload({"num_prompts": 8}, 1)
    perf = ttft_session(tmp_path, BASE_TTFTS, llmperf_update_baselines=True)
    perf.bind(perf.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    entry = perf.store.load("sim", "m").entry(1)
    assert len(entry["requests"]) == 8
    index, prompt, out, chunks, ttft, e2el = entry["requests"][1].split()
    assert (index, prompt, out, chunks) == ("1", "50", "20", "20") and float(ttft) == pytest.approx(300.0)


def test_an_older_baseline_without_request_lines_compares_on_the_tolerance_with_a_note(tmp_path):
    workload = resolve_workload({"num_prompts": 8}, 1)
    record_ttft_baseline(tmp_path, workload)
    path = tmp_path / "baselines" / "sim" / "m.json"
    doc = json.loads(path.read_text())
    del doc["concurrency"]["1"]["requests"]
    path.write_text(json.dumps(doc))
    slower = ttft_session(tmp_path, [t * 1.5 for t in BASE_TTFTS])
    with pytest.raises(PerfFailure) as failure:
        slower.bind(slower.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    assert "REGRESSED" in str(failure.value)
    assert "no per-request figures" in str(failure.value)


INCONCLUSIVE = compare("ttft_ms_median", 100.0, 100.0, Tolerance("relative", 0.1), "lower", error=10.0)


def counting_ttft_session(tmp_path, ttfts, **cli):
    perf = ttft_session(tmp_path, ttfts, **cli)
    calls = []

    def execute(endpoint, requests, workload, speed):
        calls.append(workload.concurrency)
        return jittered_result(ttfts)

    perf._execute = execute
    return perf, calls


def test_auto_repetitions_record_five_runs_and_add_runs_only_while_inconclusive(tmp_path):
    workload = resolve_workload({"num_prompts": 8}, 1)
    recorder, recorded = counting_ttft_session(tmp_path, BASE_TTFTS, llmperf_update_baselines=True)
    recorder.bind(recorder.run(BASE, workload), "t").assert_no_regression("ttft_ms_median", "decode_tok_s")
    assert len(recorded) == 5  # the baseline knows the spread between runs
    assert len(recorder.store.load("sim", "m").entry(1)["metrics"]["decode_tok_s"]["samples"]) == 5

    decided, calls = counting_ttft_session(tmp_path, BASE_TTFTS)
    decided.bind(decided.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    assert len(calls) == 1  # decided at once: one run

    # Inconclusive, and about 1.5x the data would decide it: one more run, then decided.
    steps = iter([[replace(INCONCLUSIVE, more_data=1.5)], [replace(INCONCLUSIVE, status="pass")]])
    hopeful, calls = counting_ttft_session(tmp_path, NOISY_TTFTS, llmperf_max_repetitions="4")
    hopeful._verdicts = lambda *args: next(steps)
    hopeful.bind(hopeful.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    assert len(calls) == 2 and "(2 repetitions)" in hopeful.gates[-1].message

    # Still inconclusive each time: runs are added while runs x 1.5 stays within the budget of 4.
    stuck, calls = counting_ttft_session(tmp_path, NOISY_TTFTS, llmperf_max_repetitions="4")
    stuck._verdicts = lambda *args: [replace(INCONCLUSIVE, more_data=1.5)]
    with pytest.warns(UserWarning, match="inconclusive"):
        stuck.bind(stuck.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    assert len(calls) == 3

    # Hopeless (far more data than the budget, or a change on the boundary): no run is added.
    hopeless, calls = counting_ttft_session(tmp_path, NOISY_TTFTS)
    with pytest.warns(UserWarning, match="inconclusive"):
        hopeless.bind(hopeless.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    verdict = hopeless.gates[-1].verdicts[0]
    assert len(calls) == 1 and verdict.status == "inconclusive"
    assert verdict.more_data is None or verdict.more_data > 5


def test_fixed_repetitions_never_add_runs(tmp_path):
    workload = resolve_workload({"num_prompts": 8}, 1)
    record_ttft_baseline(tmp_path, workload)
    noisy, calls = counting_ttft_session(tmp_path, NOISY_TTFTS, llmperf_repetitions="1")
    with pytest.warns(UserWarning, match="inconclusive"):
        noisy.bind(noisy.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    assert len(calls) == 1


ENGINE_PAGE = '# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{engine="0"} 0\n'


def test_a_base_server_carries_no_not_speculative_note_and_a_speculative_one_does(tmp_path):
    """Which notes a run keeps is decided by the spec-decode status, not by their text."""
    perf, _, _ = make_session(tmp_path, [100.0, 150.0])
    plain = lambda result: replace(result, metrics_before=ENGINE_PAGE, metrics_after=ENGINE_PAGE)  # noqa: E731
    execute = perf._execute
    perf._execute = lambda *args: plain(execute(*args))
    workload = resolve_workload({"num_prompts": 4}, 8)
    assert perf.run(BASE, workload).notes == []
    (note,) = perf.run(MTP, workload).notes
    assert "not a speculative-decoding server" in note


def failing_result(decode_tok_s, failed, n=4):
    result = make_result(decode_tok_s, n=n)
    for r in result.records[:failed]:
        r.error, r.chunk_times = "HTTP 500: EngineCore encountered an issue", []
    return result


def test_a_run_beyond_its_error_budget_is_invalid_never_recorded_and_never_passed(tmp_path):
    workload = resolve_workload({"num_prompts": 4}, 8)
    recorder, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True)
    recorder._execute = lambda *args: failing_result(100.0, failed=1)
    with pytest.raises(PerfFailure, match=r"not recorded: invalid run: 1 of 4 failed: 1x HTTP 500: EngineCore"):
        recorder.bind(recorder.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    assert not (tmp_path / "baselines" / "sim" / "m.json").exists()

    recorder.bind(recorder.run(BASE, workload), "t", error_budget="25%").assert_no_regression("decode_tok_s")
    assert (tmp_path / "baselines" / "sim" / "m.json").exists()  # within a budget of one in four: judged

    broken, _, _ = make_session(tmp_path, [100.0], llmperf_error_budget="1")
    broken._execute = lambda *args: failing_result(100.0, failed=2)
    with pytest.raises(PerfFailure) as failure:
        broken.bind(broken.run(BASE, workload), "t").assert_no_regression("decode_tok_s", "tpot_ms_median")
    assert [v.status for v in broken.gates[-1].verdicts] == ["invalid", "invalid"]
    assert "INVALID RUN" in str(failure.value) and "2 of 4 failed" in str(failure.value)
    assert "re-record" not in str(failure.value)  # a broken run is not a new level to accept


def test_a_run_where_nothing_completed_is_invalid_whatever_the_budget(tmp_path):
    workload = resolve_workload({"num_prompts": 4}, 8)
    perf, _, _ = make_session(tmp_path, [100.0], llmperf_error_budget="100%")
    perf._execute = lambda *args: failing_result(100.0, failed=4)
    with pytest.raises(PerfFailure, match="invalid run: no request completed"):
        perf.bind(perf.run(MTP, workload), "t").assert_no_regression("acceptance_rate")


def test_recording_a_metric_without_data_fails_and_says_what_was_recorded(tmp_path):
    workload = resolve_workload({"num_prompts": 4}, 8)
    recorder, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True)
    run = recorder.bind(recorder.run(MTP, workload), "t")
    with pytest.raises(PerfFailure) as failure:
        run.assert_no_regression("decode_tok_s", "acceptance_rate")
    message = str(failure.value)
    assert message.startswith("recorded decode_tok_s in baselines/sim/m-mtp.json; ")
    assert "not recorded, no data: acceptance_rate: no /metrics snapshots were captured around the run" in message
    stored = json.loads(next((tmp_path / "baselines" / "sim").glob("*.json")).read_text())
    assert "acceptance_rate" not in stored["concurrency"]["8"]["metrics"]


SECRET_SPEC = ServerSpec(name="m", model="org/m", args=("--api-key", "key-1234"), env={"DB_PASSWORD": "pw-5678"})
LOG = """INFO loading weights
INFO serving with --api-key key-1234
ERROR EngineCore died: CUDA error: an illegal memory access (auth Bearer abcdefghijklmnop, pw-5678)
"""


class DyingTarget(FakeTarget):
    """Its server's log holds secrets; `server_down` (set by the test) says it died."""

    @contextmanager
    def start(self, spec):
        self.events.append(("start", spec.name))
        try:
            yield Endpoint("http://127.0.0.1:1", spec.model_id, "sim", {}, log_tail=lambda lines: LOG)
        finally:
            self.events.append(("stop", spec.name))


def test_a_server_that_died_says_so_with_its_last_log_lines_redacted_and_is_not_started_again(tmp_path):
    from pytest_llmperf.report.document import build_report
    from pytest_llmperf.report.terminal import terminal_lines

    cli = {"llmperf_sim": True, "llmperf_repetitions": "3", "llmperf_error_budget": "100%"}
    target = DyingTarget()
    perf = PerfSession(resolve_options(lambda d: cli.get(d), lambda n: ""), target, tmp_path)
    perf._requests_for = lambda endpoint, workload: []
    perf._execute = lambda *args: failing_result(100.0, failed=3)
    perf.server_down = lambda endpoint: "container m-1 exited with code 137 (killed: out of memory)"
    workload = resolve_workload({"num_prompts": 4}, 8)

    run = perf.run(SECRET_SPEC, workload)
    assert len(run.results) == 1  # no repetition on a dead server
    assert target.events == [("start", "m"), ("stop", "m")]  # stopped at once, not at the session's end
    with pytest.raises(PerfFailure) as failure:  # invalid whatever the error budget
        perf.bind(run, "t").assert_no_regression("decode_tok_s")
    message = str(failure.value)
    assert (
        "invalid run: server died after 1 of 4 requests: container m-1 exited with code 137 (killed: out of "
        "memory); 3 of 4 failed: 3x HTTP 500: EngineCore encountered an issue" in message
    )
    assert "its last 3 log lines:\n    INFO loading weights\n    INFO serving with --api-key ***\n" in message
    assert "    ERROR EngineCore died: CUDA error: an illegal memory access (auth ***, ***)" in message
    for secret in ("key-1234", "pw-5678", "abcdefghijklmnop"):
        assert secret not in message

    with pytest.raises(RuntimeError, match=r"server 'm' died earlier in this session \(server died after 1 of 4"):
        perf.run(SECRET_SPEC, resolve_workload({"num_prompts": 4}, 16))
    assert target.events == [("start", "m"), ("stop", "m")]

    document = build_report(perf)
    assert document["runs"][0]["server_death"].startswith("server died after 1 of 4 requests: container m-1")
    assert document["runs"][0]["server_log"][1] == "INFO serving with --api-key ***"
    assert (
        "note: m @ 8: server died after 1 of 4 requests: container m-1 exited with code 137 (killed: out of memory)"
        in (terminal_lines(document))
    )
    assert "key-1234" not in json.dumps(document)


def test_failed_requests_on_a_server_that_still_serves_are_no_death(tmp_path):
    perf, target, _ = make_session(tmp_path, [100.0], llmperf_error_budget="100%", llmperf_inconclusive="pass")
    asked = []
    perf.server_down = lambda endpoint: asked.append(endpoint.model)  # None: it answers
    perf._execute = lambda *args: failing_result(100.0, failed=1)
    run = perf.run(BASE, resolve_workload({"num_prompts": 4}, 8))
    assert asked == ["org/m"] and run.server_death is None and run.server_log == []
    assert perf.invalid_reason(run, parse_budget("100%")) is None
