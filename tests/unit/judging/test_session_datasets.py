"""The session's datasets: each loaded and checked before any server starts, and each run's
dataset in its workload identity, so a baseline of one dataset never judges another."""

from __future__ import annotations

import json

import pytest

from pytest_llmperf.baselines.outcome import PerfFailure, SetupError
from pytest_llmperf.measuring.preflight import PlannedTest, check_before_start
from pytest_llmperf.options import resolve_options
from pytest_llmperf.workload.workload import resolve_workload
from tests.unit.judging.test_session import BASE, FakeTarget, make_session


def options_for(**cli):
    cli = {"llmperf_sim": True, **cli}
    return resolve_options(lambda d: cli.get(d), lambda n: "")


def plan(name="t.py::test", concurrency=2, **declared):
    return PlannedTest(name, (BASE,), (resolve_workload({"num_prompts": 4, **declared}, concurrency),))


def jsonl(path, n):
    path.write_text("".join(json.dumps({"prompt": f"prompt {i} words here"}) + "\n" for i in range(n)))
    return path


def test_a_random_only_session_needs_no_file(tmp_path):
    """No ShareGPT anywhere: a suite of random-dataset tests runs without one."""
    loaded = check_before_start(options_for(), tmp_path, [plan(dataset_name="random")], folders=["sim"])
    assert loaded == {("random", None): None}


def test_each_planned_dataset_is_loaded_once_under_its_name_and_file(tmp_path):
    jsonl(tmp_path / "a.jsonl", 10)
    jsonl(tmp_path / "b.jsonl", 10)
    plans = [
        plan("t.py::a", dataset_name="custom", dataset_path="a.jsonl"),
        plan("t.py::a8", concurrency=4, dataset_name="custom", dataset_path="a.jsonl"),
        plan("t.py::b", dataset_name="custom", dataset_path="b.jsonl"),
        plan("t.py::r", dataset_name="random"),
    ]
    loaded = check_before_start(options_for(), tmp_path, plans, folders=["sim"])
    assert sorted(loaded, key=str) == [("custom", "a.jsonl"), ("custom", "b.jsonl"), ("random", None)]
    assert len(loaded[("custom", "a.jsonl")].prompts) == 10


def test_a_bad_jsonl_file_is_a_setup_error_naming_the_setting_the_line_and_the_fix(tmp_path):
    (tmp_path / "p.jsonl").write_text('{"prompt": "fine"}\n{"prompt": 3}\n')
    target = FakeTarget()
    with pytest.raises(SetupError) as exc:
        check_before_start(
            options_for(), tmp_path, [plan(dataset_name="custom", dataset_path="p.jsonl")], folders=["sim"]
        )
    assert str(exc.value) == (
        f"dataset_path='p.jsonl': {tmp_path / 'p.jsonl'}: 1 bad line(s) of 2; each line must be one JSON object "
        'such as {"prompt": "...", "max_tokens": 128} (max_tokens optional):\n'
        "  line 2: 'prompt' must be a string, found a number 3"
    )
    assert target.events == []  # nothing started


def test_the_option_file_serves_the_option_dataset_and_too_few_lines_name_it(tmp_path):
    jsonl(tmp_path / "p.jsonl", 5)
    options = options_for(llmperf_dataset_name="custom", llmperf_dataset="p.jsonl")
    workload = resolve_workload({"num_prompts": 4}, 2, dataset=("custom", "p.jsonl"))
    with pytest.raises(SetupError) as exc:
        check_before_start(options, tmp_path, [PlannedTest("t.py::x", (BASE,), (workload,))], folders=["sim"])
    assert str(exc.value) == (
        "t.py::x needs 6 prompts at concurrency 2 (4 measured + 2 warm-up, profile full) but dataset p.jsonl has 5 "
        "prompts; lower num_prompts= (or warmup=) in its llmperf marker, run a smaller --llmperf-profile, or add "
        "lines to the file (--llmperf-dataset)"
    )
    # A missing option file: the option named, with the fix.
    options = options_for(llmperf_dataset_name="custom", llmperf_dataset="gone.jsonl")
    with pytest.raises(SetupError, match=r"^--llmperf-dataset \(gone.jsonl\): configured dataset not found"):
        check_before_start(options, tmp_path, [PlannedTest("t.py::x", (BASE,), (workload,))], folders=["sim"])


def test_a_baseline_of_one_dataset_never_judges_a_run_of_another(tmp_path):
    sharegpt = resolve_workload({"num_prompts": 4}, 8)
    random = resolve_workload({"num_prompts": 4, "dataset_name": "random"}, 8)
    recorder, _, _ = make_session(tmp_path, [100.0], llmperf_update_baselines=True)
    recorder.bind(recorder.run(BASE, sharegpt), "t::sharegpt").assert_no_regression()
    recorder.finish()
    other, _, _ = make_session(tmp_path, [100.0])
    with pytest.raises(PerfFailure) as failure:
        other.bind(other.run(BASE, random), "t::random").assert_no_regression()
    message = str(failure.value)
    assert "has no entry for this workload at concurrency 8" in message
    assert "  - dataset_name: baseline (absent), measured random\n" in message
    assert other.gates[-1].outcome == "refused"
    identity = other.workload_identity(other.runs[(BASE, random)])
    assert identity["dataset"] == "random tokenizer:builtin" and identity["random_input_len"] == 1024


def test_a_test_whose_concurrency_is_unknown_loads_the_datasets_its_marker_names(tmp_path):
    """No concurrency parameter: its workload is known only when it runs, but its marker
    names the datasets: those are loaded and checked before any server, and no ShareGPT
    file is needed for a random-only suite."""
    from pytest_llmperf.workload.workload import declared_datasets

    jsonl(tmp_path / "a.jsonl", 3)
    named = declared_datasets({"dataset_name": {1: "random", "default": "custom"}, "dataset_path": "a.jsonl"}, "x")
    assert named == [("custom", "a.jsonl"), ("random", None)]
    free = PlannedTest("t.py::free", (BASE,), (), tuple(named))
    loaded = check_before_start(options_for(), tmp_path, [free], folders=["sim"])
    assert sorted(loaded, key=str) == [("custom", "a.jsonl"), ("random", None)]
    random_only = PlannedTest("t.py::r", (BASE,), (), tuple(declared_datasets({"dataset_name": "random"}, "sharegpt")))
    assert check_before_start(options_for(), tmp_path, [random_only], folders=["sim"]) == {("random", None): None}
    (tmp_path / "a.jsonl").write_text("oops\n")
    with pytest.raises(SetupError, match=r"^dataset_path='a.jsonl': .*a.jsonl: 1 bad line\(s\) of 1"):
        check_before_start(options_for(), tmp_path, [free], folders=["sim"])
