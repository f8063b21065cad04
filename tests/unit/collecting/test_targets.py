"""targets.py: the target the options chose, built with the options' settings; and
--llmperf-cleanup and the leftover notice, with a fake engine and with none."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import pytest

import docker
from pytest_llmperf.collecting.targets import (
    LEFTOVER_CHECK_TIMEOUT,
    baseline_folders_before_start,
    build_target,
    cleanup_leftover_containers,
    leftover_report,
    sim_profile_lines,
)
from pytest_llmperf.options import LlmperfOptions, OptionError, all_gpus
from pytest_llmperf.servers import docker as dk
from pytest_llmperf.servers.base import ServerStartError
from pytest_llmperf.servers.docker import DockerTarget
from pytest_llmperf.servers.external import ExternalTarget
from pytest_llmperf.servers.local_vllm import PREPARED_KEY, PREPARED_MODEL_IDS, LocalVllmTarget
from pytest_llmperf.servers.owners import Owner, current_owner
from pytest_llmperf.servers.sim_target import SimTarget
from pytest_llmperf.servers.spec import ServerSpec
from tests.local_fakes import fake_nvidia_smi, fake_python, python_without_vllm, smi_calls


def build(**options: Any) -> Any:
    lines: list[str] = []
    return build_target(LlmperfOptions(**options), "sess-1234", lines.append)


def test_sim_gets_the_speed_and_extra_args():
    target = build(target="sim", sim_speed=25.0, sim_args=("--sim-step-time-scale", "2"), ready_timeout=90.0)
    assert isinstance(target, SimTarget)
    assert (target.name, target.speed, target.extra_args) == ("sim", 25.0, ("--sim-step-time-scale", "2"))
    assert target.ready_timeout == 90.0  # --llmperf-ready-timeout holds on every target


def test_the_sim_header_names_each_servers_profile_generic_as_such():
    fitted = ServerSpec(name="q27", model="Qwen/Qwen3.6-27B-FP8")
    tiny = ServerSpec(name="tiny", model="org/tiny")
    mtp = tiny.with_speculative({"method": "mtp", "num_speculative_tokens": 3}, name="tiny-mtp")
    broken = ServerSpec(name="x", model="org/x", sim_args=("--sim-nonsense", "1"))  # its start says why
    assert sim_profile_lines(LlmperfOptions(target="sim"), [fitted, tiny, mtp, tiny, broken]) == [
        "simulator profile qwen3.6-27b-fp8: q27",
        "simulator profile generic (no profile fitted to these models: a small generic engine): tiny, tiny-mtp",
    ]


def test_external_attaches_to_the_base_url():
    target = build(target="external", base_url="http://127.0.0.1:8000", ready_timeout=90.0)
    assert isinstance(target, ExternalTarget)
    assert (target.name, target.base_url, target.ready_timeout) == ("external", "http://127.0.0.1:8000", 90.0)


def test_external_without_a_base_url_says_what_it_needs():
    with pytest.raises(ValueError, match=r"needs a base URL \(--llmperf-base-url\)"):
        build(target="external")


@pytest.mark.parametrize("kind, gpu", [("gpu", True), ("docker", False)])
def test_containers_get_the_gpu_choice_image_cache_timeout_session_and_progress(monkeypatch, kind, gpu):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setenv("HOME", "/home/perf")
    lines: list[str] = []
    options = LlmperfOptions(
        target=kind, image="vllm/vllm-openai:v0.11.1", hf_cache="~/hf", ready_timeout=900.0, cleanup_age=1800.0
    )
    target = build_target(options, "sess-42", lines.append)
    assert isinstance(target, DockerTarget)
    assert target.gpu is gpu
    assert target.image_override == "vllm/vllm-openai:v0.11.1"
    assert target.hf_cache == Path("/home/perf/hf")  # ~ expanded here, not in the container
    assert (target.ready_timeout, target.session_id) == (900.0, "sess-42")
    assert target.cleanup_age == 1800.0  # which running GPU server is a leftover it may name
    target.progress("pulling")
    assert lines == ["pulling"]


def _prepared_env(root: Path) -> Path:
    """What .ci/setup_real_vllm.sh leaves: READY, a python that imports vllm, the model's config."""
    env = root / PREPARED_KEY
    fake_python(env / "venv" / "bin" / "python", version="0.32.0", platform="cpu")
    model = env / "models" / "smollm2-135m-instruct"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (env / "READY").write_text("")
    return env


