"""The --llmperf-gpu provenance path in a real container, without a GPU: the image gets
a stand-in `nvidia-smi` printing an H200 whose used memory grows on every call, and the
device request is left out (the engine here has no NVIDIA runtime). What is proven:
nvidia-smi runs inside the container, its answer becomes gpu_name/driver/count, and a
sampling window opened around a run reads the peak of that window."""

from __future__ import annotations

import time

import pytest

from pytest_llmperf.servers import docker as dk
from pytest_llmperf.servers.spec import ServerSpec
from tests.docker.images import build_with_script

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Each call adds 1000 MiB to a counter kept in the container's /tmp.
FAKE_NVIDIA_SMI = r"""#!/bin/sh
n=$(cat /tmp/nvsmi-calls 2>/dev/null || echo 0); n=$((n + 1)); echo $n > /tmp/nvsmi-calls
echo "NVIDIA H200, 570.133.20, $((n * 1000)), 143771"
"""


@pytest.fixture(scope="module")
def fake_gpu_image(docker_client, sim_image):
    tag = build_with_script(docker_client, sim_image, "test-fake-gpu", "/usr/local/bin/nvidia-smi", FAKE_NVIDIA_SMI)
    yield tag
    docker_client.images.remove(tag, force=True)


def test_gpu_provenance_and_peak_memory_from_nvidia_smi_in_the_container(make_target, fake_gpu_image, monkeypatch):
    monkeypatch.setattr(dk, "gpu_device_requests", lambda gpu, ids: [])
    spec = ServerSpec(name="fake-gpu", model="sim/gpu-model", args=("--sim-speed", "50"))
    target = make_target(image_override=fake_gpu_image, gpu=True, gpu_sample_interval=0.2)
    with target.start(spec) as endpoint:
        prov = endpoint.provenance
        assert prov["gpu_name"] == "NVIDIA H200"
        assert prov["gpu_driver"] == "570.133.20"
        assert prov["gpu_count"] == 1
        assert prov["gpu_memory_total_mib"] == 143771
        assert dk.GPU_SLOT.locked()  # one GPU server at a time
        with endpoint.sample_peak_memory() as peak:  # what the session opens around each run
            time.sleep(1.0)  # a few samples
        assert "peak_gpu_memory_mib" not in endpoint.provenance  # the run's figure, not the server's
    samples = peak["gpu_memory_samples"]
    assert samples >= 3
    # Call 1 was the provenance query; the sampler's calls were 2 .. samples+1.
    assert peak["peak_gpu_memory_mib"] == (samples + 1) * 1000
    assert peak["peak_gpu_memory_per_gpu_mib"] == [(samples + 1) * 1000]
    assert not dk.GPU_SLOT.locked()
