"""targets.py: the target the options chose, built with the options' settings; and
--llmperf-cleanup, with a fake engine and with none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import docker
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.servers import docker as dk
from pytest_llmperf.servers.base import ServerStartError
from pytest_llmperf.servers.docker import DockerTarget
from pytest_llmperf.servers.external import ExternalTarget
from pytest_llmperf.servers.local_vllm import PREPARED_KEY, PREPARED_MODEL_IDS, LocalVllmTarget
from pytest_llmperf.servers.sim_target import SimTarget
from pytest_llmperf.targets import build_target, cleanup_leftover_containers


def build(**options: Any) -> Any:
    lines: list[str] = []
    return build_target(LlmperfOptions(**options), "sess-1234", lines.append)


def test_sim_gets_the_speed_and_extra_args():
    target = build(target="sim", sim_speed=25.0, sim_args=("--sim-step-time-scale", "2"), ready_timeout=90.0)
    assert isinstance(target, SimTarget)
    assert (target.name, target.speed, target.extra_args) == ("sim", 25.0, ("--sim-step-time-scale", "2"))
    assert target.ready_timeout == 90.0  # --llmperf-ready-timeout holds on every target


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
    options = LlmperfOptions(target=kind, image="vllm/vllm-openai:v0.11.1", hf_cache="~/hf", ready_timeout=900.0)
    target = build_target(options, "sess-42", lines.append)
    assert isinstance(target, DockerTarget)
    assert target.gpu is gpu
    assert target.image_override == "vllm/vllm-openai:v0.11.1"
    assert target.hf_cache == Path("/home/perf/hf")  # ~ expanded here, not in the container
    assert (target.ready_timeout, target.session_id) == (900.0, "sess-42")
    target.progress("pulling")
    assert lines == ["pulling"]


def _prepared_env(root: Path) -> Path:
    """What .ci/setup_real_vllm.sh leaves: READY, an executable python, the model's config."""
    env = root / PREPARED_KEY
    python = env / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
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
    with pytest.raises(ServerStartError, match=r"cannot start a local vLLM: no prepared real vLLM at .*READY"):
        build(target="real-cpu")


def test_no_target_is_an_error_naming_what_was_given():
    with pytest.raises(ValueError, match=r"no target chosen \(got None\)"):
        build(target=None)


# --------------------------------------------------------------------------- --llmperf-cleanup


def test_cleanup_without_an_engine_says_so_and_how_to_fix_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    with pytest.raises(RuntimeError, match=r"no Docker engine answers \(.+\); start dockerd or set DOCKER_HOST") as err:
        cleanup_leftover_containers()
    assert err.value.__cause__ is None and err.value.__suppress_context__  # the message says it all


class FakeContainer:
    def __init__(self, name: str, session: str) -> None:
        self.name = name
        self.labels = {dk.LABEL_PLUGIN: dk.PLUGIN_NAME, dk.LABEL_SESSION: session}
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


def test_cleanup_removes_every_container_of_the_plugin_and_names_them(monkeypatch):
    left = [FakeContainer("llmperf-a-1", "dead1"), FakeContainer("llmperf-b-2", "dead2")]
    engine = FakeEngine(left)
    monkeypatch.setattr(docker, "from_env", lambda: engine)
    message = cleanup_leftover_containers()
    assert message == "--llmperf-cleanup removed 2 leftover container(s): llmperf-a-1, llmperf-b-2"
    assert all(c.removed for c in left)
    assert engine.listed == [{"all": True, "filters": {"label": dk.PLUGIN_FILTER}}]


def test_cleanup_with_nothing_left_says_so(monkeypatch):
    monkeypatch.setattr(docker, "from_env", lambda: FakeEngine([]))
    assert cleanup_leftover_containers() == "--llmperf-cleanup: no leftover containers"


def test_the_baseline_folder_is_known_before_start_except_per_gpu_model():
    from pytest_llmperf.targets import BASELINE_FOLDERS, baseline_folders_before_start

    # The folder is the target's name where its servers report no GPU (session.default_baseline_folder).
    names = {"sim": SimTarget.name, "docker": DockerTarget.name, "external": ExternalTarget.name}
    assert {kind: BASELINE_FOLDERS[kind] for kind in names} == names
    assert BASELINE_FOLDERS["real-cpu"] == LocalVllmTarget.name and BASELINE_FOLDERS["gpu"] is None
    assert baseline_folders_before_start(LlmperfOptions(target="sim")) == ["sim"]
    assert baseline_folders_before_start(LlmperfOptions(target="gpu")) is None  # the GPU model, once one runs
    assert baseline_folders_before_start(LlmperfOptions(target="gpu", target_name="h200-box")) == ["h200-box"]
