"""A bare OpenAI-style streaming server for measuring client overhead, nothing else.

Every POST to /v1/completions or /v1/chat/completions streams `--tokens` chunks of
one token each, one every `--interval` seconds on an absolute schedule (a late chunk
is sent as soon as the server can; it does not push the rest back), then usage and
[DONE]. The server keeps its own `time.perf_counter()` send time of every chunk
(taken just before the write):
`GET /truth` returns them (ground truth for TPOT), `DELETE /truth` forgets them.

    python benchmarks/stream_server.py --port 0 [--cpu 1]   # prints "PORT <n>"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from time import perf_counter

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None
if os.environ.get("STREAM_SERVER_LOOP") == "asyncio":
    uvloop = None


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(obj: object) -> bytes:
    return _chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


# Shaped and sized like vLLM 0.32's completions chunk (reference capture).
TOKEN = _event(
    {
        "id": "cmpl-9e7fd3d4c84e2fa3",
        "object": "text_completion",
        "created": 1796012019,
        "model": "bench",
        "choices": [
            {
                "index": 0,
                "text": " tok",
                "logprobs": None,
                "finish_reason": None,
                "stop_reason": None,
                "prompt_token_ids": None,
                "token_ids": None,
            }
        ],
    }
)
CHAT_TOKEN = _event(
    {
        "id": "chatcmpl-82f6990fa519b359",
        "object": "chat.completion.chunk",
        "created": 1796012022,
        "model": "bench",
        "choices": [
            {"index": 0, "delta": {"content": " tok"}, "logprobs": None, "finish_reason": None, "token_ids": None}
        ],
    }
)
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n"


def _plain(status: int, body: bytes, ctype: bytes = b"application/json") -> bytes:
    return b"HTTP/1.1 %d X\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s" % (status, ctype, len(body), body)


class Stream(asyncio.Protocol):
    truth: list[dict[str, object]] = []

    def __init__(self, tokens: int, interval: float) -> None:
        self.tokens = tokens
        self.interval = interval
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        self.busy = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while not self.busy:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            method, path, _ = head.split("\r\n", 1)[0].split(" ", 2)
            self.route(method, path, body)

    def route(self, method: str, path: str, body: bytes) -> None:
        assert self.transport is not None
        if path in ("/v1/completions", "/v1/chat/completions") and method == "POST":
            req = json.loads(body)
            prompt = req.get("prompt") or req["messages"][0]["content"]
            if not isinstance(prompt, str):
                prompt = json.dumps(prompt)
            n = req.get("max_tokens") or req.get("max_completion_tokens") or self.tokens
            record: dict[str, object] = {"prompt": prompt, "send_times": []}
            self.truth.append(record)
            self.busy = True
            self.transport.write(HEAD)
            chunk = CHAT_TOKEN if "messages" in req else TOKEN
            self.loop.call_soon(self.tick, record, chunk, min(n, self.tokens), 0, perf_counter())
        elif path == "/truth" and method == "GET":
            self.transport.write(_plain(200, json.dumps(self.truth).encode()))
        elif path == "/truth" and method == "DELETE":
            self.truth.clear()
            self.transport.write(_plain(200, b"{}"))
        elif path == "/v1/models":
            self.transport.write(_plain(200, b'{"object":"list","data":[{"id":"bench","object":"model"}]}'))
        elif path in ("/health", "/metrics"):
            self.transport.write(_plain(200 if path == "/health" else 404, b""))
        else:
            self.transport.write(_plain(404, b'{"detail":"Not Found"}'))

    def tick(self, record: dict, chunk: bytes, n: int, i: int, t0: float) -> None:
        if self.transport is None:
            return
        record["send_times"].append(perf_counter())  # type: ignore[union-attr]  # before the write
        self.transport.write(chunk)
        i += 1
        if i < n:
            self.loop.call_at(
                self.loop.time() + max(0.0, t0 + i * self.interval - perf_counter()), self.tick, record, chunk, n, i, t0
            )
            return
        usage = {"prompt_tokens": 8, "total_tokens": 8 + n, "completion_tokens": n}
        self.transport.write(
            _event({"id": "cmpl-x", "object": "text_completion", "model": "bench", "choices": [], "usage": usage})
            + _chunk(b"data: [DONE]\n\n")
            + b"0\r\n\r\n"
        )
        self.busy = False
        if self.buf:
            self.data_received(b"")


async def serve(port: int, tokens: int, interval: float) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Stream(tokens, interval), "127.0.0.1", port, backlog=4096)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--interval", type=float, default=0.005)
    ap.add_argument("--cpu", type=int, default=None, help="pin the server to this CPU")
    args = ap.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    run = uvloop.run if uvloop is not None else asyncio.run
    try:
        run(serve(args.port, args.tokens, args.interval))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
