"""Token counts for the sampler's length filters (measured counts always come from `usage`):
`ServerTokenCounter`, the server's `POST /tokenize` with an on-disk cache, and
`approx_count_tokens`, an estimate for servers without it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from pytest_llmperf.util.files import atomic_write_text
from pytest_llmperf.util.http import server_root

# -- the approximation ------------------------------------------------------------------

# Pieces a byte-level BPE (Qwen, Llama) mostly keeps whole or splits predictably.
_PIECES = re.compile(
    r"[A-Za-z]+"  # a word: most words are one token, long ones split
    r"|[0-9]"  # Qwen tokenizes digits one by one
    r"|\s*\n\s*"  # a line break with its indentation: about one token
    r"| {2,}"  # a run of spaces (code indentation)
    r"|[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]+"  # a CJK/kana/Hangul run
    r"|[^\x00-\x7f]"  # another non-ASCII character (emoji, accents)
    r"|[^\sA-Za-z0-9]+"  # a punctuation run ("...", "**", "->")
)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
WORD_CHARS_PER_TOKEN = 10.0  # letters per token (words up to 10 letters: one token)
PUNCT_CHARS_PER_TOKEN = 3.0  # punctuation runs merge ("...", "**", "->")
SPACES_PER_TOKEN = 4.0
CJK_CHARS_PER_TOKEN = 1.8  # Qwen's vocabulary holds many two-character CJK words


def approx_token_count(text: str) -> int:
    """Estimate how many tokens a Qwen/Llama-style BPE tokenizer makes of `text`, by the
    pieces of _PIECES. Calibrated on Qwen3.6's tokenizer over ShareGPT (a test holds it
    to tests/fixtures/sharegpt/qwen36_token_counts.json); only for the length filters."""
    if not isinstance(text, str):
        raise TypeError(f"approx_token_count expects a str, got {type(text).__name__}")
    n = 0
    for m in _PIECES.finditer(text):
        piece = m.group()
        c = piece[0]
        if c.isascii() and c.isalpha():
            n += math.ceil(len(piece) / WORD_CHARS_PER_TOKEN)
        elif c == " " and "\n" not in piece:
            n += math.ceil(len(piece) / SPACES_PER_TOKEN)
        elif c.isspace():
            n += 1
        elif c.isascii() and not c.isdigit():
            n += math.ceil(len(piece) / PUNCT_CHARS_PER_TOKEN)
        elif len(piece) > 1 or _CJK.match(c):
            n += math.ceil(len(piece) / CJK_CHARS_PER_TOKEN)
        else:
            n += 1
    return n


def approx_count_tokens(texts: list[str]) -> list[int]:
    """Batch form of `approx_token_count`, the sampler's default counter."""
    return [approx_token_count(t) for t in texts]


# -- the on-disk cache ----------------------------------------------------------------


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class TokenCountCache:
    """Counts for one (model, dataset) in one JSON file under `cache_dir`; writes are atomic
    and merge with what is on disk, so processes sharing it lose nothing."""

    def __init__(self, cache_dir: str | os.PathLike[str], model: str, dataset_id: str = ""):
        if not model:
            raise ValueError("TokenCountCache needs the model name: counts are per tokenizer")
        self.model = model
        self.dataset_id = dataset_id
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_")[:80]
        # The slug is for humans; the hash keeps distinct names from colliding.
        ident = hashlib.sha256(f"{model}\0{dataset_id}".encode()).hexdigest()[:12]
        tag = (dataset_id[:16] + "-") if dataset_id else ""
        self.path = Path(cache_dir) / f"tokens-{slug}-{tag}{ident}.json"
        self.counts: dict[str, int] = self._read()
        self._dirty = False
        self._lock = threading.Lock()

    def _read(self) -> dict[str, int]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # missing or damaged: recount
        if not isinstance(data, dict) or data.get("model") != self.model:
            return {}
        counts = data.get("counts")
        if not isinstance(counts, dict):
            return {}
        return {k: v for k, v in counts.items() if isinstance(v, int) and v >= 0}

    def get(self, text: str) -> int | None:
        return self.counts.get(text_key(text))

    def put(self, text: str, count: int) -> None:
        with self._lock:
            self.counts[text_key(text)] = count
            self._dirty = True

    def save(self) -> None:
        with self._lock:
            if not self._dirty:
                return
            merged = {**self._read(), **self.counts}
            body = {"model": self.model, "dataset": self.dataset_id, "counts": merged}
            atomic_write_text(self.path, json.dumps(body, sort_keys=True, separators=(",", ":")))
            self.counts = merged
            self._dirty = False


