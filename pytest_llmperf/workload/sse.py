"""Server-sent events on bytes, split as they arrive (a `find` and an append), with each
event's arrival time; the JSON is decoded only when the stream ends (`decode_events`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_loads: Callable[[bytes], Any]
try:  # orjson parses a vLLM chunk several times faster than json
    import orjson as _orjson

    _loads = _orjson.loads
    _JSONError: tuple[type[Exception], ...] = (_orjson.JSONDecodeError, ValueError)
except ImportError:  # pragma: no cover - exercised only without orjson
    import json as _json

    _loads = _json.loads
    _JSONError = (ValueError,)

DONE = b"[DONE]"


def _preview(raw: bytes, limit: int = 80) -> str:
    text = raw.decode("utf-8", "replace")
    return text if len(text) <= limit else text[:limit] + "..."


class SSESplitter:
    """Feeds raw body bytes; keeps `(arrival_time, data_payload)` per event. Comments and
    `event:`/`id:`/`retry:` fields are skipped, any other non-`data:` line is malformed."""

    __slots__ = ("_buf", "events", "done_time", "error")

    def __init__(self) -> None:
        self._buf = b""
        self.events: list[tuple[float, bytes]] = []
        self.done_time: float | None = None  # arrival of `data: [DONE]`
        self.error: str | None = None  # first format error, if any

    def feed(self, data: bytes, now: float) -> None:
        if self.error is not None:
            return
        # Fast path: exactly one "data: ...\n\n" event (how vLLM writes each chunk).
        if (
            not self._buf
            and data.startswith(b"data: ")
            and data.find(b"\n") == len(data) - 2
            and data[-1:] == b"\n"
            and b"\r" not in data
        ):
            payload = data[6:-2]
            if payload == DONE:
                self.done_time = now
            elif self.done_time is not None:
                self.error = f"data after [DONE]: {_preview(payload)!r}"
            else:
                self.events.append((now, payload))
            return
        buf = self._buf + data if self._buf else data
        if b"\r" in buf:  # SSE allows CRLF and CR line ends; vLLM sends LF
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        start = 0
        while True:
            end = buf.find(b"\n\n", start)
            if end < 0:
                break
            self._event(buf[start:end], now)
            start = end + 2
        self._buf = buf[start:]

    def finish(self, now: float) -> None:
        """End of body: a last event without its blank line still counts."""
        rest = self._buf.strip(b"\n")
        self._buf = b""
        if rest and self.error is None:
            self._event(rest, now)

    def _event(self, block: bytes, now: float) -> None:
        if block.startswith(b"data: ") and b"\n" not in block:  # the common case
            payload = block[6:]
        else:
            parts = []
            for line in block.split(b"\n"):
                if not line or line.startswith(b":"):
                    continue
                name, sep, value = line.partition(b":")
                if not sep or name not in (b"data", b"event", b"id", b"retry"):
                    self.error = f"malformed SSE line: {_preview(line)!r}"
                    return
                if name == b"data":
                    parts.append(value[1:] if value.startswith(b" ") else value)
            if not parts:
                return
            payload = b"\n".join(parts)
        if payload == DONE:
            self.done_time = now
            return
        if self.done_time is not None:
            self.error = f"data after [DONE]: {_preview(payload)!r}"
            return
        self.events.append((now, payload))


@dataclass
class DecodedStream:
    """What an OpenAI-compatible stream said, with the arrival time of each token chunk."""

    chunk_times: list[float] = field(default_factory=list)
    text_parts: list[str] = field(default_factory=list)  # reasoning and answer text, in stream order
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    first_answer_time: float | None = None  # reasoning models: the first chunk with answer text
    reasoning_chunks: int = 0
    reasoning_tokens: int | None = None


def _chunk_texts(choice: dict[str, Any]) -> tuple[str | None, str | None]:
    """(reasoning, answer) text of one choice of a token chunk. Chat's reasoning is
    `delta.reasoning`, else the older `reasoning_content` (some vLLM releases send both)."""
    text = choice.get("text")  # completions
    if text is not None:
        return None, text
    delta = choice.get("delta")  # chat
    if not isinstance(delta, dict):
        return None, None
    reasoning = delta.get("reasoning")
    if reasoning is None:
        reasoning = delta.get("reasoning_content")
    return reasoning, delta.get("content")


def _reasoning_tokens(usage: dict[str, Any]) -> int | None:
    details = usage.get("completion_tokens_details")
    count = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else None


def decode_events(events: list[tuple[float, bytes]]) -> DecodedStream:
    """Decode the JSON chunks of a completions or chat stream. A token chunk is any with a
    non-empty `choices`, whatever its text, as `vllm bench serve` counts them; token counts
    come from `usage` only."""
    out = DecodedStream()
    try:  # one parse for the whole stream; on failure, find the bad event one by one
        objs = _loads(b"[" + b",".join(p for _, p in events) + b"]")
        if len(objs) != len(events):
            raise ValueError("an event held several JSON values")
    except _JSONError:
        objs = []
        for _, payload in events:
            try:
                objs.append(_loads(payload))
            except _JSONError:
                out.error = f"malformed SSE data (not JSON): {_preview(payload)!r}"
                return out
    for (t, payload), obj in zip(events, objs):
        if not isinstance(obj, dict):
            out.error = f"malformed SSE data (not an object): {_preview(payload)!r}"
            return out
        if "error" in obj:  # vLLM reports a mid-stream failure as an error event
            err = obj["error"]
            msg = err.get("message", err) if isinstance(err, dict) else err
            out.error = f"error event in stream: {msg}"
            return out
        choices = obj.get("choices")
        if choices:
            out.chunk_times.append(t)
            reasoned = False
            for choice in choices:
                reasoning, answer = _chunk_texts(choice)
                if reasoning:
                    out.text_parts.append(reasoning)
                    reasoned = True
                if answer:
                    out.text_parts.append(answer)
                    if out.first_answer_time is None:
                        out.first_answer_time = t
                reason = choice.get("finish_reason")
                if reason is not None:
                    out.finish_reason = reason
            out.reasoning_chunks += reasoned
        usage = obj.get("usage")
        if usage:
            out.prompt_tokens = usage.get("prompt_tokens", out.prompt_tokens)
            out.completion_tokens = usage.get("completion_tokens", out.completion_tokens)
            reasoning_tokens = _reasoning_tokens(usage)
            if reasoning_tokens is not None:
                out.reasoning_tokens = reasoning_tokens
    return out
