"""The simulator's HTTP answers against real vLLM 0.32 captures (tests/fixtures/reference)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from pytest_llmperf.sim import SimConfig, simulated_server

REF = Path(__file__).resolve().parents[2] / "fixtures" / "reference"
MODEL = "smollm2"
MTP = {"method": "mtp", "num_speculative_tokens": 3}


def capture_sections() -> dict[str, tuple[int, str]]:
    """'### title' -> (status, body) from the curl -i capture."""
    text = (REF / "vllm-0.32-cpu-api-capture.txt").read_text()
    out = {}
    for block in text.split("\n### ")[1:]:
        title, _, rest = block.partition("\n")
        m = re.search(r"HTTP/1.1 (\d+)", rest)
        if not m:
            continue
        body = rest.split("\n\n", 1)[1].strip() if "\n\n" in rest else ""
        out[title.strip()] = (int(m.group(1)), body)
    return out


def sse_events(body: str) -> list[str]:
    return [line[len("data: ") :] for line in body.splitlines() if line.startswith("data: ")]


def key_tree(obj):
    """The shape of a JSON value: dict keys (in order) and nested shapes, no values."""
    if isinstance(obj, dict):
        return {k: key_tree(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [key_tree(obj[0])] if obj else []
    return None


REFERENCE = capture_sections()


@pytest.fixture(scope="module")
def server():
    config = SimConfig(
        model="/models/smollm2-135m-instruct",
        served_model_name=MODEL,
        max_model_len=2048,
        max_num_seqs=8,
        speculative_config=MTP,
        speed=50,
        seed=7,
    )
    with simulated_server(config) as url:
        with httpx.Client(base_url=url, timeout=30) as client:
            yield client


def stream(client: httpx.Client, path: str, body: dict) -> list[str]:
    with client.stream("POST", path, json=body) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        return sse_events(r.read().decode())


def test_plain_endpoints_match_reference(server):
    assert server.get("/health").status_code == 200
    assert server.get("/health").content == b""
    _, ref_version = REFERENCE["GET /version"]
    assert key_tree(server.get("/version").json()) == key_tree(json.loads(ref_version))
    _, ref_models = REFERENCE["GET /v1/models"]
    models = server.get("/v1/models").json()
    assert key_tree(models) == key_tree(json.loads(ref_models))
    assert models["data"][0]["id"] == MODEL
    assert models["data"][0]["root"] == "/models/smollm2-135m-instruct"
    assert models["data"][0]["max_model_len"] == 2048


def test_tokenize_shape_and_count(server):
    _, ref = REFERENCE["POST /tokenize"]
    got = server.post("/tokenize", json={"model": MODEL, "prompt": "one two, three two, three two."}).json()
    assert key_tree(got) == key_tree(json.loads(ref))
    assert got["count"] == len(got["tokens"]) == 9
    assert got["max_model_len"] == 2048
    chat = server.post("/tokenize", json={"messages": [{"role": "user", "content": "hi"}]})
    assert chat.status_code == 200 and chat.json()["count"] >= 1
    assert server.post("/tokenize", json={"model": "nope", "prompt": "x"}).status_code == 404
    assert server.post("/tokenize", json={"model": MODEL}).status_code == 400


def test_completion_stream_chunks_match_reference(server):
    ref = [
        json.loads(e)
        for e in sse_events(REFERENCE[next(k for k in REFERENCE if k.startswith("POST /v1/completions stream"))][1])
        if e != "[DONE]"
    ]
    events = stream(
        server,
        "/v1/completions",
        {
            "model": MODEL,
            "prompt": "Count: one two",
            "max_tokens": 40,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    *token_chunks, usage = chunks
    assert key_tree(usage) == key_tree(ref[-1])
    assert usage["choices"] == []
    for c in token_chunks:
        assert key_tree(c) == key_tree(ref[0])
        assert c["id"] == usage["id"] and c["id"].startswith("cmpl-")
    assert [c["choices"][0]["finish_reason"] for c in token_chunks] == [None] * (len(token_chunks) - 1) + ["length"]
    text = "".join(c["choices"][0]["text"] for c in token_chunks)
    assert usage["usage"]["completion_tokens"] == 40
    assert usage["usage"]["total_tokens"] == usage["usage"]["prompt_tokens"] + 40
    # Re-tokenising the streamed text gives exactly the tokens the usage reports.
    assert server.post("/tokenize", json={"prompt": text}).json()["count"] == 40
    # Under MTP some chunks carry several tokens.
    assert len(token_chunks) < 40


def test_chat_stream_chunks_match_reference(server):
    ref = [
        json.loads(e)
        for e in sse_events(REFERENCE["POST /v1/chat/completions stream + include_usage"][1])
        if e != "[DONE]"
    ]
    events = stream(
        server,
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": "List three colours."}],
            "max_completion_tokens": 30,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    chunks = [json.loads(e) for e in events[:-1]]
    assert events[-1] == "[DONE]"
    assert key_tree(chunks[0]) == key_tree(ref[0])  # role chunk, empty content
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    for c in chunks[1:-2]:
        assert key_tree(c) == key_tree(ref[1])
    assert key_tree(chunks[-2]) == key_tree(ref[-2])  # finishing chunk has stop_reason
    assert key_tree(chunks[-1]) == key_tree(ref[-1])  # usage
    assert chunks[-1]["usage"]["completion_tokens"] == 30
    text = "".join(c["choices"][0]["delta"]["content"] for c in chunks[1:-1])
    assert server.post("/tokenize", json={"prompt": text}).json()["count"] == 30


def test_no_usage_chunk_without_include_usage(server):
    events = stream(server, "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 5, "stream": True})
    assert events[-1] == "[DONE]"
    assert all(json.loads(e)["choices"] for e in events[:-1])


def test_non_streaming_completion_matches_reference(server):
    _, ref = REFERENCE["POST /v1/completions non-stream"]
    got = server.post(
        "/v1/completions",
        json={"model": MODEL, "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0},
    ).json()
    assert key_tree(got) == key_tree(json.loads(ref))
    assert got["usage"]["completion_tokens"] == 8
    assert server.post("/tokenize", json={"prompt": got["choices"][0]["text"]}).json()["count"] == 8


def test_non_streaming_chat(server):
    got = server.post(
        "/v1/chat/completions", json={"model": MODEL, "max_tokens": 6, "messages": [{"role": "user", "content": "hi"}]}
    ).json()
    assert got["object"] == "chat.completion"
    assert got["choices"][0]["message"]["role"] == "assistant"
    assert got["usage"]["completion_tokens"] == 6


def test_greedy_is_deterministic_and_sampling_is_not(server):
    body = {"model": MODEL, "prompt": "Tell me a story about a robot.", "max_tokens": 20}
    a = server.post("/v1/completions", json={**body, "temperature": 0}).json()["choices"][0]["text"]
    b = server.post("/v1/completions", json={**body, "temperature": 0}).json()["choices"][0]["text"]
    c = server.post("/v1/completions", json={**body, "temperature": 1.0}).json()["choices"][0]["text"]
    d = server.post("/v1/completions", json={**body, "temperature": 1.0}).json()["choices"][0]["text"]
    assert a == b
    assert c != d


def test_eos_varies_with_prompt_and_ignore_eos_runs_to_max_tokens(server):
    lengths, reasons = [], set()
    for i in range(30):
        body = {"model": MODEL, "prompt": f"question number {i} about things", "max_tokens": 400, "temperature": 0}
        usage = server.post("/v1/completions", json=body).json()
        lengths.append(usage["usage"]["completion_tokens"])
        reasons.add(usage["choices"][0]["finish_reason"])
        forced = server.post("/v1/completions", json={**body, "ignore_eos": True}).json()
        assert forced["usage"]["completion_tokens"] == 400
        assert forced["choices"][0]["finish_reason"] == "length"
    assert reasons == {"stop", "length"}  # generic profile: median natural length 200
    assert len(set(lengths)) > 10


def test_eos_only_replies_are_shaped_as_vllm_sends_them():
    # vLLM 0.32, a reply that is one EOS token: one choices chunk with empty text and
    # finish_reason stop (chat: after the role chunk), then usage with completion_tokens 1.
    config = SimConfig(model=MODEL, max_model_len=2048, speed=50, eos_only_rate=1.0)
    with simulated_server(config) as url, httpx.Client(base_url=url, timeout=30) as client:
        opts = {"model": MODEL, "stream": True, "stream_options": {"include_usage": True}}
        completion = stream(client, "/v1/completions", {**opts, "prompt": "hi", "max_tokens": 50})
        chat = stream(
            client, "/v1/chat/completions", {**opts, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 50}
        )
    assert completion[-1] == chat[-1] == "[DONE]"
    (token, usage) = [json.loads(e) for e in completion[:-1]]
    assert (token["choices"][0]["text"], token["choices"][0]["finish_reason"]) == ("", "stop")
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 1
    role, token, usage = [json.loads(e) for e in chat[:-1]]
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert (token["choices"][0]["delta"], token["choices"][0]["finish_reason"]) == ({"content": ""}, "stop")
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 1


@pytest.mark.parametrize(
    "title, body",
    [
        ("error: unknown model", {"model": "nope", "prompt": "hi", "max_tokens": 5}),
        ("error: prompt + max_tokens over max_model_len", {"model": MODEL, "prompt": "hi", "max_tokens": 5000}),
    ],
)
def test_errors_match_reference(server, title, body):
    status, ref = REFERENCE[title]
    r = server.post("/v1/completions", json=body)
    assert r.status_code == status
    assert r.json() == json.loads(ref)


def test_malformed_json_matches_reference(server):
    status, ref = REFERENCE["error: malformed JSON"]
    r = server.post("/v1/completions", content=b'{"model":', headers={"content-type": "application/json"})
    assert r.status_code == status == 400
    assert key_tree(r.json()) == key_tree(json.loads(ref))
    assert "JSON decode error" in r.json()["error"]["message"]


def test_missing_route_matches_reference(server):
    status, ref = REFERENCE["error: stream to a missing route"]
    r = server.post("/v1/nothing", json={"stream": True})
    assert (r.status_code, r.json()) == (status, json.loads(ref))


def test_prompt_plus_max_tokens_over_limit(server):
    prompt = " word" * 2000  # 2000 tokens, under 2048 on its own
    r = server.post("/v1/completions", json={"model": MODEL, "prompt": prompt, "max_tokens": 100})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "BadRequestError" and err["param"] == "max_tokens"
    assert "2048" in err["message"] and "2000 input tokens" in err["message"]
    too_long = server.post("/v1/completions", json={"model": MODEL, "prompt": " word" * 3000, "max_tokens": 1})
    assert too_long.status_code == 400 and "maximum context length" in too_long.json()["error"]["message"]


@pytest.mark.parametrize(
    "body, fragment",
    [
        ({"model": MODEL}, "Field required"),
        ({"model": MODEL, "prompt": "x", "max_tokens": -1}, "max_tokens"),
        ({"model": MODEL, "prompt": "x", "max_tokens": "ten"}, "max_tokens"),
        ({"model": MODEL, "prompt": "x", "temperature": -1}, "temperature"),
        ({"model": MODEL, "prompt": "x", "stream": "yes"}, "stream"),
        ({"model": MODEL, "prompt": 42}, "prompt"),
        ({"model": MODEL, "prompt": "x", "stream_options": {"include_usage": True}}, "stream=True"),
    ],
)
def test_bad_requests_are_400_with_a_message(server, body, fragment):
    r = server.post("/v1/completions", json=body)
    assert r.status_code == 400
    assert fragment in r.json()["error"]["message"]


def test_chat_needs_messages(server):
    r = server.post("/v1/chat/completions", json={"model": MODEL})
    assert r.status_code == 400 and "messages" in r.json()["error"]["message"]
    r = server.post("/v1/chat/completions", json={"model": MODEL, "messages": "hi"})
    assert r.status_code == 400


def test_body_must_be_an_object(server):
    r = server.post("/v1/completions", json=[1, 2])
    assert r.status_code == 400


def test_a_lying_usage_and_counter_lie_in_streams_answers_and_metrics_alike():
    config = SimConfig(model=MODEL, max_model_len=2048, speed=50, usage_offset=-3, counter_scale=2.0)
    body = {"model": MODEL, "prompt": "hi there", "max_tokens": 20, "ignore_eos": True}
    with simulated_server(config) as url, httpx.Client(base_url=url, timeout=30) as client:
        whole = client.post("/v1/completions", json=body).json()
        streamed = stream(
            client, "/v1/completions", {**body, "stream": True, "stream_options": {"include_usage": True}}
        )
        page = client.get("/metrics").text
    assert (
        whole["usage"]["completion_tokens"] == 17
        and whole["usage"]["total_tokens"] == whole["usage"]["prompt_tokens"] + 17
    )
    assert json.loads(streamed[-2])["usage"]["completion_tokens"] == 17
    assert len(streamed) == 20 + 2  # 20 token chunks (one token each), the usage, [DONE]
    (counted,) = re.findall(r"^vllm:generation_tokens_total\{[^}]*\} (\S+)$", page, re.M)
    assert float(counted) == 2.0 * 40  # the two requests' 40 tokens, counted twice
