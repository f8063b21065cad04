"""PerfSession without pytest: caching, one server at a time, and the baseline gate."""

import contextlib
import itertools
import json
import warnings
from contextlib import contextmanager
from dataclasses import replace
from types import SimpleNamespace

import pytest

from pytest_llmperf import ServerSpec
from pytest_llmperf.baselines.compare import compare
from pytest_llmperf.baselines.outcome import PerfFailure
from pytest_llmperf.judging.gate import no_data_reason
from pytest_llmperf.judging.session import PerfSession
from pytest_llmperf.measuring.measured import MeasuredRun
from pytest_llmperf.measuring.validity import invalid_reason
from pytest_llmperf.metrics.failures import parse_budget
from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.metrics.registry import Tolerance
from pytest_llmperf.options import resolve_options
from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.workload.result import RunResult
from pytest_llmperf.workload.workload import resolve_workload
from tests.session_fakes import FakeRunner

BASE = ServerSpec(name="m", model="org/m")
MTP = BASE.with_speculative({"method": "mtp", "num_speculative_tokens": 3})


class FakeTarget:
    name = "sim"
    starts_servers = True

    def __init__(self, vllm_version="0.32.0"):
        self.events = []
        self.vllm_version = vllm_version

    @contextmanager
    def start(self, spec):
        self.events.append(("start", spec.name))
        try:
            yield Endpoint("http://127.0.0.1:1", spec.model_id, "sim", {"vllm_version": self.vllm_version})
        finally:
            self.events.append(("stop", spec.name))


def make_result(decode_tok_s, n=4, tokens=100):
    """n requests in flight together, each `tokens` output tokens over a duration giving
    `decode_tok_s` (its steady-state figure too: all n run from start to end)."""
    duration = n * tokens / decode_tok_s
    records = [
        RequestRecord(
            index=i,
            send_time=0.0,
            chunk_times=[duration * (k + 1) / tokens for k in range(tokens)],
            end_time=duration,
            prompt_tokens=50,
            completion_tokens=tokens,
            finish_reason="length",
            status=200,
        )
        for i in range(n)
    ]
    return RunResult(config={}, records=records, duration=duration, attempted=n, stop_reason="completed")


SEAMS = ("rule", "log", "detail", "clock")  # the PerfSession arguments a test may pass on


def fake_session(tmp_path, cli, target=None, *, measure=None, warmup=None, prompts=None, server_down=None, **seams):
    """A PerfSession on `cli`'s options and a FakeTarget, built through its constructor:
    runs and server warm-ups are `measure(endpoint, requests, workload, speed)` and
    `warmup(endpoint, prompts, config)`, no prompts are sampled and the fake server lives
    through every fault unless `prompts` and `server_down` say otherwise; `seams` (SEAMS)
    go to the constructor as given."""
    assert set(seams) <= set(SEAMS), seams
    options = resolve_options(lambda d: cli.get(d), lambda n: "")
    return PerfSession(
        options,
        target or FakeTarget(),
        tmp_path,
        runner=FakeRunner(measure, warmup),
        prompts=prompts or (lambda endpoint, workload: []),
        server_down=server_down or (lambda endpoint: None),
        **seams,
    )


def make_session(tmp_path, speeds, vllm_version="0.32.0", **given):
    """`given`: options (llmperf_*), and fake_session's arguments; without `measure`, the
    n-th run gets the n-th decode speed of `speeds` (`calls`: the model of each run)."""
    cli = {"llmperf_sim": True, "llmperf_repetitions": "1"}  # one run per speed given
    cli.update({k: v for k, v in given.items() if k.startswith("llmperf_")})
    calls = []

    def execute(endpoint, requests, workload, speed):
        calls.append(endpoint.model)
        return make_result(speeds[len(calls) - 1])

    seams = {"measure": execute, **{k: v for k, v in given.items() if not k.startswith("llmperf_")}}
    target = FakeTarget(vllm_version)
    return fake_session(tmp_path, cli, target, **seams), target, calls


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


