"""benchmarks/paired_nights.py (nights.py --paired): a paired night is the plugin's paired
pytest session of the seed suite, OLD and NEW drawing from one box's night, the change on
NEW alone; and a recording's paired rates are the shares of its nights."""

import dataclasses
import json
import shutil
import sys
from pathlib import Path

import pytest

from pytest_llmperf import ServerSpec

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import nights  # noqa: E402
import paired_nights  # noqa: E402
import recordings  # noqa: E402
from nightsim import VirtualRunner, VirtualTarget  # noqa: E402

from tests.unit.test_nightsim import CELLS, CONFTEST  # noqa: E402

BASE = ServerSpec(name="q", model="Qwen/Qwen3.6-27B-FP8")


def test_a_paired_nights_draw_gives_old_and_new_the_nights_box_and_new_alone_the_change():
    model = nights.NoiseModel.load()
    noise = nights.NightNoise("3:n0", shift=1.02, scale=1.0)
    draw = paired_nights.paired_draw(model, noise, {"q": nights.Change(step=2.0)})
    new = dataclasses.replace(BASE, sim_args=tuple(paired_nights.NEW_FLAGS.split()))
    assert paired_nights.is_new(new) and not paired_nights.is_new(BASE)
    unchanged = model.draw(noise)
    assert draw(BASE, 0) == unchanged(BASE, 0)  # OLD: the night's draw, no change
    assert draw(new, 0).step == {c: 2.0 * f for c, f in unchanged(new, 0).step.items()}  # NEW: the same, changed


def test_a_recordings_paired_rates_are_the_shares_of_its_nights():
    passed = ("test_base_decode", "q", 1, "steady_decode_tok_s", "pass")
    warned = ("test_base_decode", "q", 1, "steady_decode_tok_s", "inconclusive")
    red = ("test_base_decode", "q", 8, "steady_decode_tok_s", "regressed")
    unchanged = [
        nights.NightSummary(0, True, [red], [red], [passed, red], 3000.0, 60),
        nights.NightSummary(1, False, [], [], [warned], 6000.0, 70),
    ]
    seen = {0: [("red", True), ("suspect", False), ("", True), ("", False)]}
    rates = recordings.paired_rates(unchanged, seen, ["decode 5% slower", "no nights"])
    assert rates[recordings.UNCHANGED, "red"] == 0.5
    assert rates[recordings.UNCHANGED, "with a suspect cell"] == 0.0
    assert rates[recordings.UNCHANGED, "with an inconclusive cell"] == 0.5
    assert rates[recordings.UNCHANGED, "GPU-minutes a night"] == pytest.approx(75.0)
    figures = {f: rates["decode 5% slower", f] for f in recordings.PAIRED_CHANGE_FIGURES}
    assert figures == {"flagged": 0.5, "red": 0.25, "night red": 0.5}
    assert ("no nights", "red") not in rates


# The paired draw in place of the stored nights' one; the rest of test_nightsim's conftest as it is.
STORED_DRAW = 'target = VirtualTarget(model.draw(nights.NightNoise(**given["noise"]), changes))'
PAIRED_DRAW = 'target = VirtualTarget(paired_nights.paired_draw(model, nights.NightNoise(**given["noise"]), changes))'


def paired_conftest() -> str:
    assert STORED_DRAW in CONFTEST
    return CONFTEST.replace(STORED_DRAW, PAIRED_DRAW).replace(
        "import nights\n", "import nights\nimport paired_nights\n"
    )


@pytest.mark.filterwarnings("ignore::pytest_llmperf.workload.dataset.DatasetTruncatedWarning")
def test_a_paired_night_of_nights_py_is_the_plugins_paired_pytest_session(pytester, tmp_path):
    """One paired night (the 27B model's three tests at concurrency 8, its MTP server 5 %
    slower in NEW, a noisier night than the recording's, at most 4 blocks) judged by
    paired_nights.paired_night and by pytest running the seed tests with the plugin in paired
    mode on the same virtual servers, beside the same recorded baselines folder: the same
    verdicts, figure for figure, and the same test outcomes; NEW's MTP server read slower
    and its base server not, so the change reached NEW's MTP starts alone."""
    model = nights.NoiseModel.load()
    items = [item for item in nights.seed_items() if item.nodeid in CELLS]
    options = nights.night_options()
    dataset = nights.load_dataset(options.dataset_name, options.dataset, ROOT)
    datasets = {(options.dataset_name, options.dataset): dataset}
    prompts = nights.SeedPrompts(dataset)
    bench = tmp_path / "bench"
    bench.mkdir()
    recorded = nights.run_session(
        bench,
        items,
        VirtualTarget(model.draw(model.night(5, "record", recording=True))),
        VirtualRunner(),
        prompts,
        datasets,
        start_s=model.start_s,
        options=nights.night_options(update=True, flags={"llmperf_repetitions": "2"}),
    )
    assert set(recorded.outcomes.values()) == {"passed"}

    noise = nights.NightNoise("5:paired", shift=0.99, scale=3.0)
    changes = {nights.MTP_SERVER: nights.Change(step=1 / 0.95)}
    night = paired_nights.paired_night(
        bench,
        items,
        model,
        noise,
        prompts,
        datasets,
        changes=changes,
        options=paired_nights.paired_options({"llmperf_max_repetitions": "4"}),
    )

    pytester.makeconftest(
        (ROOT / "conftest.py").read_text() + paired_conftest().format(benchmarks=str(ROOT / "benchmarks"))
    )
    suite = pytester.path / "tests" / "perf"
    suite.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "perf" / "test_seed_suite.py", suite / "test_seed_suite.py")
    shutil.copytree(bench / "baselines", pytester.path / "baselines")
    given = {"noise": noise.__dict__, "changes": {k: c.__dict__ for k, c in changes.items()}}
    (pytester.path / "night.json").write_text(json.dumps(given))
    result = pytester.runpytest_inprocess(
        "--llmperf-sim",
        "--llmperf-profile=nightly",
        "--llmperf-history=off",
        "--llmperf-max-repetitions=4",
        f"--llmperf-against-sim-args={paired_nights.OLD_FLAGS or 'defaults'}",
        f"--llmperf-sim-args={paired_nights.NEW_FLAGS}",
        "-p",
        "no:randomly",
        "--import-mode=importlib",
        *CELLS,
    )
    by_pytest = json.loads((pytester.path / "gates.json").read_text())
    assert json.loads(json.dumps(nights.verdict_rows(night.gates))) == by_pytest
    assert len(by_pytest) == 8  # base 3, MTP 4, speedup 1
    statuses = {row[4] for row in by_pytest}
    assert "pass" in statuses and statuses & {"regressed", "suspect"}  # the change was read, the base passed
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == sum(o == "failed" for o in night.outcomes.values())
    assert outcomes.get("passed", 0) == sum(o != "failed" for o in night.outcomes.values())
    changed = {(g.server, v.metric): v.change.relative for g in night.gates for v in g.verdicts if v.change}
    assert changed[nights.MTP_SERVER, "steady_decode_tok_s"] < -0.02  # NEW's MTP server ran the change
    assert abs(changed[nights.DECODE_SERVER, "steady_decode_tok_s"]) < 0.02  # NEW's base server did not
