"""The simulator against the real vLLM: same endpoints, same answers' shapes, same SSE
chunk fields, same error bodies, same metric families (names, types, labels).

Both servers get the same requests; we compare structure (keys, value types, status
codes, content types), not values. A difference fails with both sides shown, so the
simulator cannot drift from vLLM unnoticed.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from real_vllm_helpers import MAX_MODEL_LEN, NGRAM, SERVED_NAME, serve

from pytest_llmperf.metrics import prometheus as prom
from pytest_llmperf.sim.config import SimConfig
from pytest_llmperf.sim.server import simulated_server

pytestmark = [pytest.mark.slow, pytest.mark.real_vllm]

# Families the plugin reads; both servers must have them, with these labels.
PLUGIN_FAMILIES = (
    prom.DRAFTS,
    prom.DRAFT_TOKENS,
    prom.ACCEPTED,
    prom.ACCEPTED_PER_POS,
    prom.GENERATION_TOKENS,
    prom.PROMPT_TOKENS,
    prom.REQUEST_SUCCESS,
)


def shape(value: Any) -> Any:
    """The structure of a JSON value: keys and value kinds, no values."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        kinds = []
        for item in value:
            s = shape(item)
            if s not in kinds:
                kinds.append(s)
        return kinds
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "null" if value is None else type(value).__name__


def _sse(resp: httpx.Response) -> tuple[list[dict], bool]:
    chunks, done = [], False
    for line in resp.text.splitlines():
        if line == "data: [DONE]":
            done = True
        elif line.startswith("data: "):
            chunks.append(json.loads(line[len("data: ") :]))
    return chunks, done


def _stream_kinds(chunks: list[dict]) -> dict[str, Any]:
    """Chunk shapes by role in the stream: first, text, finish, usage."""
    kinds: dict[str, list] = {}
    for i, c in enumerate(chunks):
        choices = c.get("choices") or []
        if not choices:
            kind = "usage"
        elif choices[0].get("finish_reason"):
            kind = "finish"
        elif i == 0:
            kind = "first"
        else:
            kind = "text"
        s = shape(c)
        kinds.setdefault(kind, [])
        if s not in kinds[kind]:
            kinds[kind].append(s)
    return kinds


def probe(url: str, model: str) -> dict[str, Any]:
    """The same requests to a server; what came back, as structure."""
    out: dict[str, Any] = {}
    with httpx.Client(base_url=url, timeout=120) as c:

        def record(name: str, resp: httpx.Response, body: Any = None) -> None:
            out[name] = {
                "status": resp.status_code,
                "content_type": resp.headers.get("content-type", "").split(";")[0],
                "body": body,
            }

        r = c.get("/health")
        record("GET /health", r, r.text)
        for path in ("/version", "/v1/models"):
            r = c.get(path)
            record(f"GET {path}", r, shape(r.json()))
        r = c.post("/tokenize", json={"model": model, "prompt": "one, two, three"})
        record("POST /tokenize", r, shape(r.json()))
        stream = {"stream": True, "stream_options": {"include_usage": True}, "temperature": 0, "max_tokens": 12}
        r = c.post("/v1/completions", json={"model": model, "prompt": "One, two, three, one, two, three,", **stream})
        chunks, done = _sse(r)
        record("POST /v1/completions stream", r, {"done": done, "chunks": _stream_kinds(chunks)})
        r = c.post(
            "/v1/chat/completions",
            json={"model": model, "messages": [{"role": "user", "content": "Count to five."}], **stream},
        )
        chunks, done = _sse(r)
        record(
            "POST /v1/chat/completions stream",
            r,
            {"done": done, "chunks": _stream_kinds(chunks), "first_delta": chunks[0]["choices"][0]["delta"]},
        )
        r = c.post("/v1/completions", json={"model": model, "prompt": "Hello", "max_tokens": 4, "temperature": 0})
        record("POST /v1/completions", r, shape(r.json()))
        # Errors: vLLM's status codes and error body (type, code, where the message is).
        for name, kwargs in {
            "unknown model": {"json": {"model": "no-such-model", "prompt": "x", "max_tokens": 2}},
            "max_tokens over max_model_len": {
                "json": {"model": model, "prompt": "x", "max_tokens": MAX_MODEL_LEN + 10}
            },
            "malformed JSON": {"content": b"{not json", "headers": {"content-type": "application/json"}},
        }.items():
            r = c.post("/v1/completions", **kwargs)
            body = r.json()
            record(
                f"error: {name}",
                r,
                {
                    "shape": shape(body),
                    "type": body.get("error", {}).get("type"),
                    "code": body.get("error", {}).get("code"),
                },
            )
    return out


