"""Fixtures for the Docker-path tests: a real engine, the local sim image, a session id
whose containers are all removed (and counted as a leak) at the end of the suite.

No engine or no image: the tests skip with the reason, except where
LLMPERF_REQUIRE_DOCKER=1 (CI), where that is a failure: CI must really run them.
"""

from __future__ import annotations

import io
import os
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from pytest_llmperf.servers import docker as dk
from pytest_llmperf.servers import leftovers as lo

SIM_IMAGE = os.environ.get("LLMPERF_SIM_IMAGE", "pytest-llmperf/sim-vllm:local")
REQUIRED = os.environ.get("LLMPERF_REQUIRE_DOCKER") == "1"
TEST_SESSION_PREFIX = "llmperf-test-"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "docker: needs a Docker engine and the local sim image (.ci/setup_docker.sh)")


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"LLMPERF_REQUIRE_DOCKER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def engine_or_skip() -> Any:
    """A client of the real engine; skips (fails under LLMPERF_REQUIRE_DOCKER=1) without one."""
    try:
        import docker

        client = docker.from_env(timeout=60)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any cause means "no engine" here
        _unavailable(f"no Docker engine answers ({type(exc).__name__}: {exc}); run .ci/setup_docker.sh")
    return client


def sim_image_or_skip(client: Any) -> str:
    """The local sim image's tag; skips (or fails, as above) when it is not built."""
    import docker.errors

    try:
        client.images.get(SIM_IMAGE)
    except docker.errors.ImageNotFound:
        _unavailable(f"image {SIM_IMAGE} is not built; run docker/build_sim_image.sh")
    return SIM_IMAGE


@pytest.fixture(scope="session")
def docker_client() -> Any:
    return engine_or_skip()


@pytest.fixture(scope="session")
def sim_image(docker_client: Any) -> str:
    return sim_image_or_skip(docker_client)


def ours(client: Any, session_prefix: str) -> list[Any]:
    """Every container of this plugin whose session starts with `session_prefix`."""
    return [
        c
        for c in client.containers.list(all=True, filters={"label": lo.PLUGIN_FILTER}, ignore_removed=True)
        if (c.labels or {}).get(lo.LABEL_SESSION, "").startswith(session_prefix)
    ]


@pytest.fixture(scope="session")
def containers_of(docker_client: Any) -> Callable[[str], list[Any]]:
    """`containers_of(session_prefix)`: this plugin's containers of those sessions."""
    return lambda session_prefix: ours(docker_client, session_prefix)


@pytest.fixture(scope="session")
def test_session_id(docker_client: Any) -> Any:
    session = TEST_SESSION_PREFIX + uuid.uuid4().hex[:10]
    yield session
    leaked = ours(docker_client, session)
    for c in leaked:
        c.remove(force=True, v=True)
    assert not leaked, f"containers left behind by the Docker tests: {[c.name for c in leaked]}"


@pytest.fixture
def make_target(docker_client: Any, sim_image: str, test_session_id: str) -> Any:
    """DockerTarget factory on the sim image with test-sized timeouts. Whatever a test
    leaves (it must leave nothing) is removed afterwards and fails that test."""

    def make(**kwargs: Any) -> dk.DockerTarget:
        options: dict[str, Any] = dict(
            image_override=sim_image,
            hf_cache=None,
            ready_timeout=60,
            session_id=test_session_id,
            client=docker_client,
            stop_timeout=5,
        )
        options.update(kwargs)
        return dk.DockerTarget(**options)

    yield make
    leaked = [c for c in ours(docker_client, test_session_id)]
    for c in leaked:
        c.remove(force=True, v=True)
    assert not leaked, f"this test left containers behind: {[c.name for c in leaked]}"


@pytest.fixture(scope="session")
def exiting_image(docker_client: Any, sim_image: str) -> Any:
    """An image whose server prints the token it was given, an error, and exits 3:
    the worst case for secrets (the log tail carries the token) and a start failure."""
    tag = f"pytest-llmperf/test-exits:{uuid.uuid4().hex[:8]}"
    dockerfile = (
        f"FROM {sim_image}\n"
        'ENTRYPOINT ["sh", "-c", "echo \\"loading with HF_TOKEN=$HF_TOKEN\\"; '
        'echo \'RuntimeError: CUDA out of memory (simulated)\' >&2; exit 3", "vllm"]\n'
    )
    docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, pull=False)
    yield tag
    docker_client.images.remove(tag, force=True)
