"""HTTP/1.1 response framing of the client's connection, fed byte splits a socket may produce."""

import asyncio
import random

import pytest

from pytest_llmperf.workload.http1 import Connection, Origin, Response

EVENTS = [
    b'data: {"choices":[{"text":" a"}]}\n\n',
    b'data: {"choices":[{"text":" bc"}]}\n\n',
    b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":12}}\n\n',
    b"data: [DONE]\n\n",
]
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
CHUNKED = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in EVENTS) + b"0\r\n\r\n"


class FakeTransport:
    def __init__(self):
        self.closed = False

    def write(self, data):
        pass

    def close(self):
        self.closed = True

    def abort(self):
        self.closed = True


def _feed(parts, lost=False):
    """Feed reads i at time float(i); return (response, index of the read that completed it)."""

    async def main():
        conn = Connection()
        conn.connection_made(FakeTransport())
        resp = Response()
        conn.send(b"GET / HTTP/1.1\r\n\r\n", resp)
        done_at = None
        for i, part in enumerate(parts):
            conn.data_received(part)
            conn_times = resp.times
            if resp.done.done() and done_at is None:
                done_at = i
            if conn_times:
                conn_times[-1] = float(i)  # make arrival times checkable
        if lost:
            conn.connection_lost(None)
        return resp, done_at, conn

    return asyncio.run(main())


def _split(raw, sizes):
    out, pos = [], 0
    for n in sizes:
        out.append(raw[pos : pos + n])
        pos += n
    if pos < len(raw):
        out.append(raw[pos:])
    return [p for p in out if p]


@pytest.mark.parametrize("seed", range(30))
def test_chunked_body_completes_exactly_at_its_last_byte(seed):
    rng = random.Random(seed)
    raw = HEAD + CHUNKED
    parts = _split(raw, [rng.randint(1, 40) for _ in range(len(raw))])
    resp, done_at, _ = _feed(parts)
    assert done_at == len(parts) - 1
    assert resp.status == 200 and resp.complete and resp.error is None
    pieces = resp.pieces()
    assert [b for _, b in pieces] == EVENTS
    # each chunk is timed by the read that held its last byte
    body_start = len(HEAD)
    offsets, pos = [], 0
    for p in parts:
        pos += len(p)
        offsets.append(pos)
    expected, at = [], body_start
    for e in EVENTS:
        header = b"%x\r\n" % len(e)
        last_byte = at + len(header) + len(e) - 1
        expected.append(float(next(i for i, end in enumerate(offsets) if end > last_byte)))
        at += len(header) + len(e) + 2
    assert [t for t, _ in pieces] == expected


def test_every_single_byte_split():
    raw = HEAD + CHUNKED
    resp, done_at, _ = _feed([raw[i : i + 1] for i in range(len(raw))])
    assert done_at == len(raw) - 1 and [b for _, b in resp.pieces()] == EVENTS


def test_not_complete_before_the_terminator():
    resp, done_at, _ = _feed([HEAD + CHUNKED[:-2]])
    assert done_at is None and not resp.done.done()


def test_trailers_after_the_last_chunk():
    resp, done_at, _ = _feed([HEAD + CHUNKED[:-2], b"X-Trailer: 1\r\n", b"\r\n"])
    assert done_at == 2 and [b for _, b in resp.pieces()] == EVENTS


def test_content_length_body_and_keep_alive():
    body = b'{"error":{"message":"nope","code":404}}'
    raw = b"HTTP/1.1 404 Not Found\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    resp, done_at, conn = _feed([raw[:30], raw[30:60], raw[60:]])
    assert done_at == 2 and resp.status == 404 and resp.body() == body
    assert not conn.closed and resp.keep_alive


def test_interim_100_continue_is_skipped():
    resp, done_at, _ = _feed([b"HTTP/1.1 100 Continue\r\n\r\n" + HEAD, CHUNKED])
    assert resp.status == 200 and done_at == 1


def test_close_delimited_body_ends_with_the_connection():
    resp, done_at, conn = _feed([b"HTTP/1.1 200 OK\r\n\r\nhello ", b"world"], lost=True)
    assert resp.error is None and resp.body() == b"hello world" and not resp.keep_alive


def test_connection_close_header_closes_after_the_response():
    resp, _, conn = _feed([b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok"])
    assert resp.body() == b"ok" and conn.closed


def test_lost_mid_body_keeps_whole_chunks():
    raw = HEAD + CHUNKED
    resp, done_at, _ = _feed([raw[: len(HEAD) + 60]], lost=True)
    assert done_at is None and resp.done.done() and resp.error.startswith("connection closed by server mid-response")
    assert [b for _, b in resp.pieces()] == EVENTS[:1]


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"SPDY/9 200 OK\r\n\r\n", "bad status line"),
        (HEAD + b"zz\r\n", "bad chunk size line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "bad header line"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n", "bad Content-Length"),
    ],
)
def test_invalid_responses_fail_with_a_reason(raw, message):
    resp, done_at, conn = _feed([raw])
    assert done_at == 0 and resp.error.startswith("invalid HTTP response: ") and message in resp.error
    assert conn.closed


def test_completion_tokens_hint_reads_usage_bytes():
    resp, _, _ = _feed([HEAD + CHUNKED])
    assert resp.completion_tokens_hint() == 12


@pytest.mark.parametrize(
    "url, host, port, prefix, header",
    [
        ("http://127.0.0.1:8000", "127.0.0.1", 8000, "", "127.0.0.1:8000"),
        ("https://example.org/api/", "example.org", 443, "/api", "example.org"),
        ("http://[::1]:9000", "::1", 9000, "", "[::1]:9000"),
    ],
)
def test_origin(url, host, port, prefix, header):
    o = Origin(url)
    assert (o.host, o.port, o.prefix, o.host_header) == (host, port, prefix, header)


def test_origin_rejects_non_http():
    with pytest.raises(ValueError, match="base_url must look like http://host:port"):
        Origin("ftp://x")


def test_filling_the_pool_raises_running_out_of_file_descriptors_and_leaves_other_failures():
    import errno

    from pytest_llmperf.workload.http1 import ConnectionPool

    async def fill(failure):
        pool = ConnectionPool(Origin("http://127.0.0.1:1"), connect_timeout=1.0)

        async def acquire(fresh=False):
            raise failure

        pool.acquire = acquire
        await pool.fill(3)

    asyncio.run(fill(ConnectionRefusedError(errno.ECONNREFUSED, "refused")))  # left for the requests
    with pytest.raises(OSError, match="Too many open files"):
        asyncio.run(fill(OSError(errno.EMFILE, "Too many open files")))
