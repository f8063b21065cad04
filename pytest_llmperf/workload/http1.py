"""A minimal HTTP/1.1 client for streamed responses, on asyncio protocols: httpx's
per-chunk cost makes the event loop timestamp chunks late at a few hundred streams.
Keep-alive, one request per connection at a time; no proxies, redirects or HTTP/2.
"""

from __future__ import annotations

import asyncio
import ssl
from time import perf_counter
from urllib.parse import urlsplit

from pytest_llmperf.util.limits import is_too_many_open_files

MAX_HEAD = 64 * 1024


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
    """One response: the raw body reads and their arrival times, framing still on until
    `pieces()` (nothing is decoded while the body streams)."""

    __slots__ = (
        "status",
        "reason",
        "headers",
        "done",
        "error",
        "end_time",
        "bytes_seen",
        "times",
        "data",
        "chunked",
        "complete",
        "keep_alive",
    )

    def __init__(self) -> None:
        self.status: int | None = None
        self.reason = ""
        self.headers: dict[str, str] = {}
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.error: str | None = None
        self.end_time: float | None = None
        self.bytes_seen = 0
        # Floats and bytes in two lists, not a tuple per read: fewer objects for the GC.
        self.times: list[float] = []
        self.data: list[bytes] = []
        self.chunked = False
        self.complete = False  # the body ended as its framing says
        self.keep_alive = True

    def pieces(self) -> list[tuple[float, bytes]]:
        """Body bytes as `(arrival_time, bytes)`; for a chunked body one per chunk, timed
        by the read that completed it. Raises HTTPProtocolError for broken framing."""
        if not self.chunked:
            return list(zip(self.times, self.data))
        return deframe(self.times, self.data, self.complete)

    def body(self) -> bytes:
        try:
            return b"".join(b for _, b in self.pieces())
        except HTTPProtocolError:
            return b"".join(self.data)

    def completion_tokens_hint(self) -> int | None:
        """`usage.completion_tokens` found by a byte search of the last reads, for the
        progress line only (records take it from the decoded usage chunk)."""
        tail = b"".join(self.data[-3:])
        at = tail.rfind(b'"completion_tokens":')
        if at < 0:
            return None
        digits = tail[at + 20 : at + 40].lstrip(b" ")
        end = 0
        while end < len(digits) and 48 <= digits[end] <= 57:
            end += 1
        return int(digits[:end]) if end else None


