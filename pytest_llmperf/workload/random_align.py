"""The random dataset's built-in prompts made to the lengths the server's `/tokenize`
counts: pieces are taken off the end until one more would pass, then a one-token filler
word (found by probing) makes up the rest; the shared prefix first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from pytest_llmperf.workload.requests import SampledRequest

# One token in common vocabularies; the first that adds exactly one per repeat is the filler.
FILLERS = (" the", " a", " and", " of", " to", " is", " x", " .", " ,", " -")
MAX_ROUNDS = 16

Count = Callable[[list[str]], list[int]]


@dataclass(frozen=True)
class ServerTokens:
    """A server's token counts (special tokens included, as its `usage` counts a prompt),
    a filler word that adds one token, and how many special tokens it adds to a prompt."""

    count: Count
    filler: str
    special: int


def probe(count: Count) -> ServerTokens | None:
    """The server's filler and special-token count; None when no filler word adds
    exactly one token (prompts then stay as built, and the run's check says so)."""
    for filler in FILLERS:
        one, two = count([filler, filler * 2])
        if two - one == 1 and one >= 1:
            return ServerTokens(count, filler, one - 1)
    return None


@dataclass
class _Fit:
    """One prompt being fitted: `head` (kept whole) + the first `k` of `pieces` + fillers."""

    head: str
    pieces: Sequence[str]
    target: int
    lo: int = 0  # most pieces known to count <= target (0: not measured)
    lo_count: int | None = None
    hi: int = -1  # fewest pieces known to count > target
    hi_count: int | None = None
    k: int = -1
    fillers: int = 0
    filling: bool = False
    done: bool = False
    best: tuple[int, str] = field(default=(1 << 30, ""))

    def __post_init__(self) -> None:
        self.hi = self.k = len(self.pieces)

    def text(self, filler: str) -> str:
        return self.head + "".join(self.pieces[: self.k]) + filler * self.fillers

    def take(self, counted: int, text: str) -> None:
        """Move towards the target by what the server counted for `text`."""
        if abs(counted - self.target) < self.best[0]:
            self.best = (abs(counted - self.target), text)
        if counted == self.target:
            self.done = True
        elif self.filling:
            self.fillers = max(0, self.fillers + self.target - counted)
        elif counted < self.target:
            self.lo, self.lo_count = self.k, counted
            self._next_k()
        else:
            self.hi, self.hi_count = self.k, counted
            self._next_k()

    def _next_k(self) -> None:
        if self.hi - self.lo <= 1:  # one more piece would pass: fillers make up the rest
            self.k, self.filling = self.lo, True
            # Not even one piece fits (lo never measured): fillers alone, counted from one.
            self.fillers = self.target - self.lo_count if self.lo_count is not None else 1
            return
        low_count = self.lo_count if self.lo_count is not None else 0
        high_count = self.hi_count if self.hi_count is not None else self.target + 1
        share = (self.target - low_count) / max(1, high_count - low_count)
        self.k = min(self.hi - 1, max(self.lo + 1, self.lo + int(share * (self.hi - self.lo))))


def fit(server: ServerTokens, jobs: Sequence[tuple[str, Sequence[str], int]]) -> list[tuple[str, int]]:
    """For each (head, pieces, target): a text the server counts at `target` tokens (or the
    closest found in MAX_ROUNDS), and its count less the target (0 when it is exact)."""
    fits = [_Fit(head, pieces, target) for head, pieces, target in jobs]
    for _ in range(MAX_ROUNDS):
        todo = [f for f in fits if not f.done]
        if not todo:
            break
        texts = [f.text(server.filler) for f in todo]
        for f, text, counted in zip(todo, texts, server.count(texts)):
            f.take(counted, text)
    return [(f.best[1], 0 if f.done else f.best[0]) for f in fits]


def align(
    requests: list[SampledRequest], server: ServerTokens, prefix_len: int, piece_chars: int
) -> list[SampledRequest]:
    """`requests` with prompts the server counts at their lengths plus its special tokens,
    `prompt_len` that count (as its `usage` will say)."""
    if not requests:
        return requests

    def pieces(text: str) -> list[str]:
        return [text[i : i + piece_chars] for i in range(0, len(text), piece_chars)]

    prefix = ""
    if prefix_len:
        ((prefix, _),) = fit(server, [("", pieces(requests[0].prompt)[:prefix_len], prefix_len + server.special)])
    jobs = [(prefix, pieces(r.prompt)[prefix_len:], r.prompt_len + server.special) for r in requests]
    fitted = fit(server, jobs)
    return [replace(r, prompt=text, prompt_len=r.prompt_len + server.special) for r, (text, _) in zip(requests, fitted)]
