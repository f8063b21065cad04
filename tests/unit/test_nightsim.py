"""benchmarks/nightsim.py and nights.py: the virtual-clock runner gives the session the
engine's own figures, and a night of nights.py is a pytest session of the seed suite."""

import json
import shutil
import sys
from pathlib import Path

import pytest

from pytest_llmperf import ServerSpec
from pytest_llmperf.judging.session import PerfSession
from pytest_llmperf.metrics.steady import steady_tok_s
from pytest_llmperf.options import resolve_options
from pytest_llmperf.sim.virtual import run_virtual
from pytest_llmperf.workload.config import GRACE_SECONDS
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.workload import resolve_workload

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import nights  # noqa: E402
from nightsim import StartNoise, VirtualRunner, VirtualTarget, sim_config  # noqa: E402

MTP = ServerSpec(name="q-mtp", model="Qwen/Qwen3.6-27B-FP8", args=("--max-num-seqs", "32")).with_speculative(
    {"method": "mtp", "num_speculative_tokens": 3}
)


def prompts(count):
    return [SampledRequest(i, " ".join(f"w{i}x{j}" for j in range(20 + 7 * i)), 20 + 7 * i, 256) for i in range(count)]


def test_a_runs_figures_come_out_of_the_session_as_the_engine_made_them(tmp_path):
    options = resolve_options(lambda dest: {"llmperf_sim": True, "llmperf_repetitions": "1"}.get(dest), lambda n: "")
    noise = StartNoise({8: 1.07}, acceptance=0.95)
    target = VirtualTarget(lambda spec, start: noise)
    requests = prompts(40)
    perf = PerfSession(options, target, tmp_path, runner=VirtualRunner(), prompts=lambda endpoint, workload: requests)
    workload = resolve_workload({"num_prompts": 24, "max_tokens": 64, "max_seconds": 10}, 8)
    run = perf.run(MTP, workload)
    endpoint = perf.pool.endpoint(MTP)  # the server the run ran on, still running
    config = sim_config(endpoint, 8)
    assert config.step_time_scale == pytest.approx(1.07) and config.acceptance_scale == pytest.approx(0.95)
    engine = run_virtual(
        config,
        [q.prompt_len for q in requests[:24]],
        8,
        64,
        num_prompts=24,
        max_seconds=10,
        prompts=[q.prompt for q in requests[:24]],
        grace_seconds=GRACE_SECONDS,
    )
    figures = run.figures
    assert engine.completed < 24 and run.results[0].attempted == engine.completed + len(engine.cut_spans)
    assert run.completed == engine.completed
    assert figures["acceptance_rate"] == pytest.approx(engine.accepted / engine.draft_tokens)
    assert figures["acceptance_length"] == pytest.approx(1 + engine.accepted / engine.drafts)
    assert figures["tpot_ms_median"] == pytest.approx(engine.tpot_median * 1000)
    assert figures["ttft_ms_median"] == pytest.approx(engine.ttft_median * 1000)
    assert figures["steady_decode_tok_s"] == pytest.approx(steady_tok_s(engine.spans, 8))
    assert figures["decode_tok_s"] == pytest.approx(engine.decode_tok_s)
    # the run is valid: the token account agrees, the cut requests are the cap's, not failures
    assert perf.gate.reference.invalid(run, None, options.error_budget) is None
    assert run.provenance["sim_noise"] == noise.to_dict()
    perf.close()


def test_a_start_draw_reaches_every_concurrency_and_carries_a_changes_simulator_flags():
    noise = StartNoise({2: 1.10, 8: 0.99, 32: 1.02}, sim_args=("--sim-prefill-time-scale", "1.2"))
    assert noise.step_at(8) == pytest.approx(0.99) and noise.step_at(64) == pytest.approx(1.02)
    assert noise.step_at(1) == pytest.approx(1.10)  # beyond the ends: the nearest draw
    assert noise.step_at(16) == pytest.approx((0.99 * 1.02) ** 0.5)  # halfway between 8 and 32 in log concurrency
    assert StartNoise().step_at(16) == 1.0
    target = VirtualTarget(lambda spec, start: noise)
    with target.start(MTP) as endpoint:
        config = sim_config(endpoint, 16)
    assert config.prefill_time_scale == 1.2 and config.step_time_scale == pytest.approx(noise.step_at(16))
    assert StartNoise.from_dict(noise.to_dict()) == noise