def test_the_run_log_names_the_server_not_its_model(tmp_path):
    """A base and an MTP server serve one model: the log line (-v) says which one runs."""
    lines: list[str] = []
    perf, _, _ = make_session(tmp_path, [100.0, 150.0], detail=lines.append)
    workload = resolve_workload({"num_prompts": 4}, 8)
    perf.run(BASE, workload)
    perf.run(MTP, workload)
    perf.close()
    assert "m @ concurrency 8: 4 prompts" in lines and "m-mtp @ concurrency 8: 4 prompts" in lines
    assert not [line for line in lines if line.startswith("org/m @")]


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
    updater.finish()
    (entry,) = json.loads((tmp_path / "baselines" / "sim" / "m.json").read_text())["concurrency"]["8"].values()
    recorded = entry["metrics"]
    assert {"decode_tok_s", "tpot_ms_median", "prefill_tok_s"} <= set(recorded)  # every figure, not just the asserted
    assert updater.gates[-1].outcome == "recorded"

    again, _, _ = make_session(tmp_path, [97.0])  # -3%: within the default -5%
    again.bind(again.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    assert again.gates[-1].outcome == "pass"


def test_recording_on_more_nights_makes_the_level_their_median_and_the_summary_says_until_they_are_in(tmp_path):
    workload = resolve_workload({"num_prompts": 4}, 8)

    def judged() -> list[str]:
        session, _, _ = make_session(tmp_path, [100.0])
        session.bind(session.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
        return session.finish().lines

    levels = []
    for speed in (100.0, 104.0, 98.0):
        updater, _, _ = make_session(tmp_path, [speed], llmperf_update_baselines=True)
        updater.bind(updater.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
        updater.finish()
        levels.append(json.loads((tmp_path / "baselines" / "sim" / "m.json").read_text()))
        if speed == 100.0:
            (line,) = [line for line in judged() if line.startswith("baselines: ")]
            assert line == (
                "baselines: 1 entry rests on one recording night of 3, whose shift of the box is in every verdict: "
                "record 2 more nights of this build with --update-baselines (m @ 8)"
            )
    assert "recording night 3 of 3" in updater.gates[-1].message
    (entry,) = levels[-1]["concurrency"]["8"].values()
    decode = entry["metrics"]["decode_tok_s"]
    assert [n["value"] for n in decode["nights"]] == [100.0, 104.0, 98.0] and decode["value"] == 100.0
    assert not [line for line in judged() if line.startswith("baselines: ")]  # three nights in: nothing to say


def test_regression_fails_with_a_table_and_improvement_passes_with_a_hint(tmp_path):
    workload = resolve_workload({"num_prompts": 4}, 8)
    updater, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True)
    updater.bind(updater.run(BASE, workload), "t").assert_no_regression("decode_tok_s")

    updater.finish()
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


def test_the_spread_between_starts_is_pooled_over_the_targets_other_servers(tmp_path):
    workload = resolve_workload({"num_prompts": 4}, 8)

    def record(root, spec, speeds):
        recorder, _, _ = make_session(root, speeds, llmperf_update_baselines=True, llmperf_repetitions="5")
        recorder.bind(recorder.run(spec, workload), "t").assert_no_regression("decode_tok_s")
        recorder.close()
        recorder.finish()

    def judge(root):
        perf, _, _ = make_session(root, [95.0])  # one run, -5 %, against a 3 % tolerance
        try:
            perf.bind(perf.run(BASE, workload), "t", {"decode_tok_s": "3%"}).assert_no_regression("decode_tok_s")
        except PerfFailure:
            pass
        return perf.gates[-1].verdicts[0]

    alone, pooled = tmp_path / "alone", tmp_path / "pooled"
    for root in (alone, pooled):
        record(root, BASE, [100.0, 103.0, 97.0, 101.5, 98.5])  # its own five starts: a wide spread on 4 dof
    # two more servers of the same target whose starts moved 0.4 %: 8 more degrees of freedom
    record(pooled, ServerSpec(name="n", model="org/n"), [100.0, 100.5, 99.5, 100.2, 99.8])
    record(pooled, ServerSpec(name="o", model="org/o"), [50.0, 50.25, 49.75, 50.1, 49.9])
    # another target's files are no part of it
    (alone / "baselines" / "docker").mkdir()
    for name in ("n.json", "o.json"):
        text = (pooled / "baselines" / "sim" / name).read_text().replace('"target": "sim"', '"target": "docker"')
        (alone / "baselines" / "docker" / name).write_text(text)

    with pytest.warns(UserWarning, match="inconclusive"):
        undecided = judge(alone)
    assert undecided.status == "inconclusive"
    verdict = judge(pooled)
    assert verdict.status == "regressed"
    assert verdict.noise < undecided.noise


def test_a_regressed_table_says_what_changed_since_the_baseline_a_passing_one_does_not(tmp_path):
    workload = resolve_workload({"num_prompts": 4}, 8)
    updater, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True)
    updater.bind(updater.run(BASE, workload), "t").assert_no_regression("decode_tok_s")

    updater.finish()
    nightly, _, _ = make_session(tmp_path, [90.0], vllm_version="0.33.0")
    with pytest.raises(PerfFailure) as failure:
        nightly.bind(nightly.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    lines = str(failure.value).splitlines()
    (block,) = [line for line in lines if line.startswith("what changed since the baseline")]
    assert block.endswith("nothing but the vLLM version: 0.32.0 -> 0.33.0")
    assert lines.index(block) < lines.index("hints:")  # under the table, before the hints
    gate = nightly.gates[-1]
    assert gate.changes == ["vLLM version: 0.32.0 -> 0.33.0"] and gate.attribution is None  # a base server
    assert gate.baseline_figures["decode_tok_s"] == 100.0

    same, _, _ = make_session(tmp_path, [99.0], vllm_version="0.33.0")
    same.bind(same.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    assert same.gates[-1].explanation == [] and "what changed" not in same.gates[-1].message


def test_baseline_from_another_workload_is_refused_naming_the_difference(tmp_path):
    updater, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True)
    updater.bind(
        updater.run(BASE, resolve_workload({"num_prompts": 4, "max_tokens": 256}, 8)), "t"
    ).assert_no_regression()
    updater.finish()
    other, _, _ = make_session(tmp_path, [100.0])
    with pytest.raises(PerfFailure) as failure:
        other.bind(
            other.run(BASE, resolve_workload({"num_prompts": 4, "max_tokens": 128}, 8)), "t::short"
        ).assert_no_regression()
    message = str(failure.value)
    assert message.startswith(
        "baseline baselines/sim/m.json has no entry for this workload at concurrency 8: its entry there was "
        "recorded under a different workload; nothing to compare with. Differences:\n"
        "  - max_tokens: baseline 256, measured 128\n"
    )
    assert "Record this workload beside it with: pytest 't::short' --llmperf-sim --update-baselines" in message
    assert other.gates[-1].outcome == "refused"


def test_two_workloads_of_one_server_and_concurrency_keep_an_entry_each(tmp_path):
    """Two tests of one server at one concurrency, short and long outputs: each records
    and is judged against its own entry; neither overwrites the other's."""
    short, long = (resolve_workload({"num_prompts": 4, "max_tokens": n}, 8) for n in (64, 512))
    updater, _, _ = make_session(tmp_path, [100.0, 200.0], llmperf_update_baselines=True)
    updater.bind(updater.run(BASE, short), "t::short").assert_no_regression("decode_tok_s")
    updater.bind(updater.run(BASE, long), "t::long").assert_no_regression("decode_tok_s")
    updater.finish()
    doc = json.loads((tmp_path / "baselines" / "sim" / "m.json").read_text())
    assert doc["format"] == 2
    entries = doc["concurrency"]["8"]
    assert sorted(entries) == sorted(
        f"endpoint=completions ignore_eos=false max_seconds=null max_tokens={n} num_prompts=4 profile=full "
        "seed=0 warmup=8"
        for n in (64, 512)
    )
    assert sorted(e["metrics"]["decode_tok_s"]["value"] for e in entries.values()) == [100.0, 200.0]

    # Each judged against its own: 100 and 200 again pass; swapped, both would fail by 50 % or gain 100 %.
    again, _, _ = make_session(tmp_path, [100.0, 200.0])
    again.bind(again.run(BASE, short), "t::short").assert_no_regression("decode_tok_s")
    again.bind(again.run(BASE, long), "t::long").assert_no_regression("decode_tok_s")
    assert [(g.outcome, g.verdicts[0].baseline) for g in again.gates] == [("pass", 100.0), ("pass", 200.0)]

    # A third workload, none recorded: refused naming what differs from the nearest of the two.
    third, _, _ = make_session(tmp_path, [100.0])
    with pytest.raises(PerfFailure) as failure:
        third.bind(
            third.run(BASE, resolve_workload({"num_prompts": 4, "max_tokens": 64, "seed": 3}, 8)), "t"
        ).assert_no_regression()
    assert "its 2 entries there were recorded under a different workload" in str(failure.value)
    assert "Differences from the nearest:\n  - seed: baseline 0, measured 3\n" in str(failure.value)


def test_the_same_workload_on_another_dataset_is_refused_and_recording_replaces_it(tmp_path):
    """Where a run ran (dataset, model, simulator clock, hardware) is no part of the key:
    comparing across it is refused, recording replaces the entry instead of adding one."""
    workload = resolve_workload({"num_prompts": 4}, 8)
    updater, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True)
    updater.bind(updater.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    path = tmp_path / "baselines" / "sim" / "m.json"
    updater.finish()
    doc = json.loads(path.read_text())
    (entry,) = doc["concurrency"]["8"].values()
    entry["workload"]["dataset"] = "other.json sha256:0123456789ab"
    path.write_text(json.dumps(doc))
    other, _, _ = make_session(tmp_path, [100.0])
    with pytest.raises(PerfFailure, match="recorded under a different workload or hardware") as failure:
        other.bind(other.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    assert "dataset: baseline other.json sha256:0123456789ab, measured (absent)" in str(failure.value)
    again, _, _ = make_session(tmp_path, [90.0], llmperf_update_baselines=True)
    again.bind(again.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    again.finish()
    (entry,) = json.loads(path.read_text())["concurrency"]["8"].values()
    assert "dataset" not in entry["workload"] and entry["metrics"]["decode_tok_s"]["value"] == 90.0


def test_a_format_1_baseline_is_read_and_the_next_record_writes_format_2(tmp_path):
    """Files committed before entries were keyed by workload: one entry per concurrency."""
    workload = resolve_workload({"num_prompts": 4}, 8)
    updater, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True)
    updater.bind(updater.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    path = tmp_path / "baselines" / "sim" / "m.json"
    updater.finish()
    doc = json.loads(path.read_text())
    (entry,) = doc["concurrency"]["8"].values()
    path.write_text(json.dumps({**doc, "format": 1, "concurrency": {"8": entry}}))
    slow, _, _ = make_session(tmp_path, [90.0])
    with pytest.raises(PerfFailure, match="REGRESSED"):
        slow.bind(slow.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    assert slow.gates[-1].verdicts[0].baseline == 100.0
    other, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True)
    other.bind(other.run(BASE, resolve_workload({"num_prompts": 4, "warmup": 0}, 8)), "t").assert_no_regression()
    other.finish()
    rewritten = json.loads(path.read_text())
    assert rewritten["format"] == 2 and len(rewritten["concurrency"]["8"]) == 2  # the old entry kept beside


SPEEDUP_WORKLOAD = resolve_workload({"num_prompts": 4}, 8)


def speedup_runs(tmp_path, speeds, **given):
    """The base and the bound MTP run of a speedup test, after a baseline recorded at 100 and 150 tok/s."""
    rec, _, _ = make_session(tmp_path, [100.0, 150.0], llmperf_update_baselines=True)
    base, mtp = rec.run(BASE, SPEEDUP_WORKLOAD), rec.bind(rec.run(MTP, SPEEDUP_WORKLOAD), "t")
    mtp.assert_speedup_over(base)
    rec.finish()
    tonight, _, _ = make_session(tmp_path, speeds, **given)
    return tonight.run(BASE, SPEEDUP_WORKLOAD), tonight.bind(tonight.run(MTP, SPEEDUP_WORKLOAD), "t")


def test_speedup_is_gated_against_its_own_baseline(tmp_path):
    base, mtp = speedup_runs(tmp_path, [100.0, 120.0])
    with pytest.raises(PerfFailure, match="mtp_speedup"):
        mtp.assert_speedup_over(base)


def test_an_added_speedup_repetition_re_runs_its_base_too(tmp_path):
    # A speedup read regressed at the first look is read again on fresh starts: MTP, then its base.
    speeds = [100.0, 120.0, 121.0, 80.0] + [120.0, 100.0] * 10  # base, MTP, then MTP and base by pairs
    base, mtp = speedup_runs(tmp_path, speeds, llmperf_repetitions="auto")
    with warnings.catch_warnings(), contextlib.suppress(PerfFailure):  # the verdict is not what is tested here
        warnings.simplefilter("ignore")
        mtp.assert_speedup_over(base)
    assert len(mtp.results) == len(base.results) >= 2
    # each ratio its own pair's: the second is 121 over 80, not over the base's median
    assert mtp.speedup_samples(base)[:2] == pytest.approx([120.0 / 100.0, 121.0 / 80.0], rel=0.02)


def test_acceptance_without_counters_is_no_data_not_zero(tmp_path):
    workload = resolve_workload({"num_prompts": 4}, 8)
    perf, _, _ = make_session(tmp_path, [100.0])
    with pytest.raises(PerfFailure, match="NO DATA"):
        perf.bind(perf.run(MTP, workload), "t").assert_no_regression("acceptance_rate")


def test_ctrl_c_keeps_the_partial_run_and_stops_the_session(tmp_path):
    partial = make_result(100.0)
    partial.stop_reason = "interrupted"
    perf, _, _ = make_session(tmp_path, [], llmperf_repetitions="3", measure=lambda *args: partial)
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


def ttft_session(tmp_path, ttfts, *, measure=None, **given):
    """Runs of `jittered_result(ttfts)` unless `measure` says; `given`: options (llmperf_*)
    and fake_session's seams."""
    cli = {"llmperf_sim": True, **{k: v for k, v in given.items() if k.startswith("llmperf_")}}
    seams = {k: v for k, v in given.items() if not k.startswith("llmperf_")}
    return fake_session(tmp_path, cli, measure=measure or (lambda *args: jittered_result(ttfts)), **seams)


# Ten requests: a median over fewer is not judged (registry min_requests).
BASE_TTFTS = [0.10, 0.30, 0.12, 0.28, 0.11, 0.29, 0.10, 0.31, 0.12, 0.29]
# The same prompts, each moved a lot but the median barely: noise wider than the 10 % tolerance.
NOISY_TTFTS = [0.30, 0.10, 0.28, 0.12, 0.29, 0.11, 0.31, 0.10, 0.29, 0.12]


# The baseline's five starts, each moving every TTFT alike: a spread between runs of
# about 23 %, wider than the 10 % tolerance (a deterministic fake would record none).
START_SCALES = [1.0, 1.3, 0.75, 1.2, 0.85]


def spread_starts(ttfts):
    """An _execute whose every call is another start: the TTFTs scaled by START_SCALES in turn."""
    scales = itertools.cycle(START_SCALES)

    def execute(endpoint, requests, workload, speed):
        scale = next(scales)
        return jittered_result([t * scale for t in ttfts])

    return execute


def record_ttft_baseline(tmp_path, workload, *, spread=False, **cli):
    """The TTFT baseline, of five runs unless `cli` says; `spread`: their starts differ
    (START_SCALES)."""
    measure = spread_starts(BASE_TTFTS) if spread else None
    recorder = ttft_session(tmp_path, BASE_TTFTS, measure=measure, llmperf_update_baselines=True, **cli)
    recorder.bind(recorder.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    recorder.finish()


def test_a_change_within_the_noise_is_inconclusive_and_warns_by_default(tmp_path):
    workload = resolve_workload({"num_prompts": 10}, 1)
    record_ttft_baseline(tmp_path, workload, spread=True)
    perf = ttft_session(tmp_path, NOISY_TTFTS)
    with pytest.warns(UserWarning, match="inconclusive"):
        perf.bind(perf.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    gate = perf.gates[-1]
    assert gate.outcome == "warn" and gate.verdicts[0].status == "inconclusive"
    assert "the data would decide it" in gate.message or "boundary" in gate.message


def test_inconclusive_fails_or_passes_as_the_option_says(tmp_path):
    workload = resolve_workload({"num_prompts": 10}, 1)
    # one run recorded: no spread between runs known, the request-level error alone (the
    # same prompts moved a lot, the median barely) leaves it inconclusive
    record_ttft_baseline(tmp_path, workload, llmperf_repetitions="1")
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
    workload = resolve_workload({"num_prompts": 10}, 1)
    perf = ttft_session(tmp_path, BASE_TTFTS, llmperf_update_baselines=True)
    perf.bind(perf.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    perf.finish()
    entry = perf.store.load("sim", "m").entry(1)
    assert len(entry["requests"]) == 10
    index, prompt, out, chunks, ttft, e2el = entry["requests"][1].split()
    assert (index, prompt, out, chunks) == ("1", "50", "20", "20") and float(ttft) == pytest.approx(300.0)


def test_an_older_baseline_without_request_lines_compares_on_the_tolerance_with_a_note(tmp_path):
    workload = resolve_workload({"num_prompts": 10}, 1)
    record_ttft_baseline(tmp_path, workload, llmperf_repetitions="1")  # no spread between runs either
    path = tmp_path / "baselines" / "sim" / "m.json"
    doc = json.loads(path.read_text())
    (entry,) = doc["concurrency"]["1"].values()
    del entry["requests"]
    path.write_text(json.dumps(doc))
    # one measured run (auto would read the regression again, and two runs know a spread)
    slower = ttft_session(tmp_path, [t * 1.5 for t in BASE_TTFTS], llmperf_repetitions="1")
    with pytest.raises(PerfFailure) as failure:
        slower.bind(slower.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    assert "REGRESSED" in str(failure.value)
    assert "no per-request figures" in str(failure.value)


INCONCLUSIVE = compare("ttft_ms_median", 100.0, 100.0, Tolerance("relative", 0.1), "lower", error=10.0)


def counting_ttft_session(tmp_path, ttfts, *, measure=None, **given):
    """ttft_session, and the concurrency of each run it made."""
    calls = []
    runs = measure or (lambda *args: jittered_result(ttfts))

    def execute(endpoint, requests, workload, speed):
        calls.append(workload.concurrency)
        return runs(endpoint, requests, workload, speed)

    return ttft_session(tmp_path, ttfts, measure=execute, **given), calls


def test_auto_repetitions_record_five_runs_and_add_runs_only_while_inconclusive(tmp_path):
    workload = resolve_workload({"num_prompts": 10}, 1)
    recorder, recorded = counting_ttft_session(
        tmp_path, BASE_TTFTS, measure=spread_starts(BASE_TTFTS), llmperf_update_baselines=True
    )
    recorder.bind(recorder.run(BASE, workload), "t").assert_no_regression("ttft_ms_median", "decode_tok_s")
    assert len(recorded) == 5  # the baseline knows the spread between runs
    recorder.finish()
    assert len(recorder.store.load("sim", "m").entry(1)["metrics"]["decode_tok_s"]["samples"]) == 5

    decided, calls = counting_ttft_session(tmp_path, BASE_TTFTS)
    decided.bind(decided.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    assert len(calls) == 1  # decided at once: one run

    # Inconclusive, and about 1.5x the data would decide it: one more run, then decided.
    steps = iter([[replace(INCONCLUSIVE, more_data=1.5)], [replace(INCONCLUSIVE, status="pass")]])
    hopeful, calls = counting_ttft_session(
        tmp_path, NOISY_TTFTS, llmperf_max_repetitions="4", rule=lambda *args, **kwargs: next(steps)
    )
    hopeful.bind(hopeful.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    assert len(calls) == 2 and "(2 repetitions)" in hopeful.gates[-1].message

    # Still inconclusive each time: runs are added while runs x 1.5 stays within the budget of 4.
    stuck, calls = counting_ttft_session(
        tmp_path,
        NOISY_TTFTS,
        llmperf_max_repetitions="4",
        rule=lambda *args, **kwargs: [replace(INCONCLUSIVE, more_data=1.5)],
    )
    with pytest.warns(UserWarning, match="inconclusive"):
        stuck.bind(stuck.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    assert len(calls) == 3

    # Hopeless (noise far wider than the tolerance: even an unchanged value would need more
    # runs than the budget to pass): no run is added.
    hopeless, calls = counting_ttft_session(tmp_path, NOISY_TTFTS)
    with pytest.warns(UserWarning, match="inconclusive"):
        hopeless.bind(hopeless.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    verdict = hopeless.gates[-1].verdicts[0]
    assert len(calls) == 1 and verdict.status == "inconclusive" and verdict.resolution > 5

    # One run's change far from passing (more_data beyond the budget) but a noise that more
    # runs can narrow below the tolerance: a second run, then judged on more_data.
    steps = iter([[replace(INCONCLUSIVE, more_data=50.0)], [replace(INCONCLUSIVE, more_data=50.0)]])
    moved, calls = counting_ttft_session(tmp_path, NOISY_TTFTS, rule=lambda *args, **kwargs: next(steps))
    assert INCONCLUSIVE.resolution == pytest.approx(1.645**2, rel=1e-3)  # 10 % noise (95 %) on a 10 % tolerance
    with pytest.warns(UserWarning, match="inconclusive"):
        moved.bind(moved.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    assert len(calls) == 2
    assert verdict.more_data is None or verdict.more_data > 5

    # The same noise, most of it the baseline's spread, which more measured runs do not
    # take off (Verdict.decidable): the square-root rule would add a run, the session adds
    # none.
    firm_verdict = replace(INCONCLUSIVE, run_share=0.2)
    assert firm_verdict.decidable(1, 5, by_change=False, project=False)
    firm, calls = counting_ttft_session(tmp_path, NOISY_TTFTS, rule=lambda *args, **kwargs: [firm_verdict])
    with pytest.warns(UserWarning, match="inconclusive"):
        firm.bind(firm.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    assert len(calls) == 1


REGRESSED_AT_ONCE = compare("ttft_ms_median", 100.0, 130.0, Tolerance("relative", 0.1), "lower", error=5.0)


def test_auto_reads_a_regression_again_before_reporting_it(tmp_path):
    """A shared host that ran slow for one server start reads as a regression that the next
    start does not repeat (CI read an unchanged vLLM CPU server 22.5 % slower at the first
    look, noise +/-10.5 %; another time inconclusive at the first look, then 5.3 % slower
    over two starts, noise +/-4.4 %): auto adds one run before a regression the look
    before did not read is reported."""
    assert REGRESSED_AT_ONCE.status == "regressed"
    workload = resolve_workload({"num_prompts": 10}, 1)
    record_ttft_baseline(tmp_path, workload)

    # One slow start, then the verdict over both runs passes: reported as a pass.
    steps = iter([[REGRESSED_AT_ONCE], [replace(INCONCLUSIVE, status="pass")]])
    logged: list[str] = []
    transient, calls = counting_ttft_session(
        tmp_path, BASE_TTFTS, rule=lambda *args, **kwargs: next(steps), log=logged.append
    )
    transient.bind(transient.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    assert len(calls) == 2 and transient.gates[-1].outcome == "pass"
    assert "m @ concurrency 1: ttft_ms_median regressed, read again, repetition 2 of at most 5" in logged
    transient.close()
    assert transient.pool.target.events == [("start", "m"), ("stop", "m")] * 2  # read again on a fresh start

    # A real regression repeats: the second look regresses too, and it is reported (no third run).
    slower, calls = counting_ttft_session(tmp_path, [t * 1.5 for t in BASE_TTFTS])
    with pytest.raises(PerfFailure, match="REGRESSED"):
        slower.bind(slower.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    assert len(calls) == 2 and slower.gates[-1].verdicts[0].status == "regressed"

    # A regression first read after an inconclusive look is read again too: reported where
    # the next start repeats it, a pass where it does not.
    steps = iter([[replace(INCONCLUSIVE, more_data=1.5)], [REGRESSED_AT_ONCE], [REGRESSED_AT_ONCE]])
    later, calls = counting_ttft_session(tmp_path, BASE_TTFTS, rule=lambda *args, **kwargs: next(steps))
    with pytest.raises(PerfFailure):
        later.bind(later.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    assert len(calls) == 3

    steps = iter([[replace(INCONCLUSIVE, more_data=1.5)], [REGRESSED_AT_ONCE], [replace(INCONCLUSIVE, status="pass")]])
    spell, calls = counting_ttft_session(tmp_path, BASE_TTFTS, rule=lambda *args, **kwargs: next(steps))
    spell.bind(spell.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    assert len(calls) == 3 and spell.gates[-1].outcome == "pass"

    # Each gate's looks are its own: a second assertion on a run the first one extended
    # (the seed suite's speedup test on the MTP test's runs) reads its regression again too.
    steps = iter(
        [[replace(INCONCLUSIVE, more_data=1.5)], [replace(INCONCLUSIVE, status="pass")], [REGRESSED_AT_ONCE]]
        + [[replace(INCONCLUSIVE, status="pass")]]
    )
    shared, calls = counting_ttft_session(tmp_path, BASE_TTFTS, rule=lambda *args, **kwargs: next(steps))
    bound = shared.bind(shared.run(BASE, workload), "t")
    bound.assert_no_regression("ttft_ms_median")
    assert len(calls) == 2
    bound.assert_no_regression("ttft_ms_median")
    assert len(calls) == 3 and shared.gates[-1].outcome == "pass"

    # Not with fixed repetitions, nor where the budget allows no other run.
    for cli in ({"llmperf_repetitions": "1"}, {"llmperf_max_repetitions": "1"}):
        fixed, calls = counting_ttft_session(
            tmp_path, BASE_TTFTS, **cli, rule=lambda *args, **kwargs: [REGRESSED_AT_ONCE]
        )
        with pytest.raises(PerfFailure):
            fixed.bind(fixed.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
        assert len(calls) == 1, cli


def test_each_repetition_after_the_first_runs_on_a_fresh_server_start(tmp_path):
    # What moves between server starts (the public figures: 1-20 % of throughput) is
    # part of the spread only if repetitions see different starts.
    workload = resolve_workload({"num_prompts": 10}, 1)
    recorder, _ = counting_ttft_session(tmp_path, BASE_TTFTS, llmperf_update_baselines=True)
    recorder.bind(recorder.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    recorder.close()
    assert recorder.pool.target.events == [("start", "m"), ("stop", "m")] * 5

    # an auto repetition added while inconclusive starts the server again too
    steps = iter([[replace(INCONCLUSIVE, more_data=1.5)], [replace(INCONCLUSIVE, status="pass")]])
    recorder.finish()
    added, _ = counting_ttft_session(
        tmp_path, NOISY_TTFTS, llmperf_max_repetitions="4", rule=lambda *args, **kwargs: next(steps)
    )
    added.bind(added.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    added.close()
    assert added.pool.target.events == [("start", "m"), ("stop", "m")] * 2

    # --llmperf-same-server: one start for all five
    same, _ = counting_ttft_session(
        tmp_path / "same", BASE_TTFTS, llmperf_update_baselines=True, llmperf_same_server=True
    )
    same.bind(same.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    same.close()
    assert same.pool.target.events == [("start", "m"), ("stop", "m")]


def test_auto_repetitions_stop_when_the_sessions_time_budget_is_spent(tmp_path):
    workload = resolve_workload({"num_prompts": 10}, 1)
    record_ttft_baseline(tmp_path, workload)
    clock = iter([1000.0, 1100.0])  # the first added repetition takes 100 s of the 90 s budget
    stuck, calls = counting_ttft_session(
        tmp_path,
        NOISY_TTFTS,
        llmperf_max_repetitions="4",
        llmperf_repetition_budget="90",
        rule=lambda *args, **kwargs: [replace(INCONCLUSIVE, more_data=1.5)],
        clock=lambda: next(clock),
    )
    with pytest.warns(UserWarning, match="inconclusive"):
        stuck.bind(stuck.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    assert len(calls) == 2  # one added within the budget; none after (4 would be allowed otherwise)
    assert stuck.added_seconds == pytest.approx(100.0)
    assert "auto repetitions stopped: the session's --llmperf-repetition-budget (90 s) is spent (100 s added)" in (
        stuck.gates[-1].message
    )


def test_fixed_repetitions_never_add_runs(tmp_path):
    workload = resolve_workload({"num_prompts": 10}, 1)
    record_ttft_baseline(tmp_path, workload, spread=True)
    noisy, calls = counting_ttft_session(tmp_path, NOISY_TTFTS, llmperf_repetitions="1")
    with pytest.warns(UserWarning, match="inconclusive"):
        noisy.bind(noisy.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    assert len(calls) == 1


ENGINE_PAGE = '# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{engine="0"} 0\n'


def test_a_base_server_carries_no_not_speculative_note_and_a_speculative_one_does(tmp_path):
    """Which notes a run keeps is decided by the spec-decode status, not by their text."""
    speeds = iter([100.0, 150.0])
    plain = lambda: replace(make_result(next(speeds)), metrics_before=ENGINE_PAGE, metrics_after=ENGINE_PAGE)  # noqa: E731
    perf, _, _ = make_session(tmp_path, [], measure=lambda *args: plain())
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
    recorder, _, _ = make_session(
        tmp_path, [], llmperf_update_baselines=True, measure=lambda *args: failing_result(100.0, failed=1)
    )
    with pytest.raises(PerfFailure, match=r"not recorded: invalid run: 1 of 4 failed: 1x HTTP 500: EngineCore"):
        recorder.bind(recorder.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    recorder.finish()
    assert not (tmp_path / "baselines" / "sim" / "m.json").exists()

    recorder.bind(recorder.run(BASE, workload), "t", error_budget="25%").assert_no_regression("decode_tok_s")
    recorder.finish()
    assert (tmp_path / "baselines" / "sim" / "m.json").exists()  # within a budget of one in four: judged

    broken, _, _ = make_session(
        tmp_path, [], llmperf_error_budget="1", measure=lambda *args: failing_result(100.0, failed=2)
    )
    with pytest.raises(PerfFailure) as failure:
        broken.bind(broken.run(BASE, workload), "t").assert_no_regression("decode_tok_s", "tpot_ms_median")
    assert [v.status for v in broken.gates[-1].verdicts] == ["invalid", "invalid"]
    assert "INVALID RUN" in str(failure.value) and "2 of 4 failed" in str(failure.value)
    assert "re-record" not in str(failure.value)  # a broken run is not a new level to accept


def test_a_run_where_nothing_completed_is_invalid_whatever_the_budget(tmp_path):
    workload = resolve_workload({"num_prompts": 4}, 8)
    perf, _, _ = make_session(
        tmp_path, [], llmperf_error_budget="100%", measure=lambda *args: failing_result(100.0, failed=4)
    )
    with pytest.raises(PerfFailure, match="invalid run: no request completed"):
        perf.bind(perf.run(MTP, workload), "t").assert_no_regression("acceptance_rate")


def lagging_result(decode_tok_s, lag):
    """A simulated run whose engine steps ended `lag` of a step late on average."""
    result = make_result(decode_tok_s)
    page = "# TYPE llmperf_sim:engine_step_seconds counter\nllmperf_sim:engine_step_seconds_total {}\n"
    page += "# TYPE llmperf_sim:engine_lag_seconds counter\nllmperf_sim:engine_lag_seconds_total {}\n"
    result.metrics_before, result.metrics_after = page.format(1.0, 0.1), page.format(11.0, 0.1 + 10 * lag)
    return result


def test_a_simulated_run_whose_engine_fell_behind_is_invalid_and_says_to_free_the_cores(tmp_path):
    workload = resolve_workload({"num_prompts": 4}, 8)

    def execute(endpoint, requests, workload, speed):  # at concurrency 4 within the bound: recorded
        return lagging_result(100.0, lag=0.8 if workload.concurrency == 8 else 0.2)

    perf, _, _ = make_session(tmp_path, [], llmperf_update_baselines=True, measure=execute)
    with pytest.raises(PerfFailure, match=r"invalid run: the simulator's engine loop ran 80% of a step behind"):
        perf.bind(perf.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    perf.bind(perf.run(BASE, resolve_workload({"num_prompts": 4}, 4)), "t").assert_no_regression("decode_tok_s")
    perf.finish()


def test_a_run_its_host_spoiled_is_made_again_once_and_judged_on_the_second(tmp_path):
    """An engine (or client) that fell behind measured the host, not the server: the run is
    made once more and the verdict reads that one, with a note; spoiled twice, invalid."""
    workload = resolve_workload({"num_prompts": 4}, 8)
    lines: list[str] = []
    made = iter([lagging_result(100.0, lag=0.8), lagging_result(90.0, lag=0.2)])  # at concurrency 8
    calls = []  # at concurrency 4: spoiled every time

    def execute(endpoint, requests, workload, speed):
        if workload.concurrency == 8:
            return next(made)
        calls.append(1)
        return lagging_result(100.0, lag=0.8)

    perf, _, _ = make_session(tmp_path, [], llmperf_update_baselines=True, log=lines.append, measure=execute)
    run = perf.run(BASE, workload)
    perf.bind(run, "t").assert_no_regression("decode_tok_s")  # recorded: a valid run
    assert [r.engine_lag() for r in run.results] == [pytest.approx(0.2)]
    assert run.value("decode_tok_s") == pytest.approx(90.0)  # the second run's figure
    assert "repetition 1 was made twice: the first time the simulator's engine loop ran 80% of a step" in (
        "; ".join(run.notes)
    )
    assert any("its host fell behind, the run is made again" in line for line in lines)

    with pytest.raises(PerfFailure, match=r"invalid run: the simulator's engine loop ran 80% of a step behind"):
        perf.bind(perf.run(BASE, resolve_workload({"num_prompts": 4}, 4)), "t").assert_no_regression("decode_tok_s")
    assert len(calls) == 2  # once again, not more
    perf.finish()


def test_a_run_whose_client_fell_behind_its_streams_is_invalid(tmp_path):
    workload = resolve_workload({"num_prompts": 4}, 8)
    behind = make_result(100.0)  # chunks 40 ms apart
    # a result recorded before the trimmed mean: judged on the plain mean
    behind.client_lag = {"probes": 40, "mean_s": 0.028, "p99_s": 0.05, "max_s": 0.06}
    assert behind.client_lag_share() == pytest.approx(0.7)
    fine = make_result(100.0)
    fine.client_lag = {"probes": 40, "mean_s": 0.0005, "p99_s": 0.002, "max_s": 0.003}
    # one stall of 1 s among 40 probes: a mean of 63 % of a gap, but the latest probes
    # aside the loop kept up (LagProbe.TRIM_SHARE): judged
    stalled = make_result(100.0)
    stalled.client_lag = {"probes": 40, "mean_s": 0.025, "trimmed_mean_s": 0.0005, "p99_s": 1.0, "max_s": 1.0}
    assert stalled.client_lag_share() == pytest.approx(0.0125)
    by_concurrency = {8: behind, 4: fine, 2: stalled}
    perf, _, _ = make_session(
        tmp_path,
        [],
        llmperf_update_baselines=True,
        measure=lambda endpoint, requests, workload, speed: by_concurrency[workload.concurrency],
    )
    with pytest.raises(
        PerfFailure, match=r"invalid run: the measuring client's event loop ran on average 70% of a gap"
    ):
        perf.bind(perf.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    perf.bind(perf.run(BASE, resolve_workload({"num_prompts": 4}, 4)), "t").assert_no_regression("decode_tok_s")
    perf.bind(perf.run(BASE, resolve_workload({"num_prompts": 4}, 2)), "t").assert_no_regression("decode_tok_s")
    perf.finish()


def test_a_run_whose_chunks_came_in_bursts_of_buffered_data_is_made_again_then_invalid(tmp_path):
    """Bursts are a client that was not scheduled (made again, like a host that fell behind)
    or a buffering proxy (bursty again: invalid)."""
    workload = resolve_workload({"num_prompts": 4}, 8)

    def bursty_result() -> RunResult:
        bursty = make_result(100.0)
        for record in bursty.records:  # read two at a time: every other gap is 0
            record.chunk_times = [t for t in record.chunk_times[1::2] for _ in (0, 1)]
        return bursty

    assert bursty_result().burst_share() == pytest.approx(0.5, abs=0.02)
    # a first gap of 0 (chat's role chunk with the first token) and a last one (the final chunk) are no burst
    edges = make_result(100.0)
    edges.config = {"endpoint": "chat"}  # a role chunk before the first token's: one chunk more than tokens
    for record in edges.records:
        t = record.chunk_times
        record.chunk_times = [t[0], *t[:-1], t[-2]]
    assert edges.burst_share() == 0.0
    made = {8: iter([bursty_result(), bursty_result()]), 4: iter([edges]), 2: iter([bursty_result(), edges])}
    perf, _, _ = make_session(
        tmp_path,
        [],
        llmperf_update_baselines=True,
        measure=lambda endpoint, requests, workload, speed: next(made[workload.concurrency]),
    )
    with pytest.raises(PerfFailure, match=r"invalid run: 49% of the gaps between chunks were 0 \(bound 25%\)"):
        perf.bind(perf.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    perf.bind(perf.run(BASE, resolve_workload({"num_prompts": 4}, 4)), "t").assert_no_regression("decode_tok_s")
    again = perf.run(BASE, resolve_workload({"num_prompts": 4}, 2))
    perf.bind(again, "t").assert_no_regression("decode_tok_s")  # judged on the second run
    assert "repetition 1 was made twice: the first time 49% of the gaps between chunks were 0" in "; ".join(again.notes)
    assert [next(m, None) for m in made.values()] == [None, None, None]  # each made as often as said, no more
    perf.finish()


def test_recording_a_metric_without_data_fails_and_says_what_was_recorded(tmp_path):
    workload = resolve_workload({"num_prompts": 4}, 8)
    recorder, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True)
    run = recorder.bind(recorder.run(MTP, workload), "t")
    with pytest.raises(PerfFailure) as failure:
        run.assert_no_regression("decode_tok_s", "acceptance_rate")
    message = str(failure.value)
    assert message.startswith("recorded decode_tok_s in baselines/sim/m-mtp.json (recording night 1 of 3); ")
    assert "not recorded, no data: acceptance_rate: no /metrics snapshots were captured around the run" in message
    recorder.finish()
    stored = json.loads(next((tmp_path / "baselines" / "sim").glob("*.json")).read_text())
    (entry,) = stored["concurrency"]["8"].values()
    assert "acceptance_rate" not in entry["metrics"]


# -- before any server starts ---------------------------------------------------------

from pytest_llmperf.baselines.outcome import SetupError  # noqa: E402
from pytest_llmperf.measuring.preflight import PlannedTest, check_before_start  # noqa: E402


def write_dataset(path, n, words=8):
    turn = " ".join(["word"] * words)
    records = [
        {"id": f"c{i}", "conversations": [{"from": "human", "value": turn}, {"from": "gpt", "value": turn}]}
        for i in range(n)
    ]
    path.write_text(json.dumps(records))
    return path


def options_for(tmp_path, **cli):
    cli = {"llmperf_sim": True, "llmperf_dataset": str(tmp_path / "data.json"), **cli}
    return resolve_options(lambda d: cli.get(d), lambda n: "")


def plan(num_prompts=4, concurrency=2, profile="full", servers=(BASE,), **declared):
    workload = resolve_workload({"num_prompts": num_prompts, **declared}, concurrency, profile)
    return PlannedTest(f"t.py::test[{num_prompts}]", servers, (workload,))


def test_the_dataset_is_loaded_once_before_any_server_and_handed_to_the_session(tmp_path):
    write_dataset(tmp_path / "data.json", 10)
    options = options_for(tmp_path)
    datasets = check_before_start(options, tmp_path, [plan(num_prompts=8, warmup=2)], folders=["sim"])
    [(key, dataset)] = datasets.items()
    assert key == ("sharegpt", str(tmp_path / "data.json")) and len(dataset.conversations) == 10
    perf = PerfSession(options, FakeTarget(), tmp_path, datasets=datasets, runner=FakeRunner())
    assert perf.book.dataset_for(plan().workloads[0]) is dataset


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "--llmperf-dataset ({path}): configured dataset not found; looked at: {path}"),
        ("", "--llmperf-dataset ({path}): {path}: file is empty; point --llmperf-dataset at a ShareGPT V3 JSON file"),
        (b"\xff\xfe\x00binary", "{path}: not UTF-8 text"),
        ("hello", "{path}: expected a JSON array '[' at the top level, found 'h' (not JSON)"),
        ('{"conversations": []}', "found a JSON object (JSON Lines? ShareGPT V3 is one array)"),
        ("[1]", "{path}: record 0 at byte 1: expected an object, found int"),
        ("[]", "dataset {path}: no conversation with two or more turns (0 records read), nothing to send"),
    ],
)
def test_a_missing_empty_binary_or_unparseable_dataset_is_a_setup_error_with_the_fix(tmp_path, content, message):
    path = tmp_path / "data.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(SetupError) as exc:
        check_before_start(options_for(tmp_path), tmp_path, [plan()], folders=["sim"])
    assert message.format(path=path) in str(exc.value)
    assert "\n" not in str(exc.value)


def test_a_directory_for_the_dataset_is_refused(tmp_path):
    (tmp_path / "data.json").mkdir()
    with pytest.raises(SetupError, match="data.json exists but is not a file"):
        check_before_start(options_for(tmp_path), tmp_path, [plan()], folders=["sim"])


def test_too_few_prompts_for_the_largest_workload_names_the_test_and_the_real_knobs(tmp_path):
    write_dataset(tmp_path / "data.json", 10)
    plans = [plan(num_prompts=5), plan(num_prompts=9, warmup=2), plan(num_prompts=20)]
    with pytest.raises(SetupError) as exc:
        check_before_start(options_for(tmp_path), tmp_path, plans, folders=["sim"])
    assert str(exc.value) == (
        "t.py::test[20] needs 22 prompts at concurrency 2 (20 measured + 2 warm-up, profile full) but dataset "
        "data.json has 10 conversations (1 more test(s) need more than it has); lower num_prompts= (or warmup=) "
        "in its llmperf marker, run a smaller --llmperf-profile, or point --llmperf-dataset at a larger file"
    )
    assert "oversample" not in str(exc.value)
    # The profile's workload is what counts: smoke sends at most 16 prompts at concurrency 2.
    write_dataset(tmp_path / "data.json", 18)
    check_before_start(options_for(tmp_path), tmp_path, [plan(num_prompts=100, profile="smoke")], folders=["sim"])
    # A test whose concurrency collection cannot tell plans no workload: checked when it runs.
    check_before_start(options_for(tmp_path), tmp_path, [PlannedTest("t.py::free", (BASE,))], folders=["sim"])


def test_fewer_prompts_passing_the_length_filters_fail_the_run_naming_the_knobs(tmp_path, monkeypatch):
    """Only the server's token counts tell how many pass the filters: found when it runs."""
    from pytest_llmperf.workload import token_counts

    approx = (token_counts.approx_count_tokens, "approx")  # the fake server has no /tokenize
    monkeypatch.setattr(token_counts, "token_counter_for", lambda *args, **kwargs: approx)
    path = tmp_path / "data.json"
    records = [
        {"conversations": [{"from": "human", "value": "hi " * n}, {"from": "gpt", "value": "word " * 10}]}
        for n in (1, 1, 1, 8, 8, 8)  # a one-word prompt is under min_len=4 tokens
    ]
    path.write_text(json.dumps(records))
    perf = PerfSession(options_for(tmp_path), FakeTarget(), tmp_path, runner=FakeRunner())
    with pytest.raises(SetupError) as exc:
        perf.run(BASE, resolve_workload({"num_prompts": 4, "warmup": 1}, 2))
    assert str(exc.value).startswith(
        "org/m @ concurrency 2: 5 prompts needed (4 measured + 1 warm-up) but only 3 of 6 conversations in "
        "data.json pass the length filters (min_len=4, max_prompt_len=1024, max_total_len=2048; tokens counted "
        "by approx); lower num_prompts= (or warmup=) in the llmperf marker"
    )
    perf.close()


def test_corrupt_baseline_files_the_tests_read_are_found_before_start_naming_file_and_fix(tmp_path):
    write_dataset(tmp_path / "data.json", 10)
    options = options_for(tmp_path)
    sim = tmp_path / "baselines" / "sim"
    sim.mkdir(parents=True)
    (sim / "m.json").write_text('{"format": 2, "concurrency": {')
    (sim / "unrelated.json").write_text("not read by these tests")
    with pytest.raises(SetupError) as exc:
        check_before_start(options, tmp_path, [plan()], folders=["sim"])
    assert str(exc.value) == (
        "baseline baselines/sim/m.json: not valid JSON (line 1, column 31: Expecting property name enclosed in "
        "double quotes); the tests of m read it: fix it, or delete it and record again with --update-baselines"
    )
    check_before_start(options, tmp_path, [plan(servers=(ServerSpec(name="x", model="org/x"),))], folders=["sim"])

    (sim / "m.json").write_text(json.dumps({"format": 3, "concurrency": {}, "server": "m", "target": "sim"}))
    (tmp_path / "baselines" / "published").mkdir()
    (tmp_path / "baselines" / "published" / "m-mtp.json").write_text("[]")
    with pytest.raises(SetupError) as exc:
        check_before_start(options, tmp_path, [plan(servers=(MTP, BASE))], folders=["sim"])
    assert str(exc.value).splitlines() == [
        "baseline baselines/sim/m.json: unsupported format 3 (this plugin reads format 1 or 2); the tests of m "
        "read it: fix it, or delete it and record again with --update-baselines",
        "published figures baselines/published/m-mtp.json: expected a JSON object at the top level, got list; "
        "fix it by hand (hand-curated, never recorded), or delete it",
    ]


def test_where_the_folder_is_known_only_once_a_gpu_runs_every_folder_is_checked(tmp_path):
    write_dataset(tmp_path / "data.json", 10)
    broken = tmp_path / "baselines" / "NVIDIA-H200" / "m.json"
    broken.parent.mkdir(parents=True)
    broken.write_text("")
    options = options_for(tmp_path)
    check_before_start(options, tmp_path, [plan()], folders=["sim"])  # the sim's folder only
    with pytest.raises(SetupError, match="baseline baselines/NVIDIA-H200/m.json: empty file; the tests of m"):
        check_before_start(options, tmp_path, [plan()], folders=None)


SECRET_SPEC = ServerSpec(name="m", model="org/m", args=("--api-key", "key-1234"), env={"DB_PASSWORD": "pw-5678"})
LOG = """INFO loading weights
INFO serving with --api-key key-1234
ERROR EngineCore died: CUDA error: an illegal memory access (auth Bearer abcdefghijklmnop, pw-5678)
"""


class DyingTarget(FakeTarget):
    """Its server's log holds secrets; `server_down` (the test's) says it died."""

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
    perf = fake_session(
        tmp_path,
        cli,
        target,
        measure=lambda *args: failing_result(100.0, failed=3),
        server_down=lambda endpoint: "container m-1 exited with code 137 (killed: out of memory)",
    )
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
    asked = []
    perf, target, _ = make_session(
        tmp_path,
        [],
        llmperf_error_budget="100%",
        llmperf_inconclusive="pass",
        server_down=lambda endpoint: asked.append(endpoint.model),  # None: it answers
        measure=lambda *args: failing_result(100.0, failed=1),
    )
    run = perf.run(BASE, resolve_workload({"num_prompts": 4}, 8))
    assert asked == ["org/m"] and run.server_death is None and run.server_log == []
    assert invalid_reason(run, parse_budget("100%")) is None


def test_a_fresh_server_is_warmed_up_once_before_its_first_run(tmp_path):
    prompts = [object() for _ in range(7)]  # 4 measured, 3 of their own for warm-ups
    sent = []

    def send_warmup(endpoint, given, config):
        sent.append((endpoint.model, calls[:], given, config.concurrency, config.num_prompts, config.max_tokens))
        return {"requests": 6, "completed": 6, "failed": 0, "output_tokens": 600, "duration": 2.0}

    perf, target, calls = make_session(
        tmp_path,
        [100.0, 100.0, 100.0],
        llmperf_server_warmup="6",
        prompts=lambda endpoint, workload: prompts,
        warmup=send_warmup,
    )
    four, eight = resolve_workload({"num_prompts": 4, "warmup": 3}, 4), resolve_workload({"num_prompts": 4}, 8)
    first, second = perf.run(BASE, four), perf.run(BASE, eight)
    other = perf.run(MTP, four)
    # once per started server, before anything is measured on it, all at once, on prompts beyond the measured ones
    assert [(m, before, conc, n, tokens) for m, before, _, conc, n, tokens in sent] == [
        ("org/m", [], 6, None, 256),
        ("org/m", ["org/m", "org/m"], 6, None, 256),
    ]
    assert sent[0][2] == [prompts[4], prompts[5], prompts[6], prompts[4], prompts[5], prompts[6]]
    # its figures in real time, on the first run of the server only
    assert first.server_warmup == {
        "requests": 6,
        "completed": 6,
        "failed": 0,
        "duration_s": 2.0,
        "output_tok_s": 300.0,
    }
    assert second.server_warmup is None and other.server_warmup is not None
    assert target.events[:2] == [("start", "m"), ("stop", "m")]


def test_each_fresh_start_of_a_repetition_is_warmed_up_too(tmp_path):
    warmed = []

    def send_warmup(endpoint, given, config):
        warmed.append(len(calls))  # how many measured runs came before it
        return {"requests": 2, "completed": 2, "failed": 0, "output_tokens": 200, "duration": 1.0}

    perf, target, calls = make_session(
        tmp_path,
        [100.0, 101.0, 99.0],
        llmperf_server_warmup="2",
        llmperf_repetitions="3",
        prompts=lambda endpoint, workload: [object() for _ in range(6)],
        warmup=send_warmup,
    )
    perf.run(BASE, resolve_workload({"num_prompts": 4}, 4))
    perf.close()
    assert target.events == [("start", "m"), ("stop", "m")] * 3
    assert warmed == [0, 1, 2]  # each start warmed before its run


def test_a_server_that_dies_during_a_repetitions_warm_up_ends_the_repetitions(tmp_path):
    answers = iter([{"requests": 2, "completed": 2, "failed": 0, "output_tokens": 200, "duration": 1.0}])
    perf, target, calls = make_session(
        tmp_path,
        [100.0, 101.0, 99.0],
        llmperf_server_warmup="2",
        llmperf_repetitions="3",
        prompts=lambda endpoint, workload: [object() for _ in range(6)],
        warmup=lambda *args: next(answers, {"requests": 2, "completed": 0, "failed": 2, "duration": 1.0}),
        server_down=lambda endpoint: "/health answers 503",
    )
    run = perf.run(BASE, resolve_workload({"num_prompts": 4}, 4))
    assert len(calls) == 1 and len(run.results) == 1
    assert run.server_death == "server died during its warm-up (2 of 2 failed): /health answers 503"
    assert invalid_reason(run, parse_budget("0")).startswith("server died during its warm-up")


def test_the_default_server_warmup_is_two_waves_of_the_specs_max_num_seqs(tmp_path):
    sent = []
    perf, _, _ = make_session(
        tmp_path,
        [100.0, 100.0],
        prompts=lambda endpoint, workload: [object() for _ in range(80)],
        warmup=lambda endpoint, given, config: sent.append((len(given), config.concurrency)),
    )
    small = ServerSpec(name="small", model="org/small", args=("--max-num-seqs", "8", "--enforce-eager"))
    perf.run(small, resolve_workload({"num_prompts": 4}, 4))
    perf.run(BASE, resolve_workload({"num_prompts": 4}, 4))  # no --max-num-seqs: the profile's 64
    assert sent == [(16, 16), (64, 64)]


def test_server_warmup_zero_sends_nothing(tmp_path):
    perf, _, _ = make_session(
        tmp_path,
        [100.0],
        llmperf_server_warmup="0",
        warmup=lambda *args: pytest.fail("no server warm-up was asked for"),
    )
    assert perf.run(BASE, resolve_workload({"num_prompts": 4}, 8)).server_warmup is None


def capped_result(decode_tok_s, peak, waiting):
    """A run whose server ran at most `peak` requests at once, `waiting` queued."""
    result = make_result(decode_tok_s, n=32)
    result.config = {"concurrency": 8}
    result.running = [[0.5 * i, 8, peak, waiting] for i in range(1, 5)]
    return result


def test_a_run_whose_server_never_reached_the_concurrency_is_invalid_and_not_recorded(tmp_path):
    workload = resolve_workload({"num_prompts": 32}, 8)
    updater, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True)
    updater.bind(updater.run(BASE, workload), "t").assert_no_regression("decode_tok_s")

    updater.finish()
    capped, _, _ = make_session(tmp_path, [], measure=lambda *args: capped_result(200.0, peak=4, waiting=4))
    with pytest.raises(PerfFailure) as failure:
        capped.bind(capped.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    message = str(failure.value)
    assert "INVALID RUN" in message
    assert "at most 4 requests running at once" in message and "--max-num-seqs >= 8" in message

    recorder, _, _ = make_session(
        tmp_path, [], measure=lambda *args: capped_result(200.0, peak=4, waiting=4), llmperf_update_baselines=True
    )
    with pytest.raises(PerfFailure, match="not recorded: invalid run: the server never ran the run's concurrency"):
        recorder.bind(recorder.run(BASE, workload), "t").assert_no_regression("decode_tok_s")

    recorder.finish()
    full, _, _ = make_session(tmp_path, [], measure=lambda *args: capped_result(100.0, peak=8, waiting=0))
    full.bind(full.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    assert full.gates[-1].outcome == "pass"


@pytest.mark.parametrize(
    "samples, name, reason",
    [
        ({}, "ttfa_ms_median", "no reply carried reasoning: it needs a chat run (endpoint='chat')"),
        ({"answered": [None]}, "reasoning_share", "of a server that streams reasoning (vLLM with --reasoning-parser)"),
        ({"answered": [0]}, "ttfa_ms_p90", "no reply got past its reasoning to answer text: raise max_tokens"),
    ],
)
def test_a_missing_reasoning_figure_says_why(samples, name, reason):
    run = MeasuredRun(
        server=ServerSpec(name="m", model="org/m"),
        workload=resolve_workload({"num_prompts": 4}, 1),
        results=[SimpleNamespace(completed=4)],  # type: ignore[list-item]
        samples=samples,
        provenance={},
    )
    assert reason in no_data_reason(run, name)


def goodput_session(tmp_path, ttfts, **cli):
    """A session whose runs are `jittered_result(ttfts)` with the workload's config (its SLOs)."""

    def execute(endpoint, requests, workload, speed):
        result = jittered_result(ttfts)
        result.config = workload.run_config().as_dict()  # as run_benchmark records it
        return result

    perf, _, _ = make_session(tmp_path, [], measure=execute, **cli)
    return perf


def test_goodput_at_slos_is_recorded_under_them_and_a_slower_ttft_regresses_it(tmp_path):
    # 24 requests: at 12 the paired noise of a halved goodput is too wide to claim at 99 %
    workload = resolve_workload({"num_prompts": 24, "slos": "ttft:500"}, 1)
    recorder = goodput_session(tmp_path, [0.2, 0.3, 0.25, 0.35] * 6, llmperf_update_baselines=True)
    recorder.bind(recorder.run(BASE, workload), "t").assert_no_regression("request_goodput", "slo_attainment")
    recorder.finish()
    (key,) = json.loads((tmp_path / "baselines" / "sim" / "m.json").read_text())["concurrency"]["1"]
    assert "slos=ttft:500" in key
    (entry,) = json.loads((tmp_path / "baselines" / "sim" / "m.json").read_text())["concurrency"]["1"].values()
    assert entry["metrics"]["slo_attainment"]["value"] == 1.0
    assert entry["metrics"]["request_goodput"]["value"] == 1.0  # 24 good requests over 24 s

    judge = goodput_session(tmp_path, [0.6, 0.3, 0.7, 0.35] * 6)  # half now miss the 500 ms TTFT
    run = judge.bind(judge.run(BASE, workload), "t")
    assert (run.value("slo_attainment"), run.value("request_goodput")) == (0.5, 0.5)
    with pytest.raises(PerfFailure, match="regressed"):
        run.assert_no_regression()  # with SLOs the default gate holds goodput and attainment
    verdicts = {v.metric: v for v in judge.gates[-1].verdicts}
    assert set(verdicts) == {"steady_decode_tok_s", "request_goodput", "slo_attainment"}
    assert verdicts["slo_attainment"].status == "regressed" and verdicts["request_goodput"].status == "regressed"
    assert verdicts["slo_attainment"].noise > 0  # the paired rows' estimate, at the workload's SLOs


def test_goodput_without_slos_is_no_data_saying_how_to_give_them(tmp_path):
    perf = goodput_session(tmp_path, [0.2] * 4)
    run = perf.bind(perf.run(BASE, resolve_workload({"num_prompts": 4}, 1)), "t")
    with pytest.raises(PerfFailure, match="NO DATA") as failure:
        run.assert_no_regression("request_goodput")
    assert "no SLOs were given, so there is no goodput: set slos='ttft:500 tpot:50'" in str(failure.value)


def test_a_change_is_claimed_at_the_alarm_confidence_and_a_pass_at_the_confidence(tmp_path):
    workload = resolve_workload({"num_prompts": 4}, 8)
    updater, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True)
    updater.bind(updater.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    updater.finish()
    for alarm, speed, status, at in [
        (None, 90.0, "regressed", 0.99),  # the default: 99 % for a claimed change
        ("0.9", 90.0, "regressed", 0.9),  # --llmperf-alarm-confidence
        ("0.9", 100.0, "pass", 0.95),  # a pass at --llmperf-confidence, whatever the alarm's
    ]:
        perf, _, _ = make_session(tmp_path, [speed], **({"llmperf_alarm_confidence": alarm} if alarm else {}))
        try:
            perf.bind(perf.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
        except PerfFailure:
            pass
        verdict = perf.gates[-1].verdicts[0]
        assert (verdict.status, verdict.confidence) == (status, at)


@pytest.mark.parametrize("n, status", [(4, "inconclusive"), (10, "regressed")])
def test_a_ttft_median_over_too_few_requests_is_not_judged(tmp_path, n, status):
    """The fewest requests a run on either side completed reach compare: a median of four
    requests reads inconclusive whatever it moved (and auto would add no run for it)."""
    workload = resolve_workload({"num_prompts": n}, 8)
    updater, _, _ = make_session(
        tmp_path, [], llmperf_update_baselines=True, measure=lambda *args: make_result(100.0, n=n)
    )
    updater.bind(updater.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    updater.finish()
    perf, _, _ = make_session(tmp_path, [], measure=lambda *args: make_result(50.0, n=n))  # TTFT doubled
    try:
        perf.bind(perf.run(BASE, workload), "t").assert_no_regression("ttft_ms_median")
    except PerfFailure:
        pass
    verdict = perf.gates[-1].verdicts[0]
    assert verdict.status == status
    assert verdict.change is not None and verdict.change.relative == pytest.approx(1.0)
    if status == "inconclusive":
        assert "a statistic over 4 requests a run is not judged (it needs 10" in verdict.hint


def stalled_result(n=4, cap=60.0):
    """n requests in flight, every one cut by the time cap before it finished: nothing completed."""
    records = [
        RequestRecord(index=i, send_time=0.0, chunk_times=[1.0], end_time=cap, cut_at_cap=True, error="time cap")
        for i in range(n)
    ]
    return RunResult(config={}, records=records, duration=cap, attempted=n, stop_reason="time cap")


def test_auto_makes_a_run_that_completed_nothing_again_once_on_a_fresh_start(tmp_path):
    """A start too slow to finish one request in the cap, its server alive, reads like a broken
    image; auto makes it again once on a fresh start and judges the runs that completed."""
    workload = resolve_workload({"num_prompts": 4}, 8)
    recorder, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True)
    recorder.bind(recorder.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    recorder.finish()
    recorder.close()

    results = iter([stalled_result(), make_result(100.0)])
    logged: list[str] = []
    perf, target, _ = make_session(
        tmp_path, [], llmperf_repetitions="auto", measure=lambda *args: next(results), log=logged.append
    )
    perf.bind(perf.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    assert perf.gates[-1].outcome == "pass" and perf.gates[-1].verdicts[0].measured == pytest.approx(100.0)
    assert any(
        "no request completed, its server alive: made again on a fresh start, repetition 2" in line for line in logged
    )
    perf.close()
    assert target.events == [("start", "m"), ("stop", "m")] * 2

    # stalled twice: the image is broken, not the start; invalid, and no third run
    results = iter([stalled_result(), stalled_result(), make_result(100.0)])
    broken, _, _ = make_session(tmp_path, [], llmperf_repetitions="auto", measure=lambda *args: next(results))
    with pytest.raises(PerfFailure, match="no request completed"):
        broken.bind(broken.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    assert len(broken.gates[-1].verdicts) == 1 and broken.gates[-1].verdicts[0].status == "invalid"
    assert next(results).completed == 4  # the third was never asked for
    broken.close()

    # a fixed number of repetitions is what was asked: no run is added
    once, _, _ = make_session(tmp_path, [], llmperf_repetitions="1", measure=lambda *args: stalled_result())
    with pytest.raises(PerfFailure, match="no request completed"):
        once.bind(once.run(BASE, workload), "t").assert_no_regression("decode_tok_s")
    once.close()