@pytest.mark.parametrize("asked, used", [(1800.0, 600.0), (120.0, 120.0)])
def test_real_cpu_runs_the_prepared_build_and_waits_at_most_ten_minutes(tmp_path, monkeypatch, asked, used):
    monkeypatch.setenv("LLMPERF_CACHE_DIR", str(tmp_path))
    env = _prepared_env(tmp_path)
    target = build(target="real-cpu", ready_timeout=asked)
    assert isinstance(target, LocalVllmTarget)
    assert target.python == env / "venv" / "bin" / "python"
    assert target.ready_timeout == used
    assert target.model_paths == {m: str(env / "models" / "smollm2-135m-instruct") for m in PREPARED_MODEL_IDS}


def test_real_cpu_without_the_prepared_build_says_how_to_prepare_it(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMPERF_CACHE_DIR", str(tmp_path))
    with pytest.raises(
        ServerStartError, match=r"cannot start a local vLLM: --llmperf-real-cpu: no prepared real vLLM at .*READY"
    ):
        build(target="real-cpu")


@pytest.mark.parametrize("source, where", [("cli", "--llmperf-local"), ("ini", "ini option 'llmperf_local'")])
def test_local_runs_vllm_from_the_interpreter_given_and_waits_as_long_as_asked(tmp_path, source, where):
    python = fake_python(tmp_path / "venv" / "bin" / "python")
    target = build(target="local", local=str(python), ready_timeout=1800.0, sources={"llmperf_local": source})
    assert isinstance(target, LocalVllmTarget)
    assert (target.python, target.ready_timeout, target.platform) == (python, 1800.0, "cuda")
    with pytest.raises(ServerStartError, match=rf"cannot start a local vLLM: {where}: .* cannot import vllm"):
        build(target="local", local=str(python_without_vllm(tmp_path / "other")), sources={"llmperf_local": source})


def test_a_local_gpu_build_is_judged_per_gpu_model_a_cpu_one_in_local_vllm(tmp_path, monkeypatch):
    gpu, cpu = fake_python(tmp_path / "gpu"), fake_python(tmp_path / "cpu", platform="cpu")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-smi"))
    assert baseline_folders_before_start(LlmperfOptions(target="local", local=str(gpu))) == ["local-vllm"]
    smi = fake_nvidia_smi(tmp_path / "smi")
    monkeypatch.setenv("PATH", str(smi))
    assert baseline_folders_before_start(LlmperfOptions(target="local", local=str(gpu))) is None
    assert baseline_folders_before_start(LlmperfOptions(target="local", local=str(cpu))) == ["local-vllm"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU visible
    assert baseline_folders_before_start(LlmperfOptions(target="local", local=str(gpu))) == ["local-vllm"]
    assert baseline_folders_before_start(LlmperfOptions(target="local", local=str(gpu), target_name="box")) == ["box"]
    assert smi_calls(smi) == []  # decided without asking it


def test_no_target_is_an_error_naming_what_was_given():
    with pytest.raises(ValueError, match=r"no target chosen \(got None\)"):
        build(target=None)


# --------------------------------------------------------------------------- --llmperf-cleanup


def test_cleanup_without_an_engine_says_so_and_how_to_fix_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    with pytest.raises(RuntimeError, match=r"no Docker engine answers \(.+\); start dockerd or set DOCKER_HOST") as err:
        cleanup_leftover_containers(DAY)
    assert err.value.__cause__ is None and err.value.__suppress_context__  # the message says it all


DAY = 24 * 3600.0
DEAD = dataclasses.replace(current_owner(), pid=999_999_999)  # this host, a pid that cannot exist


class FakeContainer:
    def __init__(self, name: str, owner: Owner, age: float = 0.0) -> None:
        self.name = name
        spec = ServerSpec(name=name, model="m")
        self.labels = dk.container_labels(f"s-{name}", spec, False, owner=owner, created=time.time() - age)
        self.status = "running"
        self.removed = False

    def remove(self, force: bool, v: bool) -> None:
        assert force and v
        self.removed = True


class FakeEngine:
    def __init__(self, containers: list[FakeContainer]) -> None:
        self.listed: list[dict[str, Any]] = []
        self.all = containers
        engine = self

        class Containers:
            def list(self, **kwargs: Any) -> list[FakeContainer]:
                engine.listed.append(kwargs)
                return list(engine.all)

        self.containers = Containers()

    def ping(self) -> bool:
        return True


def fake_engine(monkeypatch: pytest.MonkeyPatch, containers: list[FakeContainer]) -> list[dict[str, Any]]:
    """docker.from_env answers with a fake engine; returns the keyword arguments it got."""
    calls: list[dict[str, Any]] = []
    engine = FakeEngine(containers)

    def from_env(**kwargs: Any) -> FakeEngine:
        calls.append(kwargs)
        return engine

    monkeypatch.setattr(docker, "from_env", from_env)
    return calls


def test_cleanup_removes_the_dead_sessions_containers_keeps_the_live_ones_and_says_why(monkeypatch):
    dead = FakeContainer("llmperf-a-1", DEAD)
    live = FakeContainer("llmperf-b-2", current_owner())
    old_remote = FakeContainer("llmperf-c-3", Owner("laptop", 1234), age=2 * DAY)
    fake_engine(monkeypatch, [dead, live, old_remote])
    lines = cleanup_leftover_containers(DAY)
    assert lines[0] == "--llmperf-cleanup: removed 2 container(s), kept 1"
    assert lines[1].startswith("  removed llmperf-a-1 (spec llmperf-a-1, model m, gpu 0, running")
    assert lines[1].endswith("its owner, pid 999999999 on this host, is gone")
    assert lines[2].startswith("  removed llmperf-c-3 (")
    assert lines[2].endswith("older than 24h (--llmperf-cleanup-age)")
    assert lines[3].startswith("  kept llmperf-b-2 (")
    assert lines[3].endswith(f"owned by this process (pid {os.getpid()})")
    assert dead.removed and old_remote.removed and not live.removed


def test_cleanup_takes_the_age_limit_and_the_engine_docker_host_names(monkeypatch):
    remote = FakeContainer("llmperf-c-3", Owner("laptop", 1234), age=3600)
    calls = fake_engine(monkeypatch, [remote])
    monkeypatch.setenv("DOCKER_HOST", "ssh://ops@gpu-box")
    assert cleanup_leftover_containers(DAY)[0] == "--llmperf-cleanup: removed 0 container(s), kept 1"
    assert cleanup_leftover_containers(1800.0)[0] == "--llmperf-cleanup: removed 1 container(s), kept 0"
    assert calls[0]["environment"]["DOCKER_HOST"] == "ssh://ops@gpu-box" and calls[0]["use_ssh_client"] is True


def test_cleanup_with_nothing_there_says_so(monkeypatch):
    fake_engine(monkeypatch, [])
    assert cleanup_leftover_containers(DAY) == ["--llmperf-cleanup: no containers of this plugin on the engine"]


def test_the_leftover_notice_lists_only_leftovers_and_is_quiet_without_an_engine(tmp_path, monkeypatch):
    dead = FakeContainer("llmperf-a-1", DEAD)
    live = FakeContainer("llmperf-b-2", current_owner())
    calls = fake_engine(monkeypatch, [dead, live])
    lines = leftover_report(DAY)
    assert lines[0] == "1 container(s) left by sessions that are gone; remove with pytest --llmperf-cleanup:"
    assert lines[1].startswith("  llmperf-a-1 (") and len(lines) == 2
    assert not dead.removed  # a notice removes nothing
    assert calls[0]["timeout"] == LEFTOVER_CHECK_TIMEOUT  # a far engine cannot hold the session up long
    fake_engine(monkeypatch, [live])
    assert leftover_report(DAY) == []
    monkeypatch.undo()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    assert leftover_report(DAY) == []  # the first server start says what is wrong, with the fix


def test_the_baseline_folder_is_known_before_start_except_per_gpu_model():
    from pytest_llmperf.kinds import KINDS

    # The folder is the target's name where its servers report no GPU (reference.default_baseline_folder).
    names = {"sim": SimTarget.name, "docker": DockerTarget.name, "external": ExternalTarget.name}
    assert {kind: KINDS[kind].baseline_folder for kind in names} == names
    assert KINDS["real-cpu"].baseline_folder == LocalVllmTarget.name and KINDS["gpu"].baseline_folder is None
    assert baseline_folders_before_start(LlmperfOptions(target="sim")) == ["sim"]
    assert baseline_folders_before_start(LlmperfOptions(target="gpu")) is None  # the GPU model, once one runs
    assert baseline_folders_before_start(LlmperfOptions(target="gpu", target_name="h200-box")) == ["h200-box"]


def test_all_gpus_are_the_indices_nvidia_smi_lists_and_a_failure_says_to_list_them():
    asked: list[Any] = []

    def smi(query: Any) -> str:
        asked.append(tuple(query))
        return "0\n1\n2\n3\n"

    assert all_gpus(smi) == ("0", "1", "2", "3")
    assert asked == [("nvidia-smi", "--query-gpu=index", "--format=csv,noheader")]

    def missing(query: Any) -> str:
        raise FileNotFoundError(2, "No such file or directory", "nvidia-smi")

    with pytest.raises(
        OptionError,
        match=r"--llmperf-gpus all asks this machine's nvidia-smi, which failed "
        r"\(FileNotFoundError: .*\); list the GPU ids instead \(--llmperf-gpus 0,1,2,3\)",
    ):
        all_gpus(missing)
    with pytest.raises(OptionError, match="nvidia-smi lists no GPU"):
        all_gpus(lambda query: "\n")
