"""What a request asks for, checked as vLLM 0.32 checks it: status codes, error types
and messages follow real captures (tests/fixtures/reference/)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from pytest_llmperf.sim import tokenizer
from pytest_llmperf.sim.config import SimConfig


class ApiError(Exception):
    def __init__(self, status: int, message: str, type_: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param = status, message, type_, param

    def response(self) -> JSONResponse:
        return JSONResponse(
            {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.status}},
            status_code=self.status,
        )


@dataclass(frozen=True)
class Params:
    key: str  # the prompt as the engine keys its draws: its text, or its token ids joined
    prompt_tokens: int
    max_tokens: int
    temperature: float
    stream: bool
    include_usage: bool
    ignore_eos: bool


def _bad_request(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, "BadRequestError", param)


def validation_error(kind: str, loc: tuple[str | int, ...], msg: str, value: Any) -> ApiError:
    # vLLM turns FastAPI's RequestValidationError into this shape.
    err = {"type": kind, "loc": loc, "msg": msg, "input": value}
    return ApiError(400, f"1 validation error:\n  {err!r}", "Bad Request", ".".join(map(str, loc)))


async def json_body(request: Request) -> dict[str, Any]:
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
        raise validation_error("model_attributes_type", ("body",), "Input should be a valid dictionary or object", body)
    return body


def check_model(body: dict[str, Any], served: str) -> None:
    model = body.get("model")
    if model is not None and model != served:
        raise ApiError(404, f"The model `{model}` does not exist. Valid aliases: {served}.", "NotFoundError", "model")


def chat_text(messages: Any) -> str:
    if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m for m in messages):
        msg = "Input should be a list of messages, each an object with a role"
        raise validation_error("list_type", ("body", "messages"), msg, messages)
    parts = []
    for m in messages:
        content = m.get("content") or ""
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(str(content))
    return "\n".join(parts)


def parse_params(body: dict[str, Any], chat: bool, config: SimConfig) -> Params:
    """A generation request's parameters, checked in vLLM's order; ApiError when one is wrong."""
    check_model(body, config.model_id)
    key, prompt_tokens = _chat_prompt(body, config) if chat else _completion_prompt(body, config)
    max_tokens = _max_tokens(body, chat, prompt_tokens, config.max_model_len)
    temperature = body.get("temperature", 1.0)
    if temperature is None:
        temperature = 1.0
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or temperature < 0:
        raise _bad_request(f"temperature must be a number >= 0, got {temperature!r}", "temperature")
    n = body.get("n", 1)
    if n not in (1, None):
        raise _bad_request(f"n={n!r}: the simulator generates one choice per request (n=1)", "n")
    stream = _boolean(body, "stream")
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise _bad_request("stream_options must be an object", "stream_options")
    if opts and not stream:
        raise _bad_request("Stream options can only be defined when `stream=True`.", "stream_options")
    include_usage, ignore_eos = bool(opts.get("include_usage")), _boolean(body, "ignore_eos")
    return Params(key, prompt_tokens, max_tokens, float(temperature), stream, include_usage, ignore_eos)


def _chat_prompt(body: dict[str, Any], config: SimConfig) -> tuple[str, int]:
    if "messages" not in body:
        raise validation_error("missing", ("body", "messages"), "Field required", body)
    messages = body["messages"]
    key = chat_text(messages)
    return key, tokenizer.chat_prompt_tokens(messages, config.prompt_word_tokens)


def _completion_prompt(body: dict[str, Any], config: SimConfig) -> tuple[str, int]:
    """A text, a list of token ids, or a list holding one of those (batches are not simulated)."""
    if "prompt" not in body:
        raise validation_error("missing", ("body", "prompt"), "Field required", body)
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
    return key, prompt_tokens


def _max_tokens(body: dict[str, Any], chat: bool, prompt_tokens: int, limit: int) -> int:
    """The reply's token cap, held to the context length; absent, the rest of the context."""
    max_tokens = body.get("max_completion_tokens") if chat else None
    if max_tokens is None:
        max_tokens = body.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        raise _bad_request(f"max_tokens must be an integer >= 1, got {max_tokens!r}", "max_tokens")
    if prompt_tokens >= limit:
        raise _bad_request(
            f"This model's maximum context length is {limit} tokens. However, your request has "
            f"{prompt_tokens} input tokens. Please reduce the length of the input messages. "
            f"(parameter=input_tokens, value={prompt_tokens})",
            "input_tokens",
        )
    if max_tokens is None:
        return limit - prompt_tokens
    if max_tokens > limit:
        raise _bad_request(
            f"max_tokens={max_tokens} cannot be greater than max_model_len={limit}. "
            f"Please request fewer output tokens. (parameter=max_tokens, value={max_tokens})",
            "max_tokens",
        )
    if prompt_tokens + max_tokens > limit:
        raise _bad_request(
            f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's "
            f"maximum context length is {limit} tokens and your request has {prompt_tokens} input "
            f"tokens ({max_tokens} > {limit} - {prompt_tokens}). "
            f"(parameter=max_tokens, value={max_tokens})",
            "max_tokens",
        )
    return max_tokens


def _boolean(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise _bad_request(f"{name} must be a boolean, got {value!r}", name)
    return value
