"""/v1/completions and /v1/chat/completions: a request from its admission to the engine to
its streamed or whole answer, in vLLM 0.32's shapes (tests/fixtures/reference/)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from pytest_llmperf.sim.engine import Emission, SimRequest
from pytest_llmperf.sim.params import ApiError, Params, json_body, parse_params
from pytest_llmperf.sim.reasoning import ReasoningStream, split_reasoning
from pytest_llmperf.sim.service import EngineDead, EngineService

VLLM_VERSION = "0.32.0"
SYSTEM_FINGERPRINT = f"vllm-{VLLM_VERSION}-sim"
_Queue = asyncio.Queue[Emission | None]  # a request's steps, None when the engine died
_Entry = dict[str, Any]  # a request's line in the log of /sim/requests
_DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_ENGINE_DEAD = "EngineCore encountered an issue. See stack trace (above) for the root cause."
_ADMIT_ERRORS = {"dead": _ENGINE_DEAD, "injected": "Internal server error (injected by the simulator's error_rate)."}

# The keys vLLM 0.32 puts after the common ones, in its order (reference captures): a
# streamed completion's choice; a whole completion's choice, a completion, a chat completion.
_COMPLETION_CHUNK_TAIL = {"stop_reason": None, "prompt_token_ids": None, "token_ids": None}
_COMPLETION_CHOICE_TAIL = {"prompt_logprobs": None, "prompt_token_ids": None, "routed_experts": None}
_COMPLETION_BODY_TAIL = {"kv_transfer_params": None, "ec_transfer_params": None, "metrics": None}
_CHAT_BODY_TAIL = {"prompt_logprobs": None, "prompt_token_ids": None, "kv_transfer_params": None}


class StreamReset(Exception):
    """Raised inside a stream to make the server drop the connection mid-body."""


class Generation:
    """The two generation routes' handler: checks a request, hands it to the engine,
    answers with its stream or its whole reply, and logs what was sent when."""

    def __init__(self, service: EngineService) -> None:
        self.service, self.config = service, service.config

    async def completions(self, request: Request) -> Response:
        return await self._generate(request, chat=False)

    async def chat_completions(self, request: Request) -> Response:
        return await self._generate(request, chat=True)

    async def _generate(self, request: Request, chat: bool) -> Response:
        receive_time = time.perf_counter()
        try:
            if self.service.starting:
                raise ApiError(503, "The server is starting (slow_start_seconds).", "ServiceUnavailableError")
            params = parse_params(await json_body(request), chat, self.config)
        except ApiError as exc:
            return exc.response()
        failure = self.service.admit()
        if failure is not None:
            return ApiError(500, _ADMIT_ERRORS[failure], "InternalServerError").response()
        req = self.service.engine.make_request(
            rid=("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:16],
            prompt=params.key,
            prompt_tokens=params.prompt_tokens,
            max_tokens=params.max_tokens,
            ignore_eos=params.ignore_eos,
            now=receive_time,
            temperature=params.temperature,
            reasoning=chat and self.config.reasoning_parser is not None,
        )
        entry = _log_entry(req, chat, params, receive_time)
        queue = self.service.submit(req)
        if params.stream:
            stream = _Stream(self.service, req, queue, chat, params.include_usage, entry)
            return StreamingResponse(stream.body(), media_type="text/event-stream; charset=utf-8")
        return await self._complete(req, queue, chat, entry)

    async def _complete(self, req: SimRequest, queue: _Queue, chat: bool, entry: _Entry) -> Response:
        pieces: list[str] = []
        finished = False
        try:
            async for em in _emissions(req, queue):
                pieces.extend(em.pieces)
                entry["chunk_times"].append(time.perf_counter())
                entry["tokens_per_chunk"].append(len(em.pieces))
                finished = em.finished
        except EngineDead:
            entry["error"] = "engine dead"
            return ApiError(500, _ENGINE_DEAD, "InternalServerError").response()
        finally:
            self.service.release(req, finished)
            entry["completion_tokens"] = req.generated
            entry["reasoning_tokens"] = req.reasoning_tokens
            entry["finish_reason"] = req.finish_reason if finished else None
            self.service.request_log.append(entry)
        return Response(_DUMPS(self._whole_body(req, pieces, finished, chat)), media_type="application/json")

    def _whole_body(self, req: SimRequest, pieces: list[str], finished: bool, chat: bool) -> dict[str, Any]:
        """A non-streamed completion or chat completion, keys in vLLM's order."""
        reasons = chat and self.config.reasoning_parser is not None
        usage = {**_usage(req, self.config.usage_offset), "prompt_tokens_details": None}
        usage["completion_tokens_details"] = {"reasoning_tokens": req.reasoning_tokens or 0} if reasons else None
        content = {"message": _message(req, pieces, finished)} if chat else {"text": "".join(pieces)}
        choice = {"index": 0, **content, "logprobs": None, "finish_reason": req.finish_reason}
        choice.update({"stop_reason": None, "token_ids": None, **({} if chat else _COMPLETION_CHOICE_TAIL)})
        return {
            "id": req.rid,
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": self.config.model_id,
            "choices": [choice],
            "service_tier": None,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "usage": usage,
            **(_CHAT_BODY_TAIL if chat else _COMPLETION_BODY_TAIL),
        }


