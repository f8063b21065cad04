"""A reasoning reply's text split as vLLM 0.32's qwen3 reasoning parser splits it."""

from __future__ import annotations

from pytest_llmperf.sim.engine import Emission


def split_reasoning(reasoning_len: int, em: Emission, eos_last: bool) -> tuple[str, str]:
    """(reasoning, answer) text of `em`'s tokens in a reply that reasons for its first
    `reasoning_len` tokens; `</think>` (token `reasoning_len`) is dropped from both."""
    reasoning, answer = [], []
    last = len(em.pieces) - 1
    for j, piece in enumerate(em.pieces):
        pos = em.start + j
        if j == last and eos_last:
            continue
        if pos < reasoning_len:
            reasoning.append(piece.lstrip(" ") if pos == 0 else piece)
        elif pos == reasoning_len + 1:
            answer.append("\n\n")
        elif pos == reasoning_len + 2:
            answer.append(piece.lstrip(" "))
        elif pos > reasoning_len:
            answer.append(piece)
    return "".join(reasoning), "".join(answer)


class ReasoningStream:
    """A reasoning reply's deltas, step by step, as vLLM sends them: `reasoning` text, then
    `content` (both in the step holding `</think>`; no chunk when that step has neither)."""

    def __init__(self, reasoning_len: int) -> None:
        self.reasoning_len = reasoning_len

    def delta(self, em: Emission, stop: bool) -> dict[str, str] | None:
        reasoning, answer = split_reasoning(self.reasoning_len, em, em.finished and stop)
        if em.start > self.reasoning_len:  # the reasoning ended in an earlier step
            return {"content": answer}
        delta = {}
        if answer:
            delta["content"] = answer
        if reasoning:
            delta["reasoning"] = reasoning
        return delta or None
