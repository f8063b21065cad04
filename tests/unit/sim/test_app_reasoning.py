"""The simulator served with `--reasoning-parser qwen3`: chat streams shaped as vLLM 0.32's
qwen3 parser writes them (vllm/parser/qwen3.py, vllm/parser/engine/parser_engine.py and
the chat path in vllm/entrypoints/openai/chat_completion/serving.py)."""

from __future__ import annotations

import json

import httpx
import pytest

from pytest_llmperf.sim import SimConfig, simulated_server
from pytest_llmperf.sim.engine import Engine
from tests.unit.sim.test_app import REFERENCE, key_tree, sse_events, stream

MODEL = "m"
OPTS = {"model": MODEL, "stream": True, "stream_options": {"include_usage": True}, "temperature": 0}


# One token per step (no speculation), so each step's chunk, or its absence, shows.
CONFIG = SimConfig(model=MODEL, max_model_len=4096, speed=50, reasoning_parser="qwen3", reasoning_share=0.5)


def thinker(at_least: int) -> str:
    """A prompt whose reply reasons for at least `at_least` tokens (the engine's own draw)."""
    engine = Engine(CONFIG)
    for i in range(1000):
        prompt = f"question {i} to think about"
        if (engine.make_request("x", prompt, 5, 10_000, False, 0.0, reasoning=True).reasoning_len or 0) >= at_least:
            return prompt
    raise AssertionError("no such prompt")


@pytest.fixture(scope="module")
def server():
    config = CONFIG
    with simulated_server(config) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


def chat(client: httpx.Client, prompt: str, max_tokens: int) -> list[dict]:
    events = stream(
        client,
        "/v1/chat/completions",
        {**OPTS, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens},
    )
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def test_a_reply_reasons_then_answers_in_vllms_chunk_shapes(server):
    ref = [json.loads(e) for e in sse_events(REFERENCE["POST /v1/chat/completions stream + include_usage"][1])[:-1]]
    shapes = set()
    for i in range(20):  # the generic profile's natural lengths: most stop before 2000 tokens
        role, *tokens, usage = chat(server, f"question {i} about colours", 2000)
        assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        deltas = [c["choices"][0]["delta"] for c in tokens]
        finish = tokens[-1]["choices"][0]["finish_reason"]
        out = usage["usage"]["completion_tokens"]
        reasoning_tokens = usage["usage"]["completion_tokens_details"]["reasoning_tokens"]
        assert list(usage["usage"]) == [
            "prompt_tokens",
            "total_tokens",
            "completion_tokens",
            "completion_tokens_details",
        ]
        if finish != "stop" or reasoning_tokens == 0:
            continue
        shapes.add("answered")
        kinds = [tuple(d) for d in deltas]
        r = kinds.count(("reasoning",))
        # reasoning first, one token a chunk; then the answer, each step's text passed through
        assert kinds == [("reasoning",)] * r + [("content",)] * (len(kinds) - r)
        assert r == reasoning_tokens
        # </think> alone in its step makes no chunk; the blank line after it is the answer's first
        assert len(tokens) == out - 1
        assert deltas[r] == {"content": "\n\n"} and deltas[r + 1]["content"].strip()
        assert deltas[-1] == {"content": ""}  # EOS, as without a parser
        for c in tokens[:-1]:  # the reference's token chunk, its delta's field renamed where reasoning
            delta_key = next(iter(c["choices"][0]["delta"]))
            expected = key_tree(ref[1])
            expected["choices"][0]["delta"] = {delta_key: None}
            assert key_tree(c) == expected
        assert key_tree(tokens[-1])["choices"][0].keys() == key_tree(ref[-2])["choices"][0].keys()
    assert shapes == {"answered"}


def test_a_reply_cut_in_its_reasoning_never_answers(server):
    role, *tokens, usage = chat(server, thinker(100), 40)
    assert [tuple(c["choices"][0]["delta"]) for c in tokens] == [("reasoning",)] * 40
    assert tokens[-1]["choices"][0]["finish_reason"] == "length"
    assert usage["usage"]["completion_tokens"] == 40
    assert usage["usage"]["completion_tokens_details"] == {"reasoning_tokens": 40}


def test_completions_and_non_streamed_chat(server):
    # /v1/completions has no reasoning parser in vLLM: text as without the flag, no details
    events = stream(server, "/v1/completions", {**OPTS, "prompt": thinker(100), "max_tokens": 20})
    *tokens, usage = [json.loads(e) for e in events[:-1]]
    assert all("text" in c["choices"][0] for c in tokens)
    assert "completion_tokens_details" not in usage["usage"]
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": thinker(100)}],
        "temperature": 0,
    }
    got = server.post("/v1/chat/completions", json={**body, "max_tokens": 40}).json()
    message = got["choices"][0]["message"]
    assert message["reasoning"] and message["content"] is None  # still reasoning at 40 tokens
    assert got["usage"]["completion_tokens_details"] == {"reasoning_tokens": 40}
    streamed = chat(server, thinker(100), 40)
    assert message["reasoning"] == "".join(c["choices"][0]["delta"].get("reasoning", "") for c in streamed[1:-1])


def test_without_the_flag_chat_has_no_reasoning():
    config = SimConfig(model=MODEL, speed=50)
    with simulated_server(config) as url, httpx.Client(base_url=url, timeout=30) as client:
        role, *tokens, usage = chat(client, "question 1 about colours", 2000)
    assert all(tuple(c["choices"][0]["delta"]) == ("content",) for c in tokens)
    assert list(usage["usage"]) == ["prompt_tokens", "total_tokens", "completion_tokens"]


def test_speculative_steps_mix_reasoning_and_answer_and_account_every_token():
    config = SimConfig(
        model=MODEL,
        speed=50,
        reasoning_parser="qwen3",
        reasoning_share=0.5,
        speculative_config={"method": "mtp", "num_speculative_tokens": 3},
    )
    with simulated_server(config) as url, httpx.Client(base_url=url, timeout=30) as client:
        replies = [chat(client, f"question {i} about colours", 2000) for i in range(12)]
        log = {e["id"]: e for e in client.get("/sim/requests").json()}
    mixed = 0
    for _role, *tokens, usage in replies:
        entry = log[usage["id"]]
        # every token is in some chunk: a step the parser kept back adds to the next chunk
        assert sum(entry["tokens_per_chunk"]) == entry["completion_tokens"] == usage["usage"]["completion_tokens"]
        assert len(entry["chunk_times"]) == len(tokens)
        assert entry["reasoning_tokens"] == usage["usage"]["completion_tokens_details"]["reasoning_tokens"]
        mixed += any(set(c["choices"][0]["delta"]) == {"content", "reasoning"} for c in tokens)
        for c in tokens:
            assert list(c["choices"][0]["delta"]) in ([], ["content"], ["reasoning"], ["content", "reasoning"])
    assert mixed >= 1  # a step that ended the reasoning and began the answer: one delta with both


def test_an_eos_only_reply_of_a_reasoning_server_is_one_empty_delta():
    # vLLM: still in the reasoning phase, the parser has nothing to send; the finishing
    # chunk goes out with an empty DeltaMessage.
    config = SimConfig(model=MODEL, speed=50, eos_only_rate=1.0, reasoning_parser="qwen3")
    with simulated_server(config) as url, httpx.Client(base_url=url, timeout=30) as client:
        role, token, usage = chat(client, "hi", 50)
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert (token["choices"][0]["delta"], token["choices"][0]["finish_reason"]) == ({}, "stop")
    assert usage["usage"]["completion_tokens"] == 1
    assert usage["usage"]["completion_tokens_details"] == {"reasoning_tokens": 0}
