"""The HTTP face of the simulator: vLLM's OpenAI-compatible routes on Starlette.

Response bodies follow real vLLM 0.32 captures (tests/fixtures/reference/): field
names, order, error shapes and status codes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from pytest_llmperf.sim import tokenizer
from pytest_llmperf.sim.config import SimConfig
from pytest_llmperf.sim.engine import Emission, SimRequest
from pytest_llmperf.sim.metrics import CONTENT_TYPE
from pytest_llmperf.sim.service import EngineDead, EngineService

log = logging.getLogger("pytest_llmperf.sim")

VLLM_VERSION = "0.32.0"
SYSTEM_FINGERPRINT = f"vllm-{VLLM_VERSION}-sim"
_DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class ApiError(Exception):
    def __init__(self, status: int, message: str, type_: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param = status, message, type_, param

    def response(self) -> JSONResponse:
        return JSONResponse(
            {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.status}},
            status_code=self.status,
        )


class StreamReset(Exception):
    """Raised inside a stream to make the server drop the connection mid-body."""


def _bad_request(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, "BadRequestError", param)


def _validation_error(kind: str, loc: tuple[str | int, ...], msg: str, value: Any) -> ApiError:
    # vLLM turns FastAPI's RequestValidationError into this shape.
    err = {"type": kind, "loc": loc, "msg": msg, "input": value}
    return ApiError(400, f"1 validation error:\n  {err!r}", "Bad Request", ".".join(map(str, loc)))


def build_app(config: SimConfig) -> Starlette:
    service = EngineService(config)
    served = config.model_id
    created = int(time.time())

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    # -- plain endpoints -----------------------------------------------------------------
    async def health(request: Request) -> Response:
        ok = not service.dead and not service.starting
        return Response(status_code=200 if ok else 503)

    async def version(request: Request) -> Response:
        return JSONResponse({"version": VLLM_VERSION})

    async def models(request: Request) -> Response:
        perm = {
            "id": f"modelperm-{uuid.uuid4().hex[:16]}",
            "object": "model_permission",
            "created": created,
            "allow_create_engine": False,
            "allow_sampling": True,
            "allow_logprobs": True,
            "allow_search_indices": False,
            "allow_view": True,
            "allow_fine_tuning": False,
            "organization": "*",
            "group": None,
            "is_blocking": False,
        }
        card = {
            "id": served,
            "object": "model",
            "created": created,
            "owned_by": "vllm",
            "root": config.model,
            "parent": None,
            "max_model_len": config.max_model_len,
            "permission": [perm],
        }
        return JSONResponse({"object": "list", "data": [card]})

    async def metrics(request: Request) -> Response:
        return Response(service.metrics.render(), media_type=CONTENT_TYPE)

    async def tokenize(request: Request) -> Response:
        if config.no_tokenize:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        try:
            body = await _json_body(request)
            model = body.get("model")
            if model is not None and model != served:
                raise ApiError(
                    404, f"The model `{model}` does not exist. Valid aliases: {served}.", "NotFoundError", "model"
                )
            if "messages" in body:
                text = _chat_text(body["messages"])
            elif isinstance(body.get("prompt"), str):
                text = body["prompt"]
            else:
                raise _validation_error("missing", ("body", "prompt"), "Field required", body)
        except ApiError as exc:
            return exc.response()
        tokens = tokenizer.encode(text, config.prompt_word_tokens)
        return JSONResponse(
            {"count": len(tokens), "max_model_len": config.max_model_len, "tokens": tokens, "token_strs": None}
        )

    async def sim_requests(request: Request) -> Response:
        if request.method == "DELETE":
            service.request_log.clear()
            return JSONResponse({"cleared": True})
        return JSONResponse(list(service.request_log))

    async def sim_state(request: Request) -> Response:
        e = service.engine
        return JSONResponse(
            {
                "pid": os.getpid(),
                "dead": service.dead,
                "received": service.received,
                "running": len(e.running),
                "waiting": len(e.waiting),
                "max_lag_s": service.max_lag,
                "profile": e.profile.name,
                "speed": config.speed,
                "num_speculative_tokens": e.k,
                "acceptance": list(e.survival),
                "run_factors": {"step_time": e.run_factors[0], "acceptance": e.run_factors[1]},
            }
        )

    # -- generation ----------------------------------------------------------------------
    async def completions(request: Request) -> Response:
        return await _generate(request, chat=False)

    async def chat_completions(request: Request) -> Response:
        return await _generate(request, chat=True)

    async def _generate(request: Request, chat: bool) -> Response:
        receive_time = time.perf_counter()
        try:
            if service.starting:
                raise ApiError(503, "The server is starting (slow_start_seconds).", "ServiceUnavailableError")
            body = await _json_body(request)
            params = _parse_params(body, chat, served, config)
        except ApiError as exc:
            return exc.response()
        failure = service.admit()
        if failure == "dead":
            return ApiError(
                500,
                "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                "InternalServerError",
            ).response()
        if failure == "injected":
            return ApiError(
                500, "Internal server error (injected by the simulator's error_rate).", "InternalServerError"
            ).response()
        req = service.engine.make_request(
            rid=("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:16],
            prompt=params["key"],
            prompt_tokens=params["prompt_tokens"],
            max_tokens=params["max_tokens"],
            ignore_eos=params["ignore_eos"],
            now=receive_time,
            temperature=params["temperature"],
            reasoning=chat and config.reasoning_parser is not None,
        )
        entry: dict[str, Any] = {
            "id": req.rid,
            "endpoint": "chat" if chat else "completions",
            "receive_time": receive_time,
            "chunk_times": [],
            "tokens_per_chunk": [],
            "prompt_tokens": req.prompt_tokens,
            "completion_tokens": 0,
            "finish_reason": None,
            "reasoning_tokens": None,
            "stream": params["stream"],
            "error": None,
        }
        queue = service.submit(req)
        if params["stream"]:
            gen = _stream(req, queue, chat, params["include_usage"], entry)
            return StreamingResponse(gen, media_type="text/event-stream; charset=utf-8")
        return await _complete(req, queue, chat, entry)

    async def _emissions(req: SimRequest, queue: asyncio.Queue[Emission | None]) -> AsyncIterator[Emission]:
        """The request's steps as its writer takes them. Steps the engine made while the
        writer was away (a stalled stream, a busy event loop) come merged into one, as
        vLLM's per-request output collector merges outputs its consumer has not taken."""
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

    async def _stream(
        req: SimRequest, queue: asyncio.Queue[Emission | None], chat: bool, include_usage: bool, entry: dict[str, Any]
    ) -> AsyncIterator[bytes]:
        created_s = int(time.time())
        faulty = service.stream_faulty()
        cfg = config
        head = {
            "id": req.rid,
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": created_s,
            "model": served,
        }
        prefix = ("data: " + _DUMPS(head)[:-1] + ',"choices":').encode()
        labels = _ReasoningStream(req.reasoning_len) if chat and req.reasoning_len is not None else None
        chunks = 0
        tokens = 0  # emitted since the last chunk written (a step the parser kept back adds to the next)
        role_sent = False
        finished = False
        held: list[bytes] = []
        try:
            async for em in _emissions(req, queue):
                text = "".join(em.pieces)
                reason = req.finish_reason if em.finished else None
                tokens += len(em.pieces)
                parts = []
                if chat and not role_sent:  # vLLM: the role chunk comes with the first output
                    role_sent = True
                    parts.append(
                        (
                            "data: "
                            + _DUMPS(
                                {
                                    **head,
                                    "choices": [
                                        {
                                            "index": 0,
                                            "delta": {"role": "assistant", "content": ""},
                                            "logprobs": None,
                                            "finish_reason": None,
                                        }
                                    ],
                                    "prompt_token_ids": None,
                                    "prompt_text": None,
                                }
                            )
                        ).encode()
                        + b"\n\n"
                    )
                if chat:
                    if labels is not None:
                        delta = labels.delta(em, req.finish_reason == "stop")
                        if delta is None and not em.finished:
                            # vLLM's parser gave nothing to send (`</think>` alone): no chunk
                            if faulty and cfg.burst_chunks > 1:
                                held += parts
                            elif parts:
                                yield b"".join(parts)
                            continue
                    else:
                        delta = {"content": text}
                    choice: dict[str, Any] = {
                        "index": 0,
                        "delta": delta or {},
                        "logprobs": None,
                        "finish_reason": reason,
                    }
                    if em.finished:
                        choice["stop_reason"] = None
                    choice["token_ids"] = None
                else:
                    choice = {
                        "index": 0,
                        "text": text,
                        "logprobs": None,
                        "finish_reason": reason,
                        "stop_reason": None,
                        "prompt_token_ids": None,
                        "token_ids": None,
                    }
                parts.append(prefix + _DUMPS([choice]).encode() + b"}\n\n")
                if faulty and cfg.stall_seconds and chunks == cfg.stall_after_chunks:
                    await asyncio.sleep(cfg.stall_seconds)
                if faulty and cfg.reset_after_chunks is not None and chunks == cfg.reset_after_chunks:
                    entry["error"] = "reset"
                    raise StreamReset(f"connection reset after {chunks} chunks (reset_after_chunks)")
                if faulty and cfg.malformed_chunk_after is not None and chunks == cfg.malformed_chunk_after:
                    yield b'data: {"id":"' + req.rid.encode() + b'","object":\n\n'
                entry["chunk_times"].append(time.perf_counter())
                entry["tokens_per_chunk"].append(tokens)
                entry["completion_tokens"] = req.generated
                tokens = 0
                chunks += 1
                finished = em.finished
                if faulty and cfg.burst_chunks > 1:  # held back, written `burst_chunks` at a time
                    held += parts
                    if chunks % cfg.burst_chunks and not finished:
                        continue
                    parts, held = held, []
                yield b"".join(parts)
            entry["finish_reason"] = req.finish_reason
            entry["reasoning_tokens"] = req.reasoning_tokens
            if include_usage:
                usage: dict[str, Any] = {
                    **head,
                    "choices": [],
                    "usage": _usage(req, config.usage_offset, details=chat and config.reasoning_parser is not None),
                    "system_fingerprint": SYSTEM_FINGERPRINT,
                }
                yield ("data: " + _DUMPS(usage) + "\n\n").encode()
            yield b"data: [DONE]\n\n"
        except EngineDead:
            entry["error"] = "engine dead"
            raise StreamReset("engine dead") from None
        finally:
            service.release(req, finished)
            service.request_log.append(entry)

    async def _complete(
        req: SimRequest, queue: asyncio.Queue[Emission | None], chat: bool, entry: dict[str, Any]
    ) -> Response:
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
            return ApiError(
                500,
                "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                "InternalServerError",
            ).response()
        finally:
            service.release(req, finished)
            entry["completion_tokens"] = req.generated
            entry["reasoning_tokens"] = req.reasoning_tokens
            entry["finish_reason"] = req.finish_reason if finished else None
            service.request_log.append(entry)
        text = "".join(pieces)
        usage: dict[str, Any] = {
            **_usage(req, config.usage_offset),
            "prompt_tokens_details": None,
            "completion_tokens_details": None,
        }
        if chat and config.reasoning_parser is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": req.reasoning_tokens or 0}
        reasoning = None
        if chat and req.reasoning_len is not None:
            whole = Emission(req, pieces, finished, 0)
            reasoning, text = _split_reasoning(req.reasoning_len, whole, finished and req.finish_reason == "stop")
        if chat:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": text if req.reasoning_len is None else text or None,
                "refusal": None,
                "annotations": None,
                "audio": None,
                "function_call": None,
                "tool_calls": [],
                "reasoning": reasoning or None,
            }
            body = _full_body(req, served, "chat.completion", {"message": message}, {}, usage, _CHAT_BODY_TAIL)
        else:
            body = _full_body(
                req, served, "text_completion", {"text": text}, _COMPLETION_CHOICE_TAIL, usage, _COMPLETION_BODY_TAIL
            )
        return Response(_DUMPS(body), media_type="application/json")

    async def not_found(request: Request, exc: Exception) -> Response:
        if not isinstance(exc, HTTPException):  # registered for HTTPException only
            raise exc
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/version", version, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/tokenize", tokenize, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/sim/requests", sim_requests, methods=["GET", "DELETE"]),
        Route("/sim/state", sim_state, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: not_found})
    app.state.service = service
    return app


