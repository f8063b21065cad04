"""DockerTarget against the real engine and the local sim image: start, readiness,
a short benchmark through the container, start failures, teardown on every way out."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from pytest_llmperf.servers import docker as dk
from pytest_llmperf.servers import leftovers as lo
from pytest_llmperf.servers.base import ServerStartError
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.runner import RunConfig, run_benchmark

pytestmark = [pytest.mark.docker, pytest.mark.slow]

MTP = ServerSpec(
    name="sim-qwen3.6-27b",
    model="Qwen/Qwen3.6-27B-FP8",
    args=("--max-model-len", "65536", "--max-num-seqs", "8", "--sim-speed", "50"),
).with_speculative({"method": "mtp", "num_speculative_tokens": 3})


def by_name(client, name):
    return client.containers.list(all=True, filters={"name": f"^/{name}$"})


def test_start_ready_benchmark_then_nothing_left(make_target, docker_client, tmp_path, sim_image):
    lines: list[str] = []
    target = make_target(hf_cache=tmp_path / "hf", progress=lines.append)
    with target.start(MTP) as endpoint:
        container = docker_client.containers.get(endpoint.provenance["container"])
        config, host = container.attrs["Config"], container.attrs["HostConfig"]
        # The seeds' docker run, through the SDK.
        assert config["Cmd"] == MTP.vllm_args()
        assert json.loads(config["Cmd"][config["Cmd"].index("--speculative-config") + 1]) == {
            "method": "mtp",
            "num_speculative_tokens": 3,
        }
        assert host["IpcMode"] == "host" and host["Init"] is True
        assert not host.get("DeviceRequests")
        (binding,) = host["PortBindings"]["8000/tcp"]
        assert binding["HostIp"] == "127.0.0.1"
        assert f"{tmp_path / 'hf'}:/root/.cache/huggingface:rw" in host["Binds"]
        assert config["Labels"][lo.LABEL_SPEC] == MTP.name
        assert endpoint.base_url.startswith("http://127.0.0.1:")
        assert endpoint.model == "Qwen/Qwen3.6-27B-FP8" and endpoint.target == "docker"
        prov = endpoint.provenance
        assert prov["image"] == sim_image
        assert prov["image_id"] == docker_client.images.get(sim_image).id
        assert prov["image_digest"] is None  # built here, never pushed: no repo digest
        assert prov["vllm_version"]  # from the server's /version
        assert "gpu_name" not in prov  # no --llmperf-gpu, no nvidia-smi

        requests = [SampledRequest(i, f"Tell me about topic {i}. " * 8, 60, 64) for i in range(6)]
        result = run_benchmark(
            endpoint.base_url,
            endpoint.model,
            requests,
            RunConfig(concurrency=2, num_prompts=4, max_tokens=16, warmup_requests=1, progress=False),
        )
        assert result.completed == 4 and result.failed == 0
        assert all(r.completion_tokens == 16 for r in result.records)
        assert result.metrics_after and "vllm:spec_decode_num_drafts_total" in result.metrics_after
    assert by_name(docker_client, prov["container"]) == []
    assert any("ready at" in line for line in lines)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{endpoint.base_url}/health", timeout=2)


def test_container_that_exits_at_once_fails_with_code_and_log(make_target, docker_client, exiting_image, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_exitTEST_9f8e7d6c5b4a")
    target = make_target(image_override=exiting_image, ready_timeout=30)
    started = time.monotonic()
    with pytest.raises(ServerStartError) as info:
        with target.start(MTP):
            pytest.fail("an exited server must not be yielded")
    message = str(info.value)
    assert time.monotonic() - started < 20  # death is noticed, not waited out
    assert "exited with code 3" in message
    assert "RuntimeError: CUDA out of memory (simulated)" in message  # the log tail
    assert "loading with HF_TOKEN=***" in message
    assert "hf_exitTEST_9f8e7d6c5b4a" not in message


def test_readiness_timeout_fails_with_log_and_removes_container(make_target, docker_client):
    slow = ServerSpec(name="never-ready", model="sim/slow", args=("--sim-slow-start-seconds", "600"))
    lines: list[str] = []
    target = make_target(ready_timeout=3, progress=lines.append, progress_interval=0.5)
    started = time.monotonic()
    with pytest.raises(ServerStartError) as info:
        with target.start(slow):
            pytest.fail("a server that never gets ready must not be yielded")
    assert time.monotonic() - started < 30
    message = str(info.value)
    assert "not ready after 3 s (--llmperf-ready-timeout)" in message and "/health answered 503" in message
    assert "still running; it is being removed" in message
    assert "pytest-llmperf simulated vLLM serving 'sim/slow'" in message  # the log tail
    # The live progress line: elapsed time, status and the container's last log line.
    assert any("never-ready loading in llmperf-never-ready" in ln and "s of 3s" in ln for ln in lines)


def test_failure_inside_the_test_still_removes_the_container(make_target, docker_client):
    target = make_target()
    with pytest.raises(RuntimeError, match="the test body failed"):
        with target.start(MTP) as endpoint:
            name = endpoint.provenance["container"]
            assert by_name(docker_client, name)
            raise RuntimeError("the test body failed")
    assert by_name(docker_client, name) == []
    assert dk.LIVE.names() == []


def test_missing_image_that_cannot_be_pulled_names_the_image(make_target):
    # A registry on a closed loopback port: the pull fails at once, nothing leaves the machine.
    image = "127.0.0.1:9/llmperf/not-there:never"
    with pytest.raises(ServerStartError, match="image '127.0.0.1:9/llmperf/not-there:never' is not present") as info:
        with make_target(image_override=image).start(MTP):
            pass
    assert "--llmperf-image" in str(info.value)


def test_gpu_request_on_an_engine_without_gpus_is_a_clear_error(make_target, docker_client):
    with pytest.raises(ServerStartError) as info:
        with make_target(gpu=True).start(MTP):
            pass
    assert "could not select device driver" in str(info.value)
    assert "NVIDIA Container Toolkit" in str(info.value)
    assert not dk.GPU_SLOT.locked()
