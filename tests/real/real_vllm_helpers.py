"""Constants, server specs and helpers shared by the real-engine tests."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import httpx

from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.servers.local_vllm import LocalVllmTarget, RunningServer
from pytest_llmperf.servers.pool import ServerPool
from pytest_llmperf.servers.spec import ServerSpec

MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"  # served from the prepared folder
SERVED_NAME = "smollm2"
MAX_MODEL_LEN = 2048
NUM_SPEC_TOKENS = 3
# vLLM logs its SpecDecoding line every VLLM_LOG_STATS_INTERVAL s; 1 s keeps the
# log-vs-counter test's waits short.
LOG_INTERVAL_S = 1.0

BASE = ServerSpec(
    name="smollm2-base",
    model=MODEL_ID,
    served_model_name=SERVED_NAME,
    args=("--max-model-len", str(MAX_MODEL_LEN), "--max-num-seqs", "8", "--enforce-eager"),
    env={"VLLM_LOG_STATS_INTERVAL": str(LOG_INTERVAL_S)},
)
NGRAM = BASE.with_speculative(
    {"method": "ngram", "num_speculative_tokens": NUM_SPEC_TOKENS, "prompt_lookup_max": 4},
    name="smollm2-ngram",
)


@dataclass
class RealServer:
    endpoint: Endpoint
    process: RunningServer  # log file, process group

    @property
    def url(self) -> str:
        return self.endpoint.base_url

    def log_lines(self) -> list[str]:
        return self.process.log_text().splitlines()


def serve(pool: ServerPool, target: LocalVllmTarget, spec: ServerSpec) -> RealServer:
    """The pooled server for `spec` (started unless it is the current one)."""
    endpoint = pool.endpoint(spec)
    assert target.current is not None, "the pool's server is not the target's current one"
    return RealServer(endpoint, target.current)


def tokenize_count(url: str, model: str, text: str) -> int:
    """Tokens in `text` by the server's own tokenizer, without BOS/special tokens."""
    answer = httpx.post(
        f"{url}/tokenize", json={"model": model, "prompt": text, "add_special_tokens": False}, timeout=30
    )
    answer.raise_for_status()
    return answer.json()["count"]


def stream_token_ids(url: str, model: str, prompt: str, max_tokens: int) -> dict:
    """One greedy chat request streamed with vLLM's `return_token_ids`: the token ids
    the server actually sent, chunk by chunk, beside its text and usage."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "return_token_ids": True,
    }
    ids: list[int] = []
    text, usage, finish = "", None, None
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=120) as resp:
        resp.raise_for_status()
        for line in resp.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: ") :])
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or []:
                ids += choice.get("token_ids") or []
                text += (choice.get("delta") or {}).get("content") or ""
                finish = choice.get("finish_reason") or finish
    return {"token_ids": ids, "text": text, "usage": usage, "finish_reason": finish}


REPORT_LINES: list[str] = []


def report(request, line: str) -> None:
    """A line for the terminal summary, even without -s (the figures the issue asks for)."""
    REPORT_LINES.append(f"{request.node.name}: {line}")


def wait_for_quiet_log(server: RealServer, interval: float = LOG_INTERVAL_S) -> int:
    """Wait until vLLM has logged every earlier step; return the log's line count then.

    vLLM flushes its spec-decode stats into a log line once per interval, so after a
    few quiet intervals every earlier draft is in a line already written.
    """
    time.sleep(3 * interval)
    return len(server.log_lines())