# The keys vLLM 0.32 puts after the common ones of a non-streamed answer (reference
# captures), in its order: a completion's choice, a completion, a chat completion.
_COMPLETION_CHOICE_TAIL = {"prompt_logprobs": None, "prompt_token_ids": None, "routed_experts": None}
_COMPLETION_BODY_TAIL = {"kv_transfer_params": None, "ec_transfer_params": None, "metrics": None}
_CHAT_BODY_TAIL = {"prompt_logprobs": None, "prompt_token_ids": None, "kv_transfer_params": None}


def _full_body(
    req: SimRequest,
    served: str,
    kind: str,
    content: dict[str, Any],
    choice_tail: dict[str, Any],
    usage: dict[str, Any],
    body_tail: dict[str, Any],
) -> dict[str, Any]:
    """A non-streamed completion or chat completion, keys in vLLM's order."""
    choice = {
        "index": 0,
        **content,
        "logprobs": None,
        "finish_reason": req.finish_reason,
        "stop_reason": None,
        "token_ids": None,
        **choice_tail,
    }
    return {
        "id": req.rid,
        "object": kind,
        "created": int(time.time()),
        "model": served,
        "choices": [choice],
        "service_tier": None,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "usage": usage,
        **body_tail,
    }


def _usage(req: SimRequest, offset: int = 0, details: bool = False) -> dict[str, Any]:
    """vLLM's usage; `offset` (SimConfig.usage_offset) makes its completion tokens lie;
    `details` (a chat answer of a server with --reasoning-parser): with
    `completion_tokens_details.reasoning_tokens`, as vLLM then sends it."""
    completion = max(0, req.generated + offset)
    usage: dict[str, Any] = {
        "prompt_tokens": req.prompt_tokens,
        "total_tokens": req.prompt_tokens + completion,
        "completion_tokens": completion,
    }
    if details:
        usage["completion_tokens_details"] = {"reasoning_tokens": req.reasoning_tokens or 0}
    return usage


