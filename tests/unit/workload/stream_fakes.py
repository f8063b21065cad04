"""A scripted OpenAI-style streaming server for the client and runner tests.

Raw asyncio HTTP/1.1 (keep-alive, chunked) in a background thread on a random free
port of 127.0.0.1. The prompt picks the behaviour: "<mode> key=value ...", e.g.
"ok n=20 k=3 dt=0.002" (20 tokens, 3 per chunk, 2 ms apart) or "http500". Chunks are
shaped like the vLLM 0.32 capture. For every request the server keeps its own
`time.perf_counter()` write times (ground truth, comparable in the same process).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(obj: Any) -> bytes:
    return _chunk(b"data: " + json.dumps(obj).encode() + b"\n\n")


class FakeStreamServer:
    def __init__(self, metrics: str | None = "# fake\nvllm:generation_tokens_total 0.0\n") -> None:
        self.metrics = metrics
        self.requests: list[dict[str, Any]] = []  # body + "send_times" + "mode"
        self.connections = 0
        self.connect_times: list[float] = []  # perf_counter of every accepted connection
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.base_url = ""

    def __enter__(self) -> FakeStreamServer:
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._server = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
            port = self._server.sockets[0].getsockname()[1]
            self.base_url = f"http://127.0.0.1:{port}"
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=main, daemon=True)
        self._thread.start()
        ready.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            for w in list(self._writers):
                w.transport.abort()
            await asyncio.sleep(0.1)  # handlers see the abort and return
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        assert self._loop is not None and self._thread is not None
        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.connect_times.append(time.perf_counter())
        self._writers.add(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode().split("\r\n")
                method, path, _ = lines[0].split(" ")
                headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                if not await self._route(method, path, headers, body, writer):
                    return
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _route(
        self, method: str, path: str, headers: dict[str, str], body: bytes, writer: asyncio.StreamWriter
    ) -> bool:
        if method == "GET" and path == "/metrics":
            if self.metrics is None:
                return self._plain(writer, 404, b'{"detail":"Not Found"}')
            return self._plain(writer, 200, self.metrics.encode(), "text/plain")
        if method == "GET" and path == "/health":
            return self._plain(writer, 200, b"")
        if method != "POST" or path not in ("/v1/completions", "/v1/chat/completions"):
            return self._plain(writer, 404, b'{"detail":"Not Found"}')
        req = json.loads(body)
        req["headers"] = headers
        req["received"] = time.perf_counter()
        chat = path.endswith("chat/completions")
        prompt = req["messages"][0]["content"] if chat else req["prompt"]
        mode, *params = prompt.split()
        opts = dict(p.split("=", 1) for p in params if "=" in p)
        req["mode"] = mode
        req["send_times"] = []
        self.requests.append(req)
        if mode.startswith("http"):
            status = int(mode[4:])
            msg = {"error": {"message": f"scripted failure {status}", "type": "X", "param": None, "code": status}}
            return self._plain(writer, status, json.dumps(msg).encode())
        await self._stream(writer, req, chat, mode, opts)
        return mode not in ("close", "stall")

    def _plain(self, writer: asyncio.StreamWriter, status: int, body: bytes, ctype: str = "application/json") -> bool:
        writer.write(
            b"HTTP/1.1 %d X\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s"
            % (status, ctype.encode(), len(body), body)
        )
        return True

    async def _stream(
        self, writer: asyncio.StreamWriter, req: dict[str, Any], chat: bool, mode: str, opts: dict[str, str]
    ) -> None:
        n, k, dt = int(opts.get("n", 5)), int(opts.get("k", 1)), float(opts.get("dt", 0))
        first = float(opts.get("first", 0))
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        kind = "chat.completion.chunk" if chat else "text_completion"
        base = {"id": "cmpl-fake", "object": kind, "created": 1, "model": req["model"]}
        if chat:
            writer.write(
                _event(
                    {
                        **base,
                        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
                    }
                )
            )
        if first:
            await asyncio.sleep(first)
        sent = 0
        i = 0
        while sent < n:
            take = min(k, n - sent)
            sent += take
            text = "".join(f" t{sent - take + j}" for j in range(take))
            reason = "length" if sent == n and not chat else None
            choice = (
                {"index": 0, "delta": {"content": text}, "finish_reason": reason}
                if chat
                else {"index": 0, "text": text, "finish_reason": reason}
            )
            # time taken before the write: the client cannot see the chunk earlier
            req["send_times"].append(time.perf_counter())
            writer.write(_event({**base, "choices": [choice]}))
            await writer.drain()
            i += 1
            if mode == "malformed" and i == 2:
                writer.write(_chunk(b'{"oops": "no data field"}\n\n'))
            if mode == "badjson" and i == 2:
                writer.write(_chunk(b"data: {not json\n\n"))
            if mode == "close" and i == 2:
                writer.transport.abort()
                return
            if mode == "stall" and i == 2:
                while not writer.is_closing():  # until the client gives up or shutdown
                    await asyncio.sleep(0.02)
                return
            if dt and sent < n:
                await asyncio.sleep(dt)
        if chat:
            writer.write(
                _event({**base, "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "length"}]})
            )
        if mode != "nousage":
            plen = len(req.get("prompt") or req.get("messages", [{}])[0].get("content", "")) // 4 + 1
            writer.write(
                _event(
                    {
                        **base,
                        "choices": [],
                        "usage": {"prompt_tokens": plen, "total_tokens": plen + n, "completion_tokens": n},
                    }
                )
            )
        if mode != "nodone":
            writer.write(_chunk(b"data: [DONE]\n\n"))
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def scripted_requests(prompt: str, n: int) -> list:
    """n requests that all carry the same scripted prompt (see the module docstring)."""
    from pytest_llmperf.workload.requests import SampledRequest

    return [SampledRequest(index=i, prompt=prompt, prompt_len=5, expected_output_len=9) for i in range(n)]


def max_overlap(records) -> int:
    """The most requests in flight at once, from their send and end times."""
    events = sorted([(r.send_time, 1) for r in records] + [(r.end_time, -1) for r in records])
    live = peak = 0
    for _, step in events:
        live += step
        peak = max(peak, live)
    return peak


_CTRL_C_SCRIPT = """
import json, os, signal, sys, threading, time
sys.path.insert(0, sys.argv[1])
from stream_fakes import FakeStreamServer
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.util.signals import TERMINATE
from pytest_llmperf.workload.runner import RunConfig, run_benchmark
reqs = [SampledRequest(i, "ok n=3" if i < 4 else "stall n=5", 5, 5) for i in range(40)]
sig = getattr(signal, sys.argv[3])
if __name__ == "__main__":
    if sig == signal.SIGTERM:
        TERMINATE.install()  # as the plugin does at session start
    with FakeStreamServer() as srv:
        def press_ctrl_c():
            while len(srv.requests) < 8:
                time.sleep(0.01)
            time.sleep(0.2)
            os.kill(os.getpid(), sig)
        threading.Thread(target=press_ctrl_c, daemon=True).start()
        config = RunConfig(concurrency=4, workers=int(sys.argv[2]), warmup_requests=0, progress=False)
        res = run_benchmark(srv.base_url, "m", reqs, config)
    print(json.dumps({"stop": res.stop_reason, "attempted": res.attempted, "completed": res.completed,
                      "errors": sorted({r.error for r in res.records if r.error})}))
"""


def interrupted_run(workers: int = 1, sig: str = "SIGINT") -> dict:
    """Run 40 requests (4 quick, the rest stalling) at concurrency 4 in a fresh process and
    press Ctrl-C (or send `sig`: SIGTERM with util.signals.TERMINATE installed) once 8 have
    started; what the runner returned, as a dict."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    here = str(Path(__file__).parent)
    proc = subprocess.run(
        [sys.executable, "-c", _CTRL_C_SCRIPT, here, str(workers), sig], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])
