"""A minimal HTTP/1.1 client for streamed responses, on asyncio protocols.

Why not httpx here: its per-chunk path (anyio stream, httpcore, the h11 state machine,
line decoding) costs tens of microseconds per SSE chunk in Python, so at a few hundred
streams the event loop falls behind and every chunk is timestamped late, growing TPOT
(benchmarks/client_overhead.py measures it). In `data_received` the timestamp is taken
the moment the event loop hands over the bytes, and the remaining per-chunk work is a
chunked-encoding header and a blank-line search.

Scope, on purpose: http:// and https://, keep-alive with one request at a time per
connection, Content-Length, chunked and read-until-close bodies. No proxies, no
redirects, no HTTP/2.
"""

from __future__ import annotations

import asyncio
import ssl
from time import perf_counter
from typing import Callable
from urllib.parse import urlsplit

MAX_HEAD = 64 * 1024
MAX_ERROR_BODY = 64 * 1024


class HTTPProtocolError(Exception):
    """The server's bytes are not valid HTTP/1.1."""


class Origin:
    """scheme://host:port of a base URL, and the path prefix before /v1."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must look like http://host:port, got {base_url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host if self.port == default else f"{host}:{self.port}"

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        return ssl.create_default_context() if self.scheme == "https" else None


class Response:
    """One response as it streams in. `on_body(data, t)` sees decoded body bytes."""

    __slots__ = ("status", "reason", "headers", "done", "error", "end_time", "bytes_seen",
                 "on_body", "keep_alive")

    def __init__(self, on_body: Callable[[bytes, float], None]) -> None:
        self.status: int | None = None
        self.reason = ""
        self.headers: dict[str, str] = {}
        self.on_body = on_body
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.error: str | None = None
        self.end_time: float | None = None
        self.bytes_seen = 0
        self.keep_alive = True


class Connection(asyncio.Protocol):
    """One keep-alive connection; parses the head, then the body, into a `Response`."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.last_activity = perf_counter()   # last bytes in or out
        self._resp: Response | None = None
        self._buf = b""
        self._state = "idle"      # idle | head | chunk_size | chunk_data | chunk_end | trailer | length | close
        self._remaining = 0

    # asyncio callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        resp = self._resp
        if resp is None:
            return
        if self._state == "close":
            self._finish(perf_counter())
        else:
            why = f": {exc}" if exc else ""
            self._fail(f"connection closed by server mid-response{why}")

    def data_received(self, data: bytes) -> None:
        now = perf_counter()  # first thing: this is the chunk's arrival time
        self.last_activity = now
        resp = self._resp
        if resp is None:
            return  # bytes after a finished response: ignored, the next send resets
        resp.bytes_seen += len(data)
        try:
            self._parse(data, now, resp)
        except HTTPProtocolError as exc:
            self._fail(f"invalid HTTP response: {exc}")
            self.close()

    def eof_received(self) -> bool | None:
        return None  # let the transport close; connection_lost decides

    # public ------------------------------------------------------------------------
    def send(self, request: bytes, response: Response) -> float:
        """Write a request; returns the send time (taken just before the write)."""
        self._resp = response
        self._buf = b""
        self._state = "head"
        t = perf_counter()
        self.last_activity = t
        assert self.transport is not None
        self.transport.write(request)
        return t

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def abort(self, reason: str) -> None:
        """Fail the current response (timeouts, cancellation) and drop the socket."""
        self._fail(reason)
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # parsing -----------------------------------------------------------------------
    def _parse(self, data: bytes, now: float, resp: Response) -> None:
        state = self._state
        # Fast path: a whole chunk of a chunked body in one read, the usual SSE case.
        if state == "chunk_size" and not self._buf:
            pos = 0
            n = len(data)
            while pos < n:
                eol = data.find(b"\r\n", pos)
                if eol < 0:
                    break
                size = _chunk_size(data[pos:eol])
                if size == 0:
                    break
                start = eol + 2
                stop = start + size
                if stop + 2 > n or data[stop:stop + 2] != b"\r\n":
                    break
                resp.on_body(data[start:stop], now)
                pos = stop + 2
            if pos == n:
                return
            data = data[pos:]
        buf = self._buf + data if self._buf else data
        self._buf = b""
        while buf:
            if state == "head":
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > MAX_HEAD:
                        raise HTTPProtocolError("response head larger than 64 KiB")
                    break
                head, buf = buf[:end], buf[end + 4:]
                state = self._head(head, resp)
                if state == "done":
                    self._state = state
                    self._finish(now)
                    return
            elif state == "chunk_size":
                eol = buf.find(b"\r\n")
                if eol < 0:
                    if len(buf) > 1024:
                        raise HTTPProtocolError("chunk size line too long")
                    break
                size = _chunk_size(buf[:eol])
                buf = buf[eol + 2:]
                if size == 0:
                    state = "trailer"
                else:
                    self._remaining = size
                    state = "chunk_data"
            elif state == "chunk_data":
                take = buf[:self._remaining]
                buf = buf[len(take):]
                self._remaining -= len(take)
                resp.on_body(take, now)
                if self._remaining == 0:
                    state = "chunk_end"
            elif state == "chunk_end":
                if len(buf) < 2:
                    break
                if buf[:2] != b"\r\n":
                    raise HTTPProtocolError("chunk not followed by CRLF")
                buf = buf[2:]
                state = "chunk_size"
            elif state == "trailer":
                if buf.startswith(b"\r\n"):
                    self._state = "idle"
                    self._finish(now)
                    return
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    break
                self._state = "idle"
                self._finish(now)
                return
            elif state == "length":
                take = buf[:self._remaining]
                buf = buf[len(take):]
                self._remaining -= len(take)
                resp.on_body(take, now)
                if self._remaining == 0:
                    self._state = "idle"
                    self._finish(now)
                    return
            elif state == "close":
                resp.on_body(buf, now)
                buf = b""
            else:  # idle: stray bytes
                raise HTTPProtocolError(f"unexpected bytes with no response pending: {buf[:40]!r}")
        self._buf = buf
        self._state = state

    def _head(self, head: bytes, resp: Response) -> str:
        lines = head.split(b"\r\n")
        status_line = lines[0].decode("latin-1")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise HTTPProtocolError(f"bad status line {status_line[:80]!r}")
        status = int(parts[1])
        if 100 <= status < 200:  # interim response: wait for the real one
            return "head"
        resp.status = status
        resp.reason = parts[2] if len(parts) > 2 else ""
        headers = resp.headers
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise HTTPProtocolError(f"bad header line {line[:80]!r}")
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
        conn = headers.get("connection", "").lower()
        if "close" in conn or parts[0] == "HTTP/1.0":
            resp.keep_alive = False
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return "chunk_size"
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                raise HTTPProtocolError(f"bad Content-Length {length!r}")
            self._remaining = int(length)
            return "length" if self._remaining else "done"
        if status in (204, 304):
            return "done"
        resp.keep_alive = False
        return "close"

    def _finish(self, now: float) -> None:
        resp = self._resp
        self._resp = None
        if resp is None:
            return
        if not resp.keep_alive:
            self.close()
        self._state = "idle"
        resp.end_time = now
        if not resp.done.done():
            resp.done.set_result(None)

    def _fail(self, reason: str) -> None:
        resp = self._resp
        self._resp = None
        self._state = "idle"
        if resp is None:
            return
        resp.error = reason
        resp.end_time = perf_counter()
        if not resp.done.done():
            resp.done.set_result(None)


