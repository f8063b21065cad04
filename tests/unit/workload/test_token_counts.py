"""Token counting: the documented approximation and the /tokenize counter with its cache."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from pytest_llmperf.workload.dataset import Conversation, sample_requests
from pytest_llmperf.workload.token_counts import (
    ServerTokenCounter,
    TokenCountCache,
    TokenizeError,
    TokenizeUnavailable,
    approx_count_tokens,
    approx_token_count,
    token_counter_for,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sharegpt"


# -- the approximation --------------------------------------------------------------


def test_approximation_tracks_qwen36_counts():
    """Real Qwen3.6 counts of ShareGPT prompts (fixture): close in total, bounded per text."""
    data = json.loads((FIXTURES / "qwen36_token_counts.json").read_text(encoding="utf-8"))
    samples = data["samples"]
    assert len(samples) >= 40
    real = [s["tokens"] for s in samples]
    est = [approx_token_count(s["text"]) for s in samples]
    assert 0.9 <= sum(est) / sum(real) <= 1.1
    ratios = sorted(e / r for e, r in zip(est, real))
    assert 0.85 <= ratios[len(ratios) // 2] <= 1.15  # the median text
    assert all(0.6 <= x <= 1.6 for x in ratios), ratios  # no text far off


@pytest.mark.parametrize(
    "text, n",
    [
        ("", 0),
        ("hello world", 2),
        ("2024", 4),  # digits one by one, as Qwen does
        ("a" * 25, 3),  # long letter runs split every 10 letters
        ("line one\nline two", 5),  # the line break is one token
    ],
)
def test_approximation_rules(text, n):
    assert approx_token_count(text) == n


def test_approximation_grows_with_text_and_rejects_non_text():
    t = "The quick brown fox jumps over the lazy dog. "
    assert approx_token_count(t * 10) > approx_token_count(t * 5) > approx_token_count(t)
    assert approx_count_tokens([t, ""]) == [approx_token_count(t), 0]
    with pytest.raises(TypeError, match="expects a str"):
        approx_token_count(None)  # type: ignore[arg-type]


# -- the server counter against a mock transport -------------------------------------


class FakeTokenizer:
    """A /tokenize handler: one token per word; records what it saw."""

    def __init__(self, delay: float = 0.0, status: int = 200, body=None):
        self.delay, self.status, self.body = delay, status, body
        self.seen: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.method == "POST" and request.url.path == "/tokenize"
        payload = json.loads(request.content)
        with self.lock:
            self.seen.append(payload)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                time.sleep(self.delay)
            if self.body is not None:
                return httpx.Response(self.status, content=self.body)
            n = len(payload["prompt"].split())
            return httpx.Response(
                self.status, json={"count": n, "max_model_len": 2048, "tokens": list(range(n)), "token_strs": None}
            )
        finally:
            with self.lock:
                self.in_flight -= 1


def counter(fake, cache_dir=None, **kw):
    return ServerTokenCounter(
        "http://server.test", "Qwen/Qwen3.6-35B-A3B-FP8", cache_dir, transport=httpx.MockTransport(fake), **kw
    )


def test_counts_come_from_the_server_in_input_order():
    fake = FakeTokenizer()
    texts = ["one", "two words", "three words here", "two words"]
    c = counter(fake)
    assert c(texts) == [1, 2, 3, 2]
    assert c.requests_sent == 3  # the duplicate was sent once
    assert {p["model"] for p in fake.seen} == {"Qwen/Qwen3.6-35B-A3B-FP8"}
    assert sorted(p["prompt"] for p in fake.seen) == sorted(set(texts))


def test_requests_run_concurrently_within_the_pool_bound():
    fake = FakeTokenizer(delay=0.02)
    c = counter(fake, concurrency=8)
    c([f"text number {i}" for i in range(64)])
    assert 2 <= fake.max_in_flight <= 8


def test_disk_cache_spares_a_second_run_and_is_keyed_by_model_and_dataset(tmp_path):
    texts = [f"prompt {i} " * (i + 1) for i in range(20)]
    fake = FakeTokenizer()
    c = counter(fake, tmp_path, dataset_id="abc123")
    first = c(texts)
    assert len(fake.seen) == 20
    c2 = counter(fake, tmp_path, dataset_id="abc123")
    assert c2(texts) == first
    assert c2.requests_sent == 0  # all from disk
    assert len(fake.seen) == 20
    c3 = counter(fake, tmp_path, dataset_id="other")
    c3(texts)
    assert len(fake.seen) == 40  # another dataset: its own cache
    c4 = ServerTokenCounter(
        "http://server.test", "another/model", tmp_path, dataset_id="abc123", transport=httpx.MockTransport(fake)
    )
    c4(texts[:5])
    assert len(fake.seen) == 45  # another model: recounted
    assert len(list(tmp_path.glob("tokens-*.json"))) == 3


def test_cache_file_is_merged_not_overwritten(tmp_path):
    a = TokenCountCache(tmp_path, "m", "d")
    b = TokenCountCache(tmp_path, "m", "d")
    a.put("alpha", 1)
    b.put("beta", 2)
    a.save()
    b.save()  # b did not know alpha
    fresh = TokenCountCache(tmp_path, "m", "d")
    assert fresh.get("alpha") == 1 and fresh.get("beta") == 2
    assert not list(tmp_path.glob(".tokens-*"))  # no temp files left


def test_damaged_cache_is_ignored(tmp_path):
    c = TokenCountCache(tmp_path, "m", "d")
    c.path.write_text("{not json")
    assert TokenCountCache(tmp_path, "m", "d").get("x") is None
    c.path.write_text(json.dumps({"model": "someone-else", "counts": {"k": 1}}))
    assert TokenCountCache(tmp_path, "m", "d").counts == {}


def test_cache_needs_a_model(tmp_path):
    with pytest.raises(ValueError, match="model"):
        TokenCountCache(tmp_path, "", "d")


def test_counts_already_fetched_are_saved_when_a_request_fails(tmp_path):
    class FlakyAfter(FakeTokenizer):
        def __call__(self, request):
            if b"boom" in request.content:
                return httpx.Response(500, text="engine died")
            return super().__call__(request)

    c = counter(FlakyAfter(), tmp_path, concurrency=1)
    with pytest.raises(TokenizeError, match="HTTP 500: engine died"):
        c(["fine text", "boom"])
    assert TokenCountCache(tmp_path, c.model, "").get("fine text") == 2


@pytest.mark.parametrize("status", [404, 405, 501])
def test_no_tokenize_endpoint(status):
    c = counter(FakeTokenizer(status=status, body=b'{"detail":"Not Found"}'))
    with pytest.raises(TokenizeUnavailable, match=f"HTTP {status}"):
        c(["text"])


@pytest.mark.parametrize(
    "body, match",
    [
        (b"<html>oops</html>", "non-JSON"),
        (b'{"count": -1}', "without a usable count"),
        (b'{"count": "7"}', "without a usable count"),
        (b"[]", "without a usable count"),
    ],
)
def test_bad_tokenize_answers(body, match):
    c = counter(FakeTokenizer(body=body))
    with pytest.raises(TokenizeError, match=match):
        c(["text"])


def test_tokens_list_is_used_when_count_is_absent():
    c = counter(FakeTokenizer(body=b'{"tokens": [5, 6, 7]}'))
    assert c(["anything"]) == [3]


def test_unreachable_server_is_a_tokenize_error():
    def refuse(request):
        raise httpx.ConnectError("connection refused", request=request)

    c = ServerTokenCounter("http://server.test", "m", transport=httpx.MockTransport(refuse))
    with pytest.raises(TokenizeError, match="failed"):
        c(["x"])


@pytest.mark.parametrize("url", ["", "server:8000", "ftp://x"])
def test_bad_base_url(url):
    with pytest.raises(ValueError, match="http"):
        ServerTokenCounter(url, "m")


def test_bad_concurrency():
    with pytest.raises(ValueError, match="concurrency"):
        ServerTokenCounter("http://x", "m", concurrency=0)


def test_token_counter_for_falls_back_to_the_approximation():
    missing = FakeTokenizer(status=404, body=b"{}")
    fn, source = token_counter_for("http://server.test", "m", transport=httpx.MockTransport(missing))
    assert source == "approx" and fn is approx_count_tokens
    fn, source = token_counter_for("http://server.test", "m", transport=httpx.MockTransport(FakeTokenizer()))
    assert source == "server" and fn(["a b c"]) == [3]


# -- a real loopback server, as the sampler sees it -----------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16  # one write per answer: no Nagle/delayed-ACK stall per request

    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.hits += 1
        out = json.dumps(
            {"count": len(body["prompt"].split()), "max_model_len": 4096, "tokens": [], "token_strs": None}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


@pytest.fixture
def tokenize_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.hits = 0
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_sampling_with_a_real_tokenize_server_and_cache(tokenize_server, tmp_path):
    url = f"http://127.0.0.1:{tokenize_server.server_address[1]}"
    convs = [Conversation(i, f"c{i}", "word " * (5 + i % 50), "reply " * (5 + i % 70)) for i in range(300)]
    c = ServerTokenCounter(url, "m", tmp_path, dataset_id="d")
    first = sample_requests(convs, 200, seed=1, count_tokens=c)
    hits = tokenize_server.hits
    assert hits > 0
    assert all(r.prompt_len == len(r.prompt.split()) for r in first)
    c = ServerTokenCounter(url, "m", tmp_path, dataset_id="d")
    again = sample_requests(convs, 200, seed=1, count_tokens=c)
    assert again == first and tokenize_server.hits == hits  # second run: no requests
