"""SimTarget (--llmperf-sim): the spec's vLLM command line plus the simulator's flags,
one server process per start, stopped with nothing left behind; the endpoint's
provenance carries the clock speed its figures are scaled back by."""

from __future__ import annotations

import os
import threading
import time

import httpx
import pytest

from pytest_llmperf.servers.base import ServerStartError
from pytest_llmperf.servers.sim_target import SimTarget
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.sim import SimConfig

SPEC = ServerSpec(
    name="qwen-small",
    model="Qwen/Qwen3-0.6B",
    args=("--max-model-len", "4096", "--max-num-seqs", "4"),
    served_model_name="small",
    sim_args=("--sim-acceptance-scale", "0.5"),
)


def test_the_profile_is_the_one_fitted_to_the_model_else_generic_else_the_one_named():
    target = SimTarget()
    assert target.profile_name(ServerSpec(name="q", model="Qwen/Qwen3.6-27B-FP8")) == "qwen3.6-27b-fp8"
    assert target.profile_name(SPEC) == "generic"  # no profile fitted to Qwen3-0.6B
    assert SimTarget(extra_args=("--sim-profile", "qwen3.6-27b-fp8")).profile_name(SPEC) == "qwen3.6-27b-fp8"


def test_argv_is_the_specs_vllm_command_then_the_simulators_flags():
    target = SimTarget(speed=25.0, extra_args=["--sim-step-time-scale", "2"])
    argv = target.argv(SPEC)
    assert argv == [
        *SPEC.vllm_args(host="127.0.0.1", port=0),
        "--sim-speed",
        "25.0",
        "--sim-acceptance-scale",
        "0.5",
        "--sim-step-time-scale",
        "2",
    ]
    config = SimConfig.from_vllm_argv(argv)
    assert (config.model_id, config.max_model_len, config.max_num_seqs) == ("small", 4096, 4)
    assert (config.speed, config.acceptance_scale, config.step_time_scale) == (25.0, 0.5, 2.0)
    assert (config.host, config.port) == ("127.0.0.1", 0)


def test_an_unknown_simulator_flag_is_refused_before_anything_starts():
    threads = set(threading.enumerate())
    with pytest.raises(ValueError, match=r"--sim-bogus.*--sim-speed"):
        with SimTarget(extra_args=("--sim-bogus", "1")).start(SPEC):
            pytest.fail("must not start")
    assert set(threading.enumerate()) == threads


def _pid(base_url: str) -> int:
    return int(httpx.get(f"{base_url}/sim/state", timeout=5).json()["pid"])


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_start_serves_the_spec_in_its_own_process_and_stops_it_cleanly():
    threads = set(threading.enumerate())
    with SimTarget(speed=40.0).start(SPEC) as endpoint:
        pid = _pid(endpoint.base_url)
        models = httpx.get(f"{endpoint.base_url}/v1/models", timeout=5).json()["data"]
        assert pid != os.getpid()  # not a thread of the measuring process
        assert [m["id"] for m in models] == ["small"]
        assert (endpoint.model, endpoint.target) == ("small", "sim")
        assert endpoint.base_url.startswith("http://127.0.0.1:")
        provenance = endpoint.provenance
        assert provenance["clock_speed"] == 40.0
        assert provenance["simulator"] is True
        assert provenance["sim_args"] == ["--sim-acceptance-scale", "0.5"]
        assert provenance["max_model_len"] == 4096
        assert provenance["vllm_version"] not in ("", "unknown")
    assert _gone(pid)
    assert set(threading.enumerate()) == threads  # the output reader is joined too
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{endpoint.base_url}/health", timeout=2)


def test_a_failing_test_body_still_stops_the_server():
    threads = set(threading.enumerate())
    with pytest.raises(RuntimeError, match="the test failed"):
        with SimTarget(speed=40.0, extra_args=("--sim-step-time-scale", "3")).start(SPEC) as endpoint:
            pid = _pid(endpoint.base_url)
            assert endpoint.provenance["sim_args"] == ["--sim-acceptance-scale", "0.5", "--sim-step-time-scale", "3"]
            raise RuntimeError("the test failed")
    assert _gone(pid)
    assert set(threading.enumerate()) == threads


def test_a_slow_starting_simulator_is_waited_for_before_the_endpoint_is_handed_out():
    # /health answers 503 for the first second (real time, like a model load).
    with SimTarget(speed=40.0, extra_args=("--sim-slow-start-seconds", "1")).start(SPEC) as endpoint:
        assert httpx.get(f"{endpoint.base_url}/health", timeout=5).status_code == 200


def test_a_simulator_slower_to_start_than_the_ready_timeout_fails_naming_its_status():
    target = SimTarget(speed=40.0, extra_args=("--sim-slow-start-seconds", "4000"), ready_timeout=0.3)
    with pytest.raises(
        ServerStartError, match=r"not ready after [0-9.]+ s \(--llmperf-ready-timeout\): /health answered 503"
    ):
        with target.start(SPEC):
            pytest.fail("must not hand out a server that is not ready")


def _crash(base_url: str, model: str, n: int) -> None:
    body = {"model": model, "prompt": "hi", "max_tokens": 4}
    for _ in range(n):
        httpx.post(f"{base_url}/v1/completions", json=body, timeout=10)


def test_the_endpoint_tells_a_live_simulator_from_one_that_exited_and_shows_its_output():
    args = ("--sim-crash-after-requests", "1", "--sim-crash-exit")
    with SimTarget(speed=40.0, extra_args=args).start(SPEC) as endpoint:
        assert endpoint.exit_status is not None and endpoint.log_tail is not None
        assert endpoint.exit_status() is None
        assert f"on {endpoint.base_url}" in endpoint.log_tail(5)  # its banner line
        _crash(endpoint.base_url, endpoint.model, 2)
        deadline = time.monotonic() + 10
        while endpoint.exit_status() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert endpoint.exit_status() == "the simulator process exited with code 1"
        tail = endpoint.log_tail(20)
        assert "sim: engine dead (crash_after_requests=1)" in tail
        assert "Traceback" not in tail  # deliberate stream resets are not logged as app errors
        assert endpoint.log_tail(1).count("\n") == 0