# -- the server counter ---------------------------------------------------------------


class TokenizeError(RuntimeError):
    """The server's /tokenize did not give a count."""


class TokenizeUnavailable(TokenizeError):
    """The server has no /tokenize (404/405/501): use the approximation instead."""


class ServerTokenCounter:
    """Count tokens with the server's `POST /tokenize`, cached on disk under `cache_dir`
    (None: memoized only), keyed by model and `dataset_id`."""

    def __init__(
        self,
        base_url: str,
        model: str,
        cache_dir: str | os.PathLike[str] | None = None,
        *,
        dataset_id: str = "",
        concurrency: int = 16,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ):
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.base_url = server_root(base_url)
        self.model = model
        self.concurrency = concurrency
        self.cache = TokenCountCache(cache_dir, model, dataset_id) if cache_dir is not None else None
        self._memo: dict[str, int] = {}
        self._timeout, self._transport = timeout, transport
        self.requests_sent = 0  # for tests and logs: what the cache saved
        self._count_lock = threading.Lock()

    def _client(self) -> httpx.Client:
        # A client per batch: a counter kept for a session holds no sockets between batches.
        return httpx.Client(
            base_url=self.base_url,
            timeout=self._timeout,
            transport=self._transport,
            limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency),
        )

    def __call__(self, texts: list[str]) -> list[int]:
        result: list[int | None] = [self._known(t) for t in texts]
        todo = list(dict.fromkeys(t for t, r in zip(texts, result) if r is None))
        if todo:
            try:
                with self._client() as client, ThreadPoolExecutor(max_workers=min(self.concurrency, len(todo))) as pool:
                    counts = list(pool.map(lambda t: self._tokenize(client, t), todo))
            finally:
                if self.cache is not None:
                    self.cache.save()  # keep what was counted even if one request failed
            for t, n in zip(todo, counts):
                self._memo[t] = n
            result = [self._memo[t] if r is None else r for t, r in zip(texts, result)]
        return [int(r) for r in result]  # type: ignore[arg-type]

    def _known(self, text: str) -> int | None:
        n = self._memo.get(text)
        if n is None and self.cache is not None:
            n = self.cache.get(text)
        return n

    def tokenize(self, text: str) -> int:
        """One `/tokenize` call (uncached)."""
        with self._client() as client:
            return self._tokenize(client, text)

    def _tokenize(self, client: httpx.Client, text: str) -> int:
        try:
            resp = client.post("/tokenize", json={"model": self.model, "prompt": text})
        except httpx.HTTPError as e:
            raise TokenizeError(f"POST {self.base_url}/tokenize failed: {e!r}") from e
        with self._count_lock:
            self.requests_sent += 1
        if resp.status_code in (404, 405, 501):
            raise TokenizeUnavailable(
                f"{self.base_url} has no /tokenize (HTTP {resp.status_code}); count with approx_count_tokens instead"
            )
        if resp.status_code != 200:
            raise TokenizeError(f"POST {self.base_url}/tokenize: HTTP {resp.status_code}: {resp.text[:300]}")
        n = _count_from(resp)
        if self.cache is not None:
            self.cache.put(text, n)
        return n


def _count_from(resp: httpx.Response) -> int:
    try:
        body = resp.json()
    except ValueError:
        raise TokenizeError(f"/tokenize answered non-JSON: {resp.text[:200]!r}") from None
    n = body.get("count") if isinstance(body, dict) else None
    if n is None and isinstance(body, dict) and isinstance(body.get("tokens"), list):
        n = len(body["tokens"])
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise TokenizeError(f"/tokenize answered without a usable count: {str(body)[:200]}")
    return n


def token_counter_for(
    base_url: str,
    model: str,
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    dataset_id: str = "",
    **kwargs: Any,
) -> tuple[Callable[[list[str]], list[int]], str]:
    """(the server's counter, "server") when it has /tokenize, else (the approximation, "approx")."""
    counter = ServerTokenCounter(base_url, model, cache_dir, dataset_id=dataset_id, **kwargs)
    try:
        counter.tokenize("Hello")
    except TokenizeUnavailable:
        return approx_count_tokens, "approx"
    return counter, "server"
