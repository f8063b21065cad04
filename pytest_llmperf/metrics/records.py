"""Raw per-request records: the ground every aggregate is recomputed from.

Times are `time.perf_counter()` seconds in the client process (monotonic), so only
differences between them mean anything.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RequestRecord:
    index: int  # position of the prompt in the sampled list
    send_time: float  # just before the request was written
    # Arrival time of every token chunk: an SSE chunk with non-empty `choices`, whatever
    # its text (the empty-text EOS chunk and chat's role chunk too), as vLLM's bench
    # counts them. Under speculative decoding one chunk holds several tokens.
    chunk_times: list[float] = field(default_factory=list)
    end_time: float | None = None  # stream finished ([DONE], error or cut)
    prompt_tokens: int | None = None  # from the server's usage, never counted here
    completion_tokens: int | None = None  # from the server's usage
    finish_reason: str | None = None
    status: int | None = None  # HTTP status
    error: str | None = None  # None when the request succeeded
    output_text: str = ""
    expected_prompt_len: int | None = None  # from the dataset sampler, for reference
    cut_at_cap: bool = False  # ended by the run's time cap (its own category, not a server fault)
    # The arrival time of the first chunk with answer text (chat `content`, completions
    # `text`; None when none came, e.g. a reply that never left its reasoning). Reasoning
    # models (chat with a server's --reasoning-parser): how many chunks carried reasoning
    # text, and the reasoning tokens of the server's usage
    # (`completion_tokens_details.reasoning_tokens`; None when not reported). TTFT stays
    # vLLM's: the first token chunk of any kind, a reasoning one included.
    first_answer_time: float | None = None
    reasoning_chunks: int = 0
    reasoning_tokens: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def ttft(self) -> float | None:
        return self.chunk_times[0] - self.send_time if self.chunk_times else None

    @property
    def ttfa(self) -> float | None:
        """Time to the first answer token: the first chunk with answer text minus send time."""
        return self.first_answer_time - self.send_time if self.first_answer_time is not None else None

    @property
    def reasoned(self) -> bool:
        """The reply carried reasoning: reasoning text streamed, or reasoning tokens counted."""
        return self.reasoning_chunks > 0 or bool(self.reasoning_tokens)

    @property
    def e2el(self) -> float | None:
        return self.chunk_times[-1] - self.send_time if self.chunk_times else None

    @property
    def tpot(self) -> float | None:
        """(E2EL - TTFT) / (output_tokens - 1), as vLLM's bench defines it."""
        n = self.completion_tokens
        if not self.chunk_times or n is None or n < 2:
            return None
        return (self.chunk_times[-1] - self.chunk_times[0]) / (n - 1)

    @property
    def itls(self) -> list[float]:
        t = self.chunk_times
        return [b - a for a, b in zip(t, t[1:])]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        return cls(**d)
