"""A missing image is pulled (with progress) from a registry on 127.0.0.1, and the
result records the repo digest the engine got: the path a GPU box takes for a new
nightly image, proven without any outside registry."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_llmperf.servers.spec import ServerSpec

# tests/docker is not a package; make its helper importable under any --import-mode.
sys.path.insert(0, str(Path(__file__).parent))
from local_registry import LocalRegistry  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_missing_image_is_pulled_with_progress_and_digest_recorded(make_target, docker_client, sim_image):
    import docker.errors

    with LocalRegistry(docker_client, sim_image, "llmperf/sim") as registry:
        ref = registry.ref("nightly")
        pinned = f"{registry.address}/llmperf/sim@{registry.manifest_digest}"
        lines: list[str] = []
        spec = ServerSpec(name="pulled", model="sim/pulled", image=ref, args=("--sim-speed", "50"))
        target = make_target(image_override=None, progress=lines.append, progress_interval=0.0)
        try:
            with pytest.raises(docker.errors.ImageNotFound):
                docker_client.images.get(ref)
            with target.start(spec) as endpoint:
                prov = endpoint.provenance
                assert prov["image"] == ref
                assert prov["image_digest"] == pinned
                assert prov["image_id"] == docker_client.images.get(ref).id
                assert prov["vllm_version"]
        finally:
            for name in (ref, pinned):
                try:
                    docker_client.images.remove(name)
                except docker.errors.ImageNotFound:
                    pass
    assert lines[0] == f"llmperf: pulling image {ref} ..."
    assert any(line.startswith(f"llmperf: pulling {ref}:") for line in lines[1:])
    # The engine really asked this registry for the manifest (blobs it fetches only the
    # first time: an engine that pulled them before knows them by digest).
    assert "HEAD /v2/llmperf/sim/manifests/nightly" in registry.requests or any(
        r.startswith("GET /v2/llmperf/sim/manifests/") for r in registry.requests
    ), registry.requests