class _Stream:
    """One streamed answer: an SSE chunk per engine step its writer takes, with the stream
    faults (stall, reset, malformed chunk, bursts) when the request draws them."""

    def __init__(
        self, service: EngineService, req: SimRequest, queue: _Queue, chat: bool, include_usage: bool, entry: _Entry
    ) -> None:
        self.service, self.config, self.req, self.queue = service, service.config, req, queue
        self.chat, self.include_usage, self.entry = chat, include_usage, entry
        self.labels = ReasoningStream(req.reasoning_len) if chat and req.reasoning_len is not None else None
        self.faulty = self.role_sent = self.finished = False
        self.head: dict[str, Any] = {}
        self.chunks = 0
        self.tokens = 0  # emitted since the last chunk written (a step the parser kept back adds to the next)
        self.held: list[bytes] = []  # chunks a burst holds back

    async def body(self) -> AsyncIterator[bytes]:
        """The SSE body; the fault draw and `created` are taken when the writing starts."""
        self.faulty = self.service.stream_faulty()
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        self.head = {"id": self.req.rid, "object": kind, "created": int(time.time()), "model": self.config.model_id}
        prefix = ("data: " + _DUMPS(self.head)[:-1] + ',"choices":').encode()
        try:
            async for em in _emissions(self.req, self.queue):
                self.tokens += len(em.pieces)
                parts = self._role_chunk()
                choice = self._choice(em)
                if choice is not None:
                    parts.append(prefix + _DUMPS([choice]).encode() + b"}\n\n")
                    malformed = await self._fault()
                    if malformed:
                        yield malformed
                    self._record(em)
                out = self._written(parts, chunk=choice is not None)
                if out:
                    yield out
            self.entry["finish_reason"] = self.req.finish_reason
            self.entry["reasoning_tokens"] = self.req.reasoning_tokens
            if self.include_usage:
                details = self.chat and self.config.reasoning_parser is not None
                usage = _usage(self.req, self.config.usage_offset, details)
                yield _event({**self.head, "choices": [], "usage": usage, "system_fingerprint": SYSTEM_FINGERPRINT})
            yield b"data: [DONE]\n\n"
        except EngineDead:
            self.entry["error"] = "engine dead"
            raise StreamReset("engine dead") from None
        finally:
            self.service.release(self.req, self.finished)
            self.service.request_log.append(self.entry)

    def _role_chunk(self) -> list[bytes]:
        """vLLM's chat stream opens with the assistant's role, sent with the first output."""
        if not self.chat or self.role_sent:
            return []
        self.role_sent = True
        choice = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
        return [_event({**self.head, "choices": [choice], "prompt_token_ids": None, "prompt_text": None})]

    def _choice(self, em: Emission) -> dict[str, Any] | None:
        """The step's choice; None when the reasoning parser gives nothing to send (`</think>` alone)."""
        reason = self.req.finish_reason if em.finished else None
        text = "".join(em.pieces)
        if not self.chat:
            return {"index": 0, "text": text, "logprobs": None, "finish_reason": reason, **_COMPLETION_CHUNK_TAIL}
        if self.labels is None:
            delta: dict[str, str] | None = {"content": text}
        else:
            delta = self.labels.delta(em, self.req.finish_reason == "stop")
            if delta is None and not em.finished:
                return None
        choice: dict[str, Any] = {"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": reason}
        if em.finished:
            choice["stop_reason"] = None
        choice["token_ids"] = None
        return choice

    async def _fault(self) -> bytes:
        """Before chunk number `chunks` of a faulty stream: a stall, a reset (raised) or a
        malformed chunk (returned, to write first)."""
        cfg, n = self.config, self.chunks
        if not self.faulty:
            return b""
        if cfg.stall_seconds and n == cfg.stall_after_chunks:
            await asyncio.sleep(cfg.stall_seconds)
        if cfg.reset_after_chunks is not None and n == cfg.reset_after_chunks:
            self.entry["error"] = "reset"
            raise StreamReset(f"connection reset after {n} chunks (reset_after_chunks)")
        if cfg.malformed_chunk_after is not None and n == cfg.malformed_chunk_after:
            return b'data: {"id":"' + self.req.rid.encode() + b'","object":\n\n'
        return b""

    def _record(self, em: Emission) -> None:
        self.entry["chunk_times"].append(time.perf_counter())
        self.entry["tokens_per_chunk"].append(self.tokens)
        self.entry["completion_tokens"] = self.req.generated
        self.tokens = 0
        self.chunks += 1
        self.finished = em.finished

    def _written(self, parts: list[bytes], chunk: bool) -> bytes:
        """What to write now: `parts`, or, when a faulty stream writes `burst_chunks` at a
        time, nothing until a burst (or the reply) is complete."""
        burst = self.config.burst_chunks
        if self.faulty and burst > 1:
            self.held += parts
            if not chunk or (self.chunks % burst and not self.finished):
                return b""
            parts, self.held = self.held, []
        return b"".join(parts)


