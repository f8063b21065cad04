"""ExternalTarget (--llmperf-base-url): attach to a server someone else runs, after
checking that it is an http(s) URL, that it answers, and that it serves the spec's model."""

from __future__ import annotations

import re

import pytest

from pytest_llmperf.servers.base import ServerStartError
from pytest_llmperf.servers.external import ExternalTarget
from pytest_llmperf.servers.spec import ServerSpec
from tests.unit.servers.openai_fake import FakeOpenAIServer, unused_url

SPEC = ServerSpec(name="qwen-small", model="Qwen/Qwen3-0.6B")


@pytest.mark.parametrize("url", ["localhost:8000", "127.0.0.1:8000/v1", "ftp://h:21", ""])
def test_a_url_that_is_not_http_is_refused_with_what_was_given(url):
    with pytest.raises(ValueError, match=re.escape(f"expected an http(s):// URL, got {url!r}")):
        ExternalTarget(url)


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_the_url_is_kept_as_the_server_root(suffix):
    assert ExternalTarget("http://10.0.0.5:8000" + suffix).base_url == "http://10.0.0.5:8000"


def test_start_yields_the_endpoint_with_what_the_server_says_about_itself():
    with FakeOpenAIServer(models=(SPEC.model_id,), max_model_len=40960) as server:
        target = ExternalTarget(server.base_url + "/v1")
        with target.start(SPEC) as endpoint:
            assert endpoint.base_url == server.base_url
            assert endpoint.model == "Qwen/Qwen3-0.6B"
            assert endpoint.target == "external" == target.name
            assert endpoint.provenance == {"vllm_version": "0.11.1", "max_model_len": 40960}
        assert "/health" in server.paths  # checked, not assumed


def test_the_served_model_name_is_what_must_be_listed():
    spec = ServerSpec(name="s", model="Qwen/Qwen3-0.6B", served_model_name="small")
    with FakeOpenAIServer(models=("small",)) as server:
        with ExternalTarget(server.base_url).start(spec) as endpoint:
            assert endpoint.model == "small"


def test_a_server_with_another_model_is_refused_naming_what_it_serves():
    with FakeOpenAIServer(models=("meta-llama/Llama-3.1-8B",)) as server:
        target = ExternalTarget(server.base_url, ready_timeout=600.0)
        with pytest.raises(ServerStartError) as err:
            with target.start(SPEC):
                pytest.fail("must not attach to a server serving another model")
    assert "serves ['meta-llama/Llama-3.1-8B'], not 'Qwen/Qwen3-0.6B'" in str(err.value)


def test_nothing_at_the_url_is_refused_saying_it_does_not_answer():
    url = unused_url()
    with pytest.raises(
        ServerStartError, match=rf"server at {url} not ready after [0-9.]+ s \(--llmperf-ready-timeout\): not answering"
    ):
        with ExternalTarget(url, ready_timeout=0.0).start(SPEC):
            pytest.fail("must not attach to nothing")