def _split_reasoning(reasoning_len: int, em: Emission, eos_last: bool) -> tuple[str, str]:
    """(reasoning, answer) text of the tokens of `em` in a reply that reasons for its first
    `reasoning_len` tokens; `eos_last`: its last token is EOS (no text).

    As vLLM's qwen3 parser splits a Qwen3 reply (vllm/parser/qwen3.py): the chat template
    opens `<think>` in the prompt, so the reply starts inside its reasoning; `</think>`
    (token `reasoning_len`) ends it and is dropped from both; the answer follows from the
    blank line after it."""
    reasoning, answer = [], []
    last = len(em.pieces) - 1
    for j, piece in enumerate(em.pieces):
        pos = em.start + j
        if j == last and eos_last:
            continue
        if pos < reasoning_len:
            reasoning.append(piece.lstrip(" ") if pos == 0 else piece)
        elif pos == reasoning_len + 1:
            answer.append("\n\n")
        elif pos == reasoning_len + 2:
            answer.append(piece.lstrip(" "))
        elif pos > reasoning_len:
            answer.append(piece)
    return "".join(reasoning), "".join(answer)


class _ReasoningStream:
    """A reasoning reply's deltas, step by step, as vLLM 0.32 streams them with
    `--reasoning-parser qwen3` and no tool parser (`DelegatingParser.parse_delta` in
    vllm/parser/abstract_parser.py, the engine's deltas in
    vllm/parser/engine/parser_engine.py, the chat path in
    vllm/entrypoints/openai/chat_completion/serving.py):

    - while the reply reasons, the engine parses each step: reasoning text as
      `{"reasoning": ...}`; the step that holds `</think>` sends the reasoning before it
      and, as `content`, whatever followed it in the step (the engine's held whitespace
      is flushed at that transition), both in one delta when both are there (`content`
      first, the field order of vLLM's `DeltaMessage`), and no chunk when neither is
      (`</think>` alone), unless it finishes the reply: then its delta is `{}`;
    - after it, every step's text passes through as `{"content": ...}`, the blank line
      after `</think>` and the EOS token's empty text (`{"content": ""}`) included.
    """

    def __init__(self, reasoning_len: int) -> None:
        self.reasoning_len = reasoning_len

    def delta(self, em: Emission, stop: bool) -> dict[str, str] | None:
        reasoning, answer = _split_reasoning(self.reasoning_len, em, em.finished and stop)
        if em.start > self.reasoning_len:  # the reasoning ended in an earlier step
            return {"content": answer}
        delta = {}
        if answer:
            delta["content"] = answer
        if reasoning:
            delta["reasoning"] = reasoning
        return delta or None