async def _emissions(req: SimRequest, queue: _Queue) -> AsyncIterator[Emission]:
    """The request's steps as its writer takes them, those made while it was away merged
    into one (as vLLM's output collector merges them)."""
    while True:
        em = await queue.get()
        if em is None:
            raise EngineDead()
        dead = False
        while not em.finished and not queue.empty():
            more = queue.get_nowait()
            if more is None:
                dead = True
                break
            em = Emission(req, em.pieces + more.pieces, more.finished, em.start)
        yield em
        if dead:
            raise EngineDead()
        if em.finished:
            return


def _event(payload: dict[str, Any]) -> bytes:
    return ("data: " + _DUMPS(payload) + "\n\n").encode()


def _log_entry(req: SimRequest, chat: bool, params: Params, receive_time: float) -> _Entry:
    """Filled in as the answer is written."""
    return {
        "id": req.rid,
        "endpoint": "chat" if chat else "completions",
        "receive_time": receive_time,
        "chunk_times": [],
        "tokens_per_chunk": [],
        "prompt_tokens": req.prompt_tokens,
        "completion_tokens": 0,
        "finish_reason": None,
        "reasoning_tokens": None,
        "stream": params.stream,
        "error": None,
    }


def _message(req: SimRequest, pieces: list[str], finished: bool) -> dict[str, Any]:
    """A whole chat reply's message; a reasoning reply's text split as vLLM's parser splits it."""
    text, reasoning = "".join(pieces), None
    if req.reasoning_len is not None:
        whole = Emission(req, pieces, finished, 0)
        reasoning, text = split_reasoning(req.reasoning_len, whole, finished and req.finish_reason == "stop")
    return {
        "role": "assistant",
        "content": text if req.reasoning_len is None else text or None,
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
        "tool_calls": [],
        "reasoning": reasoning or None,
    }


def _usage(req: SimRequest, offset: int = 0, details: bool = False) -> dict[str, Any]:
    """vLLM's usage; `offset` makes its completion tokens lie; `details` adds
    `completion_tokens_details.reasoning_tokens`, as vLLM sends with a reasoning parser."""
    completion = max(0, req.generated + offset)
    usage: dict[str, Any] = {
        "prompt_tokens": req.prompt_tokens,
        "total_tokens": req.prompt_tokens + completion,
        "completion_tokens": completion,
    }
    if details:
        usage["completion_tokens_details"] = {"reasoning_tokens": req.reasoning_tokens or 0}
    return usage
