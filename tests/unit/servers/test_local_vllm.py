"""--llmperf-local's target (servers/local_vllm.py) with stand-ins: the interpreter check
and its errors, the prepared CPU build found whatever names it, the command, and on a
GPU build the host's nvidia-smi (a fake first on PATH) for provenance and peak memory of
the GPUs CUDA_VISIBLE_DEVICES names. The lifecycle itself: tests/real/test_local_vllm_target.py."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

import pytest

from pytest_llmperf.servers.local_vllm import (
    PREPARED_ENV,
    PREPARED_KEY,
    PREPARED_MODEL_IDS,
    SERVER_MODULE,
    InterpreterError,
    LocalVllmTarget,
    PreparedVllm,
    check_interpreter,
    local_target,
    prepared_args,
    prepared_env,
)
from pytest_llmperf.servers.spec import ServerSpec
from tests.local_fakes import fake_nvidia_smi, fake_python, python_without_vllm, smi_calls

SPEC = ServerSpec(name="tiny", model="org/tiny", args=("--max-num-seqs", "8"))


@pytest.fixture
def smi(tmp_path, monkeypatch):
    """A fake nvidia-smi first on PATH; CUDA_VISIBLE_DEVICES unset."""
    folder = fake_nvidia_smi(tmp_path / "smi-bin")
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return folder


def test_an_interpreter_with_vllm_gives_its_version_and_platform_past_vllms_log_lines(tmp_path):
    python = fake_python(tmp_path / "venv" / "bin" / "python", version="0.11.1", platform="cuda")
    found = check_interpreter(python)
    assert (found.python, found.vllm_version, found.platform) == (python, "0.11.1", "cuda")


def test_a_bare_name_is_looked_up_on_path_and_a_venvs_link_is_kept(tmp_path, monkeypatch):
    real = fake_python(tmp_path / "base" / "python3.12")
    link = tmp_path / "venv" / "bin" / "python"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)  # a venv's python is a link to its base interpreter
    monkeypatch.setenv("PATH", f"{link.parent}{os.pathsep}{os.environ['PATH']}")
    assert check_interpreter("python").python == link  # not resolved: that would leave the venv


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: d / "nowhere" / "python", r"--llmperf-local: .*/nowhere/python does not exist; pass the python of"),
        (lambda d: d, r"is a folder, not a Python interpreter; .*write --llmperf-local=PYTHON, or put the paths first"),
        (
            lambda d: python_without_vllm(d / "bin" / "python"),
            r"/bin/python cannot import vllm \(ModuleNotFoundError: No module named 'vllm'\); "
            r"pip install vllm into it \(.*/bin/python -m pip install vllm\), or pass the python of the venv",
        ),
    ],
)
def test_an_interpreter_that_cannot_run_vllm_is_named_with_the_fix(tmp_path, make, message):
    with pytest.raises(InterpreterError, match=message):
        check_interpreter(make(tmp_path))


def test_a_file_that_is_not_executable_is_named(tmp_path):
    python = fake_python(tmp_path / "python")
    python.chmod(python.stat().st_mode & ~(stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
    with pytest.raises(InterpreterError, match=r"python is not executable; chmod \+x it"):
        check_interpreter(python, where="ini option 'llmperf_local'")


def test_no_python_on_path_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InterpreterError, match=r"^--llmperf-local: no `python` on PATH; pass the python of"):
        check_interpreter("python")


def test_a_probe_that_hangs_is_stopped_and_said(tmp_path):
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexec sleep 30\n")
    python.chmod(0o755)
    with pytest.raises(InterpreterError, match=r"-c 'import vllm'` did not finish in 0.5 s"):
        check_interpreter(python, timeout=0.5)


def test_the_probe_runs_once_per_interpreter(tmp_path):
    python = fake_python(tmp_path / "python")
    first = check_interpreter(python)
    python.write_text("#!/bin/sh\nexit 1\n")  # a second probe would fail
    assert check_interpreter(python) is first


def test_the_command_runs_vllms_server_module_from_the_interpreter(tmp_path):
    python = fake_python(tmp_path / "python")
    target = local_target(str(python), ready_timeout=900.0)
    argv = target.command(SPEC, 8123)
    assert argv[:5] == [str(python), "-m", SERVER_MODULE, "--model", "org/tiny"]
    assert argv[argv.index("--port") + 1] == "8123" and "--max-num-seqs" in argv
    assert (target.platform, target.vllm_version, target.ready_timeout) == ("cuda", "0.99.0", 900.0)
    # Not the prepared CPU build: the hub is not switched off, no model folder stands in.
    assert target.model_paths == {} and "HF_HUB_OFFLINE" not in target.env


def _prepared(cache: Path) -> Path:
    root = cache / PREPARED_KEY
    fake_python(root / "venv" / "bin" / "python", version="0.32.0", platform="cpu")
    (root / "models" / "smollm2-135m-instruct").mkdir(parents=True)
    (root / "models" / "smollm2-135m-instruct" / "config.json").write_text("{}")
    (root / "READY").write_text("")
    return root


@pytest.mark.parametrize("given", [None, "path"])
def test_the_prepared_cpu_build_serves_its_model_offline_however_it_is_named(tmp_path, monkeypatch, given):
    monkeypatch.setenv("LLMPERF_CACHE_DIR", str(tmp_path))
    root = _prepared(tmp_path)
    python = root / "venv" / "bin" / "python"
    target = local_target(None if given is None else str(python), ready_timeout=1800.0)
    assert target.python == python and target.platform == "cpu"
    assert target.model_paths == {m: str(root / "models" / "smollm2-135m-instruct") for m in PREPARED_MODEL_IDS}
    assert PREPARED_ENV.items() <= target.env.items() and target.ready_timeout == 600.0


def test_without_the_prepared_build_the_real_cpu_target_says_how_to_prepare_it(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMPERF_CACHE_DIR", str(tmp_path))
    with pytest.raises(InterpreterError, match=r"^--llmperf-real-cpu: no prepared real vLLM at .*scripts/real_vllm"):
        local_target(None, "--llmperf-real-cpu")


# --------------------------------------------------------------------------- GPUs


def gpu_target(platform: str = "cuda") -> LocalVllmTarget:
    return LocalVllmTarget(python=sys.executable, platform=platform, gpu_sample_interval=0.05)


@pytest.mark.parametrize(
    "visible, ids", [(None, None), ("1", "--id=1"), (" 0, 2 ", "--id=0,2"), ("GPU-8f2c", "--id=GPU-8f2c")]
)
def test_the_gpus_queried_are_those_cuda_visible_devices_names(smi, visible, ids):
    env = {**os.environ, **({} if visible is None else {"CUDA_VISIBLE_DEVICES": visible})}
    query = gpu_target().gpu_query(env)
    assert query is not None and query[0] == str(smi / "nvidia-smi")
    assert query[1:3] == ["--query-gpu=name,driver_version,memory.used,memory.total", "--format=csv,noheader,nounits"]
    assert query[3:] == ([] if ids is None else [ids])


def test_no_gpus_are_watched_for_a_cpu_build_without_nvidia_smi_or_with_none_visible(smi, monkeypatch):
    assert gpu_target("cpu").gpu_query(os.environ) is None  # the CPU build, though nvidia-smi answers
    assert gpu_target().gpu_query({**os.environ, "CUDA_VISIBLE_DEVICES": ""}) is None
    assert gpu_target().gpu_query({**os.environ, "PATH": "/nonexistent"}) is None


def test_provenance_names_the_visible_gpus_the_interpreter_and_the_version_it_imported(smi):
    target = LocalVllmTarget(python=sys.executable, platform="cuda", vllm_version="0.99.0")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "1,3"}
    prov = target._provenance("http://127.0.0.1:9", env, target.gpu_query(env))  # nothing listens: no /version
    assert prov["gpu_name"] == "NVIDIA H200" and prov["gpu_count"] == 2 and prov["gpu_driver"] == "570.124.06"
    assert prov["cuda_visible_devices"] == "1,3" and prov["platform"] == "cuda"
    assert prov["python"] == target.python.as_posix() and prov["vllm_version"] == "0.99.0"
    assert "vllm_version_error" in prov
    assert smi_calls(smi) == [
        "--query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader,nounits --id=1,3"
    ]


def test_a_failing_nvidia_smi_is_recorded_not_raised(smi):
    target = gpu_target()
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "7"}
    prov = target._provenance("http://127.0.0.1:9", env, target.gpu_query(env))
    assert prov["gpu_error"] == "RuntimeError: nvidia-smi exited with 6: No devices were found"
    assert "gpu_name" not in prov  # judged in local-vllm, not under a GPU it could not name


def test_a_cpu_build_records_no_gpu_and_calls_no_nvidia_smi(smi):
    target = gpu_target("cpu")
    prov = target._provenance("http://127.0.0.1:9", os.environ, target.gpu_query(os.environ))
    assert "gpu_name" not in prov and "cuda_visible_devices" not in prov and smi_calls(smi) == []


def test_a_started_server_on_a_gpu_build_samples_peak_memory_of_its_gpus(tmp_path, smi, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    target = local_target(
        str(fake_python(tmp_path / "python")), ready_timeout=60.0, log_dir=tmp_path / "logs", gpu_sample_interval=0.05
    )
    with target.start(SPEC) as endpoint:
        assert endpoint.target == "local-vllm"
        assert endpoint.provenance["gpu_name"] == "NVIDIA H200" and endpoint.provenance["gpu_count"] == 1
        assert endpoint.provenance["cuda_visible_devices"] == "2"
        with endpoint.sample_peak_memory() as peak:
            deadline = time.monotonic() + 20
            while len(smi_calls(smi)) < 4 and time.monotonic() < deadline:
                time.sleep(0.02)
    assert peak["gpu_memory_samples"] >= 3
    # The fake's used memory grows 1000 MiB a call; GPU 2 adds 2: the last call is the peak.
    assert peak["peak_gpu_memory_mib"] == len(smi_calls(smi)) * 1000 + 2
    assert {call.rsplit(" ", 1)[-1] for call in smi_calls(smi)} == {"--id=2"}
    assert "CUDA_VISIBLE_DEVICES" not in target.env  # passed through from the environment, not set by us


AVX2_ONLY = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\nprocessor\t: 1\nflags\t\t: fpu sse2 avx avx2 fma\n"
AVX512_BF16 = "flags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n"
AMX = "flags\t\t: fpu avx2 avx512f amx_bf16 amx_tile\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd bf16\n"


@pytest.mark.parametrize(
    "cpuinfo, expected",
    [(AVX2_ONLY, {"--dtype": "float32"}), (AVX512_BF16, {}), (AMX, {}), (ARM, {}), ("", {})],
    ids=["avx2-only", "avx512_bf16", "amx_bf16", "arm", "no-flags"],
)
def test_the_prepared_build_runs_float32_where_bfloat16_is_emulated(cpuinfo, expected):
    assert prepared_args(cpuinfo) == expected


def test_default_args_are_added_unless_the_spec_sets_the_flag():
    t = LocalVllmTarget(python=sys.executable, default_args={"--dtype": "float32"})
    argv = t.command(ServerSpec(name="s", model="/m"), 1)
    assert argv[argv.index("--dtype") + 1] == "float32"
    for args in (["--dtype", "bfloat16"], ["--dtype=bfloat16"]):
        argv = t.command(ServerSpec(name="s", model="/m", args=args), 1)
        assert "float32" not in argv and argv.count("--dtype") + argv.count("--dtype=bfloat16") == 1
    assert "--dtype" not in LocalVllmTarget(python=sys.executable).command(ServerSpec(name="s", model="/m"), 1)


def test_the_prepared_build_preloads_the_allocator_and_openmp_vllm_asks_for(tmp_path, monkeypatch):
    import ctypes.util

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    prepared = PreparedVllm(root=tmp_path, python=venv / "bin" / "python", model=tmp_path / "model")
    found = {"tcmalloc_minimal": "libtcmalloc_minimal.so.4"}
    monkeypatch.setattr(ctypes.util, "find_library", found.get)
    assert prepared_env(prepared, environ={})["LD_PRELOAD"] == "libtcmalloc_minimal.so.4"
    (venv / "lib").mkdir()
    (venv / "lib" / "libiomp5.so").write_text("")
    env = prepared_env(prepared, environ={})
    assert env["LD_PRELOAD"] == f"libtcmalloc_minimal.so.4:{venv / 'lib' / 'libiomp5.so'}"
    assert PREPARED_ENV.items() <= env.items()
    # the caller's own LD_PRELOAD is theirs: nothing added (it would replace it)
    assert "LD_PRELOAD" not in prepared_env(prepared, environ={"LD_PRELOAD": "/x.so"})
    found.clear()
    (venv / "lib" / "libiomp5.so").unlink()
    assert prepared_env(prepared, environ={}) == PREPARED_ENV


def test_the_api_key_reaches_the_process_in_its_environment_and_wins_over_vllm_api_key(monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", "k-caller-1234")
    spec = ServerSpec(name="s", model="m", args=("--api-key", "k-flag-1234"), env={"VLLM_API_KEY": "k-env-1234"})
    target = LocalVllmTarget(python=sys.executable)
    assert target.process_env(spec)["VLLM_API_KEY"] == "k-flag-1234"
    assert not any("k-flag-1234" in arg for arg in target.command(spec, 8000))  # not in `ps`