def _chunk_size(line: bytes) -> int:
    try:
        return int(line.split(b";", 1)[0], 16)
    except ValueError:
        raise HTTPProtocolError(f"bad chunk size line {line[:40]!r}") from None


class ConnectionPool:
    """Idle keep-alive connections to one origin; at most one request per connection.

    The runner bounds concurrency, so the pool never holds more connections than that.
    """

    def __init__(self, origin: Origin, connect_timeout: float, idle_limit: float = 4.0) -> None:
        self.origin = origin
        self.connect_timeout = connect_timeout
        # uvicorn closes idle keep-alive sockets after 5 s: don't reuse older ones.
        self.idle_limit = idle_limit
        self._idle: list[Connection] = []
        self._all: set[Connection] = set()
        self._ssl = origin.ssl_context

    async def acquire(self, fresh: bool = False) -> tuple[Connection, bool]:
        """A ready connection and whether it was reused (a reused one may be stale)."""
        now = perf_counter()
        while self._idle and not fresh:
            conn = self._idle.pop()
            if not conn.closed and now - conn.last_activity < self.idle_limit:
                return conn, True
            conn.close()
            self._all.discard(conn)
        loop = asyncio.get_running_loop()
        _, conn = await asyncio.wait_for(
            loop.create_connection(Connection, self.origin.host, self.origin.port, ssl=self._ssl),
            self.connect_timeout,
        )
        self._all.add(conn)
        return conn, False

    def release(self, conn: Connection) -> None:
        if conn.closed or conn._resp is not None:
            self._all.discard(conn)
            conn.close()
        else:
            self._idle.append(conn)

    def discard(self, conn: Connection) -> None:
        self._all.discard(conn)
        conn.close()

    def close(self) -> None:
        for conn in list(self._all):
            conn.close()
        self._all.clear()
        self._idle.clear()
