"""wait_until_ready against a scripted server on 127.0.0.1: ready once /health answers
200 and the model is listed; otherwise a ServerStartError that says where and why."""

from __future__ import annotations

import time

import pytest

from pytest_llmperf.servers.base import ServerStartError
from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.servers.readiness import wait_until_ready, why_down
from tests.unit.servers.openai_fake import FakeOpenAIServer, unused_url

FAST = 0.01  # poll interval: these servers answer at once


def test_ready_at_once_when_healthy_and_the_model_is_listed():
    progress: list[tuple[float, str]] = []
    with FakeOpenAIServer(models=("other", "m")) as server:
        wait_until_ready(server.base_url, "m", 5.0, on_progress=lambda t, s: progress.append((t, s)))
    assert server.paths == ["/health", "/v1/models"]
    assert progress == []  # ready on the first poll: nothing to report


def test_waits_while_health_answers_503_and_reports_each_poll():
    progress: list[str] = []
    with FakeOpenAIServer() as server:
        server.unhealthy_polls = 3
        wait_until_ready(server.base_url, "m", 5.0, on_progress=lambda t, s: progress.append(s), poll_interval=FAST)
    assert progress == ["/health answered 503"] * 3
    assert server.paths.count("/health") == 4 and server.paths[-1] == "/v1/models"


def test_a_server_serving_another_model_fails_at_once_naming_both():
    with FakeOpenAIServer(models=("someone/else",)) as server:
        started = time.monotonic()
        with pytest.raises(ServerStartError) as err:
            wait_until_ready(server.base_url, "org/wanted", 60.0, poll_interval=FAST)
    assert time.monotonic() - started < 5  # not the 60 s timeout
    assert f"server at {server.base_url} serves ['someone/else'], not 'org/wanted'" in str(err.value)


def test_health_never_ok_times_out_with_the_last_status():
    with FakeOpenAIServer() as server:
        server.health_status = 503
        with pytest.raises(
            ServerStartError, match=r"not ready after [0-9.]+ s \(--llmperf-ready-timeout\): /health answered 503"
        ):
            wait_until_ready(server.base_url, "m", 0.05, poll_interval=FAST)
    assert "/v1/models" not in server.paths  # models are asked only of a healthy server


def test_models_page_not_ok_counts_as_nothing_served():
    with FakeOpenAIServer() as server:
        server.models_status = 500
        with pytest.raises(ServerStartError, match=r"model 'm' not listed yet \(served: \[\]\)"):
            wait_until_ready(server.base_url, "m", 0.0)


def test_a_models_page_that_is_not_json_reads_as_not_answering():
    with FakeOpenAIServer() as server:
        server.models_body = b"<html>proxy error</html>"
        with pytest.raises(ServerStartError, match=r"not answering \(JSONDecodeError\)"):
            wait_until_ready(server.base_url, "m", 0.0)


def test_nothing_listening_times_out_as_not_answering():
    url = unused_url()
    with pytest.raises(
        ServerStartError,
        match=rf"server at {url} not ready after [0-9.]+ s \(--llmperf-ready-timeout\): not answering \(ConnectError\)",
    ):
        wait_until_ready(url, "m", 0.05, poll_interval=FAST)


def test_a_dead_server_fails_at_once_with_its_reason_not_after_the_timeout():
    started = time.monotonic()
    dead = r"server exited before it was ready \(connecting\): exit code 1; log: boom"
    with pytest.raises(ServerStartError, match=dead):
        wait_until_ready(unused_url(), "m", 60.0, is_alive=lambda: "exit code 1; log: boom")
    assert time.monotonic() - started < 5.0


def test_death_after_some_polls_names_the_status_it_had_reached():
    polls = iter([None, None, "exit code 137"])
    with FakeOpenAIServer() as server:
        server.health_status = 503
        with pytest.raises(ServerStartError, match=r"before it was ready \(/health answered 503\): exit code 137"):
            wait_until_ready(server.base_url, "m", 60.0, is_alive=lambda: next(polls), poll_interval=FAST)


# ----------------------------------------------------------------------------- why_down


def endpoint(base_url, exit_status=None):
    return Endpoint(base_url, "m", "sim", {}, exit_status=exit_status)


def test_a_server_answering_health_200_is_not_down():
    with FakeOpenAIServer() as server:
        assert why_down(endpoint(server.base_url, exit_status=lambda: None)) is None


def test_an_engine_dead_under_a_live_api_process_reads_as_its_health_status():
    with FakeOpenAIServer() as server:
        server.health_status = 503
        assert why_down(endpoint(server.base_url, exit_status=lambda: None), settle=0.1) == "/health answers 503"
        exits = iter([None, None, "the vLLM process exited with code 1"])  # on its way out
        assert why_down(endpoint(server.base_url, lambda: next(exits))) == "the vLLM process exited with code 1"


def test_an_ended_process_is_said_before_anything_is_asked():
    with FakeOpenAIServer() as server:
        assert why_down(endpoint(server.base_url, lambda: "the vLLM process exited with code 1")) == (
            "the vLLM process exited with code 1"
        )
    assert server.paths == []


def test_a_server_that_does_not_answer_is_given_time_to_finish_exiting():
    exits = iter([None, None, None, "the simulator process exited with code 1"])
    assert why_down(endpoint(unused_url(), lambda: next(exits)), timeout=1.0) == (
        "the simulator process exited with code 1"
    )
    started = time.monotonic()
    assert why_down(endpoint(unused_url(), lambda: None), timeout=1.0, settle=0.2) == (
        "/health does not answer (ConnectError)"
    )
    assert time.monotonic() - started < 3
    assert why_down(endpoint(unused_url()), timeout=1.0) == "/health does not answer (ConnectError)"  # external
