"""--llmperf-local end to end with pytester: the tiny project (tests/plugin_project.py)
run through an interpreter that "has vLLM" (tests/local_fakes.py: it serves with the
simulator), with and without a fake nvidia-smi first on PATH; and the usage errors an
interpreter that cannot run vLLM gives before any server starts."""

from __future__ import annotations

import json
import os

import pytest

from tests.local_fakes import fake_nvidia_smi, fake_python, python_without_vllm, smi_calls
from tests.plugin_project import make_project

ARGS = ("-p", "no:benchmark", "-p", "no:cacheprovider", "-p", "no:hypothesispytest")

SUITE = """
import pytest
from conftest import BASE

@pytest.mark.llmperf(server=BASE, num_prompts=6, max_tokens=16, warmup=1)
def test_base(llmperf):
    llmperf.run(concurrency=2).assert_no_regression("decode_tok_s")
"""


@pytest.fixture
def project(pytester, monkeypatch, tmp_path_factory):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    make_project(pytester, monkeypatch, tmp_path_factory)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_a_gpu_build_records_under_the_gpu_model_with_its_visible_gpus_and_peak_memory(project, monkeypatch):
    python = fake_python(project.path / "venv" / "bin" / "python", version="0.99.0", platform="cuda")
    smi = fake_nvidia_smi(project.path / "smi-bin")
    monkeypatch.setenv("PATH", f"{smi}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    result = project.runpytest(*ARGS, "--llmperf-local", str(python), "--update-baselines")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"llmperf: target local {python} (from cli)*", f"*vLLM 0.99.0 (cuda) from {python}"])
    assert [p.parent.name for p in (project.path / "baselines").glob("*/*.json")] == ["NVIDIA-H200"]
    doc = json.loads((project.path / "baselines" / "NVIDIA-H200" / "tiny.json").read_text())
    (entry,) = doc["concurrency"]["2"].values()
    prov = entry["provenance"]
    assert (prov["target"], prov["gpu_count"], prov["cuda_visible_devices"]) == ("local-vllm", 1, "1")
    assert prov["python"] == str(python) and prov["platform"] == "cuda"
    assert prov["peak_gpu_memory_mib"] >= 1000 and prov["gpu_memory_samples"] >= 1
    assert smi_calls(smi) and all(call.endswith("--id=1") for call in smi_calls(smi))
    # The same again compares with what was recorded there.
    project.runpytest(*ARGS, "--llmperf-local", str(python)).assert_outcomes(passed=1)


def test_without_a_gpu_the_baselines_go_to_local_vllm_and_the_flag_alone_runs_the_python_on_path(project, monkeypatch):
    bin_dir = project.path / "venv" / "bin"
    fake_python(bin_dir / "python", platform="cpu")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    result = project.runpytest(*ARGS, "--llmperf-local", "--update-baselines")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["llmperf: target local python (from cli)*", f"*vLLM 0.99.0 (cpu) from {bin_dir}/python"]
    )
    assert [p.parent.name for p in (project.path / "baselines").glob("*/*.json")] == ["local-vllm"]


@pytest.mark.parametrize(
    "make, message",
    [
        (
            python_without_vllm,
            "*--llmperf-local: */python cannot import vllm (ModuleNotFoundError: No module named 'vllm'); "
            "pip install vllm into it*",
        ),
        (lambda path: path.parent / "missing", "*--llmperf-local: */missing does not exist; pass the python of*"),
    ],
)
def test_an_interpreter_that_cannot_run_vllm_is_a_usage_error_before_any_server_starts(project, make, message):
    python = make(project.path / "bad" / "python")
    result = project.runpytest(*ARGS, f"--llmperf-local={python}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert not (project.path / "baselines").exists()


def test_the_interpreter_is_checked_when_the_baseline_folder_is_named_too(project):
    python = python_without_vllm(project.path / "bad" / "python")
    result = project.runpytest(*ARGS, f"--llmperf-local={python}", "--llmperf-target-name", "box")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llmperf-local: */bad/python cannot import vllm*"])


def test_a_test_path_read_as_the_interpreter_says_how_to_write_it(project):
    result = project.runpytest(*ARGS, "--llmperf-local", ".")  # meant: the tests here, on the python on PATH
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*is a folder, not a Python interpreter*: write --llmperf-local=PYTHON, or put the paths first)"]
    )


def test_the_ini_twin_names_itself_in_the_error(project):
    python_without_vllm(project.path / "bad" / "python")
    project.makeini("[pytest]\nllmperf_dataset = sharegpt.json\nllmperf_local = bad/python\n")
    result = project.runpytest(*ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option 'llmperf_local': */bad/python cannot import vllm*"])


def test_local_with_another_target_is_refused(project):
    result = project.runpytest(*ARGS, "--llmperf-local", "--llmperf-sim")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llmperf-sim and --llmperf-local choose different targets: pass exactly one*"])


def test_xdist_never_runs_local_servers_side_by_side(project):
    pytest.importorskip("xdist")
    result = project.runpytest(*ARGS, "--llmperf-local", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*would start several vLLM processes at once on the GPUs CUDA_VISIBLE_DEVICES names; run --llmperf-local "
         "without -n*--llmperf-gpu --llmperf-gpus*"]
    )  # fmt: skip