class Connection(asyncio.Protocol):
    """One keep-alive connection, one response at a time. A read costs a timestamp, an
    append and, for a chunked body, a walk of the chunk headers to see where it ends."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.last_activity = perf_counter()  # last bytes in or out
        self._resp: Response | None = None
        self._head = b""
        self._mode = ""  # "" (reading the head) | chunked | length | close
        self._skip = 0  # chunked: bytes of the current chunk (and its CRLF) still to come
        self._carry = b""  # chunked: an incomplete chunk header
        self._remaining = 0  # length: body bytes still to come

    # asyncio callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._resp is None:
            return
        if self._mode == "close":
            self._complete(perf_counter())
        else:
            why = f": {exc}" if exc else ""
            self._fail(f"connection closed by server mid-response{why}")

    def data_received(self, data: bytes) -> None:
        now = perf_counter()  # first thing: this is the bytes' arrival time
        self.last_activity = now
        resp = self._resp
        if resp is None:
            return  # bytes with no request pending: dropped, the socket is not reused
        resp.bytes_seen += len(data)
        try:
            if self._mode == "chunked":
                resp.times.append(now)
                resp.data.append(data)
                if self._walk_chunks(data):
                    self._complete(now)
            elif self._mode == "":
                self._read_head(data, now)
            else:
                self.data_received_body(data, now)
        except HTTPProtocolError as exc:
            self._fail(f"invalid HTTP response: {exc}")
            self.close()

    def eof_received(self) -> bool | None:
        return None  # let the transport close; connection_lost decides

    # public ------------------------------------------------------------------------
    def send(self, request: bytes, response: Response) -> float:
        """Write a request; returns the send time (taken just before the write)."""
        self._resp = response
        self._head = b""
        self._mode = ""
        self._skip = 0
        self._carry = b""
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
        """Fail the current response (timeouts, cuts), keeping what arrived, and drop the socket."""
        self._fail(reason)
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # parsing -----------------------------------------------------------------------
    def _walk_chunks(self, data: bytes) -> bool:
        """Advance over chunk headers in `data`; True at the end of the chunked body."""
        skip = self._skip
        n = len(data)
        if skip >= n:
            self._skip = skip - n
            return False
        if self._carry:
            data = self._carry + data[skip:]
            self._carry = b""
            skip = 0
            n = len(data)
        pos = skip
        while True:
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                if n - pos > 1024:
                    raise HTTPProtocolError("chunk size line too long")
                self._carry = data[pos:]
                self._skip = 0
                return False
            size = _chunk_size(data[pos:eol])
            if size == 0:  # last chunk: then optional trailers and a blank line
                rest = data[eol + 2 :]
                if rest.startswith(b"\r\n") or b"\r\n\r\n" in rest:
                    return True
                self._carry = data[pos:]
                self._skip = 0
                return False
            pos = eol + size + 4
            if pos >= n:
                self._skip = pos - n
                return False

    def _read_head(self, data: bytes, now: float) -> None:
        buf = self._head + data
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD:
                    raise HTTPProtocolError("response head larger than 64 KiB")
                self._head = buf
                return
            mode = self._parse_head(buf[:end])
            buf = buf[end + 4 :]
            if mode != "interim":
                break
        self._head = b""
        self._mode = mode
        if mode == "empty":
            self._complete(now)
        elif buf or mode == "length":
            self.data_received_body(buf, now)

    def data_received_body(self, buf: bytes, now: float) -> None:
        """The part of a read that follows the head."""
        resp = self._resp
        assert resp is not None
        if buf:
            resp.times.append(now)
            resp.data.append(buf)
        if self._mode == "chunked":
            if self._walk_chunks(buf):
                self._complete(now)
        elif self._mode == "length":
            self._remaining -= len(buf)
            if self._remaining <= 0:
                self._complete(now)

    def _parse_head(self, head: bytes) -> str:
        resp = self._resp
        assert resp is not None
        lines = head.split(b"\r\n")
        status_line = lines[0].decode("latin-1")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise HTTPProtocolError(f"bad status line {status_line[:80]!r}")
        status = int(parts[1])
        if 100 <= status < 200:  # interim response: the real one follows
            return "interim"
        resp.status = status
        resp.reason = parts[2] if len(parts) > 2 else ""
        headers = resp.headers
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise HTTPProtocolError(f"bad header line {line[:80]!r}")
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
        if "close" in headers.get("connection", "").lower() or parts[0] == "HTTP/1.0":
            resp.keep_alive = False
        if "chunked" in headers.get("transfer-encoding", "").lower():
            resp.chunked = True
            return "chunked"
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                raise HTTPProtocolError(f"bad Content-Length {length!r}")
            self._remaining = int(length)
            return "length" if self._remaining else "empty"
        if status in (204, 304):
            return "empty"
        resp.keep_alive = False
        return "close"

    def _complete(self, now: float) -> None:
        resp = self._resp
        if resp is None:
            return
        resp.complete = True
        self._resp = None
        if not resp.keep_alive:
            self.close()
        resp.end_time = now
        if not resp.done.done():
            resp.done.set_result(None)

    def _fail(self, reason: str) -> None:
        resp = self._resp
        self._resp = None
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


def deframe(times: list[float], reads: list[bytes], complete: bool = True) -> list[tuple[float, bytes]]:
    """Remove chunked framing. Each chunk's data keeps the arrival time of the read
    that completed it. `complete=False` (a cut body) keeps the whole chunks only."""
    ends = []
    total = 0
    for b in reads:
        total += len(b)
        ends.append(total)
    data = b"".join(reads)
    out: list[tuple[float, bytes]] = []
    n = len(data)
    pos = 0
    k = 0  # index of the read that holds `pos`
    while True:
        eol = data.find(b"\r\n", pos)
        if eol < 0:
            if complete:
                raise HTTPProtocolError("chunked body ended inside a chunk header")
            return out
        size = _chunk_size(data[pos:eol])
        if size == 0:
            return out
        start = eol + 2
        stop = start + size
        if stop + 2 > n:
            if complete:
                raise HTTPProtocolError("chunked body ended inside a chunk")
            return out
        if data[stop : stop + 2] != b"\r\n":
            raise HTTPProtocolError("chunk not followed by CRLF")
        while ends[k] < stop:  # the read holding the chunk's last byte
            k += 1
        out.append((times[k], data[start:stop]))
        pos = stop + 2


class ConnectionPool:
    """Idle keep-alive connections to one origin; at most one request per connection."""

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

    async def fill(self, n: int) -> None:
        """Open connections until `n` are idle, so no measured request pays for a handshake.
        Failures are left for the requests to report, except running out of file descriptors."""
        missing = n - len(self._idle)
        if missing <= 0:
            return
        results = await asyncio.gather(*(self.acquire(fresh=True) for _ in range(missing)), return_exceptions=True)
        out_of_files = None
        for res in results:
            if isinstance(res, tuple):
                self.release(res[0])
            elif out_of_files is None and is_too_many_open_files(res):
                out_of_files = res
        if out_of_files is not None:
            raise out_of_files

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