CONFTEST = '''
import json
import sys
from pathlib import Path

sys.path.insert(0, {benchmarks!r})

import nights
from nightsim import VirtualRunner, VirtualTarget
from pytest_llmperf.plugin import state_of
from pytest_llmperf.judging.session import PerfSession


def pytest_collection_finish(session):
    """The plugin's session, made as the plugin makes it, with the virtual target and runner."""
    config = session.config
    given = json.loads(Path(config.rootpath, "night.json").read_text())
    model = nights.NoiseModel.load()
    changes = {{name: nights.Change(**c) for name, c in given["changes"].items()}}
    target = VirtualTarget(model.draw(nights.NightNoise(**given["noise"]), changes))
    runner = VirtualRunner()
    state = state_of(config)
    options = state.options
    # the plugin's loaded datasets where it loaded them before the session, else loaded as its book would
    datasets = state.datasets or {{
        (options.dataset_name, options.dataset): nights.load_dataset(
            options.dataset_name, options.dataset, Path(config.rootpath)
        )
    }}
    state.session = PerfSession(
        options,
        target,
        Path(config.rootpath),
        datasets=datasets,
        runner=runner,
        prompts=nights.SeedPrompts(next(iter(datasets.values()))),
        server_down=lambda endpoint: None,
        clock=lambda: runner.gpu_seconds + model.start_s * sum(target.starts.values()),
    )


def pytest_sessionfinish(session):
    perf = state_of(session.config).session
    Path(session.config.rootpath, "gates.json").write_text(json.dumps(nights.verdict_rows(perf.gates)))
'''

# One model at one concurrency: its three tests (base, MTP, speedup).
CELLS = [
    "tests/perf/test_seed_suite.py::test_base_decode[qwen3.6-27b-fp8-8]",
    "tests/perf/test_seed_suite.py::test_mtp_decode_and_acceptance[qwen3.6-27b-fp8-mtp-8]",
    "tests/perf/test_seed_suite.py::test_mtp_speedup[qwen3.6-27b-fp8-mtp-8]",
]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pytest_llmperf.workload.dataset.DatasetTruncatedWarning")
def test_a_night_of_nights_py_is_the_pytest_session_of_the_seed_suite(pytester, tmp_path):
    """The same night (noise draw, a 10 % slower MTP server, a noisier night than the
    recording's) judged by pytest running the seed suite with the plugin, and by
    nights.night: the same verdicts, figure for figure, and the same test outcomes. Both read
    one history of earlier sessions, so the nightly profile's --llmperf-confirm 2 reads the
    change as suspect and the spread between sessions widens the noise alike."""
    pytester.makeconftest((ROOT / "conftest.py").read_text() + CONFTEST.format(benchmarks=str(ROOT / "benchmarks")))
    suite = pytester.path / "tests" / "perf"
    suite.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "perf" / "test_seed_suite.py", suite / "test_seed_suite.py")
    model = nights.NoiseModel.load()
    # importlib: the outer session (CI collects the whole tree) already holds a module named test_seed_suite
    flags = [
        "--llmperf-sim",
        "--llmperf-profile=nightly",
        "--llmperf-history=history.jsonl",
        "-p",
        "no:randomly",
        "--import-mode=importlib",
    ]

    def night_file(noise, changes):
        (pytester.path / "night.json").write_text(
            json.dumps({"noise": noise.__dict__, "changes": {k: c.__dict__ for k, c in changes.items()}})
        )

    night_file(model.night(7, "record", recording=True), {})
    recorded = pytester.runpytest_inprocess(*flags, "--update-baselines", *CELLS)
    recorded.assert_outcomes(passed=3)
    # Six earlier sessions 1 % either side of the recording, so the spread between sessions counts.
    recording = (pytester.path / "history.jsonl").read_text().splitlines()
    earlier = [
        json.dumps({**line, "outcome": "pass", "value": line["value"] * (1 + 0.01 * (-1) ** k)})
        for k in range(6)
        for line in map(json.loads, recording)
    ]
    (pytester.path / "history.jsonl").write_text("\n".join([*recording, *earlier]) + "\n")
    baselines = tmp_path / "judged"
    shutil.copytree(pytester.path / "baselines", baselines / "baselines")
    shutil.copy(pytester.path / "history.jsonl", baselines / "history.jsonl")  # the same history

    noise = nights.NightNoise("7:n0", shift=1.004, scale=3.0)
    changes = {"qwen3.6-27b-fp8-mtp": nights.Change(step=1 / 0.90)}
    night_file(noise, changes)
    judged = pytester.runpytest_inprocess(*flags, *CELLS)
    by_pytest = json.loads((pytester.path / "gates.json").read_text())

    items = [item for item in nights.seed_items() if item.nodeid in CELLS]
    assert [item.nodeid for item in items] == CELLS  # the plugin's order
    options = nights.night_options()
    dataset = nights.load_dataset(options.dataset_name, options.dataset, ROOT)
    night = nights.night(
        baselines,
        items,
        model,
        noise,
        nights.SeedPrompts(dataset),
        {(options.dataset_name, options.dataset): dataset},
        changes=changes,
        history=baselines / "history.jsonl",
    )
    assert json.loads(json.dumps(nights.verdict_rows(night.gates))) == by_pytest
    statuses = {row[4] for row in by_pytest}
    assert "suspect" in statuses  # the change was seen: the comparison is not of passes only
    notes = {v.note for g in night.gates for v in g.verdicts}
    assert "tonight's side: the spread of the last 7 sessions' values" in notes  # the history's spread judged
    outcomes = judged.parseoutcomes()
    assert outcomes.get("failed", 0) == sum(o == "failed" for o in night.outcomes.values())
    assert outcomes.get("passed", 0) == sum(o != "failed" for o in night.outcomes.values())


