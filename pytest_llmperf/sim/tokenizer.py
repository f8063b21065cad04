"""A deterministic stand-in tokenizer (no vocabulary file) that splits like a byte-level
BPE closely enough for prompt lengths. Pieces join back to the input, and generated text
is built from pieces that never merge, so re-tokenising it gives its token count.
"""

from __future__ import annotations

import random
import re
import zlib
from typing import Any

VOCAB_SIZE = 151_643  # Qwen's vocabulary size: ids look plausible, nothing more

_TOKEN_RE = re.compile(
    r" ?[A-Za-z]{1,7}"  # ASCII words, cut every 7 letters
    r"| ?\d{1,3}"  # numbers, 3 digits per token
    r"| ?[^\W\d_A-Za-z]{1,2}"  # other letters (CJK, accents): 2 per token
    r"| ?[^\w\s]|_"  # punctuation and symbols, one each
    r"|\s+(?!\S)|\s+"  # whitespace runs; the last space joins the next word
)


_WORD_RE = re.compile(r" ?[A-Za-z]{1,7}")


def tokenize(text: str) -> list[str]:
    """Split text into token strings; ''.join(result) == text."""
    return _TOKEN_RE.findall(text)


def count_tokens(text: str, word_tokens: int = 1) -> int:
    """`text`'s tokens, each word piece counted `word_tokens` times (SimConfig.prompt_word_tokens)."""
    pieces = _TOKEN_RE.findall(text)
    return len(pieces) + (word_tokens - 1) * sum(1 for p in pieces if _WORD_RE.fullmatch(p))


def token_id(piece: str) -> int:
    return zlib.crc32(piece.encode("utf-8")) % VOCAB_SIZE


def encode(text: str, word_tokens: int = 1) -> list[int]:
    return [token_id(p) for p in tokenize(text) for _ in range(word_tokens if _WORD_RE.fullmatch(p) else 1)]


_IM_START, _IM_END = "<|im_start|>", "<|im_end|>"  # Qwen's ChatML markers, one token each


def chat_prompt_tokens(messages: list[dict[str, Any]], word_tokens: int = 1) -> int:
    """Token count of `messages` rendered with ChatML plus the assistant header."""
    total = 0
    for m in messages:
        content = m.get("content") or ""
        if isinstance(content, list):  # OpenAI content parts: keep the text parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        total += 1 + count_tokens(f"{m.get('role', 'user')}\n{content}", word_tokens) + 1 + 1  # start, body, end, "\n"
    return total + 1 + count_tokens("assistant\n")


# Output text pieces, none of which merges with its neighbour under the split above.
_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "this",
    "are",
    "or",
    "from",
    "at",
    "an",
    "not",
    "we",
    "can",
    "which",
    "have",
    "but",
    "all",
    "one",
    "if",
    "will",
    "there",
    "their",
    "so",
    "what",
    "about",
    "more",
    "when",
    "use",
    "model",
    "token",
    "step",
    "batch",
    "draft",
    "time",
    "first",
    "think",
    "answer",
    "let",
    "check",
    "value",
    "result",
    "thus",
    "case",
    "need",
    "given",
    "number",
    "output",
    "input",
    "since",
    "each",
    "then",
    "also",
    "both",
    "where",
]
_WORD_PIECES = tuple(" " + w for w in _WORDS)
_PUNCT = (",", ".", ":", ";")


class TextGenerator:
    """Deterministic stream of output token strings for one request."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self._prev = " "

    def next_piece(self) -> str:
        r = self._rng.random()
        if self._prev in _WORD_PIECES:
            if r < 0.12:
                piece = _PUNCT[int(r * 100) % len(_PUNCT)]
            elif r < 0.14:
                piece = "\n\n"
            else:
                piece = self._rng.choice(_WORD_PIECES)
        else:
            piece = self._rng.choice(_WORD_PIECES)
        self._prev = piece
        return piece
