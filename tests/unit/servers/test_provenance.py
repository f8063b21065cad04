"""server_provenance against a scripted server: vLLM's version from /version and
max_model_len from /v1/models; best effort, so a missing page never raises."""

from __future__ import annotations

from pytest_llmperf.servers.provenance import server_provenance
from tests.unit.servers.openai_fake import FakeOpenAIServer, unused_url


def test_reads_the_version_and_max_model_len():
    with FakeOpenAIServer(max_model_len=65536) as server:
        server.version = "0.11.1rc2.dev5"
        info = server_provenance(server.base_url)
    assert info == {"vllm_version": "0.11.1rc2.dev5", "max_model_len": 65536}
    assert server.paths == ["/version", "/v1/models"]


def test_without_a_version_page_the_version_is_unknown_and_the_rest_is_read():
    with FakeOpenAIServer(max_model_len=8192) as server:
        server.version = None  # /version answers 404 (older servers, other engines)
        assert server_provenance(server.base_url) == {"vllm_version": "unknown", "max_model_len": 8192}


def test_max_model_len_comes_from_the_first_model_and_is_left_out_when_absent():
    with FakeOpenAIServer(models=("a", "b"), max_model_len=None) as server:
        assert server_provenance(server.base_url) == {"vllm_version": "0.11.1"}
    with FakeOpenAIServer(models=(), max_model_len=4096) as server:
        assert server_provenance(server.base_url) == {"vllm_version": "0.11.1"}  # empty listing: no entry to read


def test_a_models_page_that_fails_or_is_not_json_leaves_only_the_version():
    with FakeOpenAIServer() as server:
        server.models_status = 500
        assert server_provenance(server.base_url) == {"vllm_version": "0.11.1"}
        server.models_status, server.models_body = 200, b"not json"
        assert server_provenance(server.base_url) == {"vllm_version": "0.11.1"}


def test_an_unreachable_server_gives_unknown_without_raising():
    assert server_provenance(unused_url(), timeout=1.0) == {"vllm_version": "unknown"}
