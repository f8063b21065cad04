"""One streaming request to an OpenAI-compatible server -> one `RequestRecord`.

A failed request (HTTP error, broken stream, timeout, cut) is recorded with its
reason; nothing here raises for a request-level failure. Running out of file descriptors
is not one: that OSError is raised (the run, not the server, has to be fixed).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from time import perf_counter
from typing import Any

from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.util.limits import is_too_many_open_files
from pytest_llmperf.workload.http1 import Connection, ConnectionPool, HTTPProtocolError, Origin, Response
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.sse import SSESplitter, decode_events

ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


def build_payload(
    model: str,
    prompt: str,
    endpoint: str,
    max_tokens: int,
    ignore_eos: bool = False,
    extra_body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body, shaped as `vllm bench serve` sends it (chat: max_completion_tokens)."""
    if endpoint == "completions":
        body: dict[str, Any] = {"model": model, "prompt": prompt, "max_tokens": max_tokens}
    elif endpoint == "chat":
        body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_completion_tokens": max_tokens}
    else:
        raise ValueError(f"endpoint must be one of {sorted(ENDPOINTS)}, got {endpoint!r}")
    body.update({"temperature": 0, "stream": True, "stream_options": {"include_usage": True}})
    if ignore_eos:
        body["ignore_eos"] = True
    if extra_body:
        body.update(extra_body)
    return body


def error_message(status: int, reason: str, body: bytes) -> str:
    """'HTTP 404: The model `x` does not exist...' from vLLM's or starlette's error body."""
    text = body.decode("utf-8", "replace").strip()
    message = text
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict) and err.get("message"):
            message = str(err["message"])
        elif isinstance(err, str):
            message = err
        elif obj.get("detail"):
            message = str(obj["detail"])
    if len(message) > 500:
        message = message[:500] + "..."
    return f"HTTP {status}: {message or reason or 'no body'}"


class _Flight:
    """A request in flight, so that timeouts and cuts can reach it."""

    __slots__ = ("conn", "task", "cut_reason", "at_cap")

    def __init__(self, task: asyncio.Task[Any] | None) -> None:
        self.conn: Connection | None = None
        self.task = task
        self.cut_reason: str | None = None
        self.at_cap = False  # cut because the run's time cap passed, not a server fault