# paired_power.py's trial at concurrency 8: the 27B model's three tests (base, MTP, speedup).
PAIRED_CELLS = CELLS


@pytest.mark.filterwarnings("ignore::pytest_llmperf.workload.dataset.DatasetTruncatedWarning")
def test_a_trial_of_paired_power_py_is_the_plugins_paired_session(pytester, tmp_path):
    """One trial of benchmarks/paired_power.py (NEW 5 % slower, at most 4 blocks) and pytest
    running the same three seed tests with the plugin in paired mode
    (--llmperf-against-sim-args with --llmperf-sim-args), on the same virtual servers and
    noise, beside the same recorded baselines folder: the same verdicts, figure for figure,
    and the same test outcomes; and NEW ran slower than OLD, so the flags reached its servers."""
    import paired_power

    from pytest_llmperf.judging.read_again import CONFIRMING_RUNS

    bench = paired_power.PairedBench.load(tmp_path / "bench", stored_reps=2, flags={"llmperf_max_repetitions": "4"})
    scale = paired_power.SCENARIOS["NEW 5% slower"]
    trial = bench.trial(8, scale, 0)
    assert [item.nodeid for item in bench.paired_items(8)] == PAIRED_CELLS
    # A B, B A, then what auto added, and a flagged cell's fresh blocks beyond the cap
    assert 2 <= trial.blocks <= 4 + CONFIRMING_RUNS

    pytester.makeconftest((ROOT / "conftest.py").read_text() + CONFTEST.format(benchmarks=str(ROOT / "benchmarks")))
    suite = pytester.path / "tests" / "perf"
    suite.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "perf" / "test_seed_suite.py", suite / "test_seed_suite.py")
    shutil.copytree(bench.folder(8, 0) / "baselines", pytester.path / "baselines")
    noise = bench.model.night(bench.seed, "paired:8:0")  # the trial's
    (pytester.path / "night.json").write_text(json.dumps({"noise": noise.__dict__, "changes": {}}))
    result = pytester.runpytest_inprocess(
        "--llmperf-sim",
        "--llmperf-profile=nightly",
        "--llmperf-history=off",
        "--llmperf-max-repetitions=4",
        "--llmperf-against-sim-args=defaults",
        f"--llmperf-sim-args=--sim-step-time-scale {scale!r}",
        "-p",
        "no:randomly",
        "--import-mode=importlib",
        *PAIRED_CELLS,
    )
    by_pytest = json.loads((pytester.path / "gates.json").read_text())
    assert json.loads(json.dumps(nights.verdict_rows(trial.gates))) == by_pytest
    assert len(by_pytest) == 8  # base 3, MTP 4, speedup 1
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == sum(o == "failed" for o in trial.outcomes.values())
    assert outcomes.get("passed", 0) == sum(o != "failed" for o in trial.outcomes.values())
    decode = trial.verdicts()["steady_decode_tok_s"]
    assert -0.15 < decode.change.relative < -0.02  # NEW's servers ran with its flags (OLD's unchanged)