async def _json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        pos = getattr(exc, "pos", 0)
        msg = getattr(exc, "msg", "invalid UTF-8")
        detail = {
            "type": "json_invalid",
            "loc": f"body.{pos}",
            "msg": "JSON decode error",
            "input": "<dict of 0 items>",
            "ctx": {"error": msg},
        }
        raise ApiError(400, f"1 validation error:\n  {detail!r}", "Bad Request", f"body.{pos}") from None
    if not isinstance(body, dict):
        raise _validation_error(
            "model_attributes_type", ("body",), "Input should be a valid dictionary or object", body
        )
    return body


def _chat_text(messages: Any) -> str:
    if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise _validation_error(
            "list_type",
            ("body", "messages"),
            "Input should be a list of messages, each an object with a role",
            messages,
        )
    parts = []
    for m in messages:
        content = m.get("content") or ""
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(str(content))
    return "\n".join(parts)


def _parse_params(body: dict[str, Any], chat: bool, served: str, config: SimConfig) -> dict[str, Any]:
    model = body.get("model")
    if model is not None and model != served:
        raise ApiError(404, f"The model `{model}` does not exist. Valid aliases: {served}.", "NotFoundError", "model")
    if chat:
        if "messages" not in body:
            raise _validation_error("missing", ("body", "messages"), "Field required", body)
        messages = body["messages"]
        key = _chat_text(messages)
        prompt_tokens = tokenizer.chat_prompt_tokens(messages, config.prompt_word_tokens)
    else:
        if "prompt" not in body:
            raise _validation_error("missing", ("body", "prompt"), "Field required", body)
        prompt = body["prompt"]
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]
        if isinstance(prompt, str):
            key, prompt_tokens = prompt, tokenizer.count_tokens(prompt, config.prompt_word_tokens)
        elif isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            key, prompt_tokens = ",".join(map(str, prompt)), len(prompt)
        else:
            raise _bad_request(
                "prompt must be a string, a list of token ids, or a list with one of those "
                "(batched prompts are not simulated)",
                "prompt",
            )
        if prompt_tokens == 0:
            raise _bad_request("The prompt is empty: it must contain at least one token.", "prompt")
    max_tokens = body.get("max_completion_tokens") if chat else None
    if max_tokens is None:
        max_tokens = body.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        raise _bad_request(f"max_tokens must be an integer >= 1, got {max_tokens!r}", "max_tokens")
    limit = config.max_model_len
    if prompt_tokens >= limit:
        raise _bad_request(
            f"This model's maximum context length is {limit} tokens. However, your request has "
            f"{prompt_tokens} input tokens. Please reduce the length of the input messages. "
            f"(parameter=input_tokens, value={prompt_tokens})",
            "input_tokens",
        )
    if max_tokens is None:
        max_tokens = limit - prompt_tokens
    elif max_tokens > limit:
        raise _bad_request(
            f"max_tokens={max_tokens} cannot be greater than max_model_len={limit}. "
            f"Please request fewer output tokens. (parameter=max_tokens, value={max_tokens})",
            "max_tokens",
        )
    elif prompt_tokens + max_tokens > limit:
        raise _bad_request(
            f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's "
            f"maximum context length is {limit} tokens and your request has {prompt_tokens} input "
            f"tokens ({max_tokens} > {limit} - {prompt_tokens}). "
            f"(parameter=max_tokens, value={max_tokens})",
            "max_tokens",
        )
    temperature = body.get("temperature", 1.0)
    if temperature is None:
        temperature = 1.0
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or temperature < 0:
        raise _bad_request(f"temperature must be a number >= 0, got {temperature!r}", "temperature")
    n = body.get("n", 1)
    if n not in (1, None):
        raise _bad_request(f"n={n!r}: the simulator generates one choice per request (n=1)", "n")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad_request(f"stream must be a boolean, got {stream!r}", "stream")
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise _bad_request("stream_options must be an object", "stream_options")
    if opts and not stream:
        raise _bad_request("Stream options can only be defined when `stream=True`.", "stream_options")
    ignore_eos = body.get("ignore_eos", False)
    if not isinstance(ignore_eos, bool):
        raise _bad_request(f"ignore_eos must be a boolean, got {ignore_eos!r}", "ignore_eos")
    return {
        "key": key,
        "prompt_tokens": prompt_tokens,
        "max_tokens": max_tokens,
        "temperature": float(temperature),
        "stream": stream,
        "include_usage": bool(opts.get("include_usage")),
        "ignore_eos": ignore_eos,
    }
