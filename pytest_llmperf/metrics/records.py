"""Raw per-request records, the ground every aggregate is recomputed from. Times are
`time.perf_counter()` seconds: only their differences mean anything."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RequestRecord:
    index: int  # position of the prompt in the sampled list
    send_time: float  # just before the request was written
    # Arrival of every chunk with non-empty `choices`, as vLLM's bench counts them.
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
    first_answer_time: float | None = None  # the first chunk with answer text (not reasoning)
    reasoning_chunks: int = 0
    reasoning_tokens: int | None = None  # from usage; None when not reported

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