class StreamingClient:
    """Streams requests over a keep-alive pool; use as `async with`.

    `read_timeout` is the longest silence allowed between bytes of one response
    (the server may think for a long time before the first token, so keep it generous).
    `connections`: what makes the keep-alive pool for an origin (tests pass a faulty one).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        endpoint: str = "completions",
        max_tokens: int = 256,
        ignore_eos: bool = False,
        api_key: str | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        extra_body: dict[str, Any] | None = None,
        connections: Callable[[Origin, float], ConnectionPool] = ConnectionPool,
    ) -> None:
        if endpoint not in ENDPOINTS:
            raise ValueError(f"endpoint must be one of {sorted(ENDPOINTS)}, got {endpoint!r}")
        self.origin = Origin(base_url)
        self.model = model
        self.endpoint = endpoint
        self.max_tokens = max_tokens
        self.ignore_eos = ignore_eos
        self.extra_body = extra_body
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.connections = connections
        head = [
            f"POST {self.origin.prefix}{ENDPOINTS[endpoint]} HTTP/1.1",
            f"Host: {self.origin.host_header}",
            "User-Agent: pytest-llmperf",
            "Accept: text/event-stream",
            "Content-Type: application/json",
        ]
        if api_key:
            head.append(f"Authorization: Bearer {api_key}")
        self._head = ("\r\n".join(head) + "\r\nContent-Length: ").encode("latin-1")
        self._pool: ConnectionPool | None = None
        self._flights: set[_Flight] = set()
        self._watchdog: asyncio.Task[None] | None = None

    async def __aenter__(self) -> StreamingClient:
        self._pool = self.connections(self.origin, self.connect_timeout)
        self._watchdog = asyncio.get_running_loop().create_task(self._watch_idle())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cut_all("client closed")
        if self._watchdog is not None:
            self._watchdog.cancel()
            try:
                await self._watchdog
            except asyncio.CancelledError:
                pass
        if self._pool is not None:
            self._pool.close()

    async def open_connections(self, n: int) -> None:
        """Have `n` keep-alive connections ready (one per concurrent stream)."""
        if self._pool is None:
            raise RuntimeError("use StreamingClient as `async with StreamingClient(...) as c`")
        await self._pool.fill(n)

    def encode(self, prompt: str, max_tokens: int | None = None) -> bytes:
        body = json.dumps(
            build_payload(
                self.model, prompt, self.endpoint, max_tokens or self.max_tokens, self.ignore_eos, self.extra_body
            ),
            ensure_ascii=False,
        ).encode()
        return self._head + str(len(body)).encode() + b"\r\n\r\n" + body

    def cut_all(self, reason: str, at_cap: bool = False) -> None:
        """End every request in flight now; each is recorded as failed with `reason` (and
        as cut at the time cap when `at_cap`: the run's limit, not a server fault)."""
        for flight in list(self._flights):
            flight.at_cap = flight.at_cap or (at_cap and flight.cut_reason is None)
            self._cut(flight, reason)

    def _cut(self, flight: _Flight, reason: str) -> None:
        if flight.cut_reason is not None:
            return
        flight.cut_reason = reason
        if flight.conn is not None:
            flight.conn.abort(reason)
        elif flight.task is not None:
            flight.task.cancel()  # still connecting

    async def _watch_idle(self) -> None:
        period = min(0.5, self.read_timeout / 4)
        while True:
            await asyncio.sleep(period)
            now = perf_counter()
            for flight in list(self._flights):
                conn = flight.conn
                if conn is not None and now - conn.last_activity > self.read_timeout:
                    self._cut(flight, f"read timeout after {self.read_timeout:g} s without data")

    async def request(self, req: SampledRequest, max_tokens: int | None = None) -> RequestRecord:
        """Send one prompt and stream the answer; always returns a finished record."""
        return (await self.stream(req, max_tokens)).finish()

    async def stream(self, req: SampledRequest, max_tokens: int | None = None) -> PendingRecord:
        """Like `request`, but the body is decoded only when `.finish()` is called.

        The runner finishes records after the measured window, so that no stream's
        decoding runs while other streams' chunks are being timed.
        """
        if self._pool is None:
            raise RuntimeError("use StreamingClient as `async with StreamingClient(...) as c`")
        record = RequestRecord(index=req.index, send_time=perf_counter(), expected_prompt_len=req.prompt_len)
        raw = self.encode(req.prompt, max_tokens)
        flight = _Flight(asyncio.current_task())
        self._flights.add(flight)
        resp = None
        try:
            for attempt in (0, 1):
                resp, retry = await self._attempt(raw, record, flight, fresh=attempt == 1)
                if not retry:
                    break
        except asyncio.CancelledError:
            if flight.cut_reason is None:
                raise
            record.error = flight.cut_reason
            record.end_time = perf_counter()
        except Exception as exc:  # a bug here must cost one record, not the run
            if is_too_many_open_files(exc):
                raise  # not the server's failure: the run stops and says what to fix
            record.error = f"client error: {type(exc).__name__}: {exc}"
            record.end_time = perf_counter()
            resp = None
        finally:
            self._flights.discard(flight)
            record.cut_at_cap = flight.at_cap
        return PendingRecord(record, resp)

    async def _attempt(
        self, raw: bytes, record: RequestRecord, flight: _Flight, fresh: bool
    ) -> tuple[Response | None, bool]:
        """One try; retry=True when a reused keep-alive socket was dead before any reply."""
        assert self._pool is not None
        try:
            conn, reused = await self._pool.acquire(fresh=fresh)
        except asyncio.TimeoutError:
            record.error = f"connect timeout after {self.connect_timeout:g} s to {self.origin.host}:{self.origin.port}"
            record.end_time = record.send_time = perf_counter()
            return None, False
        except OSError as exc:
            if is_too_many_open_files(exc):
                raise
            record.error = f"cannot connect to {self.origin.host}:{self.origin.port}: {exc}"
            record.end_time = record.send_time = perf_counter()
            return None, False
        flight.conn = conn
        resp = Response()
        record.send_time = conn.send(raw, resp)
        await resp.done
        flight.conn = None
        if resp.error is not None and reused and resp.bytes_seen == 0 and flight.cut_reason is None:
            self._pool.discard(conn)
            return None, True
        self._pool.release(conn)
        return resp, False


class PendingRecord:
    """A streamed request whose body is not decoded yet."""

    __slots__ = ("record", "response")

    def __init__(self, record: RequestRecord, response: Response | None) -> None:
        self.record = record
        self.response = response

    @property
    def failed_hint(self) -> bool:
        """Failed at the HTTP level (the body may still turn out broken)."""
        r = self.response
        return self.record.error is not None or r is None or r.error is not None or r.status != 200

    @property
    def completion_tokens_hint(self) -> int | None:
        return self.response.completion_tokens_hint() if self.response is not None else None

    def finish(self) -> RequestRecord:
        """Decode the body into the record (once) and return it."""
        resp, self.response = self.response, None
        if resp is not None:
            _fill(self.record, resp)
        return self.record


def _fill(record: RequestRecord, resp: Response) -> None:
    record.status = resp.status
    record.end_time = resp.end_time
    if resp.status is not None and resp.status != 200:
        record.error = error_message(resp.status, resp.reason, resp.body())
        return
    try:
        pieces = resp.pieces()
    except HTTPProtocolError as exc:
        record.error = resp.error or f"invalid HTTP response: {exc}"
        return
    splitter = SSESplitter()
    for t, data in pieces:
        splitter.feed(data, t)
    if resp.error is None:
        splitter.finish(resp.end_time or perf_counter())
    decoded = decode_events(splitter.events)
    record.chunk_times = decoded.chunk_times
    record.output_text = "".join(decoded.text_parts)
    record.prompt_tokens = decoded.prompt_tokens
    record.completion_tokens = decoded.completion_tokens
    record.finish_reason = decoded.finish_reason
    record.first_answer_time = decoded.first_answer_time
    record.reasoning_chunks = decoded.reasoning_chunks
    record.reasoning_tokens = decoded.reasoning_tokens
    if splitter.done_time is not None:
        record.end_time = splitter.done_time
    record.error = (
        resp.error
        or splitter.error
        or decoded.error
        or (None if splitter.done_time is not None else "stream ended without [DONE]")
        or (None if decoded.chunk_times else "stream carried no token chunk (none with non-empty choices)")
        or (
            None
            if decoded.completion_tokens is not None
            else "no usage chunk (server ignored stream_options.include_usage)"
        )
    )