def metric_families(url: str) -> dict[str, tuple[str, frozenset[str]]]:
    """vllm:* sample name -> (family type, label names)."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    found: dict[str, tuple[str, frozenset[str]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("vllm:"):
                labels = frozenset(sample.labels) - {"le", "quantile"}  # bucket bounds are values
                found[sample.name] = (family.type, found.get(sample.name, (None, frozenset()))[1] | labels)
    return found


@pytest.fixture(scope="module")
def both(real_pool, real_target):
    ngram_server = serve(real_pool, real_target, NGRAM)
    sim_config = SimConfig(
        model=SERVED_NAME,
        served_model_name=SERVED_NAME,
        max_model_len=MAX_MODEL_LEN,
        max_num_seqs=8,
        speculative_config=dict(NGRAM.speculative_config),
        speed=50.0,
    )
    real = probe(ngram_server.url, SERVED_NAME)
    real_metrics = metric_families(ngram_server.url)
    with simulated_server(sim_config) as sim_url:
        sim = probe(sim_url, SERVED_NAME)
        sim_metrics = metric_families(sim_url)
    return {"real": real, "sim": sim, "real_metrics": real_metrics, "sim_metrics": sim_metrics}


def test_the_probe_sees_what_it_compares(both):
    # Guards against comparing two empty answers: the real server's shapes are rich.
    real = both["real"]
    assert real["GET /version"]["body"] == {"version": "str"}
    assert real["POST /v1/completions stream"]["body"]["done"] is True
    assert "usage" in real["POST /v1/completions stream"]["body"]["chunks"]
    assert real["error: unknown model"]["status"] == 404
    assert prom.ACCEPTED_PER_POS in both["real_metrics"]


@pytest.mark.parametrize(
    "case",
    [
        "GET /health",
        "GET /version",
        "GET /v1/models",
        "POST /tokenize",
        "POST /v1/completions stream",
        "POST /v1/chat/completions stream",
        "POST /v1/completions",
        "error: unknown model",
        "error: max_tokens over max_model_len",
        "error: malformed JSON",
    ],
)
def test_sim_answers_like_real_vllm(both, case):
    real, sim = both["real"][case], both["sim"][case]
    assert sim == real, f"{case}: the simulator differs from vLLM 0.32\n real: {real}\n  sim: {sim}"


def test_sim_metric_families_exist_in_real_vllm_with_the_same_type_and_labels(both):
    real, sim = both["real_metrics"], both["sim_metrics"]
    invented = {n: sim[n] for n in sim if n not in real}
    assert not invented, f"the simulator exposes vllm: series real vLLM 0.32 does not: {invented}"
    differ = {n: {"real": real[n], "sim": sim[n]} for n in sim if sim[n] != real[n]}
    assert not differ, f"type or labels differ from vLLM 0.32: {differ}"


def test_families_the_plugin_reads_are_in_both(both):
    for name in PLUGIN_FAMILIES:
        assert name in both["real_metrics"], f"real vLLM has no {name}: the plugin reads a name that does not exist"
        assert name in both["sim_metrics"], f"the simulator lacks {name}, which the plugin reads"
    assert both["real_metrics"][prom.ACCEPTED_PER_POS][1] >= {"engine", "model_name", "position"}
