"""The local-vllm target against the real engine: readiness, /version provenance, and
nothing left running after a normal exit, an exception, or a server that dies at start."""

from __future__ import annotations

import time

import httpx
import pytest
from real_vllm_helpers import BASE, SERVED_NAME, report

from pytest_llmperf.servers.base import ServerStartError
from pytest_llmperf.servers.local_vllm import VLLM_VERSION, group_members, target_from_prepared_env
from pytest_llmperf.servers.spec import ServerSpec

pytestmark = [pytest.mark.slow, pytest.mark.real_vllm]


@pytest.fixture
def target(prepared_vllm, real_pool, tmp_path):
    real_pool.stop()  # one engine at a time on two cores
    return target_from_prepared_env(ready_timeout=300, log_dir=tmp_path)


def assert_nothing_left(pgid: int, port: int) -> None:
    assert group_members(pgid) == [], f"vLLM processes left running in group {pgid}"
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)


def test_ready_serves_reports_version_and_stops_everything(target, request):
    started = time.monotonic()
    with target.start(BASE) as ep:
        ready_s = time.monotonic() - started
        server = target.current
        assert ep.target == "local-vllm" and ep.model == SERVED_NAME
        assert ep.provenance["vllm_version"] == VLLM_VERSION
        assert ep.provenance["platform"] == "cpu"
        # The api server forks an engine core (and a worker): they must all go with it.
        assert len(group_members(server.pgid)) >= 2
        models = httpx.get(f"{ep.base_url}/v1/models").json()
        assert [m["id"] for m in models["data"]] == [SERVED_NAME]
        answer = httpx.post(
            f"{ep.base_url}/v1/completions",
            timeout=60,
            json={"model": ep.model, "prompt": "The capital of France is", "max_tokens": 3, "temperature": 0},
        )
        assert "Paris" in answer.json()["choices"][0]["text"]
        stopping = time.monotonic()
    stop_s = time.monotonic() - stopping
    assert_nothing_left(server.pgid, server.port)
    assert "Paris" in answer.text
    report(request, f"local-vllm ready in {ready_s:.1f} s, stopped in {stop_s:.1f} s")


def test_exception_in_the_block_stops_the_server(target):
    with pytest.raises(RuntimeError, match="measurement blew up"):
        with target.start(BASE):
            server = target.current
            raise RuntimeError("measurement blew up")
    assert_nothing_left(server.pgid, server.port)


def test_server_dying_at_start_fails_at_once_with_its_log(target):
    spec = ServerSpec(
        name="bad-flag", model=BASE.model, served_model_name=SERVED_NAME, args=(*BASE.args, "--no-such-flag")
    )
    started = time.monotonic()
    with pytest.raises(ServerStartError) as err:
        with target.start(spec):
            pytest.fail("a server with an unknown flag must not become ready")
    assert time.monotonic() - started < 120, "a dead server must not wait out the ready timeout"
    message = str(err.value)
    assert "exit code" in message and "--no-such-flag" in message
    assert_nothing_left(target.last.pgid, target.last.port)
